"""Alignment stalls: a job whose data flow waits on itself through a barrier alignment.

A task that aligns a checkpoint blocks each input channel whose barrier came and waits for the
barriers of the others. In a job with unaligned checkpoints, a node with a pointwise input aligns all
its inputs (FORCED_ALIGNED barriers, facts §3.7), while an unaligned node upstream of it forwards its
barrier at the first one it meets (its snapshot, facts §4.5). When the aligning node ``c`` blocks the
channel of such an unaligned node ``b`` and waits for the barrier of a node ``a`` that feeds ``b`` too,
``b``'s output towards ``c`` fills, ``b`` stops reading, ``a``'s output towards ``b`` fills, and ``a`` can
no longer process the records queued before its barrier: ``c`` waits for ``a``, ``a`` for ``b``, ``b`` for
``c``. Expiry does not break it: the coordinator's abort reaches no barrier handler (facts §4.10), and
every later barrier and cancel marker queues behind the same records.

``alignment_stall`` finds such a stall in a run's state (``Engine.tasks``): the greatest sets of
tasks whose alignment never ends and that never emit again, each member's every wait being on members
(``_stuck_sets``), and names a cycle of their waits. Its waits:

* an aligning task (a handler collecting a checkpoint, some channel blocked) waits for the producer of
  each channel whose barrier has not arrived (not blocked, not ended, nothing of the checkpoint on
  the way); any one of them sending a newer barrier or a cancel marker would end it too, so all must
  be stuck;
* a task that cannot emit (``out_blocked``) waits for the consumer of each of its queued outputs: its
  channel is blocked by an alignment, or holds all the buffers it may while its task cannot emit
  either (and so reads nothing); one queue that moves frees a buffer, so all must be stuck.

No step of the job ends such a stall: each wait needs another member to move first. The engine stops such a run (``Engine``, at a checkpoint expiry)
rather than spend its step budget on it; the judge classes it as a finding against the protocol
itself, which the engine follows as Flink does (``reference.judge``: ``ALIGNMENT_STALL``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import networkx as nx


@dataclass(frozen=True, slots=True)
class Wait:
    """One edge of the wait-for graph: ``waiter`` cannot go on until ``on`` does, for ``why``."""

    waiter: str
    on: str
    why: str


def _on_the_way(ch: Any, cp: int) -> bool:
    """Whether a barrier or cancel marker of ``cp`` (or newer) is already queued towards ``ch``: then the
    aligning task waits only for itself to reach it."""
    queues = (ch.queue, ch.priority, ch.sender.queue if ch.sender is not None else ())
    return any(getattr(x, "cp", -1) >= cp for q in queues for x in q)


def _awaited(task: Any) -> list[Any] | None:
    """The channels an aligning task still waits on (None when it does not align: no collection, or no
    channel blocked)."""
    collecting = task.handler.collecting()
    if not collecting or not any(ch.blocked for ch in task.channels):
        return None
    return [ch for ch in task.channels if not (ch.blocked or ch.ended or ch.eop_arrived or ch.sender is None)]


def _event_ahead(task: Any) -> bool:
    """Whether ``task`` has an event it handles without emitting a record: a priority barrier, a direct
    trigger, or an event at the head of a channel it reads (a barrier it forwards, a cancel marker)."""
    if task.pending_priority or task.direct_triggers:
        return True
    return any(ch.priority or (not ch.blocked and ch.queue and ch.queue[0].__class__.__name__ != "Buf")
               for ch in task.channels)


def _stuck_sets(tasks: list[Any]) -> tuple[set[int], set[int]]:
    """The tasks whose alignment never ends (``aligning``) and those that never emit again
    (``emitting``), by id: the greatest sets in which every wait of each member is on members.

    An alignment never ends when every channel it waits on has nothing of its checkpoint (or newer) on
    the way and a producer that never sends again: one whose own alignment never ends, or that never
    emits (a newer barrier or a cancel marker on any of those channels would end it as well). A task
    never emits again when it cannot emit now, has no event to handle (which needs no output space) and
    none of its queued outputs can move: each waits
    behind a channel whose receiver's alignment never ends, or for buffers of a receiver that never
    emits again either (so reads nothing). Sources are left out: a trigger may reach them at any time.
    """
    aligning = {id(t) for t in tasks if not t.is_source and _awaited(t) is not None}
    emitting = {id(t) for t in tasks if not t.is_source and t.out_blocked and not _event_ahead(t)}
    changed = True
    while changed:
        changed = False
        for t in tasks:
            if id(t) in aligning:
                cp = max(t.handler.collecting())
                awaited = _awaited(t) or []
                if not awaited or any(_on_the_way(ch, cp) or (id(ch.sender.task) not in aligning
                                                              and id(ch.sender.task) not in emitting) for ch in awaited):
                    aligning.discard(id(t))
                    changed = True
            if id(t) in emitting:
                queued = [sp for p in t.partitions for sp in p.subpartitions if sp.queue and sp.channel is not None]
                if not queued or not all(
                        id(sp.channel.task) in aligning if sp.channel.blocked
                        else (not sp.channel.gate.can_receive(sp.channel) and id(sp.channel.task) in emitting)
                        for sp in queued):
                    emitting.discard(id(t))
                    changed = True
    return aligning, emitting


def _waits(tasks: list[Any], aligning: set[int], emitting: set[int]) -> list[Wait]:
    waits: list[Wait] = []
    for t in tasks:
        name = str(t.sid)
        if id(t) in aligning:
            cp = max(t.handler.collecting())
            waits += [Wait(name, str(ch.sender.task.sid), f"aligns checkpoint {cp} and waits for its barrier on channel "
                           f"{ch.index_in_task}") for ch in _awaited(t) or []]
        if id(t) in emitting:
            for p in t.partitions:
                for sp in p.subpartitions:
                    ch = sp.channel
                    if not sp.queue or ch is None:
                        continue
                    why = ("waits behind a channel that alignment blocks" if ch.blocked
                           else "waits for buffers the receiver holds")
                    waits.append(Wait(name, str(ch.task.sid), f"cannot emit: its output to {ch.task.sid} {why}"))
    return waits


def alignment_stall(tasks: Iterable[Any]) -> list[Wait]:
    """The waits of a cycle of the stall (empty when there is none)."""
    every = list(tasks)
    aligning, emitting = _stuck_sets(every)
    if not aligning:
        return []
    graph: nx.DiGraph[str] = nx.DiGraph()
    for w in _waits(every, aligning, emitting):
        # One wait per pair of tasks, an alignment's first: it is what the cycle must hold.
        if not graph.has_edge(w.waiter, w.on) or (w.why.startswith("aligns")
                                                   and not graph.edges[w.waiter, w.on]["wait"].why.startswith("aligns")):
            graph.add_edge(w.waiter, w.on, wait=w)
    # Depth-first from each aligning task in the job's order, edges in insertion order: the same cycle in
    # every process (simple_cycles walks sets of names, whose order follows the string hash seed).
    for start in dict.fromkeys(w.waiter for w in _waits(every, aligning, set())):
        try:
            edges = nx.find_cycle(graph, source=start)
        except nx.NetworkXNoCycle:
            continue
        ring = [graph.edges[a, b]["wait"] for a, b in edges]
        if any(w.why.startswith("aligns") for w in ring):
            return ring
    return []


def describe(ring: list[Wait]) -> str:
    return "alignment stall: " + "; ".join(f"{w.waiter} {w.why} ({w.on})" for w in ring)
