"""Comparing an observation with the model's prediction, and classing every disagreement.

Each class is something a Flink committer can act on, with its evidence: the exception text of a
failed restore, record ids lost, duplicated or invented, keys whose counts have gaps, files a retained
checkpoint names that are not there. A disagreement the README's table "Where the model differs from
Flink" explains is classed as a model departure and named by its row, never left as noise.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cutcheck.flink_bridge.hunt.case import HuntCase
from cutcheck.flink_bridge.hunt.observe import Observation
from cutcheck.flink_bridge.hunt.runners import Prediction


class Kind(enum.Enum):
    RESTORE_FAILED = "restore-failed"  # Flink fails a restore the model accepts
    RESTORE_NOT_REFUSED = "restore-not-refused"  # Flink restores where the model refuses
    ALIGNED_WHERE_UNALIGNED = "aligned-where-unaligned"
    UNALIGNED_WHERE_ALIGNED = "unaligned-where-aligned"
    OUTPUT = "output"  # Flink loses, duplicates or invents output
    KEY_STATE = "key-state"  # per-key counts differ after a restore
    MISSING_FILE = "missing-file"  # a retained checkpoint names a file that is not there
    MODEL_DEPARTURE = "model-departure"  # a documented difference of the model (README)

    @property
    def describe(self) -> str:
        return DESCRIPTIONS[self]


DESCRIPTIONS = {
    Kind.RESTORE_FAILED: "Flink fails a restore the model accepts",
    Kind.RESTORE_NOT_REFUSED: "Flink restores where the model (Flink's documented rules) refuses",
    Kind.ALIGNED_WHERE_UNALIGNED: "Flink checkpoints aligned where the model says unaligned",
    Kind.UNALIGNED_WHERE_ALIGNED: "Flink persists in-flight data where the model says every exchange is aligned",
    Kind.OUTPUT: "Flink loses, duplicates or invents output",
    Kind.KEY_STATE: "Flink's per-key state differs after a restore",
    Kind.MISSING_FILE: "a retained checkpoint names a missing file",
    Kind.MODEL_DEPARTURE: "a documented difference of the model (README, \"Where the model differs from Flink\")",
}


@dataclass(frozen=True, slots=True)
class Disagreement:
    kind: Kind
    evidence: str
    witnesses: tuple[str, ...] = ()
    departure: str | None = None  # the README row, for MODEL_DEPARTURE

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "what": self.kind.describe, "evidence": self.evidence,
                "witnesses": list(self.witnesses), "departure": self.departure}


@dataclass(frozen=True, slots=True)
class Departure:
    """A row of the README's departure table and the disagreements it explains."""

    row: str  # the row's first words, as the README has them
    explains: Callable[[HuntCase, Prediction, Disagreement], bool]


# The rows whose difference can show in a hunt case. The others (savepoints in the store, timers
# before barriers, task-side snapshot failures, local channels, overdraft buffers, end-of-input
# committables, stop-with-savepoint, abort notification, barrier order) concern features a hunt
# case does not use, or timing the comparison does not look at.
def _custom_beside_unaligned(case: HuntCase, pred: Prediction, d: Disagreement) -> bool:
    """A vertex fed by a custom exchange and by an exchange that could be unaligned: the model keeps all
    of its inputs aligned, Flink (2.x) keeps only the custom exchange aligned."""
    from cutcheck.model.partitioning import supports_unaligned

    graph = case.job_graph()
    return d.kind is Kind.UNALIGNED_WHERE_ALIGNED and any(
        any(e.partitioner == "custom" for e in graph.in_edges(v.id))
        and any(supports_unaligned(e.partitioner) for e in graph.in_edges(v.id)) for v in graph.vertices)


DEPARTURES: tuple[Departure, ...] = (
    Departure("A custom partitioner keeps every input of its consumer aligned", _custom_beside_unaligned),
)


