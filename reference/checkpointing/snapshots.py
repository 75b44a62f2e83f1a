"""The snapshot step of a task (facts §3.3–§3.4) and the capture of channel state.

Order within the synchronous part, as in ``SubtaskCheckpointCoordinatorImpl.checkpointState``:
input state is captured (unaligned), the operator prepares (sink writers pre-commit), the barrier
is sent on every output (overtaking queued output as a priority event when unaligned, whose data
become output state), then the operator state is copied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cutcheck.model.kinds import BarrierOption
from cutcheck.reference.checkpointing.barriers import barrier_options_on_edge
from cutcheck.reference.core.seams import seam
from cutcheck.reference.events.stream import SnapshotCancelled, SnapshotTaken
from cutcheck.reference.runtime.network import Barrier, Buf, EndOfChannelState, EndOfPartition, InputChannel
from cutcheck.reference.runtime.tasks import TaskSnapshot

if TYPE_CHECKING:
    from cutcheck.reference.runtime.tasks import Task


def _slice_from(buf: Buf, pos: int, cut: int | None) -> Buf | None:
    """The records of ``buf`` from ``pos`` on whose sequence number is below ``cut`` (if known)."""
    lo = buf.seq0 + pos
    hi = buf.seq0 + len(buf.recs) if cut is None else min(cut, buf.seq0 + len(buf.recs))
    if hi <= lo:
        return None
    return Buf(buf.recs[lo - buf.seq0:hi - buf.seq0], lo, buf.origin)


@seam
def captures_recovered_data() -> bool:
    """A snapshot taken while recovered channel state is still being replayed captures what is left
    of it (Flink declines such checkpoints until the channels are recovered, facts §3.4)."""
    return True


@seam
def drain_before_unaligned_snapshot(task: Task, first: InputChannel) -> None:
    """Nothing is processed between an unaligned barrier's arrival and the snapshot it triggers."""


@seam
def captures_input_channel(ch: InputChannel) -> bool:
    """An unaligned snapshot captures the in-flight data of every input channel, of every gate."""
    return True


@seam
def persisted_output(state: list[Buf]) -> list[Buf]:
    """The output buffers an unaligned barrier overtakes are persisted as output channel state."""
    return state


@seam
def starts_persisting(ch: InputChannel) -> bool:
    """An unaligned snapshot starts persisting every input channel whose barrier has not come yet, a
    channel still replaying recovered state included: the buffers that reach it after its recovery and
    before its barrier belong to the checkpoint (``checkpointStarted`` on every channel, facts §3.4)."""
    return True


def capture_input(task: Task, ch: InputChannel, cut: int | None) -> list[Buf]:
    """Unconsumed recovered data, then queued data buffers before the barrier (facts §3.4)."""
    captured: list[Buf] = []
    pos = ch.head_pos
    if task.engine.rules[captures_recovered_data]():
        for buf in ch.recovered:
            piece = _slice_from(buf, pos, cut)
            pos = 0
            if piece is not None:
                captured.append(piece)
    elif ch.recovered:
        pos = 0  # recovered data forgotten, and with it the deserializer's progress
    for item in ch.queue:
        if isinstance(item, Buf):
            piece = _slice_from(item, pos if not ch.recovered else 0, cut)
            if piece is not None:
                captured.append(piece)
        pos = 0
    return captured


def cancel_at_snapshot(task: Task, b: Barrier, *, unaligned: bool, direct: bool) -> None:
    """The snapshot step of a checkpoint the coordinator already aborted (the task was told before its
    barriers or trigger reached it) takes no snapshot: it sends a cancel marker on every output instead of
    barriers, so that no consumer aligns on it (``checkAndClearAbortedStatus`` in
    ``SubtaskCheckpointCoordinatorImpl.checkpointState``, facts §4.10). An unaligned one started persisting its input channels
    before the step found the abort (``initInputsCheckpoint`` and ``checkpointStarted`` come first), and
    they persist, into nothing, until their barriers come or the alignment ends."""
    engine = task.engine
    cp = b.cp
    task.first_barrier.pop(cp, None)
    task.processed_at_first_barrier.pop(cp, None)
    if unaligned and not direct:
        for ch in task.channels:
            if (ch.barrier_arrived != cp and not ch.ended and not ch.eop_arrived
                    and engine.rules[captures_input_channel](ch) and engine.rules[starts_persisting](ch)):
                ch.persisting = cp
    if engine.bus.wants(SnapshotCancelled):
        engine.bus.publish(SnapshotCancelled(task.sid, cp, engine.step))
    if not task.finished:
        engine.checkpoints.cancel_sent(task, cp)  # the decision, published for CANCEL before the markers go
    task.cancel_downstream(cp)


