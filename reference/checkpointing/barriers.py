"""Barrier handling: one small class per handler state, whose methods are the events.

Modelled on Flink's ``SingleCheckpointBarrierHandler`` states (facts §3.4–§3.6):

* ``WaitingForFirstBarrier``: idle; the first barrier decides what follows.
* ``CollectingBarriers``: aligned; each channel blocks at its barrier, the snapshot comes after the last.
* ``CollectingBarriersUnaligned``: the snapshot was taken at the first barrier; channels whose barrier
  has not arrived keep persisting their pre-barrier data as input state.
* ``TrackingBarriers``: at-least-once; nothing blocks, the snapshot comes after the last barrier.

The events are a barrier, the alignment timeout, an end of partition and a cancel marker
(``processCancellationBarrier``). The coordinator's abort is not one of them: it never reaches a
handler (facts §4.10). An alignment of an aborted checkpoint goes on until its barriers, a cancel
marker or a newer barrier end it; the snapshot step then sends cancel markers instead of barriers.

Each method returns the next state. A state sees its task only through ``BarrierController``, the
handful of effects the rules need (``take_snapshot``, ``block``/``unblock_all``, ``decline`` …), as
Flink's handler states see a ``CheckpointBarrierBehaviourController``; ``reference.runtime.tasks.Task``
implements it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from cutcheck.model.execution import edge_supports_unaligned
from cutcheck.model.graph import JobGraph
from cutcheck.model.kinds import BarrierOption
from cutcheck.reference.core.seams import seam
from cutcheck.reference.runtime.barrier_control import AlignmentEnd
from cutcheck.reference.runtime.network import Barrier, InputChannel

if TYPE_CHECKING:
    from cutcheck.reference.runtime.tasks import Task


class BarrierController(Protocol):
    """What a handler state may see and do of its task, and nothing of the run."""

    @property
    def last_cp(self) -> int: ...  # the newest checkpoint this task snapshotted, cancelled or declined

    @property
    def channels(self) -> list[InputChannel]: ...

    def block(self, ch: InputChannel) -> None: ...

    def resume(self, ch: InputChannel) -> None: ...

    def unblock_all(self, ending: AlignmentEnd) -> None: ...

    def stop_persisting(self) -> None: ...

    def prioritise_queued_barriers(self, cp: int) -> set[int]: ...

    def queued_barrier(self, cp: int) -> Barrier | None: ...

    def all_received(self, received: set[int]) -> bool: ...

    def eop_counts_as_barrier(self, ch: InputChannel) -> bool: ...

    def cancel_ends_alignment(self, cp: int, collecting: int) -> bool: ...

    def timed_out(self, b: Barrier) -> bool: ...

    def take_snapshot(self, b: Barrier, *, unaligned: bool, received: set[int] | None = None,
                      first: InputChannel | None = None) -> None: ...

    def input_side_done(self, cp: int) -> None: ...

    def decline(self, cp: int, reason: str, cause: str) -> None: ...

    def dispatched(self, state: str, event: str, channel: int) -> None: ...


@seam
def edge_carries_unaligned_barriers(job: JobGraph, edge: int) -> bool:
    """Barriers on an edge may overtake data only if no input of its consumer is pointwise, broadcast
    or custom (facts §3.7): Flink forces those aligned, as their in-flight data cannot be rescaled."""
    return edge_supports_unaligned(job, edge)


@seam
def barrier_options_on_edge(options: BarrierOption, uc_capable: bool) -> BarrierOption:
    """The options a barrier carries on one output edge: the checkpoint's own on an edge that may be
    unaligned (and at-least-once everywhere); on any other edge unaligned and timeoutable barriers alike
    become forced aligned, so that they never overtake data there (``RecordWriterOutput.broadcastEvent``
    after FLINK-33693, facts §3.7)."""
    return options if (uc_capable or options == BarrierOption.AT_LEAST_ONCE) else BarrierOption.FORCED_ALIGNED


@seam
def trigger_reaches_task(task: Task) -> bool:
    """A checkpoint trigger sent to a task is never silently lost: a task that finished its input in
    between still snapshots (its final state, FLIP-147), as Flink's task either runs the trigger or
    declines it so that the coordinator aborts the checkpoint (FLINK-23741)."""
    return True


class HandlerState:
    """A state; the four events are dispatched here, which publishes each dispatch (state, event) on the
    run's bus for coverage, then runs the state's own ``on_*`` method."""

    cp: int = -1

    def barrier_received(self, task: BarrierController, ch: InputChannel, b: Barrier) -> HandlerState:
        _dispatched(task, self, "barrier_received", ch)
        return self.on_barrier(task, ch, b)

    def alignment_timeout(self, task: BarrierController, cp: int) -> HandlerState:
        _dispatched(task, self, "alignment_timeout")
        return self.on_timeout(task, cp)

    def end_of_partition(self, task: BarrierController, ch: InputChannel) -> HandlerState:
        _dispatched(task, self, "end_of_partition", ch)
        return self.on_end_of_partition(task, ch)

    def cancel_received(self, task: BarrierController, ch: InputChannel, cp: int) -> HandlerState:
        _dispatched(task, self, "cancel_received", ch)
        return self.on_cancel(task, ch, cp)

    def collecting(self) -> set[int]:
        """The checkpoints whose barriers this state is collecting (none while waiting for a first one)."""
        return {self.cp} if self.cp > 0 else set()

    def may_block(self) -> set[int]:
        """The input channels (indexes in the task) this state may hold blocked: those whose barrier its
        alignment took (none unless it aligns; an unaligned state keeps those an aligned one blocked
        before it switched). BLOCKED checks every blocked channel against it."""
        return set()

    def on_barrier(self, task: BarrierController, ch: InputChannel, b: Barrier) -> HandlerState:
        raise NotImplementedError

    def on_timeout(self, task: BarrierController, cp: int) -> HandlerState:
        return self

    def on_end_of_partition(self, task: BarrierController, ch: InputChannel) -> HandlerState:
        return self

    def on_cancel(self, task: BarrierController, ch: InputChannel, cp: int) -> HandlerState:
        """``processCancellationBarrier`` of the single-checkpoint handler: a cancel marker of a checkpoint
        newer than any this task met, or of the one it collects, ends what it collects (for a newer one,
        the older checkpoint is dropped here, not declined) and declines the cancelled checkpoint, which
        forwards the marker; any other cancel marker is one the task already acted on."""
        if task.cancel_ends_alignment(cp, self.cp):
            self.end_alignment(task, AlignmentEnd.ABORTED)
            task.decline(cp, "a cancel marker arrived", "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")
            return WaitingForFirstBarrier()
        return self

    def end_alignment(self, task: BarrierController, ending: AlignmentEnd) -> None:
        """What the state undoes when its alignment ends other than by completing (``abort``)."""


def _dispatched(task: BarrierController, state: HandlerState, event: str, ch: InputChannel | None = None) -> None:
    # The channel the event came on, if any: its barrier or marker is in hand, no longer queued (CANCEL).
    task.dispatched(type(state).__name__, event, -1 if ch is None else ch.index_in_task)


class WaitingForFirstBarrier(HandlerState):
    def on_barrier(self, task: BarrierController, ch: InputChannel, b: Barrier) -> HandlerState:
        if b.cp <= task.last_cp:
            task.resume(ch)  # a late barrier of a checkpoint this task finished or aborted
            return self
        if b.options == BarrierOption.AT_LEAST_ONCE:
            return TrackingBarriers().barrier_received(task, ch, b)
        if b.priority:  # an unaligned barrier (or one its sender converted on timeout)
            return CollectingBarriersUnaligned.start(task, b, first=ch)
        return CollectingBarriers(b).barrier_received(task, ch, b)

    def on_timeout(self, task: BarrierController, cp: int) -> HandlerState:
        # Before any barrier was taken: announced (queued) barriers are prioritised and the
        # checkpoint continues unaligned (AlternatingWaitingForFirstBarrier.alignedCheckpointTimeout).
        queued = task.queued_barrier(cp)
        if queued is None or queued.options != BarrierOption.TIMEOUTABLE:
            return self
        return CollectingBarriersUnaligned.start(task, queued, first=None)


class CollectingBarriers(HandlerState):
    """Aligned: block each channel at its barrier; snapshot after the last one."""

    def __init__(self, b: Barrier):
        self.barrier = b
        self.cp = b.cp
        self.received: set[int] = set()

    def may_block(self) -> set[int]:
        return self.received

    def on_barrier(self, task: BarrierController, ch: InputChannel, b: Barrier) -> HandlerState:
        if b.cp > self.cp:
            # cancelSubsumedCheckpoint: the alignment ends, then the task declines (and cancels downstream)
            self.end_alignment(task, AlignmentEnd.SUBSUMED)
            task.decline(self.cp, "a newer barrier arrived (subsumed)", "CHECKPOINT_DECLINED_SUBSUMED")
            return WaitingForFirstBarrier().barrier_received(task, ch, b)
        if b.cp < self.cp:
            task.resume(ch)
            return self
        if b.priority and self.barrier.options == BarrierOption.TIMEOUTABLE:
            self.received.add(ch.index_in_task)
            return CollectingBarriersUnaligned.switch(task, self.barrier, self.received)
        task.block(ch)
        self.received.add(ch.index_in_task)
        if task.all_received(self.received):
            return self._complete(task)
        if task.timed_out(self.barrier):
            # Flink asks "all barriers received?" before "timed out?" (AbstractAlternatingAligned-
            # BarrierHandlerState.barrierReceived): only a barrier that leaves others outstanding
            # switches; the channel stays blocked until the checkpoint ends at this task.
            return CollectingBarriersUnaligned.switch(task, self.barrier, self.received)
        return self

    def on_end_of_partition(self, task: BarrierController, ch: InputChannel) -> HandlerState:
        if task.eop_counts_as_barrier(ch):
            self.received.add(ch.index_in_task)
        return self._complete(task) if task.all_received(self.received) else self

    def _complete(self, task: BarrierController) -> HandlerState:
        task.take_snapshot(self.barrier, unaligned=False)
        task.unblock_all(AlignmentEnd.COMPLETED)
        task.input_side_done(self.cp)
        return WaitingForFirstBarrier()

    def on_timeout(self, task: BarrierController, cp: int) -> HandlerState:
        if cp != self.cp or self.barrier.options != BarrierOption.TIMEOUTABLE:
            return self  # forced-aligned barriers never time out
        return CollectingBarriersUnaligned.switch(task, self.barrier, self.received)

    def end_alignment(self, task: BarrierController, ending: AlignmentEnd) -> None:
        task.unblock_all(ending)


class CollectingBarriersUnaligned(HandlerState):
    """The snapshot is taken; wait for the remaining barriers while persisting pre-barrier input."""

    def __init__(self, b: Barrier, received: set[int]):
        self.barrier = b
        self.cp = b.cp
        self.received = received

    @classmethod
    def start(cls, task: BarrierController, b: Barrier, first: InputChannel | None) -> HandlerState:
        received: set[int] = set() if first is None else {first.index_in_task}
        received |= task.prioritise_queued_barriers(b.cp)
        received |= {ch.index_in_task for ch in task.channels if ch.eop_arrived}  # see Engine._do_transmit
        task.take_snapshot(b, unaligned=True, received=received, first=first)
        return cls(b, received)._maybe_complete(task)

    @classmethod
    def switch(cls, task: BarrierController, b: Barrier, received: set[int]) -> HandlerState:
        """Aligned → unaligned on timeout (AlternatingCollectingBarriers.alignedCheckpointTimeout).

        Channels already blocked stay blocked until the checkpoint finishes at this task.
        """
        received = set(received) | task.prioritise_queued_barriers(b.cp)
        received |= {ch.index_in_task for ch in task.channels if ch.eop_arrived}
        task.take_snapshot(b, unaligned=True, received=received)
        return cls(b, received)._maybe_complete(task)

    def may_block(self) -> set[int]:
        return self.received

    def on_barrier(self, task: BarrierController, ch: InputChannel, b: Barrier) -> HandlerState:
        if b.cp > self.cp:
            self.end_alignment(task, AlignmentEnd.SUBSUMED)
            task.decline(self.cp, "a newer barrier arrived (subsumed)", "CHECKPOINT_DECLINED_SUBSUMED")
            return WaitingForFirstBarrier().barrier_received(task, ch, b)
        if b.cp < self.cp:
            task.resume(ch)
            return self
        self.received.add(ch.index_in_task)
        ch.persisting = None
        return self._maybe_complete(task)

    def on_end_of_partition(self, task: BarrierController, ch: InputChannel) -> HandlerState:
        self.received.add(ch.index_in_task)
        ch.persisting = None
        return self._maybe_complete(task)

    def _maybe_complete(self, task: BarrierController) -> HandlerState:
        if not task.all_received(self.received):
            return self
        task.stop_persisting()
        task.unblock_all(AlignmentEnd.COMPLETED)
        task.input_side_done(self.cp)
        return WaitingForFirstBarrier()

    def end_alignment(self, task: BarrierController, ending: AlignmentEnd) -> None:
        task.stop_persisting()
        task.unblock_all(ending)


MAX_CHECKPOINTS_TO_TRACK = 50  # CheckpointBarrierTracker's bound on partly aligned checkpoints


class _Count:
    """One partly aligned checkpoint of the tracker: its barrier (none if a cancel marker came first),
    the channels its barrier or cancel marker came on, and whether it was cancelled here."""

    def __init__(self, cp: int, b: Barrier | None):
        self.cp = cp
        self.barrier = b
        self.received: set[int] = set()
        self.aborted = b is None


class TrackingBarriers(HandlerState):
    """At-least-once (CheckpointBarrierTracker): count barriers, never block; snapshot after the last.

    Up to ``MAX_CHECKPOINTS_TO_TRACK`` checkpoints are tracked at once, oldest first. A newer
    barrier declines nothing: older checkpoints are dropped (silently, the coordinator subsumes or
    expires them) only when a newer one completes here, or when a 51st one starts. A first barrier
    of a checkpoint not newer than the newest tracked (or finished) one can no longer complete and
    is ignored. A cancel marker declines its checkpoint (and every older tracked one) once, and the
    checkpoint stays tracked, cancelled, until every channel brought its barrier or marker. With
    nothing tracked the task is idle again (``WaitingForFirstBarrier``).
    """

    def __init__(self) -> None:
        self.pending: list[_Count] = []

    def collecting(self) -> set[int]:
        return {count.cp for count in self.pending if not count.aborted}

    def on_barrier(self, task: BarrierController, ch: InputChannel, b: Barrier) -> HandlerState:
        count = next((c for c in self.pending if c.cp == b.cp), None)
        if count is None:
            newest = self.pending[-1].cp if self.pending else -1
            if b.cp <= max(newest, task.last_cp):
                return self._idle()
            count = _Count(b.cp, b)
            self.pending.append(count)
            if len(self.pending) > MAX_CHECKPOINTS_TO_TRACK:
                self.pending.pop(0)
        count.received.add(ch.index_in_task)
        return self._complete(task, count) if task.all_received(count.received) else self

    def on_end_of_partition(self, task: BarrierController, ch: InputChannel) -> HandlerState:
        # Newest first, as the tracker does: the channel counts for each until one completes.
        for count in reversed(self.pending):
            count.received.add(ch.index_in_task)
            if task.all_received(count.received):
                return self._complete(task, count)
        return self

    def _complete(self, task: BarrierController, count: _Count) -> HandlerState:
        del self.pending[: self.pending.index(count) + 1]  # it and every older one (now subsumed)
        if not count.aborted and count.barrier is not None:
            task.take_snapshot(count.barrier, unaligned=False)
            task.input_side_done(count.cp)
        return self._idle()

    def on_cancel(self, task: BarrierController, ch: InputChannel, cp: int) -> HandlerState:
        """``CheckpointBarrierTracker.processCancellationBarrier``."""
        while self.pending and self.pending[0].cp < cp:
            older = self.pending.pop(0)
            if not older.aborted:
                task.decline(older.cp, "a cancel marker of a newer checkpoint arrived", "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")
        first = self.pending[0] if self.pending else None
        if first is not None and first.cp == cp:
            if not first.aborted:
                first.aborted = True
                task.decline(cp, "a cancel marker arrived", "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")
            first.received.add(ch.index_in_task)
            if task.all_received(first.received):
                self.pending.pop(0)
        elif cp > max(self.pending[-1].cp if self.pending else -1, task.last_cp):
            task.decline(cp, "a cancel marker arrived", "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")
            marker = _Count(cp, None)
            marker.received.add(ch.index_in_task)
            if not task.all_received(marker.received):
                self.pending.insert(0, marker)
        return self._idle()

    def _idle(self) -> HandlerState:
        return self if self.pending else WaitingForFirstBarrier()
