"""The result of a validation: counts per check, capped samples of offending rids, what ran.

Every check has one status: "ok" (it examined rows and found no fault), "FAULT", "skipped" (it
examined no row: a column is missing, or no row has a value in it; the reason says which), or, for
"lost" when the output is the prefix of an unfinished run, "pending" (records not yet delivered,
which are no fault there). ``examined`` says how many rows each check looked at.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

# Check names, in the order reports list them.
CHECKS: tuple[str, ...] = (
    "lost", "duplicated", "phantom", "null_rid", "count_gaps", "reordered", "double_commits",
)

# What each count means, for people reading a report.
MEANING: dict[str, str] = {
    "lost": "expected output rows missing (copies minus rows found, per input rid)",
    "duplicated": "output rows beyond a rid's expected copies",
    "phantom": "output rows whose rid is not in the input",
    "null_rid": "input and output rows without a rid (they cannot be matched, so they are not lost or phantom)",
    "count_gaps": "(counter, key) groups whose counts are not exactly 1..n",
    "reordered": "rows whose offset is below the highest offset of an earlier commit of their (lane, key, split)",
    "double_commits": "(sink_subtask, txn) pairs committed under more than one commit_seq",
    "pending": "expected output rows not delivered yet by an unfinished run (judged as a prefix: not lost)",
}

# What the rows each check examined are.
EXAMINES: dict[str, str] = {
    "lost": "input rows with a rid",
    "duplicated": "output rows with a rid",
    "phantom": "output rows with a rid",
    "null_rid": "input and output rows",
    "count_gaps": "output rows with a key (and counter)",
    "reordered": "output rows with key, split, offset, commit_seq (and lane)",
    "double_commits": "output rows with txn and commit_seq",
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
    null_rid: int = 0
    pending: int = 0  # expected output rows not yet delivered (only when judged as a prefix)
    examined: dict[str, int] = field(default_factory=dict)  # rows each check looked at
    prefix: bool = False  # judged as the prefix of an unfinished run
    prefix_reason: str = ""  # why: run.json says the run is incomplete, or --prefix
    # per fault class, up to --sample witnesses: the rid, its figures and the rows behind it (spark_validation.witness)
    witnesses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    input_ranges: list[str] = field(default_factory=list)  # the input as half-open id ranges, when given so
    columns: dict[str, str] = field(default_factory=dict)  # schema column -> the dataset's column (--rid id ...)
    notes: list[str] = field(default_factory=list)  # what was guessed about the data (a CSV header), one sentence each

    def count(self, check: str) -> int:
        return int(getattr(self, check))

    def faults(self) -> dict[str, int]:
        return {c: self.count(c) for c in CHECKS}

    def status(self, check: str) -> str:
        if check in self.checks_skipped:
            return "skipped"
        if check == "lost" and self.prefix:
            return "pending"
        return "ok" if self.count(check) == 0 else "FAULT"

    def verdict(self) -> str:
        holds = "exactly-once holds" if self.ok else "exactly-once VIOLATED"
        if not self.prefix:
            return holds
        scope = "for the delivered prefix" if self.ok else "in the delivered prefix"
        return (f"{holds} {scope}: the run is incomplete ({self.prefix_reason}), so it was judged as a prefix "
                f"(duplicates and phantoms are faults; {self.pending} undelivered rows are pending, not lost)")

    def checks(self) -> dict[str, dict[str, Any]]:
        """Per check: status, count, rows examined, and the reason when skipped."""
        result: dict[str, dict[str, Any]] = {}
        for c in CHECKS:
            entry: dict[str, Any] = {"status": self.status(c), "count": self.count(c),
                                     "examined": self.examined.get(c, 0), "examines": EXAMINES[c]}
            if c in self.checks_skipped:
                entry["reason"] = self.checks_skipped[c]
            if c == "lost" and self.prefix:
                entry["pending"] = self.pending
            result[c] = entry
        return result

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["checks_run"] = list(self.checks_run)
        d["verdict"] = self.verdict()
        d["checks"] = self.checks()
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str)
