"""Faults in savepoints: user-triggered, self-contained snapshots (facts §3.2, §8.2)."""

from __future__ import annotations

from collections.abc import Callable

from cutcheck.reference.checkpointing.coordinator import checkpoint_options_for
from cutcheck.reference.core.seams import AnyFault, Fault, Layer
from cutcheck.reference.storage.retention import subsumable


def _savepoint_as_priority_barrier(correct: Callable[[str, str, int | None], str], kind: str, mode: str,
                                   timeout: int | None) -> str:
    """A savepoint takes the unaligned options of the job's checkpoints, so its barrier overtakes in-flight data.

    FLINK-18252 (with FLINK-17467): with unaligned checkpoints enabled, a savepoint barrier was sent as a
    priority event that overtakes output buffers, and the savepoint depended on in-flight data it must
    not hold.
    """
    return correct("checkpoint", mode, timeout)


def _savepoint_subsumes_last_checkpoint(correct: Callable[[str, bool, bool], bool], kind: str, newest: bool,
                                        newest_checkpoint: bool) -> bool:
    """A completed savepoint lets retention subsume the newest checkpoint that is not a savepoint.

    FLINK-21351: savepoints count against the retained number, and the store subsumed the one checkpoint
    later incremental checkpoints still built on, discarding its shared state (fixed by never subsuming
    the newest non-savepoint checkpoint, ``CheckpointSubsumeHelper``).
    """
    return not newest


FAULTS: tuple[AnyFault, ...] = (
    Fault("savepoint-as-priority-barrier", checkpoint_options_for, Layer.SAVEPOINTS, _savepoint_as_priority_barrier,
          key="FLINK-18252"),
    Fault("savepoint-subsumes-last-checkpoint", subsumable, Layer.SAVEPOINTS, _savepoint_subsumes_last_checkpoint,
          key="FLINK-21351"),
)
