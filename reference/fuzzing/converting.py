"""The timeout cells of the abstract coverage: the sender side of the aligned-checkpoint timeout.

When the alignment timeout (``execution.checkpointing.aligned-checkpoint-timeout``) fires while a
timeoutable barrier still waits behind buffers in a sender's subpartition, the sender turns it into a
priority barrier (FLINK-27251): it overtakes those buffers, they become the sender's output state, and
its cut must move back to what had crossed. A wrong cut there shows only when a receiver reads it:

* ``timeout at-sender``: a timeoutable barrier seen queued behind buffers at one look is a priority
  barrier with buffers behind it at the next: the conversion.
* ``timeout overtaken-at-snapshot``: a task takes its unaligned snapshot of that checkpoint while the
  converted barrier has arrived on one of its channels and buffers it overtook wait there. Only then
  does the conversion's cut decide what the snapshot captures (``snapshots.capture_input``): a barrier
  that arrived with nothing it overtook behind it, or a snapshot taken before it arrived (the channel
  then persists up to the barrier), never reads it. On the aligned-timeout focus's seeds 0-299 this
  cell is reached in exactly the 7 runs where a conversion that keeps its old cut shows (6 break CUT;
  in the seventh that checkpoint never completes).

``ConversionWatch`` finds them for ``AbstractObserver``: ``look_at`` on each barrier it sees at the head
of a sender's queue while a checkpoint is pending, ``snapshot`` when a task takes one. It remembers the
cut a barrier had while it was queued, not the one the code under test gives it, so a fault in the
conversion leaves the cells as they are. It only reads the engine.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container
from typing import Any

from cutcheck.model.kinds import BarrierOption
from cutcheck.reference.runtime.network import Buf

Cell = tuple[str, str, str]
TIMEOUT_AT_SENDER: Cell = ("timeout", "at-sender", "")
TIMEOUT_AT_SNAPSHOT: Cell = ("timeout", "overtaken-at-snapshot", "")
TIMEOUT = {
    TIMEOUT_AT_SENDER[1]: "alignment timeout converts a barrier at-sender",
    TIMEOUT_AT_SNAPSHOT[1]: "receiver snapshots with buffers a converted barrier overtook queued",
}
KEPT = 16  # barriers remembered before those of ended checkpoints are dropped


class ConversionWatch:
    """Counts the timeout cells of one run."""

    __slots__ = ("_queued", "_converted")

    def __init__(self) -> None:
        # id -> (a timeoutable barrier seen queued behind buffers at a sender, its cut then); the barrier
        # is kept alive, so its id names no other barrier meanwhile
        self._queued: dict[int, tuple[Any, int]] = {}
        # id -> (a barrier converted at its sender, its channel, what had crossed then, its cut before)
        self._converted: dict[int, tuple[Any, Any, int, int]] = {}

    def forget_ended(self, pending: Container[int]) -> None:
        """Drop barriers of checkpoints no longer pending once many are kept (they are never converted)."""
        for kept in (self._queued, self._converted):
            if len(kept) > KEPT:
                for key in [k for k, v in kept.items() if v[0].cp not in pending]:
                    del kept[key]

    def look_at(self, hits: Counter[Cell], sp: Any, barrier: Any, buffers: int) -> None:
        """``barrier`` is the first barrier in ``sp``'s queue: a priority one with ``buffers`` behind it,
        or an aligned one with ``buffers`` before it."""
        key = id(barrier)
        if barrier.priority:
            if buffers and key in self._queued:  # queued aligned behind buffers at the last look
                hits[TIMEOUT_AT_SENDER] += 1
                if key not in self._converted:  # what it overtook: from what crossed to its old cut
                    self._converted[key] = (barrier, sp.channel, sp.transmitted, self._queued[key][1])
        elif buffers and barrier.options is BarrierOption.TIMEOUTABLE:
            self._queued[key] = (barrier, barrier.cut)

    def snapshot(self, hits: Counter[Cell], task: Any, cp: int, unaligned: bool) -> None:
        """``task`` takes its snapshot of ``cp`` (before it captures its channels)."""
        if not unaligned or not self._converted:
            return
        for barrier, ch, crossed, cut in self._converted.values():
            if (barrier.cp == cp and ch.task is task and ch.barrier_arrived == cp
                    and any(x.__class__ is Buf and crossed <= x.seq0 < cut for x in ch.queue)):
                hits[TIMEOUT_AT_SNAPSHOT] += 1
                return
