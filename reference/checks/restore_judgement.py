"""RESTORE_JUDGED: every restore the engine accepts Flink 1.19 accepts, and every one it refuses Flink refuses.

The engine decides in reference.recovery.rescale_refusal (per vertex side, two passes) and
reference.recovery.rescale (a custom edge with in-flight data). This module states the same
Flink rule again, per *edge and mapper*, from the model's facts alone (``model.partitioning``'s
partitioner table: which mapper each side of an edge uses, whether the edge may carry unaligned
barriers), so that a slip in either statement shows as a disagreement:

* Flink computes the subtask mapping of every input gate of a vertex when its gates are remapped
  as a whole, and of every output partition when its partitions are (facts §3, "Refusal per
  vertex"). Gates are remapped as a whole when the vertex changes parallelism and in-flight data
  sits at its inputs or on any partition of any producer; or when the vertex gets a restore at all
  (state of its own, or in-flight data on a neighbour's far side) and a producer's partitions were
  remapped. Partitions symmetrically.
* Asking an UNSUPPORTED mapper throws: the downstream mapper of an edge is asked when its
  consumer's gates are remapped, the upstream mapper when its producer's partitions are.
* In-flight data on an edge that admits no unaligned barriers in Flink 1.19 (custom, whose
  mappers are not UNSUPPORTED) cannot be rescaled either: refused when an end changes parallelism.

Cost: one pass over the restored checkpoint's channel-state keys and the graph's edges, per restore.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cutcheck.model.errors import InvariantViolation
from cutcheck.model.partitioning import UNSUPPORTED, partitioner_info
from cutcheck.reference.core.refusal_rule import RefusalRule, current_rule

if TYPE_CHECKING:
    from cutcheck.model.errors import RestoreRefused
    from cutcheck.model.graph import JobGraph
    from cutcheck.reference.core.doors import RunContext
    from cutcheck.reference.storage.memory import CompletedCheckpoint


@dataclass(frozen=True, slots=True)
class InFlight:
    """Where a checkpoint holds in-flight records: per edge, on the consumer's and the producer's side."""

    consumer_side: frozenset[int]
    producer_side: frozenset[int]
    restored_vertices: frozenset[str]  # vertices with operator state or channel state of their own

    @classmethod
    def of(cls, done: CompletedCheckpoint) -> InFlight:
        consumer: set[int] = set()
        producer: set[int] = set()
        own: set[str] = set()
        for sid, snap in done.tasks.items():
            if snap.operator:
                own.add(sid.vertex)
            for held, states in ((consumer, snap.input_state), (producer, snap.output_state)):
                for (edge, _, _), bufs in states.items():
                    if any(b.recs for b in bufs):
                        held.add(edge)
                        own.add(sid.vertex)
        return cls(frozenset(consumer), frozenset(producer), frozenset(own))


def flink_refusal(graph: JobGraph, done: CompletedCheckpoint, new: dict[str, int]) -> str | None:
    """Why Flink 1.19 refuses to restore ``done`` at parallelisms ``new``; None when it accepts."""
    old = done.parallelism
    changed = {v.id for v in graph.vertices if old[v.id] != new[v.id]}
    if not changed:
        return None  # every gate and partition restores one to one; no mapper is asked
    held = InFlight.of(done)
    if not (held.consumer_side or held.producer_side):
        return None
    edges = list(graph.edges)
    for e in edges:
        info = partitioner_info(e.partitioner)
        holds = e.key in held.consumer_side or e.key in held.producer_side
        if (holds and not info.supports_unaligned and UNSUPPORTED not in (info.upstream_mapper, info.downstream_mapper)
                and {e.source, e.target} & changed):
            return f"edge #{e.key} ({e.partitioner}) holds in-flight data Flink 1.19 cannot rescale"
    if current_rule() is RefusalRule.PER_EXCHANGE:  # the documented rule: only exchanges holding data are remapped
        for e in edges:
            info = partitioner_info(e.partitioner)
            if ((e.key in held.consumer_side or e.key in held.producer_side) and {e.source, e.target} & changed
                    and UNSUPPORTED in (info.upstream_mapper, info.downstream_mapper)):
                return f"edge #{e.key} ({e.partitioner}) holds in-flight data and has no mapping to rescale it"
        return None
    # Data next to a vertex, per side: at its gates (its inputs' consumer side, or its producers'
    # partitions) and at its partitions (its outputs' producer side, or its consumers' gates).
    data_at_gates: dict[str, bool] = {v.id: False for v in graph.vertices}
    data_at_partitions: dict[str, bool] = {v.id: False for v in graph.vertices}
    producer_holds = {v.id: False for v in graph.vertices}
    consumer_holds = {v.id: False for v in graph.vertices}
    for e in edges:
        if e.key in held.producer_side:
            producer_holds[e.source] = True
        if e.key in held.consumer_side:
            consumer_holds[e.target] = True
    for e in edges:
        data_at_gates[e.target] |= e.key in held.consumer_side or producer_holds[e.source]
        data_at_partitions[e.source] |= e.key in held.producer_side or consumer_holds[e.target]
    gates_first = {v for v in changed if data_at_gates[v]}
    partitions_first = {v for v in changed if data_at_partitions[v]}
    far_side = {e.target for e in edges if producer_holds[e.source]} | {e.source for e in edges if consumer_holds[e.target]}
    restored = held.restored_vertices | far_side
    gates_whole = gates_first | {e.target for e in edges if e.source in partitions_first and e.target in restored}
    partitions_whole = partitions_first | {e.source for e in edges if e.target in gates_first and e.source in restored}
    for e in edges:
        info = partitioner_info(e.partitioner)
        if e.target in gates_whole and info.downstream_mapper is UNSUPPORTED:
            return f"the gates of '{e.target}' are remapped, and edge #{e.key} ({e.partitioner}) has no input mapping"
        if e.source in partitions_whole and info.upstream_mapper is UNSUPPORTED:
            return f"the partitions of '{e.source}' are remapped, and edge #{e.key} ({e.partitioner}) has no output mapping"
    return None


def judge_restore(engine: RunContext, done: CompletedCheckpoint, refusal: RestoreRefused | None) -> None:
    """RESTORE_JUDGED for one restore of ``done`` at the engine's current parallelism."""
    if refusal is None and done.parallelism == engine.parallelism:
        return  # the common restore: nothing changes parallelism, Flink restores one to one
    why = flink_refusal(engine.graph, done, engine.parallelism)
    target = ", ".join(f"{v}={p}" for v, p in sorted(engine.parallelism.items()))
    if refusal is not None and why is None:
        raise InvariantViolation(
            "RESTORE_JUDGED",
            f"the engine refused to restore checkpoint {done.cp} at parallelism {target} ({refusal}), "
            f"but Flink 1.19 accepts that restore",
        )
    if refusal is None and why is not None:
        raise InvariantViolation(
            "RESTORE_JUDGED",
            f"the engine restored checkpoint {done.cp} at parallelism {target}, but Flink 1.19 refuses it: {why}",
        )
