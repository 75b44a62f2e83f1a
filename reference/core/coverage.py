"""What a run (or a whole campaign) exercised, cell by cell, so unreached cells can be named.

A ``Coverage`` is a Counter of cells, each a tuple ``(family, what, how)``. The engine carries one as
``engine.coverage``, filled from the run's event bus (``reference.events.coverage``); a campaign merges
the coverage of its runs. It is never written into a run's logs (the log fingerprints stay unchanged).

Families and where they are filled:

* ``handler`` (state class, event method): every dispatch to a barrier handler state
  (``reference.checkpointing.barriers`` publishes each one);
* ``rule`` (channel mode, protocol rule): the rules of ``model.protocol.ACTIONS`` that validated
  channel traces fired (:func:`validate_traces`);
* ``mapper`` (SubtaskStateMapper, side): mappers that moved in-flight records of a side
  (``input``: the downstream mapper, ``output``: the upstream one) in a rescaled restore, read from
  the restore reports (:func:`note_restores`);
* ``storage`` (transition, ""): on-disk storage transitions (``reference.storage.fs`` reports them);
* ``failure`` (kind, ""): failures by what failed and what recovery then did (the engine's
  ``FailureHappened``);
* ``refusal`` (kind, ""): restores refused as Flink refuses them (``note_refusal``).

``UNIVERSE`` lists every cell; cells no run can reach by construction carry the reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cutcheck.model.partitioning import PARTITIONERS, SubtaskStateMapper
from cutcheck.model.protocol import ACTIONS

Cell = tuple[str, str, str]

HANDLER_STATES = ("WaitingForFirstBarrier", "CollectingBarriers", "CollectingBarriersUnaligned", "TrackingBarriers")
HANDLER_EVENTS = ("barrier_received", "alignment_timeout", "end_of_partition", "cancel_received")
CHANNEL_MODES = ("aligned", "unaligned", "aligned_timeout", "at_least_once")
SIDES = {"input": "downstream_mapper", "output": "upstream_mapper"}
STORAGE_TRANSITIONS = {
    "register": "a subtask's acknowledgement registers a new shared file",
    "reuse": "a checkpoint references a shared file an earlier checkpoint registered",
    "subsume": "a completed checkpoint subsumes an older retained one",
    "abort-discard": "an aborted checkpoint's own files are discarded",
    "shared-delete": "a shared file no retained checkpoint uses is deleted",
    "savepoint": "a savepoint completes (self-contained, never subsumed by checkpoints)",
    "claim-takeover": "a restore in claim mode takes ownership of the restored checkpoint's files",
}
FAILURE_KINDS = {
    "task": "a scheduled failure of one subtask",
    "worker": "a scheduled failure of a worker and every subtask it runs",
    "checkpoint-failure": "the checkpoint failure manager fails the job (more failed checkpoints than tolerated)",
    "from-scratch": "a failure before any checkpoint completed: the job restarts from the beginning",
    "from-checkpoint": "a failure after a checkpoint completed: the job restores it",
    "during-recovery": "a failure while recovered in-flight data is still being replayed",
}
REFUSALS = {
    "pointwise-or-broadcast": "a rescale remaps a vertex whose pointwise or broadcast edge Flink cannot rescale",
    "custom": "a rescale changes a custom edge that holds in-flight data",
}


def _handler_unreachable(state: str, event: str) -> str | None:
    # (CollectingBarriersUnaligned, alignment_timeout) is reachable: aborts do not reach handlers (facts
    # §4.10), so a task may still collect an aborted checkpoint unaligned when the next one's timeout fires.
    if state == "TrackingBarriers" and event == "alignment_timeout":
        return "at-least-once barriers are never timeoutable, so no alignment timeout reaches the tracker"
    return None


def _rule_unreachable(mode: str, rule: str) -> str | None:
    if mode in ("aligned", "at_least_once") and rule in ("PriorityBarrierArrives", "AlignmentTimesOut"):
        return f"{mode} channels have no priority barriers and no alignment timeout"
    if mode == "unaligned" and rule == "AlignmentTimesOut":
        return "unaligned channels never wait for a timeout (only aligned_timeout switches)"
    if rule == "RetireCheckpoint":
        return "an internal step of the checker, no trace event fires it"
    return None


def _mapper_unreachable(mapper: SubtaskStateMapper, side: str) -> str | None:
    users = [name for name, info in PARTITIONERS.items() if getattr(info, SIDES[side]) is mapper]
    if mapper is SubtaskStateMapper.UNSUPPORTED:
        return f"Flink refuses to rescale in-flight data through it ({', '.join(users)} edges): a refusal, not a restore"
    if not users:
        return f"no partitioner uses it for {side} state"
    if users == ["custom"]:
        return "only custom edges use it, and a rescale of a custom edge holding in-flight data is refused"
    return None


def _universe() -> dict[Cell, str | None]:
    cells: dict[Cell, str | None] = {}
    for state in HANDLER_STATES:
        for event in HANDLER_EVENTS:
            cells["handler", state, event] = _handler_unreachable(state, event)
    for mode in CHANNEL_MODES:
        for action in ACTIONS:
            cells["rule", mode, action.name] = _rule_unreachable(mode, action.name)
    for mapper in SubtaskStateMapper:
        for side in SIDES:
            cells["mapper", mapper.name, side] = _mapper_unreachable(mapper, side)
    for name in STORAGE_TRANSITIONS:
        cells["storage", name, ""] = (
            "the takeover happens when a claimed restore opens the storage, before the run's coverage is attached (resubmits in claim mode exercise it; tests/reference/test_resubmit.py checks the restored checkpoint is deleted once subsumed)"
            if name == "claim-takeover" else None)
    for name in FAILURE_KINDS:
        cells["failure", name, ""] = None
    for name in REFUSALS:
        cells["refusal", name, ""] = (
            "custom edges are forced aligned (facts §2.4), so no checkpoint holds in-flight data on one; only a "
            "fault that puts channel state there (pointwise-edge-unaligned's kin) reaches this refusal"
            if name == "custom" else None)
    return cells


UNIVERSE: dict[Cell, str | None] = _universe()  # cell -> None (reachable) or why no run can reach it


def cell_name(cell: Cell) -> str:
    family, what, how = cell
    if family == "handler":
        return f"handler {what}.{how}"
    if family == "rule":
        return f"rule {how} ({what})"
    if family == "mapper":
        return f"mapper {what} ({how} state)"
    return f"{family} {what}"


@dataclass(slots=True)
class Coverage:
    """Hits per cell; ``merge`` adds another run's or campaign's hits."""

    hits: Counter[Cell] = field(default_factory=Counter)

    def hit(self, family: str, what: str, how: str = "") -> None:
        self.hits[family, what, how] += 1

    def merge(self, other: Coverage) -> None:
        self.hits.update(other.hits)

    def reached(self) -> list[Cell]:
        return [c for c in UNIVERSE if self.hits[c]]

    def missed(self) -> list[Cell]:
        """Reachable cells no run reached."""
        return [c for c, why in UNIVERSE.items() if why is None and not self.hits[c]]

    def reachable(self) -> int:
        return sum(why is None for why in UNIVERSE.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "reached": {cell_name(c): self.hits[c] for c in self.reached()},
            "missed": [cell_name(c) for c in self.missed()],
            "unreachable": {cell_name(c): why for c, why in UNIVERSE.items() if why is not None},
            # Cells outside the universe mean the universe is out of date: shown, never dropped.
            "unknown": {cell_name(c): n for c, n in sorted(self.hits.items()) if c not in UNIVERSE},
            "reachable_cells": self.reachable(),
        }

    def describe(self) -> str:
        return f"{len(self.reached())} of {self.reachable()} reachable coverage cells reached"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Coverage:
        """The hits of ``to_json`` (for merging reports of worker processes)."""
        names = {cell_name(c): c for c in UNIVERSE}
        return cls(Counter({names[n]: k for n, k in data.get("reached", {}).items() if n in names}))


# ----------------------------------------------------------------------------------- hooks
def note_refusal(cov: Coverage, message: str) -> None:
    cov.hit("refusal", "custom" if "custom edge" in message else "pointwise-or-broadcast")


def note_restores(cov: Coverage, reports: Iterable[Mapping[str, Any]]) -> None:
    """The mappers that moved in-flight records in the rescaled restores of a run."""
    for report in reports:
        for edge in report.get("edges", {}).values():
            if edge.get("mapper", "1:1") == "1:1":
                continue  # the edge kept its parallelism: channel state went 1:1
            down, up = (m.strip() for m in edge["mapper"].split("/"))
            if edge.get("input_records"):
                cov.hit("mapper", down, "input")
            if edge.get("output_records"):
                cov.hit("mapper", up, "output")
