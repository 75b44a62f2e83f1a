"""Faults in barrier handling and the snapshot of in-flight data (unaligned checkpoints)."""

from __future__ import annotations

from typing import Any

from cutcheck.model.partitioning import is_broadcast, is_pointwise, supports_unaligned
from cutcheck.reference.core.seams import Fault, Layer
from cutcheck.reference.runtime.network import Buf


class NoOutputState(Fault):
    """The unaligned barrier overtakes output buffers without persisting them."""

    name, seam, layer = "no-output-state", "persisted_output", Layer.BARRIERS

    def rule(self, correct: Any, state: list[Any]) -> list[Any]:
        return []


class ProcessAfterBarrier(Fault):
    """Post-barrier records are applied before the unaligned snapshot."""

    name, seam, layer = "process-after-barrier", "drain_before_unaligned_snapshot", Layer.BARRIERS

    def rule(self, correct: Any, task: Any, first: Any) -> None:
        # Drain the channel that delivered the barrier, post-barrier data included, first.

        while first.queue and isinstance(first.queue[0], Buf) and task.output_available():
            task.process(first)


class PartialInputState(Fault):
    """Input state is captured for the first gate's channels only (``hasInflightData`` checked one gate)."""

    name, seam, layer, key = "partial-input-state", "captures_input_channel", Layer.BARRIERS, "FLINK-18139"

    def rule(self, correct: Any, ch: Any) -> bool:
        return ch.gate.index == 0


class EndOfPartitionNotCounted(Fault):
    """An aligning task does not count a finished channel's end of partition as that channel's barrier.

    FLINK-21086 (FLIP-147): before alignment supported finished input channels, a task whose input had
    ended waited for a barrier that would never come on that channel.
    """

    name, seam, layer, key = ("eop-not-counted-in-alignment", "end_of_partition_counts_as_barrier", Layer.BARRIERS,
                              "FLINK-21086")

    def rule(self, correct: Any) -> bool:
        return False


class ObsoleteBarrierEndsPersisting(Fault):
    """A stale barrier of an older, aborted checkpoint ends the persisting of a newer unaligned checkpoint.

    FLINK-21104 (with FLINK-20654): ``RemoteInputChannel`` decided which buffers to spill from an obsoleted
    barrier that had not been cancelled, so the newer checkpoint missed in-flight buffers behind it.

    Not in the mutation score (``test_only``): CUT and trace validation catch it on its frozen scenario
    and on the regression tests/reference/regressions/stale-priority-barrier.json, but the interleaving
    it needs (a checkpoint expiring while its priority barrier is queued, the next one persisting the
    same channel) comes up in about one of 500 seeds even of an expiry-focused campaign, so the
    campaigns do not find it within the mutation check's 60 s.
    """

    name, seam, layer, key = ("obsolete-barrier-ends-persisting", "stop_persisting_at", Layer.BARRIERS, "FLINK-21104")
    test_only = True

    def rule(self, correct: Any, ch: Any, cp: int) -> None:
        ch.persisting = None



class BroadcastEdgeUnaligned(Fault):
    """Broadcast edges carry unaligned barriers, so a checkpoint holds broadcast data in flight.

    FLINK-22815 (with FLINK-22686): unaligned checkpoints were not disabled for broadcast partitioning;
    their channel state cannot follow a change of parallelism, and restoring such a checkpoint rescaled
    failed.
    """

    name, seam, layer, key = ("broadcast-edge-unaligned", "edge_carries_unaligned_barriers", Layer.BARRIERS,
                              "FLINK-22815")

    def rule(self, correct: Any, job: Any, edge: int) -> bool:

        return all(supports_unaligned(e.partitioner) or is_broadcast(e.partitioner)
                   for e in job.in_edges(job.edge(edge).target))


class PointwiseEdgeUnaligned(Fault):
    """Pointwise (forward, rescale) edges carry unaligned barriers, so a checkpoint holds their data in flight.

    FLINK-21945: pointwise connections were checkpointed unaligned although their in-flight data cannot
    be redistributed when the parallelism changes (FLINK-21936); restoring such a checkpoint rescaled
    failed ("Cannot rescale the given pointwise partitioner").
    """

    name, seam, layer, key = ("pointwise-edge-unaligned", "edge_carries_unaligned_barriers", Layer.BARRIERS,
                              "FLINK-21945")

    def rule(self, correct: Any, job: Any, edge: int) -> bool:

        return all(supports_unaligned(e.partitioner) or is_pointwise(e.partitioner)
                   for e in job.in_edges(job.edge(edge).target))


class TimeoutableBypassesForcedAlignment(Fault):
    """A timeoutable barrier keeps its options on a forced-aligned edge, so it may time out into an unaligned one.

    FLINK-33693: ``RecordWriterOutput.broadcastEvent`` forced a barrier aligned only if it was a priority
    event; an aligned-with-timeout barrier is not one, so on pointwise and broadcast edges it stayed
    timeoutable, overtook data after the timeout, and the checkpoint could not be restored rescaled.
    """

    name, seam, layer, key = ("timeoutable-bypasses-forced-alignment", "barrier_options_on_edge", Layer.BARRIERS,
                              "FLINK-33693")

    def rule(self, correct: Any, options: str, uc_capable: bool) -> str:
        return options if options == "timeoutable" else correct(options, uc_capable)


class TriggerLostOnFinishedTask(Fault):
    """A trigger that reaches a task after it finished is dropped, so the checkpoint waits for an acknowledgement forever.

    FLINK-23741: ``TaskExecutor#triggerCheckpoint`` reported a checkpoint as triggered while the
    ``StreamTask`` had already finished and never ran it; with checkpoints after tasks finished enabled,
    the final checkpoint deadlocked (or timed out after a long time).
    """

    name, seam, layer, key = ("trigger-lost-on-finished-task", "trigger_reaches_task", Layer.BARRIERS, "FLINK-23741")

    def rule(self, correct: Any, task: Any) -> bool:
        return not task.finished
