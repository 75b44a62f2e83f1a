"""What happens when the head of an output subpartition crosses its channel (one transmit action).

A data buffer takes a credit and, while the receiver persists the channel for an unaligned
checkpoint, is also copied into that checkpoint's input state. A priority barrier lands in the
receiver's priority queue; an aligned barrier queues in order and blocks the sender until the
consumer resumes it. An end of partition may finish an unaligned checkpoint's collection on that
channel, or make the receiver a task that Flink triggers directly (FLIP-147).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cutcheck.model.kinds import BarrierOption, CheckpointKind
from cutcheck.reference.checkpointing.barriers import CollectingBarriersUnaligned
from cutcheck.reference.core.seams import seam
from cutcheck.reference.runtime.network import (
    Barrier,
    Buf,
    CancelMarker,
    EndOfChannelState,
    EndOfPartition,
    OutputSubpartition,
)

if TYPE_CHECKING:
    from cutcheck.reference.runtime.doors import PendingView, TaskRun
    from cutcheck.reference.runtime.tasks import Task


def can_transmit(sp: OutputSubpartition) -> bool:
    """Whether the head of ``sp`` may cross now: a priority barrier unless the receiving gate still
    recovers (its input state, or, once this sender's end of channel state crossed, any channel's),
    anything else unless the sender is blocked, a data buffer only with a credit."""
    head = sp.queue[0]
    ch = sp.channel
    if ch.gate.recovering():
        return False
    if isinstance(head, Barrier) and head.priority:
        # Past its end of channel state a sender is held until the receiver's whole gate recovered; a held
        # sender keeps back the barriers of checkpoints no longer pending. Once they crossed and released it
        # (``resume`` of a late barrier), a handed-over split's new records overtook its restored ones; now
        # that they no longer release it, a stream of them (a finished source is triggered at every
        # checkpoint, and each expired) kept its receiver busy with priority events, so that it never read
        # the data that ends its gate's recovery (clean seed 33 of the handover focus, LIVENESS).
        return not (sp.blocked and head.cp not in sp.task.engine.coordinator.pending
                    and any(c.recovery_pending for c in ch.gate.channels))
    if sp.blocked:
        return False
    if isinstance(head, Buf):
        return bool(ch.gate.can_receive(ch))
    return True


def transmit_budget(engine: TaskRun, sp: OutputSubpartition, budget: int) -> None:
    """Per-record network cost (schedule.records_per_action): one action sends queued buffers,
    each with its credit, while their records fit in ``budget`` (always at least one item)."""
    while True:
        head = sp.queue[0]
        deliver_head(engine, sp)
        if not isinstance(head, Buf):
            return  # an event is one action of its own
        budget -= len(head.recs)
        nxt = sp.queue[0] if sp.queue else None
        if not isinstance(nxt, Buf) or len(nxt.recs) > budget or not can_transmit(sp):
            return


def deliver_head(engine: TaskRun, sp: OutputSubpartition) -> None:
    head = sp.queue.popleft()
    ch = sp.channel
    if isinstance(head, Buf):
        ch.gate.take_buffer(ch)
        ch.queue.append(head)
        sp.transmitted += len(head.recs)
        sp.partition.in_use -= 1
        if sp.events is not None:
            sp.events.publish(("transmit", len(head.recs)))
        if ch.persisting is not None:
            snap = ch.task.snapshots.get(ch.persisting)
            if snap is not None:
                snap.input_state.setdefault(ch.task.channel_key(ch), []).append(Buf(head.recs, head.seq0, head.origin))
    elif isinstance(head, Barrier):
        if head.priority:
            ch.priority.append(head)
            ch.task.pending_priority += 1
            ch.barrier_arrived, ch.barrier_cut = head.cp, head.cut
            engine.rules[stop_persisting_at](ch, head.cp)
            if sp.events is not None:
                sp.events.publish(("priority_arrival", head.cp))
        else:
            ch.queue.append(head)
            if head.options != BarrierOption.AT_LEAST_ONCE:
                sp.blocked = True  # aligned barriers "block upstream" until the consumer resumes
            engine.rules[stop_persisting_at](ch, head.cp)
            if sp.events is not None:
                sp.events.publish(("transmit_barrier", head.cp))
            if head.options == BarrierOption.TIMEOUTABLE:
                snap = sp.task.snapshots.get(head.cp)
                if snap is not None:
                    snap.outputs_pending -= 1
                    engine.checkpoints.maybe_acknowledge(sp.task, snap)
    elif isinstance(head, CancelMarker):
        # In order, like an aligned barrier, but it blocks nothing. An event costs Flink next to nothing
        # beside a buffer of records, so a run of cancel markers crosses in one action.
        ch.queue.append(head)
        while sp.queue and isinstance(sp.queue[0], CancelMarker):
            ch.queue.append(sp.queue.popleft())
    elif isinstance(head, EndOfChannelState):
        ch.queue.append(head)
        sp.blocked = True
    elif isinstance(head, EndOfPartition):
        ch.queue.append(head)
        ch.eop_arrived = True
        if sp.events is not None:
            sp.events.close()  # end of partition is outside the channel protocol: recording stops
        # An end of partition is the last thing on its channel: for an unaligned checkpoint
        # that is collecting barriers, everything queued ahead of it is pre-barrier (already
        # persisted) and the channel is done, as if its barrier had arrived.
        t = ch.task
        if isinstance(t.handler, CollectingBarriersUnaligned):
            t.handler = t.handler.end_of_partition(t.control, ch)
        if all(c.eop_arrived or c.ended for c in t.channels):
            engine.rules[trigger_when_predecessors_finish](t, engine.coordinator.pending)


@seam
def trigger_when_predecessors_finish(t: Task, pending: Mapping[int, PendingView]) -> None:
    """The last of a task's producers finished after some checkpoints were triggered: the task is now
    one Flink triggers directly (FLIP-147), so every pending checkpoint that no barrier brings it any
    more (its producers took them with their end of partition standing in for the barrier) is queued
    as a direct trigger, whatever its barrier handler is doing: one collecting an unaligned checkpoint
    that this end of partition just finished, or aligning on another, has the newer ones queued too
    (seed 311: a savepoint triggered while an unaligned checkpoint collected). A checkpoint the task
    took, declined or is collecting is left to its handler.

    In Flink a task finishes only after its final checkpoint, so its successors always get that
    checkpoint's barrier or, once it has finished, a direct trigger; FLINK-21081 is the coordinator
    side of the same gap (tasks that finished after the trigger were not replaced by their successors
    in the set of tasks to trigger)."""
    collecting = t.handler.collecting()
    for cp, p in sorted(pending.items()):
        if cp > t.last_cp and cp not in t.snapshots and cp not in collecting and all(b.cp != cp for b in t.direct_triggers):
            t.direct_triggers.append(Barrier(cp, CheckpointKind(p.kind), BarrierOption(p.options), p.trigger_step))


@seam
def stop_persisting_at(ch: Any, cp: int) -> None:
    """A barrier of checkpoint ``cp`` reached the channel: what follows it is after the cut of ``cp``
    and of any older checkpoint, so persisting for those ends. A stale barrier (of an aborted, older
    checkpoint, still queued at the sender) must not end the persisting of a newer checkpoint: its
    records still cross the cut (found by fuzzing with expiring checkpoints, CUT at seed 76)."""
    if ch.persisting is not None and ch.persisting <= cp:
        ch.persisting = None
