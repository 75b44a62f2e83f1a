"""The run's checkpoint controller: what tasks, barrier handlers and the coordinator call on the run.

Flink splits this between the ``CheckpointCoordinator``'s calls into the executions (trigger the
sources, notify every task of a completion or an abort) and each task's
``SubtaskCheckpointCoordinator`` (take the snapshot, acknowledge it). Here one object of the
checkpointing room does both for the whole run; the engine owns it and hands it to the coordinator
as its listener. It checks nothing: it publishes ``CheckpointCompleting``, ``CheckpointCompleted``
and ``CheckpointAborted`` on the run's bus, where the checks subscribe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from cutcheck.model.kinds import BarrierOption, CheckpointKind
from cutcheck.reference.checkpointing.acks import AckOutcome, AckPipe
from cutcheck.reference.checkpointing.barriers import (
    CollectingBarriers,
    CollectingBarriersUnaligned,
    HandlerState,
    WaitingForFirstBarrier,
    trigger_reaches_task,
)
from cutcheck.reference.checkpointing.snapshots import convert_timed_out_barrier, snapshot_task
from cutcheck.reference.core.seams import seam
from cutcheck.reference.events.stream import (
    AcknowledgementArrived,
    AlignmentStarted,
    BarrierReceived,
    CancelSent,
    CheckpointAborted,
    CheckpointCompleted,
    CheckpointCompleting,
    CheckpointTriggered,
    HandlerDispatched,
)
from cutcheck.reference.runtime.barrier_control import AlignmentEnd
from cutcheck.reference.runtime.debloat import current_buffer_size
from cutcheck.reference.runtime.doors import TaskRun
from cutcheck.reference.runtime.network import Barrier, InputChannel
from cutcheck.reference.runtime.tasks import Task, TaskSnapshot
from cutcheck.reference.storage.memory import CompletedCheckpoint

if TYPE_CHECKING:
    from cutcheck.model.execution import SubtaskId
    from cutcheck.reference.checkpointing.coordinator import Coordinator


@seam
def predecessors_finished(t: Task) -> bool:
    """A running task whose every producer has finished is triggered directly, like a source (FLIP-147:
    ``DefaultCheckpointPlanCalculator`` puts a running task with no running predecessor among the tasks
    to trigger). Here a producer has finished on a channel once its end of partition reached us, consumed
    or not: nothing but that end of partition will come on it, so no barrier will either."""
    return bool(t.channels) and all(ch.eop_arrived or ch.ended for ch in t.channels)


class ControllerRun(TaskRun, Protocol):
    """The run as its checkpoint controller sees it: the coordinator whole, the pending completion
    notifications and the in-flight data at a trigger."""

    notifications: list[tuple[Task, int]]

    @property
    def coordinator(self) -> Coordinator: ...

    def inflight_bytes(self) -> int: ...


class CheckpointController:
    """Triggers, snapshots, acknowledgements, completions and aborts, as the run's tasks see them."""

    __slots__ = ("run", "acks")

    def __init__(self, run: ControllerRun) -> None:
        self.run = run
        self.acks = AckPipe(run.scenario.checkpoint.ack_delay, run.scenario.seed)  # acks in flight (ack_delay > 0)

    # ------------------------------------------------------------------ task side
    def new_barrier_handler(self) -> HandlerState:
        """A task's barrier handler starts waiting for the first barrier."""
        return WaitingForFirstBarrier()

    def snapshot_task(self, task: Task, b: Barrier, *, unaligned: bool, received: set[int],
                      first: InputChannel | None, direct: bool = False) -> TaskSnapshot | None:
        """The snapshot step a barrier handler or a finishing task triggers (checkpointing.snapshots)."""
        return snapshot_task(task, b, unaligned=unaligned, received=received, first=first, direct=direct)

    def maybe_acknowledge(self, t: Task, snap: TaskSnapshot) -> None:
        if snap.acked or not snap.input_done or snap.outputs_pending > 0:
            return
        snap.acked = True
        if self.acks.delay:
            self.acks.send(t, snap, self.run.step)  # the asynchronous part runs; the ack arrives later
        else:
            self.run.coordinator.acknowledge(snap)

    def deliver_acks(self) -> None:
        """The acknowledgements whose asynchronous part ends now reach the coordinator, in the order
        they fall due: a late one (its checkpoint aborted, expired or subsumed meanwhile) or one from an
        execution a failover replaced is dropped, as ``receiveAcknowledgeMessage`` discards it."""
        run = self.run
        for ack in self.acks.take_due(run.step):
            outcome = run.coordinator.outcome_of(ack.snap, ack.sender)
            run.event("ack", f"checkpoint {ack.snap.cp} from {ack.snap.sid} (sent at step {ack.sent_step}): {outcome}")
            if run.bus.wants(AcknowledgementArrived):
                run.bus.publish(AcknowledgementArrived(ack.snap.cp, ack.snap.sid, ack.sent_step, run.step, outcome))
            if outcome is AckOutcome.ACCEPTED:
                run.coordinator.acknowledge(ack.snap)

    def ack_timers(self) -> list[int]:
        return self.acks.timers()

    def handler_dispatched(self, sid: SubtaskId, state: str, event: str, channel: int = -1) -> None:
        bus = self.run.bus
        if bus.wants(HandlerDispatched):
            bus.publish(HandlerDispatched(state, event, sid, channel))

    def cancel_sent(self, task: Task, cp: int) -> None:
        """A task will not take ``cp`` and is about to tell its consumers (published for CANCEL)."""
        bus = self.run.bus
        if bus.wants(CancelSent):
            bus.publish(CancelSent(task.sid, cp, self.run.step))

    def barrier_taken(self, task: Task, ch: InputChannel, b: Barrier, first: bool) -> None:
        """A task took a barrier from ``ch``; the first of a checkpoint it has not snapshotted yet starts
        its alignment (a barrier after the snapshot, of an unaligned checkpoint, starts nothing)."""
        bus = self.run.bus
        if first and b.cp > task.last_cp and bus.wants(AlignmentStarted):
            bus.publish(AlignmentStarted(task.sid, b.cp, self.run.step))
        if bus.wants(BarrierReceived):
            bus.publish(BarrierReceived(task.sid, task.channel_key(ch), b.cp, b.priority, self.run.step))

    def timed_out(self, cp: int) -> bool:
        timed_out: bool = self.run.coordinator.timed_out(cp)
        return timed_out

    # ------------------------------------------------------------------ trigger
    def direct_checkpoint(self, t: Task) -> None:
        """A task whose predecessors all finished is triggered like a source (FLIP-147).

        Aligned, it snapshots once its remaining input is processed (it is finished); unaligned, at
        once, with all of its queued input as input state: its producers sent everything, so the
        cut of each input channel is at the end of that channel. Flink hands such a trigger to the
        barrier handler as a barrier on every channel that has not ended
        (``StreamTask.triggerUnfinishedChannelsCheckpoint``), so a newer checkpoint's trigger
        subsumes an older one the handler still collects, as a newer barrier does.
        """
        b = t.direct_triggers.pop(0)
        if b.cp <= t.last_cp or (b.cp not in self.run.coordinator.pending and b.cp not in t.aborted):
            return  # this task already took the snapshot, or moved past it (a barrier got here first)
        if not self.run.rules[trigger_reaches_task](t):
            return
        h = t.handler
        if isinstance(h, (CollectingBarriers, CollectingBarriersUnaligned)) and h.cp < b.cp:
            h.end_alignment(t.control, AlignmentEnd.SUBSUMED)
            t.handler = WaitingForFirstBarrier()
            t.control.decline(h.cp, "a newer checkpoint was triggered (subsumed)", "CHECKPOINT_DECLINED_SUBSUMED")
        unaligned = not t.is_source and not t.finished and self.snapshots_unaligned(t, b)
        snapshot_task(t, b, unaligned=unaligned, received=set(), first=None, direct=True)

    def snapshots_unaligned(self, t: Task, b: Barrier) -> bool:
        """Whether a directly triggered task may snapshot before its input is processed: only
        unaligned, and only if none of its inputs is forced aligned (no channel state on
        pointwise, broadcast or custom edges, facts §3.7)."""
        coordinator = self.run.coordinator
        opts = coordinator.options(b.cp)
        unaligned = opts == BarrierOption.UNALIGNED or (opts == BarrierOption.TIMEOUTABLE and coordinator.timed_out(b.cp))
        return unaligned and all(self.run.edge_unaligned[ch.edge] for ch in t.channels)

    def trigger(self, kind: str = "checkpoint") -> int:
        run = self.run
        coordinator = run.coordinator
        cp: int = coordinator.trigger(kind, inflight_bytes=run.inflight_bytes(), buffer_size=current_buffer_size(run))
        run.event("trigger", f"checkpoint {cp} ({kind}, {coordinator.options(cp)})")
        if run.bus.wants(CheckpointTriggered):
            run.bus.publish(CheckpointTriggered(cp, kind, coordinator.options(cp), run.step))
        b = Barrier(cp, CheckpointKind(kind), BarrierOption(coordinator.options(cp)), run.step)
        for t in run.tasks.values():
            if t.terminated():
                while t.direct_triggers:  # older checkpoints first: a newer snapshot would leave them hanging
                    self.direct_checkpoint(t)
                snapshot_task(t, b, unaligned=False, received=set(), first=None, direct=True)
            elif t.is_source or t.finished or run.rules[predecessors_finished](t):
                t.direct_triggers.append(b)
        return cp

    def fire_alignment_timeouts(self) -> None:
        """Every timeoutable checkpoint whose alignment timeout passed switches to unaligned: its queued
        barriers overtake their data at the senders, and every task's handler hears of the timeout."""
        run = self.run
        c = run.coordinator
        for cp, p in list(c.pending.items()):
            if p.options == BarrierOption.TIMEOUTABLE and not p.timeout_fired and c.timed_out(cp):
                p.timeout_fired = True
                run.event("alignment_timeout", f"checkpoint {cp}")
                for t in run.tasks.values():
                    convert_timed_out_barrier(t, cp)
                for t in run.tasks.values():
                    if cp in c.pending:
                        t.handler = t.handler.alignment_timeout(t.control, cp)

    # ------------------------------------------------------------------ the coordinator's listener
    def completing(self, done: CompletedCheckpoint) -> None:
        """Every acknowledgement is in; the checks of a completed checkpoint run before it is stored."""
        self.run.bus.publish(CheckpointCompleting(done))

    def completed(self, done: CompletedCheckpoint, subsumed: list[int]) -> None:
        run = self.run
        run.event("complete", f"checkpoint {done.cp}")
        run.bus.publish(CheckpointCompleted(done, tuple(subsumed), run.step))
        pending = run.coordinator.pending
        for t in run.tasks.values():
            # A savepoint older than ``done`` may still be pending (acks cross): its snapshots stay.
            for cp in [c for c in t.snapshots if c <= done.cp and c not in pending]:
                del t.snapshots[cp]
            if done.kind != CheckpointKind.SAVEPOINT:  # a savepoint notifies no task: sinks commit nothing on it
                run.notifications.append((t, done.cp))
        run.coordinator.savepoints.on_complete(done.cp, run.step)

    def aborted(self, cp: int, kind: str, reason: str, cause: str) -> None:
        run = self.run
        run.event("abort", f"checkpoint {cp}")
        run.bus.publish(CheckpointAborted(cp, kind, reason, cause, run.step))
        # Every task hears of it (``notifyCheckpointAborted``), but no barrier handler does: alignments of
        # ``cp`` end by its barriers, a cancel marker or a newer barrier. A queued direct trigger of ``cp``
        # stays; when it runs, the task sends cancel markers instead of barriers (facts §4.10).
        for t in run.tasks.values():
            t.notify_aborted(cp)


def notify_complete(note: tuple[Task, int]) -> None:
    """Deliver one completion notification: a sink commits what the checkpoint holds."""
    t, cp = note
    op: Any = t.op
    if t.is_sink:
        op.notify_complete(cp)
