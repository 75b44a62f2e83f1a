"""Which rescaled restores Flink refuses: per vertex, not per edge (facts §3, "Refusal per vertex").

Flink 1.19's ``StateAssignmentOperation`` redistributes channel state one vertex at a time and,
once a vertex's gates (or partitions) need redistributing at all, computes the subtask mapping of
*every* gate (or partition) of that vertex. The mapper of a pointwise or broadcast edge
(UNSUPPORTED) throws whenever it is asked, even for an edge that holds no in-flight data and even
at an unchanged parallelism, so one such edge refuses the restore of the whole job. Two passes ask:

1. repartitioning (``reDistributeInputChannelStates`` / ``reDistributeResultSubpartitionStates``),
   for a vertex whose parallelism changes: its inputs when it holds input state on any gate or any
   of its producers holds output state on any partition (``hasInputState``,
   ``hasUpstreamOutputStates``); its outputs when it holds output state or any of its consumers
   holds input state (``hasOutputState``, ``hasDownstreamInputStates``).
2. rescaling descriptors (``TaskStateAssignment.getSubtaskState``), for every vertex that gets a
   restore (state of its own, or channel state next to it): its inputs when a producer's outputs
   were remapped in pass 1, its outputs when a consumer's inputs were.

Pass 2 also caches the mappings it computes, so a vertex it reaches can in turn trigger its
neighbours' descriptors, in the iteration order of a hash map; that order-dependent spread is not
modelled (see the README's departures). FLINK-38267 (fixed after 1.19) makes both passes skip
exchanges without in-flight data, which is the per-edge rule this module replaced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cutcheck.model.errors import RestoreRefused
from cutcheck.model.partitioning import UNSUPPORTED, subtask_state_mapper
from cutcheck.reference.core.refusal_rule import RefusalRule, current_rule, refusal_rule
from cutcheck.reference.core.seams import seam

__all__ = ["ChannelStateMap", "RefusalRule", "current_rule", "refusal_rule", "refuse_if_flink_would", "remapped_sides"]

if TYPE_CHECKING:
    from cutcheck.model.graph import Edge, JobGraph
    from cutcheck.reference.storage.memory import CompletedCheckpoint


@dataclass(frozen=True, slots=True)
class ChannelStateMap:
    """Which edges hold in-flight records, on which side, and which vertices hold state at all."""

    input_edges: frozenset[int]  # edges whose consumer persisted input state with records
    output_edges: frozenset[int]  # edges whose producer persisted output state with records
    stateful: frozenset[str]  # vertices with operator state or channel state in some old subtask

    @classmethod
    def of(cls, graph: JobGraph, done: CompletedCheckpoint) -> ChannelStateMap:
        inp: set[int] = set()
        out: set[int] = set()
        stateful: set[str] = set()
        for sid, snap in done.tasks.items():
            held_in = {e for (e, _, _), bufs in snap.input_state.items() if any(b.recs for b in bufs)}
            held_out = {e for (e, _, _), bufs in snap.output_state.items() if any(b.recs for b in bufs)}
            inp |= held_in
            out |= held_out
            if snap.operator or held_in or held_out:
                stateful.add(sid.vertex)
        return cls(frozenset(inp), frozenset(out), frozenset(stateful))


def _unsupported(edge: Edge) -> bool:
    return (subtask_state_mapper(edge.partitioner, "upstream") is UNSUPPORTED
            or subtask_state_mapper(edge.partitioner, "downstream") is UNSUPPORTED)


def remapped_sides(graph: JobGraph, state: ChannelStateMap, old: dict[str, int], new: dict[str, int]
                   ) -> dict[tuple[str, str], str]:
    """(vertex, "inputs" | "outputs") -> why Flink computes the mapping of every edge on that side."""
    def has_in(v: str) -> bool:
        return any(e.key in state.input_edges for e in graph.in_edges(v))

    def has_out(v: str) -> bool:
        return any(e.key in state.output_edges for e in graph.out_edges(v))

    def upstream_out(v: str) -> bool:
        return any(has_out(e.source) for e in graph.in_edges(v))

    def downstream_in(v: str) -> bool:
        return any(has_in(e.target) for e in graph.out_edges(v))

    sides: dict[tuple[str, str], str] = {}
    for v in graph.vertices:  # pass 1: repartitioning a vertex whose parallelism changes
        if old[v.id] == new[v.id]:
            continue
        change = f"'{v.id}' changes parallelism {old[v.id]} -> {new[v.id]}"
        if has_in(v.id) or upstream_out(v.id):
            sides[(v.id, "inputs")] = f"{change} with in-flight data at its inputs or at its producers' outputs"
        if has_out(v.id) or downstream_in(v.id):
            sides[(v.id, "outputs")] = f"{change} with in-flight data at its outputs or at its consumers' inputs"
    first = dict(sides)
    for v in graph.vertices:  # pass 2: descriptors of every vertex that gets a restore
        if not (v.id in state.stateful or upstream_out(v.id) or downstream_in(v.id)):
            continue
        for e in graph.in_edges(v.id):
            if (e.source, "outputs") in first:
                sides.setdefault((v.id, "inputs"), f"'{v.id}' gets a restore and its producer {first[(e.source, 'outputs')]}")
        for e in graph.out_edges(v.id):
            if (e.target, "inputs") in first:
                sides.setdefault((v.id, "outputs"), f"'{v.id}' gets a restore and its consumer {first[(e.target, 'inputs')]}")
    return sides


@seam
def refuse_if_flink_would(graph: JobGraph, done: CompletedCheckpoint, new: dict[str, int]) -> None:
    """Raise ``RestoreRefused`` where Flink 1.19 throws "Cannot rescale the given pointwise partitioner"."""
    state = ChannelStateMap.of(graph, done)
    if not (state.input_edges or state.output_edges):
        return
    if current_rule() is RefusalRule.PER_EXCHANGE:
        _refuse_per_exchange(graph, state, done, new)
        return
    order = {vid: i for i, vid in enumerate(graph.topological_order())}
    sides = remapped_sides(graph, state, done.parallelism, new)
    for (vid, side), why in sorted(sides.items(), key=lambda kv: (order[kv[0][0]], kv[0][1])):
        edges = graph.in_edges(vid) if side == "inputs" else graph.out_edges(vid)
        bad = [e for e in edges if _unsupported(e)]
        if not bad:
            continue
        e = bad[0]
        held = sorted(state.input_edges | state.output_edges)
        raise RestoreRefused(
            f"restore refused as Flink refuses it: checkpoint {done.cp} holds in-flight records on edge(s) "
            f"{', '.join(f'#{k}' for k in held)}, and {why}, so Flink 1.19 remaps every {side[:-1]} of '{vid}', "
            f"including {e.describe()}, a {e.partitioner} edge ({e.source} {done.parallelism[e.source]} -> "
            f"{new[e.source]}, {e.target} {done.parallelism[e.target]} -> {new[e.target]}) whose in-flight data "
            "it cannot rescale (UNSUPPORTED subtask mapper, whether or not that edge holds any), and refuses the "
            "whole restore; restore at the old parallelism, rescale from an aligned checkpoint or savepoint, "
            "or use rebalance."
        )


def _refuse_per_exchange(graph: JobGraph, state: ChannelStateMap, done: CompletedCheckpoint, new: dict[str, int]) -> None:
    """The documented rule: refuse only when an exchange that holds in-flight data must be remapped
    (one of its ends changes parallelism) and its mapper cannot rescale it."""
    old = done.parallelism
    for e in graph.edges:
        held = e.key in state.input_edges or e.key in state.output_edges
        moved = old[e.source] != new[e.source] or old[e.target] != new[e.target]
        if held and moved and _unsupported(e):
            raise RestoreRefused(
                f"restore refused as Flink documents it: checkpoint {done.cp} holds in-flight records on "
                f"{e.describe()}, a {e.partitioner} edge ({e.source} {old[e.source]} -> {new[e.source]}, "
                f"{e.target} {old[e.target]} -> {new[e.target]}), whose in-flight data cannot be rescaled "
                "(UNSUPPORTED subtask mapper); restore at the old parallelism or from an aligned checkpoint.")
