"""Faults in savepoints: user-triggered, self-contained snapshots (facts §3.2, §8.2)."""

from __future__ import annotations

from typing import Any

from cutcheck.reference.core.seams import Fault, Layer


class SavepointAsPriorityBarrier(Fault):
    """A savepoint takes the unaligned options of the job's checkpoints, so its barrier overtakes in-flight data.

    FLINK-18252 (with FLINK-17467): with unaligned checkpoints enabled, a savepoint barrier was sent as a
    priority event that overtakes output buffers, and the savepoint depended on in-flight data it must
    not hold.
    """

    name, seam, layer, key = ("savepoint-as-priority-barrier", "checkpoint_options_for", Layer.SAVEPOINTS,
                              "FLINK-18252")

    def rule(self, correct: Any, kind: str, mode: str, timeout: int | None) -> str:
        return correct("checkpoint", mode, timeout)


class SavepointSubsumesLastCheckpoint(Fault):
    """A completed savepoint lets retention subsume the newest checkpoint that is not a savepoint.

    FLINK-21351: savepoints count against the retained number, and the store subsumed the one checkpoint
    later incremental checkpoints still built on, discarding its shared state (fixed by never subsuming
    the newest non-savepoint checkpoint, ``CheckpointSubsumeHelper``).
    """

    name, seam, layer, key = ("savepoint-subsumes-last-checkpoint", "subsumable", Layer.SAVEPOINTS, "FLINK-21351")

    def rule(self, correct: Any, kind: str, newest: bool, newest_checkpoint: bool) -> bool:
        return not newest
