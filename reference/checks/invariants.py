"""The engine's run-time checks of DESIGN's invariants that are not local to an operator.

CUT is checked for every channel of every completed checkpoint from per-channel sequence
numbers: memory is proportional to the in-flight data a checkpoint captured, never to history.
BROADCAST_STATE and ALIGNED_EDGE are checked on every completed checkpoint too
(``check_completed_checkpoint``); the storage's invariants are in reference.checks.storage_invariants,
the judgement of restores in reference.checks.restore_judgement.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Protocol

from cutcheck.model.errors import InvariantViolation
from cutcheck.model.execution import SubtaskId
from cutcheck.model.graph import JobGraph
from cutcheck.model.invariants import cut_holds
from cutcheck.model.keygroups import operator_index
from cutcheck.model.kinds import CheckpointKind, CheckpointMode, VertexKind
from cutcheck.model.partitioning import supports_unaligned
from cutcheck.reference.core.doors import RunContext
from cutcheck.reference.runtime.operators import KeyedOperator

if TYPE_CHECKING:
    from cutcheck.reference.runtime.network import Buf
    from cutcheck.reference.runtime.tasks import Task
    from cutcheck.reference.storage.memory import CheckpointStorage, CompletedCheckpoint



class CheckedRun(RunContext, Protocol):
    """The run as its checks see it (checks.run_checks): the tasks and the checkpoint storage they judge."""

    tasks: dict[SubtaskId, Task]
    storage: CheckpointStorage
    edge_unaligned: dict[int, bool]

def _ranges(bufs: list[Buf]) -> list[tuple[int, int]]:
    return [(b.seq0, b.seq0 + len(b.recs)) for b in bufs]


def check_cut_of_checkpoint(engine: RunContext, done: CompletedCheckpoint) -> None:
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


def cut_holds_records(processed: int, input_state: list[Buf], output_state: list[Buf], emitted: int) -> bool:
    """The same check through the model's own CUT function (used by tests on small runs)."""
    def seq(bufs: list[Buf]) -> list[int]:
        return [b.seq0 + i for b in bufs for i in range(len(b.recs))]

    holds: bool = cut_holds(list(range(processed)), seq(input_state), seq(output_state), list(range(emitted)))
    return holds


def check_completed_checkpoint(engine: CheckedRun, done: CompletedCheckpoint) -> None:
    """The invariants of one completed checkpoint beyond CUT: ALIGNED_EDGE, then BROADCAST_STATE
    (channel state on a broadcast edge is the cause when broadcast copies diverge: named first)."""
    check_aligned_edges(engine, done)
    check_broadcast_state(engine, done)


def check_broadcast_state(engine: CheckedRun, done: CompletedCheckpoint) -> None:
    """BROADCAST_STATE: every subtask of a broadcast_state vertex snapshots the same broadcast state.

    Flink writes broadcast state once per subtask and a restore hands each new subtask one old
    subtask's copy (``repartitionBroadcastState``, facts §3), which is only right when the copies are
    equal; the broadcast input is forced aligned (facts §4.6), which is what makes them equal. Not
    promised in ``at_least_once`` mode, where barriers do not block and a subtask may apply a
    broadcast element of the next checkpoint before its snapshot.
    """
    if engine.scenario.checkpoint.mode == CheckpointMode.AT_LEAST_ONCE:
        return
    for v in engine.graph.vertices:
        if v.kind is not VertexKind.BROADCAST_STATE:
            continue
        copies = [done.tasks[SubtaskId(v.id, i)].operator.get("broadcast", []) for i in range(done.parallelism[v.id])]
        for i, copy in enumerate(copies[1:], start=1):
            if copy != copies[0]:
                only0, only_i = Counter(copies[0]) - Counter(copy), Counter(copy) - Counter(copies[0])
                raise InvariantViolation(
                    "BROADCAST_STATE",
                    f"checkpoint {done.cp}: {v.id}[{i}] snapshots {len(copy)} broadcast elements and {v.id}[0] "
                    f"{len(copies[0])}; only in {v.id}[0]: rids {sorted(only0)[:5]}, only in {v.id}[{i}]: rids "
                    f"{sorted(only_i)[:5]}, so a restore would lose or invent broadcast state",
                )


