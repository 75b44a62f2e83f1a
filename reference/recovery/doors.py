"""The run as recovery sees it: ``RecoveryRun``, the widest door, since recovery rebuilds the run.

Beyond a task's view (``runtime.doors.TaskRun``) it sees the coordinator whole (to abort every pending
checkpoint), the checkpoint storage, the pending completion notifications, the restore reports, the
expectations and the oracle's override of expected copies, and it asks the engine to start an
attempt, to rebuild every task or to redeploy a region; it writes no attribute of the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from cutcheck.model.execution import SubtaskId
from cutcheck.reference.runtime.doors import TaskRun

if TYPE_CHECKING:
    from cutcheck.reference.checkpointing.coordinator import Coordinator
    from cutcheck.reference.recovery.fanout import BroadcastFanout
    from cutcheck.reference.runtime.records import Expectations
    from cutcheck.reference.runtime.tasks import Task
    from cutcheck.reference.storage.memory import CheckpointStorage, CompletedCheckpoint


class ExpectedCopies(Protocol):
    """The oracle, as far as recovery tells it how many copies a rescaled broadcast makes."""

    copies_override: Callable[[str], tuple[int, bytes]] | None


class RecoveryRun(TaskRun, Protocol):
    storage: CheckpointStorage
    notifications: list[tuple[Task, int]]
    restore_reports: list[dict[str, Any]]  # JSON reports (reference.recovery.recovery.restore_state)
    expect: Expectations
    broadcast_fanout: BroadcastFanout

    @property
    def coordinator(self) -> Coordinator: ...
    @property
    def oracle(self) -> ExpectedCopies: ...

    def start_attempt(self, region: frozenset[SubtaskId] | None) -> None: ...

    def rebuild(self, restored: CompletedCheckpoint | None, new_parallelism: dict[str, int] | None) -> None: ...

    def redeploy(self, region: frozenset[SubtaskId]) -> None: ...
