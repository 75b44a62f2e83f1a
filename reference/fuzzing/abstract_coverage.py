"""Coverage of what bugs need: the model's abstract states and transitions, watched step by step.

Today's cells (``reference.core.coverage``: handler state x event, protocol rules, mappers) were all
reached by campaigns that never produced the interleaving FLINK-21104 needs. The cells here name the
states such bugs live in, per channel and per checkpoint:

* ``channel`` (persisting, pending): an input channel persisting in-flight data for an unaligned
  checkpoint or not, against the number of pending checkpoints (0, 1, 2+); ``transition`` a -> b: a
  channel moving between two of those states from one step to the next;
* ``overtake`` (barrier, buffers): a barrier at a sender, priority (it overtakes the buffers queued
  behind it) or aligned (it waits behind the buffers before it), against how many (0, 1, 2+);
* ``stale`` (where, ""): a barrier of an expired or aborted checkpoint still in flight when a newer one
  is pending, queued at its sender (``at-sender``), waiting among a receiver's priority events
  (``at-receiver``), or reaching a channel that persists the newer checkpoint (``meets-persisting``,
  the FLINK-21104 interleaving), and records crossing that channel after its handler handled the stale
  barrier, in a newer checkpoint that completes (``records-behind``: the records FLINK-21104 lost);
* ``restore`` (partitioner, side): the edge partitioner and side (input: the receiver's channel
  state, output: the sender's) of channel state a restore installed, kept or rescaled;
* ``order`` (what, ""): completions out of id order, which only crossing acknowledgements
  (``checkpoint.ack_delay``) produce: a newer checkpoint completing first, an acknowledgement
  arriving after its checkpoint ended;
* ``handover`` (side, ""): a restore that handed a source split to another producer, its restored
  ``input`` or ``output`` state on one channel of a keyed gate while new records of the same key and
  split wait on another (``reference.fuzzing.handover``: what FLINK-19856's class needs);
* ``finish`` (moment, ""): a task's last producer finishing while another checkpoint is pending that
  only a direct trigger brings it, as its handler collects one (``retrigger-while-collecting``) or as
  that end of partition ends an unaligned collection (``eop-ends-unaligned``): the moments of the
  re-trigger rule FLINK-21081's class needs (``reference.fuzzing.finishing``);
* ``timeout`` (moment, ""): the alignment timeout converting a barrier queued behind buffers at its
  sender (``at-sender``), and the receiver's unaligned snapshot while buffers it overtook wait in its
  channel (``overtaken-at-snapshot``): what a fault in the conversion's cut needs (``converting``);
* ``cancel`` (moment, ""): a cancel marker ending a collection that holds blocked channels, aligned
  (``ends-aligned``) or unaligned after its alignment timeout (``ends-unaligned-blocked``), or one
  whose channels persist (``ends-unaligned-persisting``): what a handler's abort must release
  (``reference.fuzzing.cancelling``);
* ``ownership`` (``restored-released``, ""): a shared file of a checkpoint the job restored without
  claiming it falls out of use, which the registry must keep, as the job does not own it (FLINK-26985:
  on the resubmit focus's seeds 0-99, reached in exactly the 9 runs a registry that discards it breaks);
* ``pair`` (feature, feature): two swarm features (``reference.fuzzing.swarm``) in one scenario.

The observer (``AbstractObserver``) is read-only: it subscribes to the engine's event bus
(``reference.events.stream.StepTaken``) and looks at the engine after each step's action, so a run
with it makes the same choices as one without.
``ABSTRACT_UNIVERSE`` (``abstract_cells``) lists every cell; the ones no run can reach carry the reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from cutcheck.model.regions import failover_set, pipelined_regions
from cutcheck.reference.events.stream import (
    AcknowledgementArrived,
    CheckpointAborted,
    CheckpointCompleted,
    HandlerDispatched,
    RestoreTried,
    SnapshotTaken,
    StepTaken,
)
from cutcheck.reference.fuzzing.abstract_cells import (
    ABSTRACT_UNIVERSE,
    CELL_BY_NAME,
    PENDING,
    RESTORED_RELEASED,
    Cell,
    cell_name,
    count_class,
)
from cutcheck.reference.fuzzing.cancelling import CancelWatch
from cutcheck.reference.fuzzing.converting import ConversionWatch
from cutcheck.reference.fuzzing.finishing import FinishWatch
from cutcheck.reference.fuzzing.handover import HandoverWatch
from cutcheck.reference.fuzzing.swarm import Feature, features_of
from cutcheck.reference.runtime.network import Barrier, Buf

MOMENTS = 16  # steps of each kind a run keeps (``AbstractCoverage.moments``)
# A channel starting or ending its persisting with one checkpoint pending: the moments (``AbstractCoverage.moments``)
# where one more checkpoint triggered in the same step gives ``idle/1 -> persisting/2+`` or ``persisting/1 -> idle/2+``.
NUDGED = {("idle/1", "persisting/1"): "starts", ("persisting/1", "idle/1"): "ends"}
MISSED_SHOWN = 40  # unreached cells named in the output; past that the pairs are only counted



@dataclass(slots=True)
class AbstractCoverage:
    """Hits per abstract cell; ``merge`` adds another run's or campaign's."""

    hits: Counter[Cell] = field(default_factory=Counter)
    # One run's steps where the rarest channel transitions could be provoked (``AbstractObserver``):
    # a channel starting or ending its persisting (kind -> (step, "subtask#channel")), and a channel
    # persisting with 2+ checkpoints pending while a subtask of another region runs (kind -> (step, that
    # subtask)). Timed replays add a savepoint or a failure there (``timed``); merge keeps hits only.
    moments: dict[str, list[tuple[int, str]]] = field(default_factory=dict)

    def merge(self, other: AbstractCoverage) -> None:
        self.hits.update(other.hits)

    def reached(self) -> list[Cell]:
        return [c for c in ABSTRACT_UNIVERSE if self.hits[c]]

    def missed(self) -> list[Cell]:
        return [c for c, why in ABSTRACT_UNIVERSE.items() if why is None and not self.hits[c]]

    def reachable(self) -> int:
        return sum(why is None for why in ABSTRACT_UNIVERSE.values())

    def new_in(self, other: AbstractCoverage) -> set[Cell]:
        """Cells ``other`` reached that this one has not."""
        return {c for c, n in other.hits.items() if n and not self.hits[c]}

    def describe(self) -> str:
        return f"{len(self.reached())} of {self.reachable()} reachable abstract-state cells reached"

    def to_json(self) -> dict[str, Any]:
        return {"reached": {cell_name(c): self.hits[c] for c in self.reached()},
                "missed": [cell_name(c) for c in self.missed()],
                "unreachable": {cell_name(c): why for c, why in ABSTRACT_UNIVERSE.items() if why is not None},
                "reachable_cells": self.reachable()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AbstractCoverage:
        return cls(Counter({CELL_BY_NAME[n]: k for n, k in data.get("reached", {}).items() if n in CELL_BY_NAME}))


def feature_pairs(features: Iterable[Feature]) -> list[Cell]:
    """The pair cells of one scenario's features (each pair named in value order)."""
    values = sorted(f.value for f in features)
    return [("pair", a, b) for a, b in combinations(values, 2) if ("pair", a, b) in ABSTRACT_UNIVERSE]


