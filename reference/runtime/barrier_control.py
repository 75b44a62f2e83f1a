"""What a task's barrier handler sees of its task: the effects the alignment rules need, and no more.

Flink's handler states (``SingleCheckpointBarrierHandler`` and its ``BarrierHandlerState``s) act on
their task through a ``CheckpointBarrierBehaviourController``; ``TaskBarrierControl`` is that
controller here. It implements ``checkpointing.barriers.BarrierController`` for one ``Task``, and it is
the only object a handler state is given, so a state cannot reach the run behind the task.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from cutcheck.reference.core.seams import seam
from cutcheck.reference.runtime.network import Barrier, InputChannel

if TYPE_CHECKING:
    from cutcheck.reference.runtime.tasks import Task


@seam
def end_of_partition_counts_as_barrier(ch: InputChannel) -> bool:
    """During alignment a channel whose end of partition the task has consumed counts as one whose
    barrier has come: nothing more will come on it (FLIP-147, FLINK-21086)."""
    return ch.ended


@seam
def cancel_marker_ends_alignment(cp: int, current: int, collecting: int) -> bool:
    """A cancel marker of ``cp`` ends what the handler collects (``collecting``, -1 for none) only if
    ``cp`` is newer than any checkpoint the task met (``current``: the newest it collected, took,
    cancelled or declined), or is the one it collects (``processCancellationBarrier``). A marker of an
    older checkpoint is stale: the task acted on it already, and it must not end a newer alignment,
    whose persisting or blocked channels still guard that checkpoint's cut (facts §4.10)."""
    return cp > current or (cp == current and cp == collecting)


class AlignmentEnd(Enum):
    """How an alignment ends at a task: its snapshot is taken, a cancel marker of its checkpoint (or of
    a newer one) arrives, or a newer checkpoint's barrier overtakes it (the older one is declined as
    subsumed)."""

    COMPLETED = "completed"
    ABORTED = "aborted"
    SUBSUMED = "subsumed"


@seam
def alignment_end_resumes(ending: AlignmentEnd) -> bool:
    """However an alignment ends, the channels it blocked are resumed (each of Flink's barrier handler
    states unblocks all channels when it completes, aborts or meets a newer barrier; BLOCKED checks it)."""
    return True


class TaskBarrierControl:
    """The controller a barrier handler state acts through, for one task."""

    __slots__ = ("task",)

    def __init__(self, task: Task):
        self.task = task

    @property
    def last_cp(self) -> int:
        """The newest checkpoint this task snapshotted, cancelled or declined (Flink's ``lastCheckpointId``;
        an abort the coordinator notified does not move it)."""
        return self.task.last_cp

    @property
    def channels(self) -> list[InputChannel]:
        return self.task.channels

    def timed_out(self, b: Barrier) -> bool:
        return self.task.timed_out(b)

    def queued_barrier(self, cp: int) -> Barrier | None:
        return self.task.queued_barrier(cp)

    def eop_counts_as_barrier(self, ch: InputChannel) -> bool:
        return self.task.engine.rules[end_of_partition_counts_as_barrier](ch)

    def cancel_ends_alignment(self, cp: int, collecting: int) -> bool:
        current = max(self.task.last_cp, collecting)
        return bool(self.task.engine.rules[cancel_marker_ends_alignment](cp, current, collecting))

    def dispatched(self, state: str, event: str, channel: int) -> None:
        """The barrier handler in ``state`` is about to handle ``event``, which came on input ``channel`` (-1:
        none); published for coverage and the checks."""
        self.task.engine.checkpoints.handler_dispatched(self.task.sid, state, event, channel)

    def all_received(self, received: set[int]) -> bool:
        # An ended channel (its end of partition consumed) has nothing more to align on (FLIP-147).
        return all(ch.index_in_task in received or self.eop_counts_as_barrier(ch) for ch in self.task.channels)

    def block(self, ch: InputChannel) -> None:
        ch.blocked = True

    def resume(self, ch: InputChannel) -> None:
        """resumeConsumption of one channel: an aligned barrier we do not align on (its checkpoint
        was aborted or is over) must not leave its sender blocked. A sender held by EndOfChannelState
        stays held while its gate recovers, as in ``unblock_all`` (a late priority barrier of an aborted
        checkpoint released one, and a handed-over split's new records overtook its restored ones on
        another channel: ORDER, found by the handover focus)."""
        if not ch.blocked and ch.sender is not None and not any(c.recovery_pending for c in ch.gate.channels):
            ch.sender.blocked = False

    def unblock_all(self, ending: AlignmentEnd) -> None:
        """resumeConsumption: unblock our channels and the senders our aligned barriers blocked."""
        if not self.task.engine.rules[alignment_end_resumes](ending):
            return
        for ch in self.task.channels:
            ch.blocked = False
            # A sender held by EndOfChannelState stays held until its gate saw the event on every
            # channel (InputGate.upstream_recovered): a checkpoint during recovery must not let new
            # data overtake another channel's recovered data (after a rescale, a split's old
            # in-flight records and its new ones come from different senders).
            if ch.sender is not None and not any(c.recovery_pending for c in ch.gate.channels):
                ch.sender.blocked = False

    def stop_persisting(self) -> None:
        for ch in self.task.channels:
            ch.persisting = None

    def decline(self, cp: int, reason: str, cause: str) -> None:
        """Decline ``cp`` (``abortCheckpointOnBarrier``); ``cause`` is Flink's CheckpointFailureReason for
        it. The task moves past ``cp`` (remembered aborts older than it are forgotten), tells the
        coordinator, and sends a cancel marker of ``cp`` downstream, so that none of its consumers waits
        for its barrier (facts §4.10)."""
        t = self.task
        t.last_cp = max(t.last_cp, cp)
        t.aborted = {c for c in t.aborted if c >= t.last_cp}
        t.snapshots.pop(cp, None)
        t.engine.coordinator.decline(cp, t.sid, reason, cause)
        if not t.finished:
            t.engine.checkpoints.cancel_sent(t, cp)  # the decision, published for CANCEL before the markers go
        t.cancel_downstream(cp)

    def prioritise_queued_barriers(self, cp: int) -> set[int]:
        """Move queued in-order barriers of ``cp`` out of the data order (announcements, facts §3.6)."""
        taken: set[int] = set()
        for ch in self.task.channels:
            for item in list(ch.queue):
                if isinstance(item, Barrier) and item.cp == cp:
                    ch.queue.remove(item)
                    ch.barrier_arrived, ch.barrier_cut = cp, item.cut
                    if ch.sender is not None and ch.sender.events is not None:
                        ch.sender.events.publish(("timeout_switch", cp))
                    taken.add(ch.index_in_task)
        return taken

    def take_snapshot(self, b: Barrier, *, unaligned: bool, received: set[int] | None = None,
                      first: InputChannel | None = None) -> None:
        self.task.engine.checkpoints.snapshot_task(self.task, b, unaligned=unaligned, received=received or set(), first=first)

    def input_side_done(self, cp: int) -> None:
        snap = self.task.snapshots.get(cp)
        if snap is not None:
            snap.input_done = True
            self.task.engine.checkpoints.maybe_acknowledge(self.task, snap)
