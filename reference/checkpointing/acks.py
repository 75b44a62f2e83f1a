"""Acknowledgements on their way to the coordinator: the asynchronous part of a task's snapshot.

In Flink a task's snapshot has a synchronous part, taken in the task's thread at the barrier, and
an asynchronous part (``AsyncCheckpointRunnable`` in the task's async-operations pool) that
materialises and uploads the state; only when that part ends does the task send its
acknowledgement, by RPC, to ``CheckpointCoordinator.receiveAcknowledgeMessage``. Acks of different
tasks and checkpoints therefore reach the coordinator in any order, so a newer checkpoint can
complete while an older one is still pending (facts §4.9).

With ``checkpoint.ack_delay`` D > 0 each acknowledgement is held here for a delay drawn in [1, D]
from a generator of its own, seeded from the run's seed (the scheduler's choices stay those of the
same scenario with D = 0 up to the first ack), and delivered as a timer of the engine's step loop.
With D = 0 nothing is held: the task acknowledges at once, as the engine always did.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cutcheck.reference.runtime.tasks import Task, TaskSnapshot


class AckOutcome(StrEnum):
    """What the coordinator does with an arriving acknowledgement (``PendingCheckpoint.TaskAcknowledgeResult``)."""

    ACCEPTED = "accepted"
    LATE = "late"  # the checkpoint is no longer pending (aborted, expired, subsumed): its state is discarded
    WRONG_ATTEMPT = "wrong_attempt"  # sent by an execution a failover replaced (UNKNOWN): discarded


@dataclass(frozen=True, slots=True)
class InFlightAck:
    snap: TaskSnapshot
    sender: Task  # the execution that took the snapshot: its attempt, as Flink's ExecutionAttemptID
    sent_step: int
    due_step: int


class AckPipe:
    """The acknowledgements sent and not yet delivered, in the order they fall due (ties: sent first)."""

    __slots__ = ("delay", "_rng", "_in_flight", "_slowest")

    def __init__(self, delay: int, seed: int):
        self.delay = delay
        # Its own generator, so that delays never shift the scheduler's draws.
        self._rng = random.Random(f"ack-delay:{seed}")
        self._in_flight: list[InFlightAck] = []
        self._slowest: dict[int, int] = {}  # checkpoint -> the longest asynchronous part any of its tasks takes

    def send(self, sender: Task, snap: TaskSnapshot, step: int) -> None:
        # How long an asynchronous part takes depends mostly on the checkpoint (how much state it
        # uploads, the storage's load then): each checkpoint draws its slowest in [1, delay] and each
        # task's ack a delay up to that. Per ack alone, the slowest of many tasks' acks was close to
        # ``delay`` for every checkpoint, and a newer one almost never completed first.
        slowest = self._slowest.get(snap.cp)
        if slowest is None:
            slowest = self._slowest[snap.cp] = self._rng.randint(1, self.delay)
        # At least one step: an ack sent during a step's timers would otherwise fall due at a step
        # whose acks were already delivered, and wait behind the next timer (an expiry, say).
        due = step + self._rng.randint(1, slowest)
        ack = InFlightAck(snap, sender, step, due)
        at = len(self._in_flight)
        while at > 0 and self._in_flight[at - 1].due_step > due:
            at -= 1
        self._in_flight.insert(at, ack)

    def take_due(self, step: int) -> list[InFlightAck]:
        """The acknowledgements that arrive at ``step``, removed from the pipe."""
        n = 0
        while n < len(self._in_flight) and self._in_flight[n].due_step <= step:
            n += 1
        due, self._in_flight[:n] = self._in_flight[:n], []
        return due

    def timers(self) -> list[int]:
        """When the next acknowledgement arrives (none when nothing is in flight)."""
        return [self._in_flight[0].due_step] if self._in_flight else []

    def __len__(self) -> int:
        return len(self._in_flight)
