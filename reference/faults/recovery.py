"""Faults in failover and in the replay of recovered channel state."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from cutcheck.model.protocol import ModelMutant
from cutcheck.reference.checkpointing.coordinator import tasks_to_wait_for
from cutcheck.reference.checkpointing.snapshots import captures_recovered_data, starts_persisting
from cutcheck.reference.core.seams import AnyFault, Fault, Layer
from cutcheck.reference.recovery.region_failover import restarts_whole_region
from cutcheck.reference.runtime.network import end_of_channel_state_consumed
from cutcheck.reference.runtime.tasks import recovered_buffer_polled

if TYPE_CHECKING:
    from cutcheck.model.execution import SubtaskId
    from cutcheck.reference.runtime.network import Buf, InputChannel
    from cutcheck.reference.runtime.tasks import Task


def _early_checkpoint_in_recovery(correct: Callable[[], bool]) -> bool:
    """A checkpoint completes before recovered data is drained, without capturing it."""
    return False


def _restart_failed_task_only(correct: Callable[[], bool]) -> bool:
    """Region failover restarts only the failed task, not its region."""
    return False


def _recovered_buffers_persisted_twice(correct: Callable[[Task, InputChannel, Buf], None], task: Task,
                                       ch: InputChannel, buf: Buf) -> None:
    """A recovered buffer polled before the barrier is persisted again, though the snapshot already captured it.

    FLINK-40016: when an unaligned checkpoint started while recovered buffers were still queued in a
    ``LocalInputChannel``, ``checkpointStarted`` persisted them once and ``maybePersist`` persisted each
    again as the task polled it, so the channel state held duplicates.
    """
    snap = None if ch.persisting is None else task.snapshots.get(ch.persisting)
    if snap is not None:
        snap.input_state.setdefault(task.channel_key(ch), []).append(buf)


def _terminal_counts_as_finished(correct: Callable[[Iterable[Task]], set[SubtaskId]],
                                 tasks: Iterable[Task]) -> set[SubtaskId]:
    """The checkpoint plan leaves out subtasks past their end of input, so it completes without their snapshots.

    FLINK-40482: ``isFinished()`` returned ``state.isTerminal()``, so tasks that were not running (failed
    or canceled as well as finished) were dropped from ``tasksToWaitFor`` and a checkpoint completed with
    fewer acknowledgements than subtasks that still held state or in-flight data.
    """
    return {t.sid for t in tasks if not t.finished}


def _channel_overtakes_gate_recovery(correct: Callable[[InputChannel], None], ch: InputChannel) -> None:
    """A sender resumes once its own channel consumed the end of its recovered state, so its new data overtakes recovered data of other channels of the gate.

    FLINK-19856 (apache/flink PR 13822) added the end-of-channel-recovery event and its rule: a
    subpartition blocks after sending it, and the consumer unblocks all of its gate's subpartitions only
    when every channel received it. Without the rule, after a rescale that hands a source split to
    another producer, the split's new records arrive on one channel while its restored in-flight records
    still wait on another, and a keyed consumer sees the key's offsets go backwards.
    """
    if ch.sender is not None:
        ch.sender.blocked = False


def _recovering_channel_misses_start(correct: Callable[[InputChannel], bool], ch: InputChannel) -> bool:
    """A channel still replaying recovered state does not start persisting, so later pre-barrier buffers are lost.

    FLINK-20654 (PR 14581, its second and third cases): a channel not yet converted from a recovered one
    did not handle ``checkpointStarted``, so buffers arriving after its conversion and before the
    barrier were not captured and the checkpoint was inconsistent.
    """
    return not ch.recovery_pending and correct(ch)


FAULTS: tuple[AnyFault, ...] = (
    Fault(ModelMutant.EARLY_CHECKPOINT_IN_RECOVERY, captures_recovered_data, Layer.RECOVERY,
          _early_checkpoint_in_recovery, key="FLINK-20654"),
    Fault("restart-failed-task-only", restarts_whole_region, Layer.RECOVERY, _restart_failed_task_only),
    Fault("recovered-buffers-persisted-twice", recovered_buffer_polled, Layer.RECOVERY,
          _recovered_buffers_persisted_twice, key="FLINK-40016"),
    Fault("terminal-counts-as-finished", tasks_to_wait_for, Layer.RECOVERY, _terminal_counts_as_finished,
          key="FLINK-40482"),
    Fault("recovering-channel-misses-checkpoint-start", starts_persisting, Layer.RECOVERY,
          _recovering_channel_misses_start, key="FLINK-20654"),
    Fault("channel-overtakes-gate-recovery", end_of_channel_state_consumed, Layer.RECOVERY,
          _channel_overtakes_gate_recovery, key="FLINK-19856"),
)