# The engine stand-in stops at its own invariants; each names what a real Flink would show instead.
INVARIANT_KIND = {"OWNERSHIP": Kind.KEY_STATE,  # a key reached a subtask outside its key-group range
                  "REF": Kind.MISSING_FILE, "RETAINED": Kind.MISSING_FILE, "SAVEPOINT_KEPT": Kind.MISSING_FILE,
                  "CHECKPOINT_ID": Kind.MISSING_FILE,  # a reused id's chk-N shares a directory with a retained one
                  "COMMIT": Kind.OUTPUT, "CUT": Kind.OUTPUT, "ORDER": Kind.OUTPUT,
                  "ALIGNED_EDGE": Kind.UNALIGNED_WHERE_ALIGNED,  # in-flight data persisted on an aligned exchange
                  "LIVENESS": Kind.RESTORE_FAILED,  # the job stops making progress: Flink's run times out
                  "TRIGGER": Kind.RESTORE_FAILED}  # a checkpoint no task can finish: a finishing Flink job never ends


def _witnesses(eo: dict[str, Any], name: str) -> tuple[str, ...]:
    return tuple(f"rid {r}" for r in (eo.get("samples") or {}).get(name, [])[:5])


def compare(case: HuntCase, pred: Prediction, obs: Observation) -> list[Disagreement]:
    """Every way ``obs`` departs from ``pred``; empty when they agree (or the run was inconclusive)."""
    if obs.inconclusive or pred.inconclusive:
        return []
    found: list[Disagreement] = []
    if obs.restore_failed is not None and pred.refused is None:
        found.append(Disagreement(Kind.RESTORE_FAILED, obs.restore_failed))
    elif obs.restore_failed is None and pred.refused is not None:
        found.append(Disagreement(Kind.RESTORE_NOT_REFUSED, f"the model refuses: {pred.refused}"))
    if obs.restore_failed is not None:
        return _departures(case, pred, found)  # nothing ran to compare further
    stopped = [v for v in obs.violations if v.get("invariant") != "EXACTLY_ONCE"]  # that one is judged below
    for v in stopped:
        kind = INVARIANT_KIND.get(v.get("invariant", ""), Kind.OUTPUT)
        found.append(Disagreement(kind, f"invariant {v.get('invariant')}: {v.get('detail', v.get('message', ''))}"[:300],
                                  (f"step {v['step']}",) if v.get("step") else ()))
    if stopped:
        return _departures(case, pred, found)  # the run stopped there: its output is a prefix
    if obs.unaligned_checkpoints is not None and obs.completed and case.mode == "unaligned" and pred.unaligned \
            and obs.unaligned_checkpoints == 0:
        found.append(Disagreement(Kind.ALIGNED_WHERE_UNALIGNED,
                                  f"none of Flink's {obs.completed} completed checkpoints is unaligned; the model has "
                                  f"unaligned barriers on {', '.join(pred.unaligned_edges)}"))
    if obs.persisted_bytes and not pred.unaligned:
        found.append(Disagreement(Kind.UNALIGNED_WHERE_ALIGNED,
                                  f"{obs.persisted_bytes} bytes of in-flight data persisted, but every exchange is "
                                  "kept aligned by the model (mode " + case.mode + ")"))
    eo = obs.exactly_once
    if eo and pred.exactly_once and (eo.get("lost") or eo.get("duplicated") or eo.get("phantom")):
        found.append(Disagreement(Kind.OUTPUT, f"lost {eo.get('lost', 0)}, duplicated {eo.get('duplicated', 0)}, "
                                  f"invented {eo.get('phantom', 0)} records",
                                  _witnesses(eo, "lost") + _witnesses(eo, "duplicated") + _witnesses(eo, "phantom")))
    if eo and pred.counts_hold and eo.get("count_gaps"):
        found.append(Disagreement(Kind.KEY_STATE, f"{eo['count_gaps']} (keyed vertex, key) groups whose committed "
                                  "counts do not run 1..n once", _witnesses(eo, "count_gaps")))
    if obs.missing_files:
        found.append(Disagreement(Kind.MISSING_FILE, f"{len(obs.missing_files)} file(s) named by retained "
                                  "checkpoints are missing", tuple(obs.missing_files[:5])))
    return _departures(case, pred, found)


def _departures(case: HuntCase, pred: Prediction, found: list[Disagreement]) -> list[Disagreement]:
    out = []
    for d in found:
        row = next((dep.row for dep in DEPARTURES if dep.explains(case, pred, d)), None)
        out.append(Disagreement(Kind.MODEL_DEPARTURE, f"{d.kind.describe}: {d.evidence}", d.witnesses, row) if row else d)
    return out


def signature(found: list[Disagreement]) -> frozenset[str]:
    """What a shrink step or a rerun must still show to count as the same finding: its kinds."""
    return frozenset(d.kind.value for d in found)
