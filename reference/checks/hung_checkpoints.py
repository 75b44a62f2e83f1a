"""TRIGGER: a checkpoint that hangs because some task has no way left to take it.

A lost trigger does not break a cut: the checkpoint only waits until it expires, and the job goes
on with the next one. In Flink that hang is the bug (FLINK-21067, FLINK-21081, FLINK-23741: the final
checkpoint of a finishing job never completes). So when a pending checkpoint expires, this check asks
whether it could still have completed, and a checkpoint that could not is a finding.

The decision is conservative: it flags only a checkpoint that is certainly orphaned. A task of the
plan has a way to take checkpoint ``cp`` when it

* took it already and will acknowledge it (its snapshot exists, and its input side is done or its
  barrier handler still collects the checkpoint's barriers: an unaligned snapshot whose collection
  ended some other way is never acknowledged), or has moved past it (it declined it, or took a newer
  one first: whether that is a bug is for other checks);
* has a direct trigger of ``cp`` queued, or its barrier handler is collecting ``cp``;
* has an input channel that has not ended on which a barrier of ``cp`` is queued (received, priority
  or in the sender's output), or whose producer took ``cp`` (the producer's barrier or its end of
  partition, which then stands in for the barrier, is still to be consumed), or whose producer has
  a way to take ``cp`` (transitively).

A task that has none of these (a source without its trigger; a task whose channels have all ended
with no trigger queued) will never snapshot ``cp``, which can then never complete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cutcheck.model.errors import InvariantViolation
from cutcheck.reference.runtime.network import Barrier

if TYPE_CHECKING:
    from collections.abc import Iterable

    from cutcheck.model.execution import SubtaskId
    from cutcheck.reference.runtime.network import InputChannel
    from cutcheck.reference.runtime.tasks import Task


def _barrier_of(cp: int, items: Iterable[object]) -> bool:
    return any(isinstance(x, Barrier) and x.cp == cp for x in items)


class _Ways:
    """Whether each task has a way to take one checkpoint, decided once per task."""

    def __init__(self, cp: int):
        self.cp = cp
        self.known: dict[SubtaskId, bool] = {}

    def of(self, t: Task) -> bool:
        known = self.known.get(t.sid)
        if known is None:
            self.known[t.sid] = True  # a cycle (none in a job graph) would count as a way: never a false finding
            known = self.known[t.sid] = self._decide(t)
        return known

    def _decide(self, t: Task) -> bool:
        cp = self.cp
        snap = t.snapshots.get(cp)
        if snap is not None:
            return snap.input_done or cp in t.handler.collecting()
        if t.last_cp >= cp:
            return True
        if any(b.cp == cp for b in t.direct_triggers) or cp in t.handler.collecting():
            return True
        return any(self._channel_may_deliver(ch) for ch in t.channels if not ch.ended)

    def _channel_may_deliver(self, ch: InputChannel) -> bool:
        cp = self.cp
        if _barrier_of(cp, ch.priority) or _barrier_of(cp, ch.queue):
            return True
        sp = ch.sender
        if sp is None:
            return True  # nothing known of the producer: not judged
        if _barrier_of(cp, sp.queue):
            return True
        producer: Task = sp.task
        return cp in producer.snapshots or producer.last_cp >= cp or self.of(producer)


def orphaned_by(tasks: Iterable[Task], cp: int) -> list[SubtaskId]:
    """The tasks that have no way left to take checkpoint ``cp`` (conservative: see the module)."""
    ways = _Ways(cp)
    return [t.sid for t in tasks if not ways.of(t)]


def check_not_orphaned(tasks: Iterable[Task], cp: int, kind: str, when: str) -> None:
    """TRIGGER: raised when checkpoint ``cp``, expiring or pending as the run stops (``when`` says which,
    in words), had tasks that could never have taken it."""
    orphans = orphaned_by(tasks, cp)
    if orphans:
        shown = ", ".join(str(s) for s in orphans[:4]) + (f" and {len(orphans) - 4} more" if len(orphans) > 4 else "")
        raise InvariantViolation("TRIGGER", f"{kind} {cp} {when} with no way to complete: {shown} can no longer "
                                            f"take or acknowledge it (no trigger and no barrier of it on its way, or "
                                            f"a snapshot of it whose input side will never finish)")
