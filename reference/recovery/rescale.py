"""Restoring a checkpoint at other parallelisms (DESIGN "Rescaling"; facts §2.4, §2.5, §3.8).

Operator state moves the way Flink's ``StateAssignmentOperation`` moves it: keyed state by key
group (each new subtask reads exactly the key groups of its new range, from whichever old subtask
held them), operator list state (source splits with their offsets, the committer's pending
committables) through ``RoundRobinOperatorStateRepartitioner``, broadcast state as a full copy.

Channel state is redistributed per edge, never per task, with the edge's SubtaskStateMappers:
input state with the downstream mapper over the consumer's (old -> new) parallelism, output state
with the upstream mapper over the producer's, each old output buffer re-emitted into every new
subpartition its old subpartition maps to. Every (old producer, old consumer) pair is one virtual
channel whose records stay in order; recovered buffers carry the old producer as ``Buf.origin``,
so the ORDER lineage of a keyed consumer stays per virtual channel. Restores Flink refuses raise
``RestoreRefused``; whether Flink refuses is decided per vertex (``reference.recovery.rescale_refusal``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cutcheck.model.errors import RestoreRefused
from cutcheck.model.execution import SubtaskId
from cutcheck.model.keygroups import operator_index
from cutcheck.model.partitioning import (
    ambiguous_old_subtasks,
    assign_channel_state,
    invert_mapping,
    make_selector,
    subtask_state_mapper,
)
from cutcheck.reference.checks.invariants import order_checked_edges
from cutcheck.reference.core.seams import seam
from cutcheck.reference.recovery.fanout import after_restore
from cutcheck.reference.recovery.rescale_refusal import refuse_if_flink_would
from cutcheck.reference.runtime.network import Buf
from cutcheck.reference.runtime.records import KEY

if TYPE_CHECKING:
    from cutcheck.model.graph import Edge
    from cutcheck.reference.core.doors import RecoveryRun
    from cutcheck.reference.storage.memory import CompletedCheckpoint

ChannelKey = tuple[int, int, int]  # (edge, producer index, consumer index), as TaskSnapshot keys
ChannelState = tuple[list[Buf], list[Buf]]  # (recovered input, recovered output) of one new channel
VirtualChannels = dict[tuple[int, int], tuple[list[Buf], list[Buf]]]  # (old producer, old consumer) -> state

KEYED_KINDS = frozenset({"keyed_count", "broadcast_state"})
# Partitioners that spread one split's records over several consumer subtasks; merging the
# in-flight data of several old consumers into one new subtask interleaves those records.
SPREADING = frozenset({"rebalance", "shuffle"})


# ------------------------------------------------------------------------------------ operator state
def split_distribute(entries: list[Any], parallelism: int) -> list[list[Any]]:
    """Flink's ``RoundRobinOperatorStateRepartitioner`` for SPLIT_DISTRIBUTE list state.

    All old subtasks' entries, in old-subtask order, are cut into ``parallelism`` contiguous runs:
    every new subtask gets ``len // parallelism`` entries and the first ``len % parallelism`` one
    more (``repartitionSplitState`` with one named state, whose round-robin start is subtask 0).
    """
    base, extra = divmod(len(entries), parallelism)
    runs, at = [], 0
    for i in range(parallelism):
        n = base + (1 if i < extra else 0)
        runs.append(entries[at:at + n])
        at += n
    return runs


def _keyed_states(olds: list[dict[str, Any]], max_parallelism: int, new_p: int) -> list[dict[str, Any]]:
    news: list[dict[str, Any]] = [{"counts": {}, "order": {}} for _ in range(new_p)]
    for state in olds:
        for part in ("counts", "order"):
            for kg, entries in state.get(part, {}).items():
                # operator_index(kg) == i exactly when kg lies in new subtask i's key-group range.
                news[operator_index(kg, max_parallelism, new_p)][part][kg] = dict(entries)
    if any("broadcast" in s for s in olds):
        for i, state in enumerate(news):
            # Flink (repartitionBroadcastState): new subtask i reads old subtask i % oldP's copy.
            # Broadcast inputs are always aligned (facts §3.7), so every old copy is the same.
            state["broadcast"] = list(olds[i % len(olds)].get("broadcast", ()))
    return news


def _sink_states(olds: list[dict[str, Any]], new_p: int, rules: Any) -> list[dict[str, Any]]:
    # Committer state is list state: the pending committables of the restored checkpoint all belong
    # to completed checkpoints <= its id, and each new subtask commits its share on restore
    # (SinkOperator.recover_and_commit), idempotently, so nothing is lost or committed twice.
    pending = rules[committables_to_redistribute]([s.get("pending", []) for s in olds], new_p)
    # Transaction names hold the subtask and the attempt, so they stay unique at any parallelism;
    # carrying the largest counter keeps it from going backwards.
    next_txn = max((s.get("next_txn", 0) for s in olds), default=0)
    return [{"pending": sorted(run, key=lambda e: e[0]), "next_txn": next_txn} for run in pending]


@seam
def committables_to_redistribute(per_old_subtask: list[list[Any]], new_p: int) -> list[list[list[Any]]]:
    """The committer's pending committables are list state: every old subtask's, in old-subtask
    order, are split round-robin over the new subtasks (facts §3), so none is left behind."""
    return split_distribute([list(e) for pending in per_old_subtask for e in pending], new_p)


def assign_operator_state(engine: RecoveryRun, done: CompletedCheckpoint) -> dict[SubtaskId, dict[str, Any]]:
    """Every new subtask's operator state, from the old subtasks' snapshots in ``done``."""
    graph = engine.graph
    states: dict[SubtaskId, dict[str, Any]] = {}
    for v in graph.vertices:
        old_p, new_p = done.parallelism[v.id], engine.parallelism[v.id]
        olds = [done.tasks[SubtaskId(v.id, i)].operator for i in range(old_p)]
        if old_p == new_p:
            news = olds
        elif v.kind in KEYED_KINDS:
            news = _keyed_states(olds, graph.max_parallelism(v.id), new_p)
        elif v.kind == "source":
            entries = [tuple(e) for s in olds for e in s.get("splits", [])]
            news = [{"splits": run} for run in split_distribute(entries, new_p)]
        elif v.kind == "sink":
            news = _sink_states(olds, new_p, engine.rules)
        else:
            news = [{} for _ in range(new_p)]  # map, filter, union, co_map hold no state of their own
        for i, state in enumerate(news):
            states[SubtaskId(v.id, i)] = state
    return states


# ------------------------------------------------------------------------------------- channel state
@dataclass(slots=True)
class EdgeReport:
    """What the restore did with one edge's in-flight records."""

    edge: str
    partitioner: str
    producer: tuple[int, int]  # (old, new) parallelism
    consumer: tuple[int, int]
    mapper: str = "1:1"
    ambiguous: tuple[int, ...] = ()
    input_records: int = 0
    output_records: int = 0
    filtered: int = 0
    moves: Counter[tuple[int, int, int, int]] = field(default_factory=Counter)

    def to_json(self) -> dict[str, Any]:
        return {
            "edge": self.edge, "partitioner": self.partitioner, "mapper": self.mapper,
            "producer_parallelism": list(self.producer), "consumer_parallelism": list(self.consumer),
            "ambiguous_old_subtasks": list(self.ambiguous),
            "input_records": self.input_records, "output_records": self.output_records, "filtered": self.filtered,
            "moves": [f"old {u}→{c} ⇒ new {nu}→{d}: {n}" for (u, c, nu, d), n in sorted(self.moves.items())],
        }