def snapshot_task(task: Task, b: Barrier, *, unaligned: bool, received: set[int], first: InputChannel | None,
                  direct: bool = False) -> TaskSnapshot | None:
    engine = task.engine
    cp = b.cp
    task.last_cp = max(task.last_cp, cp)
    if cp in task.aborted:
        task.aborted.discard(cp)
        cancel_at_snapshot(task, b, unaligned=unaligned, direct=direct)
        return None
    if unaligned and first is not None:
        engine.rules[drain_before_unaligned_snapshot](task, first)
    snap = TaskSnapshot(cp=cp, sid=task.sid, operator={}, unaligned=unaligned)
    # Alignment: the steps this task spent between its first barrier and its snapshot, and the records
    # it processed meanwhile (none for an unaligned snapshot at once): the checkpoint's statistics.
    first_step = task.first_barrier.pop(cp, engine.step)
    before = task.processed_at_first_barrier.pop(cp, None)
    processed = 0 if before is None else sum(ch.processed for ch in task.channels) - before
    engine.coordinator.note_alignment(cp, engine.step - first_step, processed)
    if engine.bus.wants(SnapshotTaken):
        engine.bus.publish(SnapshotTaken(task.sid, cp, unaligned, direct, engine.step - first_step, processed, engine.step))
    for ch in task.channels:
        key = task.channel_key(ch)
        snap.processed[key] = ch.processed
        if not unaligned:
            continue
        if not engine.rules[captures_input_channel](ch):
            continue
        if direct:
            # Triggered directly (every producer finished and sent all it had): no barrier will come,
            # and everything still queued is before the cut.
            snap.input_state[key] = capture_input(task, ch, None)
            continue
        known = ch.barrier_arrived == cp
        snap.input_state[key] = capture_input(task, ch, ch.barrier_cut if known else None)
        if not known and not ch.ended and not ch.eop_arrived and engine.rules[starts_persisting](ch):
            ch.persisting = cp  # until this channel's barrier arrives (or its end of partition)
    task.snapshots[cp] = snap
    pre_barrier = getattr(task.op, "pre_barrier", None)
    if pre_barrier is not None:
        pre_barrier(cp)
    options = engine.coordinator.options(cp)
    # A finished task sends no priority barrier once one of its ends of partition crossed (below), nor while
    # an end of channel state is still queued on an output: the barrier would go ahead of it, and a
    # receiving gate holds priority barriers until it has seen every end of channel state, so neither
    # could ever cross (clean seed-campaign scenario 100932 deadlocked so). In Flink a task finishes only
    # after its recovery and final checkpoint; its end of partition stands in for the barrier here.
    crossed = task.finished and any(not any(isinstance(x, EndOfPartition) for x in sp.queue)
                                    or any(isinstance(x, EndOfChannelState) for x in sp.queue)
                                    for p in task.partitions for sp in p.subpartitions)
    for p in task.partitions:
        uc_capable = p.unaligned_capable
        for sp in p.subpartitions:
            task.finish_buffer(sp)
            key = (p.edge, task.sid.index, sp.consumer)
            snap.emitted[key] = sp.emitted
            opts = engine.rules[barrier_options_on_edge](options, uc_capable)
            priority = opts == BarrierOption.UNALIGNED or (opts == BarrierOption.TIMEOUTABLE and engine.coordinator.timed_out(cp))
            if task.finished and (crossed or not priority):
                # Its end of partition stands in for the barrier (the receiver counts the channel's barrier
                # as arrived with it), so nothing is in flight after the cut and there is no output state.
                # Queued behind its data, it comes in order where an aligned barrier would. (A barrier put
                # before it would block the channel at an aligning consumer, and with checkpoints
                # triggered faster than that consumer aligns, the end of partition would never go.) A
                # priority barrier overtakes the data of a finished task only while no end of partition
                # of it has crossed: Flink's task sends barriers on every output until its final
                # checkpoint and none once finished, never on one output and not another. One that let a
                # consumer take the checkpoint early and its sibling, whose end of partition had crossed,
                # not at all, let an aligned successor hold the first one's channel blocked while the
                # sibling's other producer, backpressured through the first, never sent its barrier: a
                # deadlock once aborts stopped ending alignments (cycle seeds 80489 and 200271).
                snap.output_state[key] = []
                continue
            barrier = Barrier(cp, b.kind, opts, b.trigger_step, priority=priority)
            if priority:
                state = [Buf(list(x.recs), x.seq0, x.origin) for x in sp.queue if isinstance(x, Buf)]
                if not engine.rules[captures_recovered_data]():
                    state = [x for x in state if x.seq0 >= sp.recovered_end]
                snap.output_state[key] = engine.rules[persisted_output](state)
                barrier.cut = sp.transmitted
                at = 0
                while at < len(sp.queue) and isinstance(ahead := sp.queue[at], Barrier) and ahead.priority:
                    at += 1
                sp.queue.insert(at, barrier)
            else:
                barrier.cut = sp.emitted
                snap.output_state[key] = []
                sp.queue.append(barrier)
                if opts == BarrierOption.TIMEOUTABLE:
                    snap.outputs_pending += 1
            if sp.events is not None:
                sp.events.publish(("snapshot_up", cp, "unaligned" if priority else "aligned"))
    snap.operator = task.op.snapshot()
    for ch in task.channels:
        if ch.sender is not None and ch.sender.events is not None:
            ch.sender.events.publish(("snapshot_down", cp))
    if not task.channels or direct:
        snap.input_done = True
        engine.checkpoints.maybe_acknowledge(task, snap)
    return snap


def convert_timed_out_barrier(task: Task, cp: int) -> None:
    """Sender side of the aligned-checkpoint timeout: a queued timeoutable barrier overtakes its data."""
    snap = task.snapshots.get(cp)
    for p in task.partitions:
        for sp in p.subpartitions:
            for at, item in enumerate(sp.queue):
                if isinstance(item, Barrier) and item.cp == cp and not item.priority and item.options == BarrierOption.TIMEOUTABLE:
                    ahead = [x for x in list(sp.queue)[:at] if isinstance(x, Buf)]
                    del sp.queue[at]
                    item.priority, item.cut = True, sp.transmitted
                    front = 0
                    while front < len(sp.queue) and isinstance(first := sp.queue[front], Barrier) and first.priority:
                        front += 1
                    sp.queue.insert(front, item)
                    if snap is not None:
                        key = (p.edge, task.sid.index, sp.consumer)
                        state = [Buf(list(x.recs), x.seq0, x.origin) for x in ahead]
                        snap.output_state[key] = task.engine.rules[persisted_output](state)
                        snap.outputs_pending -= 1
                    if sp.events is not None:
                        sp.events.publish(("timeout_switch", cp))
                    break
    if snap is not None:
        task.engine.checkpoints.maybe_acknowledge(task, snap)