# Job modes whose checkpoints may persist channel state (CheckpointOptions.forConfig, facts §4.2).
UNALIGNED_MODES = frozenset({"unaligned", "aligned_timeout"})


def may_hold_channel_state(graph: JobGraph, mode: str, kind: str) -> dict[int, bool]:
    """Per edge, whether a checkpoint of ``kind`` in a job of ``mode`` may persist its in-flight data.

    Restated from the model's partitioner facts, not read from the engine: only unaligned
    (and aligned-with-timeout) checkpoints persist channel state, never a savepoint (always
    aligned, facts §4.2); and an edge into a consumer with any pointwise, broadcast or custom input
    never carries unaligned barriers (facts §4.6).
    """
    if kind == CheckpointKind.SAVEPOINT or mode not in UNALIGNED_MODES:
        return {e.key: False for e in graph.edges}
    ok_target = {v.id: all(supports_unaligned(e.partitioner) for e in graph.in_edges(v.id)) for v in graph.vertices}
    return {e.key: ok_target[e.target] for e in graph.edges}


def check_aligned_edges(engine: CheckedRun, done: CompletedCheckpoint) -> None:
    """ALIGNED_EDGE: no channel state, on either side, of an edge Flink keeps aligned, nor in any
    checkpoint Flink takes aligned (every savepoint; every checkpoint of an aligned or
    at-least-once job)."""
    mode = engine.scenario.checkpoint.mode
    allowed = may_hold_channel_state(engine.graph, mode, done.kind)
    for sid, snap in done.tasks.items():
        for side, states in (("input", snap.input_state), ("output", snap.output_state)):
            for key, bufs in states.items():
                if bufs and not allowed[key[0]]:
                    edge = engine.graph.edge(key[0])
                    why = (f"edge {key[0]} ({edge.partitioner} into {edge.target}) is kept aligned"
                           if done.kind != CheckpointKind.SAVEPOINT and mode in UNALIGNED_MODES
                           else f"a {done.kind} in {mode} mode persists none")
                    raise InvariantViolation(
                        "ALIGNED_EDGE",
                        f"checkpoint {done.cp}: {sid} persisted {sum(len(b.recs) for b in bufs)} records of {side} "
                        f"state on channel {edge.source}[{key[1]}] -> {edge.target}[{key[2]}], but {why}",
                    )


def check_key_group_ranges(engine: CheckedRun) -> None:
    """OWNERSHIP, for the ranges themselves: the key-group ranges of a keyed vertex's subtasks split
    ``[0, max parallelism)`` with neither gap nor overlap, and each key group's range is the subtask the
    hash partitioner routes it to (``computeOperatorIndexForKeyGroup``). Checked whenever tasks are
    built; a range too wide would let a subtask take state it never gets records for."""
    seen: dict[str, dict[int, int]] = {}
    for task in engine.tasks.values():
        op = task.op
        if not isinstance(op, KeyedOperator):
            continue
        owners = seen.setdefault(task.sid.vertex, {})
        for kg in op.range:
            if kg in owners:
                raise InvariantViolation("OWNERSHIP", f"key group {kg} of {task.sid.vertex} is in the ranges of "
                                                      f"subtasks {owners[kg]} and {task.sid.index}")
            owners[kg] = task.sid.index
    for vertex, owners in seen.items():
        sample = next(t for t in engine.tasks.values() if t.sid.vertex == vertex)
        max_p, p = sample.max_parallelism, sample.parallelism  # a task's is its operator's
        for kg in range(max_p):
            routed = operator_index(kg, max_p, p)
            if owners.get(kg) != routed:
                raise InvariantViolation("OWNERSHIP", f"key group {kg} of {vertex} is routed to subtask {routed} "
                                                      f"but lies in the range of {owners.get(kg, 'no subtask')}")
