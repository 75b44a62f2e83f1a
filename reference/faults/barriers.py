"""Faults in barrier handling and the snapshot of in-flight data (unaligned checkpoints)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cutcheck.model.kinds import BarrierOption
from cutcheck.model.partitioning import is_broadcast, is_pointwise, supports_unaligned
from cutcheck.model.protocol import ModelMutant
from cutcheck.reference.checkpointing.arrival import stop_persisting_at, trigger_when_predecessors_finish
from cutcheck.reference.checkpointing.barriers import (
    barrier_options_on_edge,
    edge_carries_unaligned_barriers,
    trigger_reaches_task,
)
from cutcheck.reference.checkpointing.controller import predecessors_finished
from cutcheck.reference.checkpointing.snapshots import (
    captures_input_channel,
    drain_before_unaligned_snapshot,
    persisted_output,
)
from cutcheck.reference.core.seams import AnyFault, Fault, Layer
from cutcheck.reference.runtime.barrier_control import (
    AlignmentEnd,
    alignment_end_resumes,
    cancel_marker_ends_alignment,
    end_of_partition_counts_as_barrier,
)
from cutcheck.reference.runtime.network import Buf
from cutcheck.reference.runtime.tasks import cancel_marker_broadcast

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cutcheck.model.graph import JobGraph
    from cutcheck.reference.runtime.doors import PendingView
    from cutcheck.reference.runtime.network import InputChannel
    from cutcheck.reference.runtime.tasks import Task


def _no_output_state(correct: Callable[[list[Buf]], list[Buf]], state: list[Buf]) -> list[Buf]:
    """The unaligned barrier overtakes output buffers without persisting them."""
    return []


def _process_after_barrier(correct: Callable[[Task, InputChannel], None], task: Task, first: InputChannel) -> None:
    """Post-barrier records are applied before the unaligned snapshot."""
    # Drain the channel that delivered the barrier, post-barrier data included, first.
    while first.queue and isinstance(first.queue[0], Buf) and task.output_available():
        task.process(first)


def _partial_input_state(correct: Callable[[InputChannel], bool], ch: InputChannel) -> bool:
    """Input state is captured for the first gate's channels only (``hasInflightData`` checked one gate)."""
    return bool(ch.gate.index == 0)


def _eop_not_counted(correct: Callable[[InputChannel], bool], ch: InputChannel) -> bool:
    """An aligning task does not count a finished channel's end of partition as that channel's barrier.

    FLINK-21086 (FLIP-147): before alignment supported finished input channels, a task whose input had
    ended waited for a barrier that would never come on that channel.
    """
    return False


def _obsolete_barrier_ends_persisting(correct: Callable[[InputChannel, int], None], ch: InputChannel, cp: int) -> None:
    """A stale barrier of an older, aborted checkpoint ends the persisting of a newer unaligned checkpoint.

    FLINK-21104 (with FLINK-20654): ``RemoteInputChannel`` decided which buffers to spill from an obsoleted
    barrier that had not been cancelled, so the newer checkpoint missed in-flight buffers behind it.

    The interleaving it needs (a checkpoint expiring while its barrier is queued at a sender, the next
    one completing while the receiver persists that channel, records crossing behind the stale barrier)
    is what the expiry-unaligned focus's held barriers and slow tasks (``reference.runtime.scheduler``)
    aim at, and its jobs run long enough for many such cycles: it comes up in about one of ten of that
    focus's seeds; within 60 s the seed campaign found it on 5 of 5 seeds, the Hypothesis campaign on 4
    of 5 (bench_fuzz.py, load 4-6).
    """
    ch.persisting = None


def _broadcast_edge_unaligned(correct: Callable[[JobGraph, int], bool], job: JobGraph, edge: int) -> bool:
    """Broadcast edges carry unaligned barriers, so a checkpoint holds broadcast data in flight.

    FLINK-22815 (with FLINK-22686): unaligned checkpoints were not disabled for broadcast partitioning;
    their channel state cannot follow a change of parallelism, and restoring such a checkpoint rescaled
    failed.
    """
    return all(supports_unaligned(e.partitioner) or is_broadcast(e.partitioner)
               for e in job.in_edges(job.edge(edge).target))


def _pointwise_edge_unaligned(correct: Callable[[JobGraph, int], bool], job: JobGraph, edge: int) -> bool:
    """Pointwise (forward, rescale) edges carry unaligned barriers, so a checkpoint holds their data in flight.

    FLINK-21945: pointwise connections were checkpointed unaligned although their in-flight data cannot
    be redistributed when the parallelism changes (FLINK-21936); restoring such a checkpoint rescaled
    failed ("Cannot rescale the given pointwise partitioner").
    """
    return all(supports_unaligned(e.partitioner) or is_pointwise(e.partitioner)
               for e in job.in_edges(job.edge(edge).target))


def _timeoutable_bypasses(correct: Callable[[BarrierOption, bool], BarrierOption], options: BarrierOption,
                          uc_capable: bool) -> BarrierOption:
    """A timeoutable barrier keeps its options on a forced-aligned edge, so it may time out into an unaligned one.

    FLINK-33693: ``RecordWriterOutput.broadcastEvent`` forced a barrier aligned only if it was a priority
    event; an aligned-with-timeout barrier is not one, so on pointwise and broadcast edges it stayed
    timeoutable, overtook data after the timeout, and the checkpoint could not be restored rescaled.
    """
    return options if options == BarrierOption.TIMEOUTABLE else correct(options, uc_capable)