def _virtual_channels(done: CompletedCheckpoint, graph: Any, rules: Any) -> dict[int, VirtualChannels]:
    """Per edge, the in-flight buffers of each old channel: input state, then output state."""
    per_edge: dict[int, VirtualChannels] = {}
    for snap in done.tasks.values():
        for side, states in ((0, snap.input_state), (1, snap.output_state)):
            for (edge, u, c), bufs in states.items():
                if bufs:
                    edge = rules[channel_state_edge](edge, graph)
                    per_edge.setdefault(edge, {}).setdefault((u, c), ([], []))[side].extend(bufs)
    return per_edge


def _records(bufs: list[Buf]) -> int:
    return sum(len(b.recs) for b in bufs)


def _refuse_if_flink_would(edge: Edge, report: EdgeReport, cp: int) -> None:
    """The per-edge refusal left once :func:`reference.recovery.rescale_refusal.refuse_if_flink_would` has
    passed: a custom edge holding in-flight data (pointwise and broadcast edges refuse per vertex)."""
    held = report.input_records + report.output_records
    if edge.partitioner == "custom":
        raise RestoreRefused(
            f"restore refused as Flink refuses it: checkpoint {cp} holds {held} in-flight records on "
            f"{edge.describe()}, a custom edge, and the restore changes parallelism ({edge.source} "
            f"{report.producer[0]} -> {report.producer[1]}, {edge.target} {report.consumer[0]} -> {report.consumer[1]}), "
            "but a custom partitioner admits no unaligned checkpoints (Flink 1.19 refuses them unless forced, "
            "later versions disable them on the edge); rescale from an aligned checkpoint or savepoint instead."
        )


