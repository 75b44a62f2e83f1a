"""The checkpoint coordinator: triggers, acknowledgements, completion, aborts and notifications."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cutcheck.model.execution import SubtaskId
from cutcheck.reference.checkpointing.failure_manager import CheckpointFailureManager
from cutcheck.reference.core.seams import seam
from cutcheck.reference.runtime.tasks import TaskSnapshot
from cutcheck.reference.storage.memory import CheckpointStorage, CompletedCheckpoint

if TYPE_CHECKING:
    from collections.abc import Iterable

    from cutcheck.reference.core.doors import TaskRun
    from cutcheck.reference.runtime.tasks import Task


@seam
def tasks_to_wait_for(tasks: Iterable[Task]) -> set[SubtaskId]:
    """A checkpoint waits for an acknowledgement of every subtask of the job, running or finished
    (a finished one acknowledges its final snapshot, FLIP-147; ``CheckpointPlan.tasksToWaitFor``)."""
    return {t.sid for t in tasks}


@dataclass(slots=True)
class PendingCheckpoint:
    cp: int
    kind: str
    options: str
    trigger_step: int
    expected: set[SubtaskId]
    acks: dict[SubtaskId, TaskSnapshot] = field(default_factory=dict)
    timeout_fired: bool = False


@dataclass(slots=True)
class CheckpointStats:
    cp: int
    attempt: int
    kind: str
    status: str  # completed | aborted
    trigger_step: int
    end_step: int
    alignment_steps: int = 0
    input_state_records: int = 0
    output_state_records: int = 0
    state_bytes: int = 0
    inflight_bytes: int = 0
    processed_bytes: int = 0  # data processed during alignment (Flink's processed_data); state_bytes is the persisted
    buffer_size: int = 0
    reason: str = ""


class SavepointSchedule:
    """The scenario's savepoints, each triggered once like a user's ``flink savepoint``: at a step, or
    ``delay`` steps after a checkpoint completed. A savepoint is a forced request, which
    CheckpointRequestDecider runs even when max-concurrent-checkpoints are pending."""

    def __init__(self, triggers: tuple[Any, ...]):  # reference.scenario.SavepointTrigger
        self.triggers = triggers
        self.due: dict[int, int] = {i: t.at_step for i, t in enumerate(triggers) if t.at_step is not None}
        self.fired: set[int] = set()

    def on_complete(self, cp: int, step: int) -> None:
        for i, t in enumerate(self.triggers):
            if t.after_checkpoint == cp and i not in self.due:
                self.due[i] = step + t.delay

    def take_due(self, step: int) -> int:
        """How many savepoints fall due at ``step`` (each only once)."""
        now = [i for i, d in self.due.items() if d <= step and i not in self.fired]
        self.fired.update(now)
        return len(now)

    def timers(self) -> list[int]:
        return [d for i, d in self.due.items() if i not in self.fired]


@seam
def checkpoint_options_for(kind: str, mode: str, timeout: int | None) -> str:
    """CheckpointOptions.forConfig (facts §3.2): a savepoint is always aligned, whatever the mode, so that
    it holds no in-flight data (FLINK-17467, FLINK-18252)."""
    if mode == "at_least_once":
        return "at_least_once"
    if kind == "savepoint" or mode == "aligned":
        return "aligned"
    if mode == "unaligned" or not timeout:
        return "unaligned"
    return "timeoutable"


class Coordinator:
    def __init__(self, engine: TaskRun, storage: CheckpointStorage):
        self.engine = engine
        self.storage = storage
        self.savepoints = SavepointSchedule(engine.scenario.savepoints)
        self.failure_manager = CheckpointFailureManager(engine.scenario.checkpoint.tolerable_failed)
        self.job_failure: str | None = None  # set when failed checkpoints exceed the tolerance
        self.next_id = 1
        self.pending: dict[int, PendingCheckpoint] = {}
        self.completed_ids: list[int] = []
        self.stats: list[CheckpointStats] = []
        self._last_completed = 0

    def latest_completed_id(self) -> int:
        return self._last_completed

    def options(self, cp: int) -> str:
        p = self.pending.get(cp)
        return p.options if p is not None else "aligned"

    def checkpoint_options(self, kind: str) -> str:
        ck = self.engine.scenario.checkpoint
        return self.engine.rules[checkpoint_options_for](kind, ck.mode, ck.timeout)

    def can_trigger(self) -> bool:
        ck = self.engine.scenario.checkpoint
        return len(self.pending) < ck.max_concurrent

    def trigger(self, kind: str = "checkpoint") -> int:
        cp = self.next_id
        self.next_id += 1
        expected = self.engine.rules[tasks_to_wait_for](self.engine.tasks.values())
        self.pending[cp] = PendingCheckpoint(cp, kind, self.checkpoint_options(kind), self.engine.step, expected)
        return cp

    def acknowledge(self, snap: TaskSnapshot) -> None:
        p = self.pending.get(snap.cp)
        if p is None:
            return  # late acknowledgement of an aborted checkpoint
        self.storage.acknowledge(snap)
        p.acks[snap.sid] = snap
        if set(p.acks) >= p.expected:
            self._complete(p)

    def decline(self, cp: int, sid: SubtaskId, reason: str, cause: str) -> None:
        if cp in self.pending:
            self.abort(cp, f"declined by {sid}: {reason}", cause, task_side=True)

    def abort(self, cp: int, reason: str, cause: str, *, task_side: bool = False) -> None:
        """Abort a pending checkpoint; ``cause`` is Flink's CheckpointFailureReason, which decides
        whether the failure counts against ``checkpoint.tolerable_failed``."""
        p = self.pending.pop(cp, None)
        if p is None:
            return
        self.storage.abort(cp)
        self.stats.append(CheckpointStats(cp, self.engine.attempt, p.kind, "aborted", p.trigger_step, self.engine.step, reason=reason))
        self.engine.on_abort(cp)
        if self.failure_manager.on_failure(cp, p.kind, cause, task_side=task_side) and self.job_failure is None:
            self.job_failure = f"checkpoint {cp} failed ({cause}): tolerable failed checkpoints exceeded"

    def expire(self, step: int) -> None:
        limit = self.engine.scenario.checkpoint.checkpoint_timeout
        for cp, p in list(self.pending.items()):
            if step - p.trigger_step > limit:
                self.abort(cp, "expired (checkpoint timeout)", "CHECKPOINT_EXPIRED")

    def abort_all(self, reason: str, cause: str) -> None:
        for cp in list(self.pending):
            self.abort(cp, reason, cause)

    def _complete(self, p: PendingCheckpoint) -> None:
        del self.pending[p.cp]
        if p.kind != "savepoint":
            # A completed checkpoint subsumes older pending checkpoints, never a pending savepoint
            # (PendingCheckpoint.canBeSubsumed is false for savepoints); a completed savepoint subsumes
            # nothing (CheckpointCoordinator.cleanupAfterCompletedCheckpoint).
            for older in [c for c, q in self.pending.items() if c < p.cp and q.kind != "savepoint"]:
                self.abort(older, "subsumed by a newer completed checkpoint", "CHECKPOINT_SUBSUMED")
        done = CompletedCheckpoint(p.cp, p.kind, self.engine.attempt, dict(self.engine.parallelism), dict(p.acks),
                                   p.trigger_step, self.engine.step)
        self.engine.check_cut(done)
        subsumed = self.storage.complete(done, self.engine.scenario.checkpoint.retained)
        self._last_completed = max(self._last_completed, p.cp)
        self.failure_manager.on_success(p.cp)
        self.completed_ids.append(p.cp)
        stats = CheckpointStats(p.cp, self.engine.attempt, p.kind, "completed", p.trigger_step, self.engine.step)
        for snap in p.acks.values():
            stats.input_state_records += sum(len(b.recs) for bufs in snap.input_state.values() for b in bufs)
            stats.output_state_records += sum(len(b.recs) for bufs in snap.output_state.values() for b in bufs)
        rb = self.engine.scenario.network.record_bytes
        stats.state_bytes = (stats.input_state_records + stats.output_state_records) * rb
        stats.alignment_steps = self.engine.alignment_steps.pop(p.cp, 0)
        stats.inflight_bytes = self.engine.inflight_at_trigger.pop(p.cp, 0)
        stats.processed_bytes = self.engine.aligned_processed.pop(p.cp, 0) * rb
        stats.buffer_size = self.engine.buffer_size_at_trigger.pop(p.cp, 0)
        self.stats.append(stats)
        self.engine.on_complete(done, subsumed)
