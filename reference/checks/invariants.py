"""The engine's run-time checks of DESIGN's invariants that are not local to an operator.

CUT is checked for every channel of every completed checkpoint from per-channel sequence
numbers: memory is proportional to the in-flight data a checkpoint captured, never to history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cutcheck.model.errors import InvariantViolation
from cutcheck.model.graph import JobGraph
from cutcheck.model.invariants import cut_holds

if TYPE_CHECKING:
    from cutcheck.reference.engine import Engine
    from cutcheck.reference.storage.memory import CompletedCheckpoint


def _ranges(bufs: list) -> list[tuple[int, int]]:
    return [(b.seq0, b.seq0 + len(b.recs)) for b in bufs]


def check_cut_of_checkpoint(engine: Engine, done: CompletedCheckpoint) -> None:
    """CUT: d's processed prefix, then d's input state, then u's output state are u's pre-snapshot records."""
    by_sid = done.tasks
    for sid, snap in by_sid.items():
        for key, processed in snap.processed.items():
            edge, producer, _consumer = key
            up = by_sid.get(type(sid)(engine.graph.edge(edge).source, producer))
            if up is None:
                raise InvariantViolation("CUT", f"checkpoint {done.cp}: no snapshot of the producer of channel {key}")
            emitted = up.emitted.get(key)
            if emitted is None:
                raise InvariantViolation("CUT", f"checkpoint {done.cp}: producer snapshot lacks channel {key}")
            pieces = [(0, processed)] + _ranges(snap.input_state.get(key, [])) + _ranges(up.output_state.get(key, []))
            if not cut_holds_ranges(pieces, emitted):
                raise InvariantViolation(
                    "CUT",
                    f"checkpoint {done.cp}, channel {engine.graph.edge(edge).source}[{producer}] -> {sid} (edge {edge}): "
                    f"processed {processed}, input state {_ranges(snap.input_state.get(key, []))}, output state "
                    f"{_ranges(up.output_state.get(key, []))}, but the producer sent {emitted} records before its snapshot",
                )


def check_savepoint_self_contained(done: CompletedCheckpoint) -> None:
    """SAVEPOINT: a savepoint holds no in-flight data. Savepoints are always aligned (facts §3.2), because
    they must restore after changes of topology or parallelism that channel state does not survive."""
    if done.kind != "savepoint":
        return
    for sid, snap in done.tasks.items():
        inflight = [k for k, bufs in (*snap.input_state.items(), *snap.output_state.items()) if bufs]
        if inflight:
            raise InvariantViolation("SAVEPOINT", f"savepoint {done.cp}: {sid} holds in-flight data of channel(s) "
                                                  f"{', '.join(map(str, sorted(set(inflight))))}")


def cut_holds_ranges(pieces: list[tuple[int, int]], emitted: int) -> bool:
    """Sequence ranges [lo, hi) laid end to end must be exactly [0, emitted), in order.

    This is model.invariants.cut_holds on sequence numbers, stated over ranges so that the check
    costs the number of captured buffers, not the number of records.
    """
    expect = 0
    for lo, hi in pieces:
        if lo != expect:
            return False
        expect = hi
    return expect == emitted


def cut_holds_records(processed: int, input_state: list, output_state: list, emitted: int) -> bool:
    """The same check through the model's own CUT function (used by tests on small runs)."""
    seq = lambda bufs: [b.seq0 + i for b in bufs for i in range(len(b.recs))]  # noqa: E731
    return cut_holds(list(range(processed)), seq(input_state), seq(output_state), list(range(emitted)))


def order_checked_edges(graph: JobGraph, broken: frozenset[str] = frozenset()) -> dict[str, frozenset[int]]:
    """Edges into keyed vertices on which ORDER is promised.

    The promise holds on an edge when its producer receives each source's records along a single
    path (with several paths, copies of different paths interleave legitimately) and each of its
    subtasks receives a given key and split over one channel, in order (FIFO). A split reaches
    several subtasks of a vertex after a spreading exchange (rebalance, shuffle, rescale,
    broadcast); from there only forward keeps one channel per subtask, and any other exchange lets
    slices of the split arriving from different subtasks interleave. ``broken`` names vertices
    whose order a restore merged (reference.recovery.rescale); everything downstream of them loses it too.
    """
    spreading = {"rebalance", "shuffle", "rescale", "broadcast"}
    paths: dict[str, dict[str, int]] = {}
    spread: dict[str, bool] = {}  # a key and split may reach more than one subtask
    fifo: dict[str, bool] = {}  # every subtask receives each key and split over one channel, in order
    for vid in graph.topological_order():
        v = graph.vertex(vid)
        ins = graph.in_edges(vid)
        counts: dict[str, int] = {vid: 1} if v.kind == "source" else {}
        for e in ins:
            for src, n in paths[e.source].items():
                counts[src] = counts.get(src, 0) + n
        paths[vid] = counts
        spread[vid] = any(e.partitioner in spreading or (e.partitioner == "forward" and spread[e.source]) for e in ins)
        fifo[vid] = vid not in broken and all(
            fifo[e.source] and (not spread[e.source] or e.partitioner == "forward") for e in ins
        )
    out: dict[str, frozenset[int]] = {}
    for v in graph.vertices:
        if v.kind in ("keyed_count", "broadcast_state"):
            out[v.id] = frozenset(e.key for e in graph.in_edges(v.id)
                                  if fifo[e.source] and all(n <= 1 for n in paths[e.source].values()))
    return out