def _refill(bufs: list[Buf], origin: int, keep: Callable[[tuple], bool] | None) -> tuple[list[Buf], int, int]:
    """Copies of ``bufs`` for one new channel: (buffers, records kept, records dropped by the filter).

    Each keeps its virtual channel as ``origin`` (recovered data of an earlier restore already
    names its own). Sequence numbers are handed out again by ``install_channel_state``.
    """
    out: list[Buf] = []
    kept = dropped = 0
    for b in bufs:
        recs = b.recs if keep is None else [r for r in b.recs if keep(r)]
        dropped += len(b.recs) - len(recs)
        if recs:
            out.append(Buf(list(recs), 0, b.origin if b.origin >= 0 else origin))
            kept += len(recs)
    return out, kept, dropped


def _owned_by(selector: Any, d: int) -> Callable[[tuple], bool]:
    select = selector.select
    return lambda rec: select(rec[KEY]) == d


def _redistribute_edge(engine: RecoveryRun, done: CompletedCheckpoint, edge: Edge, vchannels: VirtualChannels,
                       report: EdgeReport, out: dict[ChannelKey, ChannelState]) -> bool:
    """Place one edge's virtual channels on the new channels; True when a new subtask of a
    spreading edge received in-flight data of another old subtask (per-split order merges)."""
    (uo, un), (co, cn) = report.producer, report.consumer
    if (uo, co) == (un, cn):
        for (u, c), (inp, outp) in sorted(vchannels.items()):
            state = out.setdefault((edge.key, u, c), ([], []))
            state[0].extend(inp)
            state[1].extend(outp)
        return False
    _refuse_if_flink_would(edge, report, done.cp)
    up = subtask_state_mapper(edge.partitioner, "upstream")
    down = subtask_state_mapper(edge.partitioner, "downstream")
    new_producers = invert_mapping(assign_channel_state(up, uo, un), uo)
    new_consumers = invert_mapping(assign_channel_state(down, co, cn), co)
    ambiguous = frozenset(ambiguous_old_subtasks(down, co, cn))
    report.mapper = f"{down.name} / {up.name}"
    report.ambiguous = tuple(sorted(ambiguous))
    # Flink filters while deserializing at the receiver (RecordFilter over the re-created
    # partitioner); we filter here, at assignment, which is equivalent because the filter is a pure
    # function of the record's key and the new parallelism, and it keeps the renumbered channel
    # sequences (and so the CUT checks of later checkpoints) free of records nobody processes.
    selector = None
    if engine.rules[filters_ambiguous_channel_state](ambiguous):
        channels = engine.rules[record_filter_channels](co, cn)
        selector = make_selector(edge.partitioner, channels, max_parallelism=engine.graph.max_parallelism(edge.target))
    merged = False
    for (u, c), (inp, outp) in sorted(vchannels.items()):
        if len(new_producers[u]) != 1:
            raise AssertionError(f"{edge.describe()}: old producer {u} maps to {new_producers[u]}, not one new producer")
        nu = new_producers[u][0]
        targets = new_consumers[c]
        if not targets:
            report.filtered += _records(inp) + _records(outp)  # no new subtask reads it (Flink's RANGE at odd maxP)
        for d in targets:
            keep = _owned_by(selector, d) if selector is not None and c in ambiguous else None
            new_in, kept_in, dropped_in = _refill(inp, u, keep)
            new_out, kept_out, dropped_out = _refill(outp, u, keep)
            report.filtered += dropped_in + dropped_out
            if kept_in + kept_out:
                report.moves[(u, c, nu, d)] += kept_in + kept_out
                merged |= edge.partitioner in SPREADING and c != d
            state = out.setdefault((edge.key, nu, d), ([], []))
            state[0].extend(new_in)
            state[1].extend(new_out)
    return merged


@seam
def channel_state_edge(edge: int, graph: Any) -> int:
    """In-flight buffers are filed under the edge (intermediate data set) they travelled on, even when
    two edges join the same pair of vertices (facts §3)."""
    return edge


@seam
def record_filter_channels(old_consumers: int, new_consumers: int) -> int:
    """The record filter of ambiguous virtual channels re-creates the partitioner over the NEW number
    of consumer channels: a record is kept where the new partitioner sends it (facts §3)."""
    return new_consumers


@seam
def filters_ambiguous_channel_state(ambiguous: frozenset[int]) -> bool:
    """Channel state whose records may now belong to another subtask (that of the ``ambiguous`` old
    subtasks) is filtered by the new partitioner on rescale (Flink's virtual channels and record
    filter, facts §2.5); an edge without such old subtasks needs no filter."""
    return bool(ambiguous)


