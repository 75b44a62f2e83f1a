"""Checkpoint storage: the interface the engine writes state through, and its in-memory implementation.

The on-disk backend (exclusive/shared/taskowned layout, incremental keyed state, shared-state
registry) implements the same interface; the engine does not know which one it talks to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from cutcheck.model.execution import SubtaskId
from cutcheck.reference.core.seams import Rules
from cutcheck.reference.runtime.tasks import TaskSnapshot
from cutcheck.reference.storage.retention import subsume


@dataclass(slots=True)
class CompletedCheckpoint:
    cp: int
    kind: str  # "checkpoint" | "savepoint"
    attempt: int
    parallelism: dict[str, int]
    tasks: dict[SubtaskId, TaskSnapshot] = field(default_factory=dict)
    trigger_step: int = 0
    end_step: int = 0


class StorageObserver(Protocol):
    """Where a storage reports what it did (the engine publishes it on the run's event bus)."""

    def transition(self, name: str) -> None: ...

    def closed(self) -> None: ...


class CheckpointStorage(Protocol):
    def acknowledge(self, snapshot: TaskSnapshot) -> None:
        """A subtask's state for a pending checkpoint (shared state is registered here, facts §5.4)."""

    def complete(self, checkpoint: CompletedCheckpoint, retained: int) -> list[int]:
        """Record a completed checkpoint; return the ids subsumed by retention."""

    def abort(self, cp: int) -> None:
        """Forget a pending checkpoint's state."""

    def latest(self) -> CompletedCheckpoint | None:
        """The newest completed checkpoint or savepoint to restore from."""

    def retained_ids(self) -> list[int]:
        ...

    def retained(self) -> list[tuple[int, str]]:
        """The ids and kinds of what the store holds, oldest first."""
        ...


class InMemoryStorage:
    """Keeps the retained completed checkpoints in memory; pending acknowledgements until completion."""

    def __init__(self, rules: Rules | None = None) -> None:
        self.rules = rules or Rules()  # the seams a fault may replace (retention's ``subsumable``)
        self._pending: dict[int, list[TaskSnapshot]] = {}
        self._completed: list[CompletedCheckpoint] = []

    def acknowledge(self, snapshot: TaskSnapshot) -> None:
        self._pending.setdefault(snapshot.cp, []).append(snapshot)

    def complete(self, checkpoint: CompletedCheckpoint, retained: int) -> list[int]:
        self._pending.pop(checkpoint.cp, None)
        self._completed.append(checkpoint)
        return [c.cp for c in subsume(self._completed, retained, self.rules)]

    def abort(self, cp: int) -> None:
        self._pending.pop(cp, None)

    def latest(self) -> CompletedCheckpoint | None:
        return self._completed[-1] if self._completed else None

    def retained_ids(self) -> list[int]:
        return [c.cp for c in self._completed]

    def retained(self) -> list[tuple[int, str]]:
        return [(c.cp, c.kind) for c in self._completed]
