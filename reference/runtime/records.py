"""Records, deterministic sources, and what the committed output must hold (the oracle's expectations).

A record is a plain tuple for speed: ``(rid, key, value, split, offset, count, counter)``.
``count`` is the per-key count set by the last keyed_count it passed (0 before any), and
``counter`` the index of that keyed vertex (-1 before any).

Sources are bounded and deterministic: source vertex ``s`` with ``records`` R and ``splits`` S emits
records j = 0..R-1; record j lives in split ``split_base + j % S`` at offset ``j // S``, with rid
``rid_base + j`` (rids are dense over all sources), key ``mix(seed, j) % keys`` and value j.
Split numbers are global across sources so that a split names its source.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass

from cutcheck.model.graph import JobGraph
from cutcheck.model.kinds import VertexKind

RID, KEY, VALUE, SPLIT, OFFSET, COUNT, COUNTER = range(7)
Record = tuple[int, int, int, int, int, int, int]

_MASK64 = (1 << 64) - 1


def mix64(x: int) -> int:
    """SplitMix64 finaliser: a fixed, platform-independent integer hash (never Python's hash())."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def map_value(value: int) -> int:
    """The map operator's deterministic transformation."""
    return (value * 31 + 7) & 0x7FFFFFFF


def filter_keeps(rid: int, drop_every: int) -> bool:
    """The filter operator drops every ``drop_every``-th rid."""
    return rid % drop_every != 0


@dataclass(frozen=True, slots=True)
class SourceLayout:
    vertex: str
    rid_base: int
    split_base: int
    records: int
    splits: int
    keys: int
    seed: int

    def split_size(self, local_split: int) -> int:
        return max(0, (self.records - local_split + self.splits - 1) // self.splits)

    def record(self, local_split: int, offset: int) -> Record:
        j = offset * self.splits + local_split
        key = mix64(self.seed * 1_000_003 + j) % self.keys
        return (self.rid_base + j, key, j, self.split_base + local_split, offset, 0, -1)

    def all_records(self) -> Iterator[Record]:
        for j in range(self.records):
            yield self.record(j % self.splits, j // self.splits)


def source_layouts(graph: JobGraph) -> dict[str, SourceLayout]:
    layouts: dict[str, SourceLayout] = {}
    rid_base = split_base = 0
    for vid in graph.topological_order():
        v = graph.vertex(vid)
        if v.kind is not VertexKind.SOURCE:
            continue
        layouts[vid] = SourceLayout(vid, rid_base, split_base, v.records, v.splits, v.keys, v.seed)
        rid_base += v.records
        split_base += v.splits
    return layouts


@dataclass(frozen=True, slots=True)
class Route:
    """One path from a source to a sink: how many copies it makes and which filters it passes."""

    fanout: int
    filters: tuple[int, ...]  # drop_every of each filter on the path
    counter: str | None  # last keyed_count on the path
    counter_to_sink_simple: bool  # nothing after the counter changes multiplicity or drops records
    ordered: bool  # every edge keeps per-key, per-split order (no rebalance, shuffle or rescale)


def routes(graph: JobGraph, rescaled: frozenset[str] = frozenset()) -> dict[tuple[str, str], list[Route]]:
    """All (source, sink) routes. Broadcast edges multiply by the target's parallelism.

    ``rescaled``: vertices a restore may give another parallelism. A broadcast edge into one of them
    makes as many copies as its target has subtasks *when the record crosses it*, so a route over it
    promises neither one copy of each count nor one ordered lane, even when the graph says parallelism 1.

    broadcast_state emits the elements of both of its inputs, so both paths count.
    """
    out: dict[tuple[str, str], list[Route]] = {}
    order_breaking = {"rebalance", "shuffle", "rescale"}

    def walk(vid: str, src: str, fan: int, filters: tuple[int, ...], counter: str | None, simple: bool, ordered: bool) -> None:
        v = graph.vertex(vid)
        if v.kind is VertexKind.FILTER:
            filters = (*filters, v.drop_every)
            simple = False
        if v.kind is VertexKind.KEYED_COUNT:
            counter, simple = vid, True
        if v.kind is VertexKind.SINK:
            out.setdefault((src, vid), []).append(Route(fan, filters, counter, simple, ordered))
            return
        for e in graph.out_edges(vid):
            mult = graph.vertex(e.target).parallelism if e.partitioner == "broadcast" else 1
            varies = e.partitioner == "broadcast" and e.target in rescaled
            walk(e.target, src, fan * mult, filters, counter, simple and mult == 1 and not varies,
                 ordered and e.partitioner not in order_breaking and not varies)

    for v in graph.vertices:
        if v.kind is VertexKind.SOURCE:
            walk(v.id, v.id, 1, (), None, True, True)
    return out


@dataclass(frozen=True, slots=True)
class Expectations:
    """What EXACTLY_ONCE expects of the committed output, per source."""

    layouts: dict[str, SourceLayout]
    routes: dict[tuple[str, str], list[Route]]
    # sink -> keyed vertex whose counts reach that sink unaltered over a single route, if any
    count_groups: dict[str, str]
    # sinks reached by a single, order-keeping route from every source that reaches them
    ordered_sinks: frozenset[str]

    @classmethod
    def of(cls, graph: JobGraph, rescaled: Collection[str] = ()) -> Expectations:
        """``rescaled``: the vertices the scenario's restores may rescale (see ``routes``)."""
        rts = routes(graph, frozenset(rescaled))
        count_groups: dict[str, str] = {}
        ordered: set[str] = set()
        sinks = {v.id for v in graph.vertices if v.kind is VertexKind.SINK}
        for sink in sorted(sinks):
            per_sink = [r for (s, k), rs in rts.items() if k == sink for r in rs]
            counters = {r.counter for r in per_sink}
            if per_sink and len(counters) == 1 and None not in counters and all(r.counter_to_sink_simple for r in per_sink):
                # Every route into this sink carries counts of the same keyed vertex, one copy each.
                by_source = [len(rs) for (s, k), rs in rts.items() if k == sink]
                if all(n == 1 for n in by_source):
                    counter = next(iter(counters))
                    if counter is not None:
                        count_groups[sink] = counter
            if per_sink and all(r.ordered and r.fanout == 1 for r in per_sink) and all(
                len(rs) == 1 for (s, k), rs in rts.items() if k == sink
            ):
                ordered.add(sink)
        return cls(source_layouts(graph), rts, count_groups, frozenset(ordered))

    def copies(self, source: str, rid: int) -> int:
        total = 0
        for (src, _sink), rs in self.routes.items():
            if src != source:
                continue
            for r in rs:
                if all(filter_keeps(rid, d) for d in r.filters):
                    total += r.fanout
        return total

    def source_of_rid(self, rid: int) -> str:
        for layout in self.layouts.values():
            if layout.rid_base <= rid < layout.rid_base + layout.records:
                return layout.vertex
        raise KeyError(rid)

    @property
    def total_records(self) -> int:
        return sum(layout.records for layout in self.layouts.values())


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
        counts: dict[str, int] = {vid: 1} if v.kind is VertexKind.SOURCE else {}
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
        if v.kind in (VertexKind.KEYED_COUNT, VertexKind.BROADCAST_STATE):
            out[v.id] = frozenset(e.key for e in graph.in_edges(v.id)
                                  if fifo[e.source] and all(n <= 1 for n in paths[e.source].values()))
    return out
