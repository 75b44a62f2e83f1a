"""Checkpoint storage: the interface the engine writes state through, and its in-memory implementation.

The on-disk backend (exclusive/shared/taskowned layout, incremental keyed state, shared-state
registry) implements the same interface; the engine does not know which one it talks to.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def latest_index(entries: Sequence[tuple[int, str]]) -> int | None:
    """Which of a store's entries (ids and kinds, in the order they were added) is its latest: the last
    added, as ``CompletedCheckpointStore.getLatestCheckpoint``, never by id, except a savepoint added
    after a checkpoint with a larger id (it completed late, its acks crossed the checkpoint's). Flink
    1.15+ keeps no savepoint in the store at all; this store keeps them for their retention, and a late
    one restored would roll back what the newer checkpoint's notifications committed (facts §4.9, §13)."""
    latest: int | None = None
    newest_checkpoint = 0
    for i, (cp, kind) in enumerate(entries):
        if kind != "savepoint":
            newest_checkpoint = max(newest_checkpoint, cp)
            latest = i
        elif cp > newest_checkpoint:
            latest = i
    return latest


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
        """The completed checkpoint or savepoint to restore from: the last added (``latest_index``)."""

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
        i = latest_index([(c.cp, c.kind) for c in self._completed])
        return None if i is None else self._completed[i]

    def retained_ids(self) -> list[int]:
        return [c.cp for c in self._completed]

    def retained(self) -> list[tuple[int, str]]:
        return [(c.cp, c.kind) for c in self._completed]
