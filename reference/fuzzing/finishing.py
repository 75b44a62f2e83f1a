"""The finishing cells of the abstract coverage: a task's last producer finishing while checkpoints are pending.

When the end of partition of a task's last producer arrives, the task becomes one Flink triggers
directly (FLIP-147), and every pending checkpoint that no barrier brings it any more is queued as a
direct trigger (``checkpointing.arrival.trigger_when_predecessors_finish``). Bugs of FLINK-21081's
class (tasks whose producers finish after a trigger are left out of the other pending checkpoints)
show only in two rare moments of that rule, which no other cell names:

* ``finish retrigger-while-collecting``: the task's barrier handler still collects one checkpoint
  while another pending one, whose barrier is on none of the task's channels, is queued as a direct
  trigger. A rule that re-triggers only an idle handler leaves that checkpoint without a way to
  complete (TRIGGER at its expiry). An at-least-once tracker gets there most often (it blocks no
  channel, so every end of partition crosses while it counts barriers); an aligned handler only when
  the end of partition crosses into a channel it holds blocked (what follows the barrier fit in the
  receiver's buffers); an unaligned collection is ended by the last end of partition (the next cell).
* ``finish eop-ends-unaligned``: the last end of partition ends an unaligned collection (it stands in
  for the channel's barrier), and another pending checkpoint with no barrier on the way is queued
  (seed 242's moment, ``tests/reference/regressions/eop-ends-unaligned-seed-242.json``).

``FinishWatch`` finds them for ``AbstractObserver``: after each step it looks at the running tasks
whose channels had not all seen their end of partition at the last look. A step is one action, and an
end of partition arrives in a transmit action of its own, so the task whose last channel's end
arrived in this step is seen right after the rule ran. It only reads the engine.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from cutcheck.reference.runtime.network import Barrier

Cell = tuple[str, str, str]
WHILE_COLLECTING: Cell = ("finish", "retrigger-while-collecting", "")
UNALIGNED_ENDED: Cell = ("finish", "eop-ends-unaligned", "")
FINISH = {
    WHILE_COLLECTING[1]: ("a task's last producer finishing while its handler collects one checkpoint, another pending "
                          "one with no barrier on the way queued as a direct trigger (FLINK-21081's moment)"),
    UNALIGNED_ENDED[1]: ("a task's last end of partition ending an unaligned collection, another pending checkpoint "
                         "with no barrier on the way queued as a direct trigger"),
}


class FinishWatch:
    """Counts the finishing cells of one run's tasks (``look`` after each step, ``dispatched`` on each
    barrier handler event)."""

    __slots__ = ("_ended", "_unaligned_eop")

    def __init__(self) -> None:
        # id(task) -> the task, once all its channels saw their end of partition (kept alive, so that a
        # task a restore replaced never passes its id to a new one)
        self._ended: dict[int, Any] = {}
        self._unaligned_eop: set[Any] = set()  # subtasks whose unaligned handler took an end of partition this step

    def dispatched(self, sid: Any, state: str, event: str) -> None:
        if event == "end_of_partition" and state == "CollectingBarriersUnaligned":
            self._unaligned_eop.add(sid)

    def look(self, engine: Any, hits: Counter[Cell]) -> None:
        ended = self._ended
        for task in engine.tasks.values():
            if id(task) in ended:
                continue
            for ch in task.channels:
                if not (ch.eop_arrived or ch.ended):
                    break
            else:
                ended[id(task)] = task
                if task.channels and engine.coordinator.pending:
                    self._last_producer_finished(task, engine.coordinator.pending, hits)
        self._unaligned_eop.clear()

    def _last_producer_finished(self, task: Any, pending: Any, hits: Counter[Cell]) -> None:
        """``task``'s last channel saw its end of partition in this step: which moment of the re-trigger
        rule this is, if any (another checkpoint pending that only its direct trigger brings)."""
        collecting = task.handler.collecting()
        queued = {b.cp for b in task.direct_triggers if b.cp in pending and b.cp not in collecting}
        for ch in task.channels:
            for q in (ch.queue, ch.priority):
                for item in q:
                    if item.__class__ is Barrier:
                        queued.discard(item.cp)  # its barrier still reaches the handler
        if not queued:
            return
        if collecting:
            hits[WHILE_COLLECTING] += 1
        elif task.sid in self._unaligned_eop:
            hits[UNALIGNED_ENDED] += 1
