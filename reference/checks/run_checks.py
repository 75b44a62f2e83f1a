"""The run-time checks of one run, subscribed to its event bus.

Each check is a subscriber: OWNERSHIP of the key-group ranges whenever tasks are deployed, CUT,
ALIGNED_EDGE and BROADCAST_STATE when a checkpoint is about to be stored, RETAINED, SAVEPOINT_KEPT
and NO_ORPHANS as checkpoints complete and the storage closes, RESTORE_JUDGED at every restore,
CHECKPOINT_ID at every trigger, TRIGGER when a checkpoint expires, BLOCKED at every event a barrier
handler handles; an alignment stall (``stall``) ends the run with LIVENESS at the second expiry in a
row that finds it, or when the run stops stuck. A
check raises ``InvariantViolation`` from its subscriber, at the step the event happened; the
protocol code that published the event never knows a check exists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cutcheck.model.errors import InvariantViolation
from cutcheck.model.kinds import CheckpointMode
from cutcheck.reference.checks.alignment_checks import check_blocked_channels, check_cancel_markers_on_the_way
from cutcheck.reference.checks.hung_checkpoints import check_not_orphaned
from cutcheck.reference.checks.invariants import (
    check_completed_checkpoint,
    check_cut_of_checkpoint,
    check_key_group_ranges,
)
from cutcheck.reference.checks.restore_judgement import judge_restore
from cutcheck.reference.checks.stall import alignment_stall, describe
from cutcheck.reference.checks.storage_invariants import RetentionWatch, StorageWatch
from cutcheck.reference.events.stream import (
    CancelSent,
    CheckpointAborted,
    CheckpointCompleted,
    CheckpointCompleting,
    CheckpointTriggered,
    EventBus,
    HandlerDispatched,
    RestoreTried,
    StorageClosed,
    TasksDeployed,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from cutcheck.reference.checks.invariants import CheckedRun
    from cutcheck.reference.runtime.doors import PendingView


class RunChecks:
    """The checks of one run. ``cut`` off lets a test show that trace validation alone catches a
    faulty engine (CUT is then not checked; ALIGNED_EDGE and BROADCAST_STATE still are)."""

    def __init__(self, run: CheckedRun, bus: EventBus):
        self.run = run
        self.cut = True
        self.retention = RetentionWatch(run.storage, run.scenario.checkpoint.retained)  # RETAINED
        self.storage = StorageWatch.of(run.storage)  # SAVEPOINT_KEPT, NO_ORPHANS (on-disk storage only)
        bus.subscribe(TasksDeployed, self.on_deployed)
        bus.subscribe(RestoreTried, self.on_restore)
        bus.subscribe(CheckpointCompleting, self.on_completing)
        bus.subscribe(CheckpointCompleted, self.on_completed)
        bus.subscribe(StorageClosed, self.on_storage_closed)
        bus.subscribe(CheckpointTriggered, self.on_triggered)
        bus.subscribe(CheckpointAborted, self.on_aborted)
        bus.subscribe(HandlerDispatched, self.on_dispatched)
        bus.subscribe(CancelSent, self.on_cancel_sent)
        # CANCEL: id of a task (a restore's new tasks have new ids) -> checkpoint it cancelled -> step; the
        # tasks are kept, so that no new task takes a dead one's id
        self.cancelled: dict[int, dict[int, int]] = {}
        self.cancelling: list[object] = []
        # CHECKPOINT_ID: the highest id this job took or restored; every new checkpoint's id is above it.
        self.id_floor = 0
        self.id_floor_is = "no checkpoint yet"
        self.stall_seen: frozenset[str] = frozenset()  # the tasks of the stall the last expiry found

    def on_deployed(self, _e: TasksDeployed) -> None:
        check_key_group_ranges(self.run)  # OWNERSHIP of the ranges themselves
        self.stall_seen = frozenset()  # a failover or rescale broke whatever stalled before

    def on_restore(self, e: RestoreTried) -> None:
        judge_restore(self.run, e.done, e.refusal)  # RESTORE_JUDGED: the engine refuses what Flink refuses
        if e.refusal is None and e.done.cp > self.id_floor:
            self.id_floor, self.id_floor_is = e.done.cp, f"the restored {e.done.kind} {e.done.cp}"

    def on_triggered(self, e: CheckpointTriggered) -> None:
        """CHECKPOINT_ID: a job never takes a checkpoint id twice, across failovers and restores (Flink
        sets its id counter past a restored checkpoint): a committer or table that records the last
        committed id (Iceberg's max committed checkpoint id) would take the reused id's data as
        already committed."""
        if e.cp <= self.id_floor:
            raise InvariantViolation("CHECKPOINT_ID", f"{e.kind} {e.cp} was triggered after {self.id_floor_is}: a job's "
                                                      f"checkpoint ids only grow, a restored one's from the restored id + 1 on")
        self.id_floor, self.id_floor_is = e.cp, f"{e.kind} {e.cp}"

    def on_dispatched(self, e: HandlerDispatched) -> None:
        task = self.run.tasks.get(e.sid)
        if task is not None:
            check_blocked_channels(task, e.event)  # BLOCKED
            if self.cancelled:
                check_cancel_markers_on_the_way(task, e.event, e.channel, self.cancelled)  # CANCEL

    def on_cancel_sent(self, e: CancelSent) -> None:
        task = self.run.tasks.get(e.sid)
        if task is not None:
            if id(task) not in self.cancelled:
                self.cancelling.append(task)
            self.cancelled.setdefault(id(task), {})[e.cp] = e.step

    def on_aborted(self, e: CheckpointAborted) -> None:
        """TRIGGER: an expired checkpoint could still have completed, had it not expired: every task
        that has not taken it had a trigger, a barrier or an upstream on the way to one. Published
        before the tasks drop the checkpoint, so what they hold of it is still there."""
        if e.expired:
            check_not_orphaned(self.run.tasks.values(), e.cp, e.kind, f"expired at step {e.step}")
            self._stall_at_expiry()

    def _stall_at_expiry(self) -> None:
        """An alignment stall two expiries in a row found among the same tasks ends the run: no step
        of the job breaks it (``stall``), and the step budget would go round it to its end."""
        ring = alignment_stall(self.run.tasks.values())
        tasks = frozenset(w.waiter for w in ring)
        if ring and tasks == self.stall_seen:
            raise InvariantViolation("LIVENESS", describe(ring))
        self.stall_seen = tasks

    def on_stuck(self, pending: Iterable[tuple[int, PendingView]]) -> None:
        """TRIGGER, when the run stops with checkpoints still pending (its step limit, a deadlock): one
        that no task could ever have completed is the hang's cause, which LIVENESS alone does not name; so is
        an alignment left waiting for a cancel marker that was never sent (CANCEL)."""
        if self.cancelled:
            for task in self.run.tasks.values():
                check_cancel_markers_on_the_way(task, "nothing (the run stopped)", -1, self.cancelled)
        for cp, p in sorted(pending, key=lambda item: item[0]):
            check_not_orphaned(self.run.tasks.values(), cp, p.kind, f"was still pending when the run stopped at step {self.run.step}")
        ring = alignment_stall(self.run.tasks.values())
        if ring:  # the hang's cause, named
            raise InvariantViolation("LIVENESS", describe(ring))

    def on_completing(self, e: CheckpointCompleting) -> None:
        if self.cut and self.run.scenario.checkpoint.mode != CheckpointMode.AT_LEAST_ONCE:
            check_cut_of_checkpoint(self.run, e.done)
        check_completed_checkpoint(self.run, e.done)  # ALIGNED_EDGE, BROADCAST_STATE: before it is stored, as CUT

    def on_completed(self, e: CheckpointCompleted) -> None:
        self.retention.on_complete(e.done)
        if self.storage is not None:
            self.storage.on_complete(e.done, list(e.subsumed))

    def on_storage_closed(self, _e: StorageClosed) -> None:
        if self.storage is not None:
            self.storage.at_close()