class AbstractObserver:
    """Reads the engine after each step and counts the abstract cells it is in (never writes to it).

    Per-step work is kept to what changes: channel states are read only while some checkpoint is
    pending or some channel still persists (and once after), senders only while a checkpoint is pending.
    """

    __slots__ = ("coverage", "_last", "_restores", "_passed", "_busy", "_was_pending", "_regions", "_handover", "_finish",
                 "_cancel", "_conversion", "_behind")

    def __init__(self, coverage: AbstractCoverage | None = None):
        self.coverage = coverage if coverage is not None else AbstractCoverage()
        self._last: dict[int, tuple[str, Any]] = {}  # id(channel) -> (its last state, the channel, kept alive)
        self._restores = 0
        self._busy = False  # some channel persisted at the last look
        self._was_pending = 0  # checkpoints pending at the last look
        self._regions: tuple[Any, Any, dict[Any, frozenset[Any]]] | None = None  # ``_elsewhere``'s, per execution graph
        # id(channel) -> (persisting, last barrier arrived, records sent, a stale one arrived?, the channel,
        # records sent when the handler handled that stale barrier or -1)
        self._passed: dict[int, tuple[int, int, int, bool, Any, int]] = {}
        self._handover = HandoverWatch()  # armed by a restore that put channel state on a keyed gate
        self._finish = FinishWatch()  # a task's last producer finishing while checkpoints are pending
        self._cancel = CancelWatch()  # a cancel marker ending a collection
        self._conversion = ConversionWatch()  # the alignment timeout converting a barrier at its sender
        self._behind: set[int] = set()  # checkpoints records crossed behind a handled stale barrier for

    def attach(self, engine: Any) -> None:
        """Look at ``engine`` after each of its steps (``simulate``'s ``watch``; a resubmitted scenario
        attaches it to both jobs' engines)."""
        engine.bus.subscribe(StepTaken, lambda _: self.observe(engine))
        hits = self.coverage.hits

        def completed(e: CheckpointCompleted) -> None:
            if any(cp < e.done.cp for cp in engine.coordinator.pending):
                hits["order", "newer-first", ""] += 1  # an older savepoint still pending
            if e.done.cp in self._behind:
                hits["stale", "records-behind", ""] += 1

        def aborted(e: CheckpointAborted) -> None:
            if e.cause == "CHECKPOINT_SUBSUMED":
                hits["order", "newer-first", ""] += 1

        def arrived(e: AcknowledgementArrived) -> None:
            if e.outcome == "late":
                hits["order", "ack-late", ""] += 1

        engine.bus.subscribe(CheckpointCompleted, completed)
        engine.bus.subscribe(CheckpointAborted, aborted)
        engine.bus.subscribe(AcknowledgementArrived, arrived)

        def restored(e: RestoreTried) -> None:
            if e.refusal is None:
                self._handover.restored(engine)

        engine.bus.subscribe(RestoreTried, restored)
        engine.bus.subscribe(HandlerDispatched, lambda e: self._finish.dispatched(e.sid, e.state, e.event))
        engine.bus.subscribe(HandlerDispatched, lambda e: self._cancel.dispatched(engine, e.sid, e.state, e.event))
        engine.bus.subscribe(HandlerDispatched, lambda e: self._stale_handled(engine, e))
        engine.bus.subscribe(SnapshotTaken, lambda e: self._conversion.snapshot(hits, engine.tasks.get(e.sid), e.cp,
                                                                            e.unaligned))

    def observe(self, engine: Any) -> None:
        hits = self.coverage.hits
        pending = engine.coordinator.pending
        npending = len(pending)
        # The look after the last pending checkpoint ended counts too: without it an aligned job's
        # channels would never be seen going back to no checkpoint pending.
        if npending or self._busy or self._was_pending:
            self._channels(engine, hits, npending)
        self._was_pending = npending
        if npending:
            self._senders(engine, hits, pending)
        if self._handover.armed:
            self._handover.look(hits)
        self._finish.look(engine, hits)
        self._cancel.look(hits)
        registry = getattr(engine.storage, "registry", None)
        if registry is not None and registry.released_restored:
            hits[RESTORED_RELEASED] += 1
        if len(engine.restore_reports) != self._restores:
            for report in engine.restore_reports[self._restores:]:
                self._restore(engine, hits, report)
            self._restores = len(engine.restore_reports)

    def _channels(self, engine: Any, hits: Counter[Cell], npending: int) -> None:
        pend = PENDING[min(npending, 2)]
        last = self._last
        pending = engine.coordinator.pending
        newest = max(pending) if pending else -1
        busy = False
        for task in engine.tasks.values():
            for ch in task.channels:
                # A channel persists for a pending checkpoint; one still persisting for an aborted checkpoint
                # (its task was only told, facts §4.10) persists into nothing: idle, and a stale cell of its own.
                live = ch.persisting is not None and ch.persisting in pending
                state = ("persisting/" if live else "idle/") + pend
                busy = busy or ch.persisting is not None
                if ch.persisting is not None and not live:
                    hits["stale", "persisting-aborted", ""] += 1
                key = id(ch)
                before = last.get(key)
                if before is None or before[0] != state:
                    hits["channel", state, ""] += 1
                    if before is not None:
                        hits["transition", before[0], state] += 1
                        if (before[0], state) in NUDGED:  # one savepoint due in this step would crowd it
                            self._moment(NUDGED[before[0], state], engine.step, f"{task.sid}#{ch.index_in_task}")
                    last[key] = (state, ch)
                if state == "persisting/2+" and self._wants_moment("crowded", engine.step):
                    # A failover of another region aborts them all at once while this channel's task runs on.
                    elsewhere = self._elsewhere(engine, task)
                    if elsewhere is not None:
                        self._moment("crowded", engine.step, elsewhere)
                if live and ch.sender is not None:
                    self._after_stale(ch, hits)
                if ch.priority and newest >= 0:
                    for b in ch.priority:
                        if b.cp < newest and b.cp not in pending:
                            hits["stale", "at-receiver", ""] += 1
                            break
        # Every channel idle with nothing pending: no channel changes state until the next trigger.
        self._busy = busy

    def _wants_moment(self, kind: str, step: int) -> bool:
        steps = self.coverage.moments.get(kind, ())
        return len(steps) < MOMENTS and (not steps or steps[-1][0] != step)

    def _moment(self, kind: str, step: int, where: str) -> None:
        if self._wants_moment(kind, step):
            self.coverage.moments.setdefault(kind, []).append((step, where))

    def _elsewhere(self, engine: Any, task: Any) -> str | None:
        """A running subtask whose failure restarts a region without ``task`` (a region failover,
        ``reference.recovery.region_failover``), or None: the job fails over as a whole (the full
        strategy, or a rescale happened, after which every failover redistributes state job-wide), or
        every other region has finished (a finished task does not fail in Flink)."""
        if engine.scenario.extra.get("failover_strategy", "region") != "region" or any(
                engine.parallelism[v.id] != v.parallelism for v in engine.graph.vertices):
            return None
        cached = self._regions
        if cached is None or cached[0] is not engine.exec_graph:
            cached = self._regions = (engine.exec_graph, pipelined_regions(engine.exec_graph), {})
        graph, regions, sets = cached
        mine = sets.get(task.sid)
        if mine is None:
            mine = sets[task.sid] = failover_set(graph, task.sid, regions=regions)
        return next((str(sid) for sid, t in engine.tasks.items() if sid not in mine and not t.finished), None)

    def _after_stale(self, ch: Any, hits: Counter[Cell]) -> None:
        """A barrier older than the checkpoint a channel persists reaching it while it persists
        (``meets-persisting``), then, once the receiver's handler has handled it (``_stale_handled``),
        records crossing the channel behind it while it still persists (``records-behind``): the records
        a handler that let a stale barrier end the persisting would lose (FLINK-21104), counted when that
        checkpoint completes. Only records crossing after the handling count: those before it are
        persisted whatever the handler then does. On the expiry-unaligned focus's seeds 0-299 the cell is
        reached in exactly the 12 runs where a handler that ends the persisting on a stale barrier breaks
        CUT."""
        p, arrived, sent = ch.persisting, ch.barrier_arrived, ch.sender.transmitted
        key = id(ch)
        seen = self._passed.get(key)
        if seen is None or seen[0] != p:
            self._passed[key] = (p, arrived, sent, False, ch, -1)
        elif arrived != seen[1]:
            armed = arrived < p
            if armed:
                hits["stale", "meets-persisting", ""] += 1
            self._passed[key] = (p, arrived, sent, armed, ch, -1)
        elif seen[3] and 0 <= seen[5] < sent:
            self._behind.add(p)  # counted when ``p`` completes: an aborted one's state is never read
            self._passed[key] = (p, arrived, sent, True, ch, sent)

    def _stale_handled(self, engine: Any, e: HandlerDispatched) -> None:
        """The receiver's handler is about to handle a stale barrier on a channel that persists a newer
        checkpoint (``_after_stale``): from here on, records crossing it are ``records-behind``. (A barrier
        of the persisted checkpoint itself ends the persisting, so nothing is counted after it.)"""
        if e.event != "barrier_received" or e.channel < 0 or not self._passed:
            return
        task = engine.tasks.get(e.sid)
        if task is None or e.channel >= len(task.channels):
            return
        ch = task.channels[e.channel]
        seen = self._passed.get(id(ch))
        # The newest barrier that arrived there is older than the persisted checkpoint: the one about to be
        # handled is stale (it may have arrived before the persisting began: FLINK-21104 needs no more).
        if (seen is not None and seen[5] < 0 and ch.persisting == seen[0] and ch.barrier_arrived < seen[0]
                and ch.sender is not None):
            if ch.barrier_arrived != seen[1]:  # it arrived since the last look, and is handled in this step
                self.coverage.hits["stale", "meets-persisting", ""] += 1
            self._passed[id(ch)] = (seen[0], ch.barrier_arrived, seen[2], True, ch, ch.sender.transmitted)

    def _senders(self, engine: Any, hits: Counter[Cell], pending: Mapping[int, Any]) -> None:
        newest = max(pending)
        self._conversion.forget_ended(pending)
        for sp in engine.subpartitions:
            q = sp.queue
            if not q or (len(q) == 1 and q[0].__class__ is not Barrier):
                continue
            for pos, item in enumerate(q):
                if item.__class__ is not Barrier:
                    continue
                if item.priority:
                    buffers = sum(1 for x in q if x.__class__ is Buf)  # behind it
                    hits["overtake", "priority", count_class(buffers)] += 1
                else:
                    buffers = sum(1 for x in list(q)[:pos] if x.__class__ is Buf)  # before it
                    hits["overtake", "aligned", count_class(buffers)] += 1
                self._conversion.look_at(hits, sp, item, buffers)
                if item.cp < newest and item.cp not in pending:
                    hits["stale", "at-sender", ""] += 1
                break

    def _restore(self, engine: Any, hits: Counter[Cell], report: Mapping[str, Any]) -> None:
        edges = {e.key: e.partitioner for e in engine.graph.edges}
        for edge, moved in report.get("edges", {}).items():
            partitioner = edges.get(edge)
            if partitioner is None:
                continue
            if moved.get("input_records"):
                hits["restore", partitioner, "input"] += 1
            if moved.get("output_records"):
                hits["restore", partitioner, "output"] += 1


