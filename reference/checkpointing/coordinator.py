"""The checkpoint coordinator: triggers, acknowledgements, completion, aborts and notifications."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from cutcheck.model.execution import SubtaskId
from cutcheck.model.kinds import BarrierOption, CheckpointKind, CheckpointMode
from cutcheck.reference.checkpointing.acks import AckOutcome
from cutcheck.reference.checkpointing.failure_manager import CheckpointFailureManager, restart_point
from cutcheck.reference.core.doors import RunContext
from cutcheck.reference.core.seams import seam
from cutcheck.reference.runtime.tasks import TaskSnapshot
from cutcheck.reference.storage.memory import CheckpointStorage, CompletedCheckpoint

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from cutcheck.reference.core.doors import TimedEvent
    from cutcheck.reference.runtime.tasks import Task


class CoordinatorRun(RunContext, Protocol):
    """The run as the coordinator sees it: the tasks a checkpoint waits for."""

    tasks: dict[SubtaskId, Task]


class CheckpointListener(Protocol):
    """What the coordinator tells the run: a checkpoint about to be stored, completed, aborted."""

    def completing(self, done: CompletedCheckpoint) -> None: ...

    def completed(self, done: CompletedCheckpoint, subsumed: list[int]) -> None: ...

    def aborted(self, cp: int, kind: str, reason: str, cause: str) -> None: ...


@seam
def tasks_to_wait_for(tasks: Iterable[Task]) -> set[SubtaskId]:
    """A checkpoint waits for an acknowledgement of every subtask of the job, running or finished
    (a finished one acknowledges its final snapshot, FLIP-147; ``CheckpointPlan.tasksToWaitFor``)."""
    return {t.sid for t in tasks}


@seam
def completion_subsumes_pending(kind: str) -> bool:
    """A completed checkpoint subsumes the older pending checkpoints (never a pending savepoint,
    ``PendingCheckpoint.canBeSubsumed``); a completed savepoint subsumes nothing
    (``CheckpointCoordinator.cleanupAfterCompletedCheckpoint``). So no checkpoint ever completes after
    a newer one, however its acknowledgements cross (facts §4.9)."""
    return kind != CheckpointKind.SAVEPOINT


@dataclass(slots=True)
class PendingCheckpoint:
    cp: int
    kind: str
    options: BarrierOption
    trigger_step: int
    expected: set[SubtaskId]
    acks: dict[SubtaskId, TaskSnapshot] = field(default_factory=dict)
    timeout_fired: bool = False
    # What its statistics gather while it is pending (the coordinator's own, as Flink's
    # PendingCheckpointStats): taken at the trigger, and summed over its tasks' snapshots.
    inflight_bytes: int = 0
    buffer_size: int = 0
    alignment_steps: int = 0
    aligned_records: int = 0  # records its tasks processed while aligning


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

    def __init__(self, triggers: Sequence[TimedEvent]):
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
def checkpoint_options_for(kind: str, mode: str, timeout: int | None) -> BarrierOption:
    """CheckpointOptions.forConfig (facts §3.2): a savepoint is always aligned, whatever the mode, so that
    it holds no in-flight data (FLINK-17467, FLINK-18252)."""
    if mode == CheckpointMode.AT_LEAST_ONCE:
        return BarrierOption.AT_LEAST_ONCE
    if kind == CheckpointKind.SAVEPOINT or mode == CheckpointMode.ALIGNED:
        return BarrierOption.ALIGNED
    if mode == CheckpointMode.UNALIGNED or not timeout:
        return BarrierOption.UNALIGNED
    return BarrierOption.TIMEOUTABLE


class Coordinator:
    """Pending checkpoints and their statistics. It tells ``listener`` (the run's checkpoint controller)
    what completes and aborts, and asks for a failover through ``fail_job`` when failed checkpoints
    exceed the tolerance (as Flink hands ``CheckpointFailureManager`` a fail-job callback)."""

    def __init__(self, engine: CoordinatorRun, storage: CheckpointStorage, listener: CheckpointListener,
                 fail_job: Callable[[str], None]):
        self.engine = engine
        self.storage = storage
        self.listener = listener
        self.fail_job = fail_job
        self.savepoints = SavepointSchedule(engine.scenario.savepoints)
        self.failure_manager = CheckpointFailureManager(engine.scenario.checkpoint.tolerable_failed)
        self.next_id = 1
        self.pending: dict[int, PendingCheckpoint] = {}
        self.completed_ids: list[int] = []
        self.stats: list[CheckpointStats] = []
        self._last_completed = 0
        self.restart_point: object = None  # where the latest completed checkpoint restarts the job (failure_manager)

    def resume_after(self, restored: int, next_id: int) -> None:
        """A run restored from checkpoint ``restored`` (of an earlier run) takes ids from ``next_id`` on."""
        self.next_id = next_id
        self._last_completed = restored

    def latest_completed_id(self) -> int:
        return self._last_completed

    def options(self, cp: int) -> BarrierOption:
        p = self.pending.get(cp)
        return p.options if p is not None else BarrierOption.ALIGNED

    def checkpoint_options(self, kind: str) -> BarrierOption:
        ck = self.engine.scenario.checkpoint
        return self.engine.rules[checkpoint_options_for](kind, ck.mode, ck.timeout)

    def can_trigger(self) -> bool:
        ck = self.engine.scenario.checkpoint
        limit: int = ck.max_concurrent
        return len(self.pending) < limit

    def trigger(self, kind: str = "checkpoint", *, inflight_bytes: int = 0, buffer_size: int = 0) -> int:
        """A new pending checkpoint; ``inflight_bytes`` and ``buffer_size`` are the network's at the trigger."""
        cp = self.next_id
        self.next_id += 1
        expected = self.engine.rules[tasks_to_wait_for](self.engine.tasks.values())
        self.pending[cp] = PendingCheckpoint(cp, kind, self.checkpoint_options(kind), self.engine.step, expected,
                                             inflight_bytes=inflight_bytes, buffer_size=buffer_size)
        return cp

    def timed_out(self, cp: int) -> bool:
        """Whether pending ``cp`` is timeoutable and its alignment timeout has passed."""
        p = self.pending.get(cp)
        t = self.engine.scenario.checkpoint.timeout
        return p is not None and t is not None and p.options == BarrierOption.TIMEOUTABLE and self.engine.step - p.trigger_step > t

    def note_alignment(self, cp: int, steps: int, records: int) -> None:
        """A task's snapshot of ``cp`` ended its alignment (statistics of a pending checkpoint only)."""
        p = self.pending.get(cp)
        if p is not None:
            p.alignment_steps += steps
            p.aligned_records += records

    def outcome_of(self, snap: TaskSnapshot, sender: Task) -> AckOutcome:
        """What an acknowledgement arriving now meets (``receiveAcknowledgeMessage``): its checkpoint is
        no longer pending, or a failover replaced its sender (the execution attempt is unknown to the
        pending checkpoint), or it is taken."""
        if snap.cp not in self.pending:
            return AckOutcome.LATE
        if self.engine.tasks.get(snap.sid) is not sender:
            return AckOutcome.WRONG_ATTEMPT
        return AckOutcome.ACCEPTED

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
        self.listener.aborted(cp, p.kind, reason, cause)
        if self.failure_manager.on_failure(cp, p.kind, cause, task_side=task_side):
            self.fail_job(f"checkpoint {cp} failed ({cause}): tolerable failed checkpoints exceeded")

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
        if self.engine.rules[completion_subsumes_pending](p.kind):
            # A completed checkpoint subsumes older pending checkpoints, never a pending savepoint
            # (PendingCheckpoint.canBeSubsumed is false for savepoints); a completed savepoint subsumes
            # nothing (CheckpointCoordinator.cleanupAfterCompletedCheckpoint).
            for older in [c for c, q in self.pending.items() if c < p.cp and q.kind != CheckpointKind.SAVEPOINT]:
                self.abort(older, "subsumed by a newer completed checkpoint", "CHECKPOINT_SUBSUMED")
        done = CompletedCheckpoint(p.cp, p.kind, self.engine.attempt, dict(self.engine.parallelism), dict(p.acks),
                                   p.trigger_step, self.engine.step)
        self.listener.completing(done)
        subsumed = self.storage.complete(done, self.engine.scenario.checkpoint.retained)
        self._last_completed = max(self._last_completed, p.cp)
        self.failure_manager.on_success(p.cp)
        self.restart_point = restart_point(done.tasks.values())
        self.completed_ids.append(p.cp)
        stats = CheckpointStats(p.cp, self.engine.attempt, p.kind, "completed", p.trigger_step, self.engine.step)
        for snap in p.acks.values():
            stats.input_state_records += sum(len(b.recs) for bufs in snap.input_state.values() for b in bufs)
            stats.output_state_records += sum(len(b.recs) for bufs in snap.output_state.values() for b in bufs)
        rb = self.engine.scenario.network.record_bytes
        stats.state_bytes = (stats.input_state_records + stats.output_state_records) * rb
        stats.alignment_steps = p.alignment_steps
        stats.inflight_bytes = p.inflight_bytes
        stats.processed_bytes = p.aligned_records * rb
        stats.buffer_size = p.buffer_size
        self.stats.append(stats)
        self.listener.completed(done, subsumed)
