"""The result of a validation: counts per check, capped samples of offending rids, what ran."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

# Check names, in the order reports list them (the keys of logschema.CHECK_COLUMNS).
CHECKS: tuple[str, ...] = ("lost", "duplicated", "phantom", "count_gaps", "reordered", "double_commits")

# What each count means, for people reading a report.
MEANING: dict[str, str] = {
    "lost": "expected output rows missing (copies minus rows found, per input rid)",
    "duplicated": "output rows beyond a rid's expected copies",
    "phantom": "output rows whose rid is not in the input",
    "count_gaps": "(counter, key) groups whose counts are not exactly 1..n",
    "reordered": "rows whose offset is below the highest offset of an earlier commit of their (lane, key, split)",
    "double_commits": "(sink_subtask, txn) pairs committed under more than one commit_seq",
}


@dataclass(frozen=True, slots=True)
class Report:
    """Counts are 0 for checks that were skipped; ``checks_skipped`` says why."""

    ok: bool
    lost: int
    duplicated: int
    phantom: int
    reordered: int
    count_gaps: int
    double_commits: int
    records_in: int
    records_out: int
    samples: dict[str, list[int]]
    checks_run: tuple[str, ...]
    checks_skipped: dict[str, str]
    # Extra figures: count_gap_rows / count_missing / count_extra_rows, double_commit_extra, ...
    details: dict[str, int] = field(default_factory=dict)
    input: str = ""
    output: str = ""
    input_format: str | None = None
    output_format: str | None = None
    run: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def count(self, check: str) -> int:
        return int(getattr(self, check))

    def faults(self) -> dict[str, int]:
        return {c: self.count(c) for c in CHECKS}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["checks_run"] = list(self.checks_run)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str)