def observe(sdict: Mapping[str, Any]) -> AbstractObserver:
    """An observer for one fuzz run of ``sdict`` (its swarm-feature pairs already counted when its
    graph is inline, as generated ones are); ``simulate(..., watch=observer.attach)`` subscribes it."""
    observer = AbstractObserver()
    if isinstance(sdict.get("graph"), Mapping):
        for cell in feature_pairs(features_of(sdict)):
            observer.coverage.hits[cell] += 1
    return observer


def abstract_lines(coverage: AbstractCoverage, *, unreachable: bool = False) -> list[str]:
    """The summary for ``fuzz`` and ``verify``: reached of reachable per family, the unreached cells by
    name (pairs too, when few are left: the JSON report names them all), and how many are ruled out;
    with ``unreachable``, each of those by name under its reason."""
    families: dict[str, list[int]] = {}
    for cell, why in ABSTRACT_UNIVERSE.items():
        if why is None:
            counts = families.setdefault(cell[0], [0, 0])
            counts[0] += bool(coverage.hits[cell])
            counts[1] += 1
    ruled_out = [(c, why) for c, why in ABSTRACT_UNIVERSE.items() if why is not None]
    where = "below" if unreachable else "in the JSON report"
    lines = [f"abstract coverage: {coverage.describe()} ("
             + ", ".join(f"{family} {n}/{total}" for family, (n, total) in families.items())
             + f"; {len(ruled_out)} unreachable, with reasons {where})"]
    missed = coverage.missed()
    shown = [cell_name(c) for c in missed if c[0] != "pair" or len(missed) <= MISSED_SHOWN]
    if shown:
        lines.append("abstract states not reached: " + ", ".join(shown))
    if unreachable:
        by_reason: dict[str, list[str]] = {}
        for cell, why in ruled_out:
            by_reason.setdefault(why, []).append(cell_name(cell))
        lines += [f"unreachable ({why}): {', '.join(names)}" for why, names in by_reason.items()]
    return lines
