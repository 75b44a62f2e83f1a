"""The cancel cells of the abstract coverage: a cancel marker ending a barrier alignment.

Since aborts reach tasks as in Flink (facts §4.10), a checkpoint the coordinator aborts ends an
alignment at a downstream task only through a cancel marker, sent by a producer that declined it or
came to it after it was told of the abort. The handler's rule for the marker (``processCancellationBarrier``)
then ends the collection and must leave the task as a finished alignment would: every channel it
blocked resumed, no channel persisting. Bugs there (a blocked channel never resumed, persisting never
stopped) show only when the marker ends a collection that holds what must be released, and which
state the handler is in decides what that is:

* ``cancel ends-aligned``: a cancel marker ends an aligned collection; the channels whose barriers
  arrived are blocked.
* ``cancel ends-unaligned-blocked``: a cancel marker ends an unaligned collection while the task still
  holds blocked channels: those an aligned collection blocked before its alignment timeout switched it
  to unaligned (``execution.checkpointing.aligned-checkpoint-timeout``), kept blocked until the
  checkpoint ends at the task. The rarest: the checkpoint must time out into unaligned and then be
  aborted before its last barrier arrives.
* ``cancel ends-unaligned-persisting``: a cancel marker ends an unaligned collection while some of
  the task's channels persist in-flight data for it.

``CancelWatch`` finds them for ``AbstractObserver``: when the handler is about to handle a cancel
marker (``HandlerDispatched``) it notes what the task holds, and at the look after that step it counts
the cell if the handler no longer collects that checkpoint. It only reads the engine.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

Cell = tuple[str, str, str]
ENDS_ALIGNED: Cell = ("cancel", "ends-aligned", "")
ENDS_UNALIGNED_BLOCKED: Cell = ("cancel", "ends-unaligned-blocked", "")
ENDS_UNALIGNED_PERSISTING: Cell = ("cancel", "ends-unaligned-persisting", "")
CANCEL = {
    ENDS_ALIGNED[1]: "a cancel marker ending an aligned collection, with the channels its barriers came on blocked",
    ENDS_UNALIGNED_BLOCKED[1]: ("a cancel marker ending an unaligned collection while the task holds channels an "
                                "aligned collection blocked before its alignment timeout switched it"),
    ENDS_UNALIGNED_PERSISTING[1]: ("a cancel marker ending an unaligned collection while channels of the task persist "
                                   "in-flight data for it"),
}
ALIGNED_STATES = frozenset({"CollectingBarriers"})
UNALIGNED_STATES = frozenset({"CollectingBarriersUnaligned"})


class CancelWatch:
    """Counts the cancel cells of one run (``dispatched`` on each barrier handler event, ``look`` after
    each step)."""

    __slots__ = ("_armed",)

    def __init__(self) -> None:
        # The task a cancel marker is about to reach in this step, with the checkpoint its handler
        # collects and the cell to count if the marker ends that collection.
        self._armed: list[tuple[Any, int, Cell]] = []

    def dispatched(self, engine: Any, sid: Any, state: str, event: str) -> None:
        if event != "cancel_received" or state not in ALIGNED_STATES | UNALIGNED_STATES:
            return
        task = engine.tasks.get(sid)
        if task is None:
            return
        collecting = task.handler.collecting()
        if not collecting:
            return
        cp = max(collecting)
        if state in ALIGNED_STATES:
            if any(ch.blocked for ch in task.channels):
                self._armed.append((task, cp, ENDS_ALIGNED))
            return
        if any(ch.blocked for ch in task.channels):
            self._armed.append((task, cp, ENDS_UNALIGNED_BLOCKED))
        elif any(ch.persisting == cp for ch in task.channels):
            self._armed.append((task, cp, ENDS_UNALIGNED_PERSISTING))

    def look(self, hits: Counter[Cell]) -> None:
        if not self._armed:
            return
        for task, cp, cell in self._armed:
            if cp not in task.handler.collecting():
                hits[cell] += 1
        self._armed.clear()