@seam
def channel_state_to_assign(edge: Any, vchannels: dict[Any, ChannelState], stateless: set[str]) -> dict[Any, ChannelState]:
    """Every vertex's channel state is reassigned on rescale, stateless vertices' too (facts §2.4)."""
    return vchannels


def assign_channel_states(engine: RecoveryRun, done: CompletedCheckpoint
                          ) -> tuple[dict[ChannelKey, ChannelState], dict[int, EdgeReport], set[str]]:
    """New channel -> (recovered input, recovered output); per-edge reports; vertices whose
    per-split order merged (see :func:`_lose_order_after_merge`)."""
    graph = engine.graph
    old, new = done.parallelism, engine.parallelism
    engine.rules[refuse_if_flink_would](graph, done, new)  # per vertex, as Flink: before any edge is touched
    stateless = {v.id for v in graph.vertices
                 if all(not done.tasks[SubtaskId(v.id, i)].operator for i in range(old[v.id]))}
    per_edge = _virtual_channels(done, graph, engine.rules)
    channel_states: dict[ChannelKey, ChannelState] = {}
    reports: dict[int, EdgeReport] = {}
    merged: set[str] = set()
    for edge in graph.edges:
        vchannels = per_edge.get(edge.key, {})
        vchannels = engine.rules[channel_state_to_assign](edge, vchannels, stateless)
        report = EdgeReport(f"#{edge.key} {edge.source} -> {edge.target}", edge.partitioner,
                            (old[edge.source], new[edge.source]), (old[edge.target], new[edge.target]))
        report.input_records = sum(_records(inp) for inp, _ in vchannels.values())
        report.output_records = sum(_records(outp) for _, outp in vchannels.values())
        changed = report.producer[0] != report.producer[1] or report.consumer[0] != report.consumer[1]
        if report.input_records + report.output_records == 0:
            if changed:
                reports[edge.key] = report
            continue
        reports[edge.key] = report
        if _redistribute_edge(engine, done, edge, vchannels, report, channel_states):
            merged.add(edge.target)
    existing = {(c.edge, c.producer.index, c.consumer.index) for c in engine.exec_graph.channels}
    stray = [k for k in channel_states if k not in existing]
    if stray:
        raise AssertionError(f"channel state assigned to channels that do not exist: {stray[:5]}")
    return channel_states, reports, merged


# ------------------------------------------------------------------------------------------- ORDER
def _lose_order_after_merge(engine: RecoveryRun, merged: set[str]) -> list[int]:
    """Stop promising ORDER downstream of a vertex whose in-flight data merged.

    On a spreading edge (rebalance, shuffle) every old consumer subtask held a slice of each split;
    when a smaller parallelism hands several old subtasks' in-flight data to one new subtask, that
    subtask replays those slices one after the other, so a keyed consumer downstream can see a
    split's offsets out of order under one producer lineage. Flink promises order per channel
    only; we keep checking every edge where the promise still holds. Returns the edges dropped.
    """
    if not merged:
        return []
    allowed = order_checked_edges(engine.graph, broken=frozenset(merged))
    dropped: list[int] = []
    for vid, edges in list(engine.order_edges.items()):
        keep = edges & allowed.get(vid, frozenset())
        dropped += sorted(edges - keep)
        engine.order_edges[vid] = keep
    for task in engine.tasks.values():
        if task.op.keyed:
            task.op.check_order_edges &= engine.order_edges.get(task.sid.vertex, frozenset())  # type: ignore[attr-defined]
    return dropped


# -------------------------------------------------------------------------------------------- entry
def rescaled_assignment(engine: RecoveryRun, done: CompletedCheckpoint
                        ) -> tuple[dict[SubtaskId, dict[str, Any]], dict[ChannelKey, ChannelState], dict[str, Any]]:
    """Operator state per new subtask, channel state per new channel, and the restore report."""

    channel_states, reports, merged = assign_channel_states(engine, done)  # refuses before anything changes
    operator_states = assign_operator_state(engine, done)
    unordered = _lose_order_after_merge(engine, merged)
    after_restore(engine, done)
    changed = {v: [done.parallelism[v], p] for v, p in engine.parallelism.items() if done.parallelism[v] != p}
    report: dict[str, Any] = {
        "checkpoint": done.cp,
        "rescaled": True,
        "parallelism": changed,
        "edges": {key: r.to_json() for key, r in sorted(reports.items())},
    }
    if unordered:
        report["order_unchecked_edges"] = unordered
    return operator_states, channel_states, report