def _trigger_lost_on_finished_task(correct: Callable[[Task], bool], task: Task) -> bool:
    """A trigger that reaches a task after it finished is dropped, so the checkpoint waits for an acknowledgement forever.

    FLINK-23741: ``TaskExecutor#triggerCheckpoint`` reported a checkpoint as triggered while the
    ``StreamTask`` had already finished and never ran it; with checkpoints after tasks finished enabled,
    the final checkpoint deadlocked (or timed out after a long time).
    """
    return not task.finished


def _abort_leaves_channels_blocked(correct: Callable[[AlignmentEnd], bool], ending: AlignmentEnd) -> bool:
    """An alignment that ends in an abort of its checkpoint leaves the channels it blocked blocked.

    The abort reaches the handler as a cancel marker (the checkpoint expired, or another task declined it,
    before this task's producers came to it). The class of a handler state whose abort path forgets
    ``unblockAllChannels``: the blocked channels' records, and
    their senders' output, wait until a later checkpoint's alignment happens to resume them, or for
    ever; nothing is lost, so only BLOCKED sees it (LIVENESS when it never resumes).
    """
    return ending is not AlignmentEnd.ABORTED


def _predecessors_finished_not_triggered(correct: Callable[[Task], bool], task: Task) -> bool:
    """A running task whose producers have all finished is not triggered, so no barrier and no trigger ever reaches it.

    FLINK-21067: before the checkpoint plan was computed over finished tasks
    (``DefaultCheckpointPlanCalculator``), only sources were triggered; a task whose predecessors had all
    finished waited for barriers that would never come, and checkpoints taken while a job finished
    never completed.
    """
    return False


def _no_retrigger_after_predecessors_finish(correct: Callable[[Task, Mapping[int, PendingView]], None], task: Task,
                                            pending: Mapping[int, PendingView]) -> None:
    """A task whose last producer finishes after a checkpoint was triggered is not triggered for it.

    FLINK-21081: the tasks to trigger were computed once, at the trigger; when a task finished before
    its trigger reached it, its successors, which it then sent no barrier, were never triggered in its
    place, and the checkpoint waited until it expired.
    """


def _stale_cancel_marker_ends_alignment(correct: Callable[[int, int, int], bool], cp: int, current: int,
                                        collecting: int) -> bool:
    """A cancel marker of an older checkpoint ends the alignment of a newer one.

    The class of a ``processCancellationBarrier`` that compares the marker with the wrong checkpoint id: a
    marker still travelling behind data (sent when an upstream task found its checkpoint aborted) reaches
    a task that already collects the next checkpoint, which stops persisting its channels (unaligned: the
    in-flight records behind the newer barrier's cut are missing from its input state) or resumes them
    before its snapshot (aligned: records after the barrier are processed first). CUT sees either.
    """
    return correct(cp, current, collecting) or (collecting >= 0 and cp < collecting)


def _cancel_marker_not_sent(correct: Callable[[Task, int], bool], task: Task, cp: int) -> bool:
    """A task that will not take a checkpoint (it declined it, or came to it after its abort) sends no
    cancel marker downstream.

    The class of an ``abortCheckpointOnBarrier`` or ``checkpointState`` path that forgets
    ``broadcastEvent(new CancelCheckpointMarker(...))``: consumers that already aligned on the checkpoint
    keep their channels blocked until a newer checkpoint's barrier overtakes the alignment (CANCEL).
    """
    return False


FAULTS: tuple[AnyFault, ...] = (
    Fault(ModelMutant.NO_OUTPUT_STATE, persisted_output, Layer.BARRIERS, _no_output_state),
    Fault(ModelMutant.PROCESS_AFTER_BARRIER, drain_before_unaligned_snapshot, Layer.BARRIERS, _process_after_barrier),
    Fault(ModelMutant.PARTIAL_INPUT_STATE, captures_input_channel, Layer.BARRIERS, _partial_input_state,
          key="FLINK-18139"),
    Fault("eop-not-counted-in-alignment", end_of_partition_counts_as_barrier, Layer.BARRIERS, _eop_not_counted,
          key="FLINK-21086"),
    Fault("obsolete-barrier-ends-persisting", stop_persisting_at, Layer.BARRIERS, _obsolete_barrier_ends_persisting,
          key="FLINK-21104"),
    Fault("broadcast-edge-unaligned", edge_carries_unaligned_barriers, Layer.BARRIERS, _broadcast_edge_unaligned,
          key="FLINK-22815"),
    Fault("pointwise-edge-unaligned", edge_carries_unaligned_barriers, Layer.BARRIERS, _pointwise_edge_unaligned,
          key="FLINK-21945"),
    Fault("timeoutable-bypasses-forced-alignment", barrier_options_on_edge, Layer.BARRIERS, _timeoutable_bypasses,
          key="FLINK-33693"),
    Fault("trigger-lost-on-finished-task", trigger_reaches_task, Layer.BARRIERS, _trigger_lost_on_finished_task,
          key="FLINK-23741"),
    Fault("predecessors-finished-not-triggered", predecessors_finished, Layer.BARRIERS,
          _predecessors_finished_not_triggered, key="FLINK-21067"),
    Fault("no-retrigger-after-predecessors-finish", trigger_when_predecessors_finish, Layer.BARRIERS,
          _no_retrigger_after_predecessors_finish, key="FLINK-21081"),
    Fault("abort-leaves-channels-blocked", alignment_end_resumes, Layer.BARRIERS, _abort_leaves_channels_blocked),
    Fault("stale-cancel-marker-ends-alignment", cancel_marker_ends_alignment, Layer.BARRIERS,
          _stale_cancel_marker_ends_alignment),
    Fault("cancel-marker-not-sent", cancel_marker_broadcast, Layer.BARRIERS, _cancel_marker_not_sent),
)
