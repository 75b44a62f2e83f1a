"""Which failed checkpoints fail the job (Flink's ``CheckpointFailureManager``).

``execution.checkpointing.tolerable-failed-checkpoints`` (the scenario's ``checkpoint.tolerable_failed``)
defaults to 0: the first failed checkpoint that counts fails the job, whose failover restarts it
from the latest completed checkpoint. Which failures count depends on their reason:

* counted: ``CHECKPOINT_EXPIRED``, ``CHECKPOINT_DECLINED`` (and I/O or asynchronous snapshot
  exceptions, which the engine never raises), each checkpoint at most once;
* not counted: ``CHECKPOINT_SUBSUMED`` (a newer checkpoint completed), ``CHECKPOINT_DECLINED_SUBSUMED``
  (a task saw a newer barrier), ``JOB_FAILURE``/``JOB_FAILOVER_REGION``/``TASK_FAILURE`` (aborted by a failover),
  ``CHECKPOINT_DECLINED_INPUT_END_OF_STREAM`` and the other trigger-side reasons;
* a failure of a checkpoint not newer than the last successful one never counts;
* a savepoint's failure on the JobManager side (its expiry) never counts; a task-side one
  (a decline with a counted reason) does;
* a completed checkpoint or savepoint newer than the last success resets the count, and so does
  failing the job.

A job whose checkpoints always take longer than their timeout fails over on every attempt, and
Flink's default restart strategy restarts it for ever. The manager counts the failovers it caused
in a row without progress (``failovers_in_a_row``); at ``RESTART_LOOP_FAILOVERS`` the engine stops the
run with LIVENESS rather than spend its whole step budget going round (campaigns class such a run as
Flink's outcome, not a finding: ``reference.judge.restart_loop``).

Progress is not "a checkpoint completed": a job whose checkpoints time out only while data flows
completes checkpoints while its sources are idle after each restart, and those hold the position it
restarts from, so it goes round for ever all the same. A failover makes progress when what the job
restarts from (``restart_point``: the sources' positions and the in-flight records of the latest
completed checkpoint) differs from the previous such failover's. (What sinks wrote is no measure: an
at-least-once sink writes the same records again after every restart.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cutcheck.model.kinds import CheckpointKind

if TYPE_CHECKING:
    from cutcheck.reference.runtime.tasks import TaskSnapshot

COUNTED = frozenset({"CHECKPOINT_EXPIRED", "CHECKPOINT_DECLINED", "IO_EXCEPTION", "CHECKPOINT_ASYNC_EXCEPTION"})
REASONS = COUNTED | {"CHECKPOINT_SUBSUMED", "CHECKPOINT_DECLINED_SUBSUMED", "JOB_FAILURE", "JOB_FAILOVER_REGION", "TASK_FAILURE",
                     "CHECKPOINT_DECLINED_INPUT_END_OF_STREAM"}


RESTART_LOOP_FAILOVERS = 5  # failovers in a row, each back where the one before left the job, that end a run


def restart_point(tasks: Iterable[TaskSnapshot]) -> tuple[tuple[Any, ...], int]:
    """Where a job restarted from this completed checkpoint starts: its sources' split positions and
    how many records its channel state holds (in-flight records that moved on count as progress)."""
    positions: list[Any] = []
    inflight = 0
    for snap in tasks:
        splits = snap.operator.get("splits")
        if splits is not None:
            positions.extend((str(snap.sid), str(split), off) for split, off in splits)
        inflight += sum(len(b.recs) for bufs in snap.input_state.values() for b in bufs)
        inflight += sum(len(b.recs) for bufs in snap.output_state.values() for b in bufs)
    return tuple(sorted(positions)), inflight


class CheckpointFailureManager:
    def __init__(self, tolerable: int):
        self.tolerable = tolerable
        self.failures = 0  # consecutive counted failures
        self.counted: set[int] = set()
        self.last_succeeded = -1
        self.failovers_in_a_row = 0  # jobs failed by this manager in a row without progress
        self._progress_at_failover: object = None  # what the previous such failover restarted from

    def on_success(self, cp: int) -> None:
        if cp > self.last_succeeded:
            self.last_succeeded = cp
            self._clear()

    def on_failure(self, cp: int, kind: str, reason: str, *, task_side: bool) -> bool:
        """Count one failed checkpoint; True when the job must fail (the count exceeds the tolerance)."""
        if reason not in REASONS:
            raise ValueError(f"unknown checkpoint failure reason {reason!r}")
        if kind == CheckpointKind.SAVEPOINT and not task_side:
            return False  # a user's savepoint: failing the job over would not help it
        if cp <= self.last_succeeded:
            return False
        if reason in COUNTED and cp not in self.counted:
            self.counted.add(cp)
            self.failures += 1
        if self.failures > self.tolerable:
            self._clear()
            return True
        return False

    def job_failed_over(self, progress: object) -> bool:
        """The job fails over because of failed checkpoints, restarting from ``progress`` (its restart
        point); True when that makes the loop Flink would never leave (see the
        module's docstring)."""
        if progress == self._progress_at_failover:
            self.failovers_in_a_row += 1
        else:
            self.failovers_in_a_row = 1
            self._progress_at_failover = progress
        return self.failovers_in_a_row >= RESTART_LOOP_FAILOVERS

    def failovers_without_progress(self, progress: object) -> int:
        """How many failovers in a row this manager caused, each restarting from where the one before
        did, when the job has not moved on from there since (0 when it has)."""
        return self.failovers_in_a_row if progress == self._progress_at_failover else 0

    def _clear(self) -> None:
        self.failures = 0
        self.counted.clear()
