"""Faults in failover and in the replay of recovered channel state."""

from __future__ import annotations

from typing import Any

from cutcheck.reference.core.seams import Fault, Layer


class EarlyCheckpointInRecovery(Fault):
    """A checkpoint completes before recovered data is drained, without capturing it."""

    name, seam, layer, key = "early-checkpoint-in-recovery", "captures_recovered_data", Layer.RECOVERY, "FLINK-20654"

    def rule(self, correct: Any) -> bool:
        return False


class RestartFailedTaskOnly(Fault):
    """Region failover restarts only the failed task, not its region.

    In the mutation score since the campaigns were measured to find it (benchmarks/bench_fuzz.py,
    2026-11-26): within 60 s on 5 of 5 campaign seeds by the seed hunt, median 1.7 s, and 4 of 5 by
    the Hypothesis campaign, as a deadlock (LIVENESS), EXACTLY_ONCE or COMMIT violation.
    """

    name, seam, layer = "restart-failed-task-only", "restarts_whole_region", Layer.RECOVERY

    def rule(self, correct: Any) -> bool:
        return False


class RecoveredBuffersPersistedTwice(Fault):
    """A recovered buffer polled before the barrier is persisted again, though the snapshot already captured it.

    FLINK-40016: when an unaligned checkpoint started while recovered buffers were still queued in a
    ``LocalInputChannel``, ``checkpointStarted`` persisted them once and ``maybePersist`` persisted each
    again as the task polled it, so the channel state held duplicates.
    """

    name, seam, layer, key = ("recovered-buffers-persisted-twice", "recovered_buffer_polled", Layer.RECOVERY,
                              "FLINK-40016")

    def rule(self, correct: Any, task: Any, ch: Any, buf: Any) -> None:
        snap = task.snapshots.get(ch.persisting)
        if snap is not None:
            snap.input_state.setdefault(task.channel_key(ch), []).append(buf)


class TerminalCountsAsFinished(Fault):
    """The checkpoint plan leaves out subtasks past their end of input, so it completes without their snapshots.

    FLINK-40482: ``isFinished()`` returned ``state.isTerminal()``, so tasks that were not running (failed
    or canceled as well as finished) were dropped from ``tasksToWaitFor`` and a checkpoint completed with
    fewer acknowledgements than subtasks that still held state or in-flight data.
    """

    name, seam, layer, key = ("terminal-counts-as-finished", "tasks_to_wait_for", Layer.RECOVERY, "FLINK-40482")

    def rule(self, correct: Any, tasks: Any) -> set[Any]:
        return {t.sid for t in tasks if not t.finished}


class RecoveringChannelMissesCheckpointStart(Fault):
    """A channel still replaying recovered state does not start persisting, so later pre-barrier buffers are lost.

    FLINK-20654 (PR 14581, its second and third cases): a channel not yet converted from a recovered one
    did not handle ``checkpointStarted``, so buffers arriving after its conversion and before the
    barrier were not captured and the checkpoint was inconsistent.
    """

    name, seam, layer, key = ("recovering-channel-misses-checkpoint-start", "starts_persisting", Layer.RECOVERY,
                              "FLINK-20654")

    def rule(self, correct: Any, ch: Any) -> bool:
        return not ch.recovery_pending and correct(ch)
