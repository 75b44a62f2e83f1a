"""Random job graphs, valid by construction, shaped by a swarm mask (reference.fuzzing.swarm).

Validity is built in, not filtered for: a vertex's inputs come only from earlier vertices (no cycle);
forward is drawn only between equal parallelisms; keyed_count inputs are hash; a single-gate vertex
(map, filter, union, sink) draws all its inputs from one subtask-mapper family so that its gate is
consistent (facts §2.2); broadcast_state has a data input on gate 0 and a broadcast input on gate 1;
co_map, keyed_count and broadcast_state get one gate per input. Every vertex that is not a sink
feeds something, so every record can reach a sink.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from cutcheck.reference.fuzzing.swarm import DEFAULT_MAX_PARALLELISM, Draw, Feature, chance, choice, draw_mask

# Partitioners grouped by the downstream SubtaskStateMapper they imply; one gate may only mix
# partitioners of one family. "forward" is allowed only between equal parallelisms.
SINGLE_GATE_FAMILIES = (("forward", "rescale", "broadcast"), ("rebalance", "shuffle"), ("global",), ("custom",))
ANY_INPUT = ("rebalance", "forward", "hash", "shuffle", "rescale", "global", "custom", "broadcast")
MIDDLE_KINDS = ("map", "keyed_count", "filter", "union", "co_map", "broadcast_state")
# Partitioners whose in-flight data Flink cannot map to a new parallelism (SubtaskStateMapper
# UNSUPPORTED for pointwise and broadcast edges; custom: facts §2.4, §3.7).
UNMAPPABLE = ("forward", "rescale", "broadcast", "custom")

_KIND_FEATURE = {"keyed_count": Feature.KEYED_COUNT, "filter": Feature.FILTER, "union": Feature.UNION,
                 "co_map": Feature.CO_MAP, "broadcast_state": Feature.BROADCAST_STATE}
_PARTITIONER_FEATURE = {"forward": Feature.FORWARD, "rescale": Feature.RESCALE_EDGE, "broadcast": Feature.BROADCAST,
                        "global": Feature.GLOBAL, "custom": Feature.CUSTOM, "shuffle": Feature.SHUFFLE}
_INPUTS = {"map": (1, 2), "filter": (1, 2), "keyed_count": (1, 2), "union": (1, 3), "co_map": (2, 3),
           "broadcast_state": (2, 2)}


def graph_dict(d: Draw, *, max_parallelism: int = 4, max_middle: int = 3, max_records: int = 200,
               blocking: bool = False, mask: Collection[Feature] | None = None, keyed: bool = False,
               side_pipeline: bool = False, show: Collection[Feature] = (), max_keys: int = 16,
               min_splits: int = 1) -> dict[str, Any]:
    """A valid job graph as a JSON-ready dict, using the graph features of ``mask`` (drawn from ``d``
    when None, then without at-least-once sinks, which only a caller asking for them gets).
    ``blocking=False`` keeps every exchange pipelined whatever the mask says; ``keyed`` makes the first
    vertex after the sources a keyed one (when KEYED_COUNT is in the mask). ``side_pipeline`` adds a
    source that feeds only its own sink: a second pipelined region beside the job, which a failure
    can restart while the rest keeps running (a region failover aborts every pending checkpoint,
    facts §9). ``show``: graph features of the mask the graph must exhibit (a guided campaign forcing a
    feature pair, ``guided.force``): a vertex of each such kind, an edge of each such partitioner, a
    multi-edge; where the mask alone makes one show in a third to two thirds of the graphs. ``max_keys``:
    the most keys a source draws (few keys: a key's records recur within each split); ``min_splits``: the
    fewest splits it draws (up to 4)."""
    if mask is None:
        mask = draw_mask(d, off=(Feature.AT_LEAST_ONCE_SINK,))
    builder = _GraphBuilder(d, mask, max_parallelism, max_records, blocking and Feature.BLOCKING in mask,
                            set(show) & set(mask), max_keys, min_splits)
    return builder.build(max_middle, keyed=keyed and Feature.KEYED_COUNT in mask, side=side_pipeline)


class _GraphBuilder:
    __slots__ = ("d", "mask", "max_p", "max_records", "blocking", "vertices", "edges", "par", "kind_of", "side", "show",
                 "max_keys", "min_splits")

    def __init__(self, d: Draw, mask: Collection[Feature], max_p: int, max_records: int, blocking: bool,
                 show: set[Feature] | None = None, max_keys: int = 16, min_splits: int = 1):
        self.d, self.mask, self.max_p, self.max_records, self.blocking = d, mask, max_p, max_records, blocking
        self.max_keys, self.min_splits = max_keys, min_splits
        self.show = show or set()  # graph features still to exhibit (``graph_dict``); each leaves once shown
        self.vertices: list[dict[str, Any]] = []
        self.edges: list[dict[str, Any]] = []
        self.par: dict[str, int] = {}
        self.kind_of: dict[str, str] = {}
        self.side = ""  # the side pipeline's source, which nothing but its own sink reads

    def build(self, max_middle: int, keyed: bool = False, side: bool = False) -> dict[str, Any]:
        d = self.d
        # One of two sources without records (a lone empty source would leave the job nothing to do),
        # so EMPTY_SOURCE makes two sources.
        shown_kinds = [k for k, f in _KIND_FEATURE.items() if f in self.show]
        # A kind of two inputs to show needs two producers before it (unless multi-edges join one pair twice).
        two = Feature.MULTI_EDGE not in self.mask and any(_INPUTS[k][0] > 1 for k in shown_kinds)
        n_sources = max(d.integer(1, 2), 2 if Feature.EMPTY_SOURCE in self.mask or two else 1)
        empty = d.integer(0, 1) if Feature.EMPTY_SOURCE in self.mask and n_sources == 2 else -1
        for i in range(n_sources):
            records = d.integer(max(1, self.max_records // 4), max(1, self.max_records))
            self.add(f"src{i}", "source", d.integer(1, self.max_p), records=0 if i == empty else records,
                     keys=d.integer(1, self.max_keys), splits=d.integer(self.min_splits, 4), seed=d.integer(0, 99))
        if side:
            # Listed with the sources, left out of every later choice of inputs; the loop below that
            # gives each unread producer a sink of its own gives it one ({id}_out). Up to four times a
            # source's records: a region that is still running while the job's checkpoints go on.
            self.side = f"src{n_sources}"
            self.add(self.side, "source", d.integer(1, self.max_p), records=d.integer(max(1, self.max_records),
                     max(1, 4 * self.max_records)), keys=d.integer(1, 16), splits=d.integer(1, 4), seed=d.integer(0, 99))
        kinds = [k for k in MIDDLE_KINDS if k == "map" or _KIND_FEATURE[k] in self.mask]
        # A vertex for each kind to show and an input edge for each partitioner to show.
        shown = len(shown_kinds) + sum(f in self.show for f in _PARTITIONER_FEATURE.values())
        for i in range(max(d.integer(0, max_middle), int(keyed) + shown)):
            # Without multi-edges a vertex needs as many producers as it has inputs.
            fits = [k for k in kinds if Feature.MULTI_EDGE in self.mask or _INPUTS[k][0] <= len(self.producers())]
            wanted = [k for k in fits if _KIND_FEATURE.get(k) in self.show]
            kind = "keyed_count" if keyed and i == 0 else wanted[0] if wanted else choice(d, fits)
            if kind in _KIND_FEATURE:
                self.show.discard(_KIND_FEATURE[kind])
            low, high = _INPUTS[kind]
            inputs = self.inputs(d.integer(low, high))
            if Feature.MULTI_EDGE in self.mask and len(inputs) < 3 and (chance(d, 2) or Feature.MULTI_EDGE in self.show):
                inputs.append(inputs[0])  # the same pair joined twice
                self.show.discard(Feature.MULTI_EDGE)
            vid = f"{kind}{i}"
            extra = {"drop_every": d.integer(1, 6)} if kind == "filter" else {}
            self.add(vid, kind, self.parallelism_near(inputs), **extra)
            self.connect(vid, kind, inputs)
        sink_inputs = self.inputs(d.integer(1, 2))
        self.add("sink", "sink", self.parallelism_near(sink_inputs), delivery=self.delivery())
        self.connect("sink", "sink", sink_inputs)
        fed = {e["from"] for e in self.edges}
        for vid in [v for v in self.par if self.kind_of[v] != "sink" and v not in fed]:
            self.add(f"{vid}_out", "sink", self.par[vid], delivery=self.delivery())
            self.connect(f"{vid}_out", "sink", [vid])
        if self.blocking and all(e["exchange"] == "pipelined" for e in self.edges):
            choice(d, self.edges)["exchange"] = "blocking"  # BLOCKING on makes a batch job
        graph: dict[str, Any] = {"name": "generated", "max_parallelism": DEFAULT_MAX_PARALLELISM,
                                 "vertices": self.vertices, "edges": self.edges}
        if Feature.MAX_PARALLELISM in self.mask:
            self.small_max_parallelism(graph)
        return graph

    def add(self, vid: str, kind: str, p: int, **extra: Any) -> None:
        self.vertices.append({"id": vid, "kind": kind, "parallelism": p, **extra})
        self.par[vid], self.kind_of[vid] = p, kind

    def producers(self) -> list[str]:
        return [v for v in self.par if self.kind_of[v] != "sink" and v != self.side]

    def inputs(self, n: int) -> list[str]:
        """``n`` producers; distinct ones unless multi-edges are on (then fewer when there are not n)."""
        if Feature.MULTI_EDGE in self.mask:
            return [choice(self.d, self.producers()) for _ in range(n)]
        out: list[str] = []
        for _ in range(n):
            left = [v for v in self.producers() if v not in out]
            if left:
                out.append(choice(self.d, left))
        return out

    def parallelism_near(self, inputs: list[str]) -> int:
        # Often the first input's, so that forward edges can occur (always while one is to show).
        same = self.d.integer(0, 1) == 0 or Feature.FORWARD in self.show
        return self.par[inputs[0]] if same else self.d.integer(1, self.max_p)

    def delivery(self) -> str:
        if Feature.AT_LEAST_ONCE_SINK in self.mask and (chance(self.d, 2) or Feature.AT_LEAST_ONCE_SINK in self.show):
            self.show.discard(Feature.AT_LEAST_ONCE_SINK)
            return "at_least_once"
        return "exactly_once"

    def exchange(self) -> str:
        return "blocking" if self.blocking and self.d.integer(0, 2) == 0 else "pipelined"

    def allowed(self, options: Sequence[str]) -> list[str]:
        return [p for p in options if p not in _PARTITIONER_FEATURE or _PARTITIONER_FEATURE[p] in self.mask]

    def options(self, options: Sequence[str], src: str, dst: str) -> list[str]:
        return [p for p in self.allowed(options) if p != "forward" or self.par[src] == self.par[dst]]

    def partitioner(self, options: Sequence[str], src: str, dst: str) -> str:
        allowed = self.options(options, src, dst)
        wanted = [p for p in allowed if _PARTITIONER_FEATURE.get(p) in self.show]
        if wanted:
            return wanted[0]
        return choice(self.d, allowed) if allowed else "rebalance"

    def edge(self, src: str, dst: str, partitioner: str, gate: int) -> None:
        if partitioner in _PARTITIONER_FEATURE:
            self.show.discard(_PARTITIONER_FEATURE[partitioner])
        self.edges.append({"from": src, "to": dst, "partitioner": partitioner, "exchange": self.exchange(), "gate": gate})

    def connect(self, vid: str, kind: str, inputs: list[str]) -> None:
        if kind == "keyed_count":
            for g, src in enumerate(inputs):
                self.edge(src, vid, "hash", g)
        elif kind == "broadcast_state":
            data = ("hash", "rebalance", "forward", "shuffle", "rescale", "global", "custom")
            self.edge(inputs[0], vid, self.partitioner(data, inputs[0], vid), 0)
            self.edge(inputs[1], vid, "broadcast", 1)
        elif kind == "co_map":
            options = [p for p in ANY_INPUT if p != "hash"]
            for g, src in enumerate(inputs):
                self.edge(src, vid, self.partitioner(options, src, vid), g)
        else:
            # A family every input can use (rebalance always can), so the gate never mixes two.
            families = [f for f in SINGLE_GATE_FAMILIES if all(self.options(f, src, vid) for src in inputs)]
            wanted = [f for f in families if any(_PARTITIONER_FEATURE.get(p) in self.show
                                                 for src in inputs for p in self.options(f, src, vid))]
            family = wanted[0] if wanted else choice(self.d, families)
            for src in inputs:
                self.edge(src, vid, self.partitioner(family, src, vid), 0)

    def small_max_parallelism(self, graph: dict[str, Any]) -> None:
        """Key groups that do not divide evenly: the job's max parallelism just above its widest
        vertex, or an odd count (7, 10, 129), and now and then one vertex with its own, equal to or
        one above its parallelism; or none, for Flink's default."""
        widest = max(self.par.values())
        options = sorted({widest, widest + 1, widest + 2, 7, 10, 129} - set(range(widest)))
        if chance(self.d, 4):
            del graph["max_parallelism"]  # Flink's default: derived from each vertex's parallelism
        else:
            graph["max_parallelism"] = choice(self.d, options)
        if chance(self.d, 2):
            v = choice(self.d, self.vertices)
            v["max_parallelism"] = v["parallelism"] + self.d.integer(0, 1)


def forward_groups(graph: dict[str, Any]) -> list[set[str]]:
    """The vertices joined by forward edges, which every rescale must move together."""
    group = {v["id"]: {v["id"]} for v in graph["vertices"]}
    for e in graph["edges"]:
        if e["partitioner"] == "forward":
            merged = group[e["from"]] | group[e["to"]]
            for vid in merged:
                group[vid] = merged
    seen: list[set[str]] = []
    for g in group.values():
        if g not in seen:
            seen.append(g)
    return seen


def rescalable(graph: dict[str, Any]) -> list[str]:
    """Vertices whose rescale Flink accepts even with channel state on their own edges: no pointwise
    or broadcast edge touches them, and no custom partitioner (facts §2.4, §3.7). Flink 1.19 may still
    refuse the restore through a neighbour (reference.recovery.rescale_refusal)."""
    fixed: set[str] = set()
    for e in graph["edges"]:
        if e["partitioner"] in UNMAPPABLE:
            fixed |= {e["from"], e["to"]}
    return [v["id"] for v in graph["vertices"] if v["id"] not in fixed]
