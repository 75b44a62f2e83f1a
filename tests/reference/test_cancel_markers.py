"""Aborts as Flink's tasks see them: notifications that reach no barrier handler, and cancel markers
(facts §4.10). The handler rules against a recording controller, then whole runs."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cutcheck.model.kinds import BarrierOption, CheckpointKind
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.batch import make_engine
from cutcheck.reference.checkpointing.barriers import (
    CollectingBarriers,
    CollectingBarriersUnaligned,
    HandlerState,
    TrackingBarriers,
    WaitingForFirstBarrier,
)
from cutcheck.reference.events.stream import (
    CheckpointAborted,
    HandlerDispatched,
    SnapshotCancelled,
    SnapshotTaken,
)
from cutcheck.reference.fuzzing.generate import scenario_from_seed
from cutcheck.reference.fuzzing.swarm import Feature
from cutcheck.reference.fuzzing.verdicts import SMALL
from cutcheck.reference.runtime.barrier_control import AlignmentEnd, cancel_marker_ends_alignment
from cutcheck.reference.runtime.network import Barrier
from tests.reference.helpers import scenario


@dataclass
class _Channel:
    index_in_task: int
    persisting: int | None = None
    blocked: bool = False
    eop_arrived: bool = False


@dataclass
class _Task:
    """A recording BarrierController: the effects a handler state asks for, in order."""

    n: int = 3
    last_cp: int = 0
    effects: list[tuple[Any, ...]] = field(default_factory=list)
    channels: list[_Channel] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.channels = [_Channel(i) for i in range(self.n)]

    def block(self, ch: _Channel) -> None:
        ch.blocked = True

    def resume(self, ch: _Channel) -> None:
        self.effects.append(("resume", ch.index_in_task))

    def unblock_all(self, ending: AlignmentEnd) -> None:
        self.effects.append(("unblock_all", ending))
        for ch in self.channels:
            ch.blocked = False

    def stop_persisting(self) -> None:
        self.effects.append(("stop_persisting",))

    def prioritise_queued_barriers(self, cp: int) -> set[int]:
        return set()

    def queued_barrier(self, cp: int) -> Barrier | None:
        return None

    def all_received(self, received: set[int]) -> bool:
        return len(received) == self.n

    def eop_counts_as_barrier(self, ch: _Channel) -> bool:
        return False

    def cancel_ends_alignment(self, cp: int, collecting: int) -> bool:
        return cancel_marker_ends_alignment(cp, max(self.last_cp, collecting), collecting)

    def timed_out(self, b: Barrier) -> bool:
        return False

    def take_snapshot(self, b: Barrier, *, unaligned: bool, received: set[int] | None = None,
                      first: _Channel | None = None) -> None:
        self.last_cp = max(self.last_cp, b.cp)
        self.effects.append(("snapshot", b.cp))

    def input_side_done(self, cp: int) -> None:
        self.effects.append(("input_done", cp))

    def decline(self, cp: int, reason: str, cause: str) -> None:
        self.last_cp = max(self.last_cp, cp)
        self.effects.append(("decline", cp, cause))

    def dispatched(self, state: str, event: str, channel: int) -> None:
        pass


def _barrier(cp: int, options: BarrierOption = BarrierOption.ALIGNED, priority: bool = False) -> Barrier:
    return Barrier(cp, CheckpointKind.CHECKPOINT, options, 0, priority=priority)


def _aligning(task: _Task, cp: int) -> HandlerState:
    return WaitingForFirstBarrier().barrier_received(task, task.channels[0], _barrier(cp))  # type: ignore[arg-type]


def test_a_cancel_marker_of_the_checkpoint_being_aligned_ends_the_alignment_and_is_declined_once() -> None:
    task = _Task()
    state = _aligning(task, 5)
    assert isinstance(state, CollectingBarriers) and task.channels[0].blocked
    state = state.cancel_received(task, task.channels[1], 5)  # type: ignore[arg-type]
    assert isinstance(state, WaitingForFirstBarrier) and not task.channels[0].blocked
    assert task.effects == [("unblock_all", AlignmentEnd.ABORTED), ("decline", 5, "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")]
    # The same checkpoint's other markers and its late barriers change nothing now.
    state = state.cancel_received(task, task.channels[2], 5)  # type: ignore[arg-type]
    state = state.barrier_received(task, task.channels[2], _barrier(5))  # type: ignore[arg-type]
    assert isinstance(state, WaitingForFirstBarrier)
    assert task.effects[2:] == [("resume", 2)]


def test_a_newer_cancel_marker_drops_the_alignment_without_declining_it_and_a_stale_one_is_ignored() -> None:
    task = _Task()
    state = _aligning(task, 5)
    stale = state.cancel_received(task, task.channels[1], 4)  # type: ignore[arg-type]
    assert stale is state and task.effects == [] and task.channels[0].blocked
    state = state.cancel_received(task, task.channels[1], 7)  # type: ignore[arg-type]
    assert isinstance(state, WaitingForFirstBarrier)
    assert [e for e in task.effects if e[0] == "decline"] == [("decline", 7, "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")]
    state = state.barrier_received(task, task.channels[1], _barrier(6))  # type: ignore[arg-type]
    assert isinstance(state, WaitingForFirstBarrier)  # 6 is older than the cancelled 7: obsolete


def test_an_unaligned_collection_stops_persisting_on_its_cancel_marker() -> None:
    task = _Task()
    state = WaitingForFirstBarrier().barrier_received(  # type: ignore[arg-type]
        task, task.channels[0], _barrier(3, BarrierOption.UNALIGNED, priority=True))  # type: ignore[arg-type]
    assert isinstance(state, CollectingBarriersUnaligned) and ("snapshot", 3) in task.effects
    del task.effects[:]
    state = state.cancel_received(task, task.channels[1], 2)  # type: ignore[arg-type]
    assert isinstance(state, CollectingBarriersUnaligned) and task.effects == []  # stale: the snapshot's cut stands
    state = state.cancel_received(task, task.channels[1], 3)  # type: ignore[arg-type]
    assert isinstance(state, WaitingForFirstBarrier)
    assert task.effects == [("stop_persisting",), ("unblock_all", AlignmentEnd.ABORTED),
                            ("decline", 3, "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")]


def test_an_idle_task_declines_a_cancel_marker_of_a_checkpoint_it_has_not_met() -> None:
    task = _Task(last_cp=4)
    state: HandlerState = WaitingForFirstBarrier()
    state = state.cancel_received(task, task.channels[0], 4)  # type: ignore[arg-type]
    assert task.effects == []
    state = state.cancel_received(task, task.channels[0], 6)  # type: ignore[arg-type]
    assert isinstance(state, WaitingForFirstBarrier) and task.effects == [("decline", 6, "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")]


def test_the_tracker_declines_each_cancelled_checkpoint_once_and_counts_it_out() -> None:
    task = _Task(n=2)
    state: HandlerState = WaitingForFirstBarrier()
    state = state.barrier_received(task, task.channels[0], _barrier(1, BarrierOption.AT_LEAST_ONCE))  # type: ignore[arg-type]
    state = state.barrier_received(task, task.channels[0], _barrier(2, BarrierOption.AT_LEAST_ONCE))  # type: ignore[arg-type]
    assert isinstance(state, TrackingBarriers) and state.collecting() == {1, 2}
    state = state.cancel_received(task, task.channels[1], 2)  # type: ignore[arg-type]
    # 1 is older than the cancelled 2: declined too; 2 stays counted, cancelled, until channel 0 brought it
    assert task.effects == [("decline", 1, "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER"),
                            ("decline", 2, "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")]
    assert isinstance(state, WaitingForFirstBarrier)  # channel 0 had brought 2 already: counted out
    task2 = _Task(n=2)
    tracker: HandlerState = TrackingBarriers()
    tracker = tracker.cancel_received(task2, task2.channels[0], 3)  # type: ignore[arg-type]
    assert isinstance(tracker, TrackingBarriers) and tracker.collecting() == set()
    tracker = tracker.barrier_received(task2, task2.channels[1], _barrier(3, BarrierOption.AT_LEAST_ONCE))  # type: ignore[arg-type]
    assert isinstance(tracker, WaitingForFirstBarrier)
    assert task2.effects == [("decline", 3, "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")]  # no snapshot of 3


def test_an_expired_alignment_ends_on_a_cancel_marker_and_nothing_is_snapshotted_after_an_abort() -> None:
    """Aligned, expiring checkpoints under backpressure (the catalogue's BLOCKED witness): aborts do not
    end alignments; tasks that come to an aborted checkpoint send cancel markers, which do."""
    sdict = scenario("keyed-pipeline.json", mode="aligned", seed=1, slow="count")
    sdict["checkpoint"] |= {"checkpoint_timeout": 40, "tolerable_failed": 1000}
    engine = make_engine(Scenario.from_json(sdict))
    aborted: set[int] = set()
    dispatched: set[tuple[str, str]] = set()
    cancelled: list[int] = []
    late: list[tuple[str, int]] = []
    engine.bus.subscribe(CheckpointAborted, lambda e: aborted.add(e.cp))
    engine.bus.subscribe(HandlerDispatched, lambda e: dispatched.add((e.state, e.event)))
    engine.bus.subscribe(SnapshotCancelled, lambda e: cancelled.append(e.cp))
    engine.bus.subscribe(SnapshotTaken, lambda e: late.append((str(e.sid), e.cp)) if e.cp in aborted else None)
    engine.run()
    assert aborted and cancelled and set(cancelled) <= aborted
    assert ("CollectingBarriers", "cancel_received") in dispatched
    assert late == []


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10**6), mode=st.sampled_from(["aligned", "unaligned", "aligned_timeout"]))
def test_no_task_snapshots_a_checkpoint_after_its_abort(seed: int, mode: str) -> None:
    """Generated jobs with expiring checkpoints: every task hears of an abort at once, so a snapshot of an
    aborted checkpoint taken later would be one a task made of a checkpoint it knew was dead; it sends
    cancel markers instead. The runs hold every check."""
    sdict = scenario_from_seed(seed, modes=(mode,), on=(Feature.EXPIRY, Feature.BACKPRESSURE), **SMALL)
    aborted: set[int] = set()
    late: list[tuple[str, int]] = []

    def watch(engine: Any) -> None:
        engine.bus.subscribe(CheckpointAborted, lambda e: aborted.add(e.cp))
        engine.bus.subscribe(SnapshotTaken, lambda e: late.append((str(e.sid), e.cp)) if e.cp in aborted else None)

    with tempfile.TemporaryDirectory(prefix="cutcheck-cancel-") as tmp:
        result = simulate(Scenario.from_json(sdict), checkpoint_dir=Path(tmp) / "run", watch=watch)
    assert late == []
    assert not [v for v in result.violations if v["invariant"] not in ("LIVENESS",)], result.violations
