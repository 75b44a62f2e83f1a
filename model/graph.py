"""Job graphs: a NetworkX multigraph of vertices and edges, loaded from and saved to JSON.

Two edges between the same pair of vertices are legal and distinct: the multigraph keys edges by
their position in the JSON ``edges`` list, and that key is the edge's identity everywhere
(channel state, execution graph, logs).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from cutcheck.model.errors import GraphError
from cutcheck.model.jsontext import read_json
from cutcheck.model.kinds import Delivery, Exchange, Partitioner, VertexKind, values
from cutcheck.model.sections import Section

UPPER_BOUND_MAX_PARALLELISM = 1 << 15
# The most vertices and edges a job graph may have, counted in the JSON before anything is built: a
# 10^6-vertex graph took minutes and 2 GB before it was refused or run. Measured (2 cores): a chain of
# 10 000 vertices takes `graph validate` 10 s, and the engine's per-route walk recurses once per vertex
# of a route, which Python's recursion limit stops near 1 000; Flink jobs have tens of job vertices.
MAX_VERTICES = 500
MAX_EDGES = 5_000

VERTEX_KINDS = values(VertexKind)
PARTITIONERS = values(Partitioner)
EXCHANGES = values(Exchange)
DELIVERIES = values(Delivery)
KEYED_KINDS = frozenset({"keyed_count", "broadcast_state"})
# Kinds whose inputs each sit on a gate of their own; the others read every input through gate 0.
ONE_GATE_PER_INPUT = frozenset({"co_map", "keyed_count", "broadcast_state"})

# The JSON objects of a job-graph file; the values are checked where they are parsed (_int_field).
_GRAPH = Section.names("", ("name", "max_parallelism", "vertices", "edges"), error=GraphError,
                       shape="a JSON object with 'vertices' and 'edges'")
_COMMON_VERTEX_FIELDS = ("id", "kind", "parallelism", "max_parallelism")
_VERTEX = Section.names("", _COMMON_VERTEX_FIELDS, error=GraphError, optional=False)
_VERTEX_OF_KIND = {
    kind: Section.names("", (*_COMMON_VERTEX_FIELDS, *extra), error=GraphError, optional=False)
    for kind, extra in (("source", ("records", "keys", "splits", "seed")), ("filter", ("drop_every",)),
                        ("sink", ("delivery",)))
}
_EDGE = Section.names("", ("from", "to", "partitioner", "exchange", "gate"), error=GraphError, optional=False)


@dataclass(frozen=True, slots=True)
class Vertex:
    id: str
    kind: VertexKind
    parallelism: int
    max_parallelism: int | None = None  # as written; see JobGraph.max_parallelism for the effective value
    records: int = 0
    keys: int = 1
    splits: int = 1
    seed: int = 0
    drop_every: int = 5
    delivery: Delivery = Delivery.EXACTLY_ONCE


@dataclass(frozen=True, slots=True)
class Edge:
    key: int  # position in the JSON edges list: the edge's identity
    source: str
    target: str
    partitioner: Partitioner
    exchange: Exchange
    gate: int

    def describe(self) -> str:
        return f"edge #{self.key} ({self.source} -> {self.target})"


def _int_field(obj: Mapping[str, Any], field: str, where: str, default: int | None = None) -> int | None:
    value = obj.get(field, default)
    if value is None:
        if field in obj and default is not None:
            raise GraphError(f"{where}: field '{field}' must be an integer, got null; leave it out for {default}.")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise GraphError(f"{where}: field '{field}' must be an integer, got {value!r}.")
    return value


def check_size(vertices: int, edges: int, where: str) -> None:
    """Refuse, before anything is built, a graph with more vertices or edges than cutcheck handles."""
    for count, limit, name in ((vertices, MAX_VERTICES, "vertices"), (edges, MAX_EDGES, "edges")):
        if count > limit:
            raise GraphError(f"{where}: the graph has {count} {name}, above the {limit} cutcheck handles "
                             f"(model.graph.MAX_{name.upper()}); split the job or merge chained operators.")


def _vertex_named(vid: object, end: str, kinds: Mapping[str, VertexKind], where: str) -> str:
    """An edge's ``from``/``to`` end, which must name a declared vertex."""
    if not isinstance(vid, str) or vid not in kinds:
        raise GraphError(f"{where}: '{end}' names no vertex ({vid!r}); declare it under 'vertices'.")
    return vid


class JobGraph:
    """A validated job graph. Build it with :meth:`from_json`; it never holds an invalid graph."""

    def __init__(self, name: str, vertices: list[Vertex], edges: list[Edge], max_parallelism: int | None = None):
        self.name = name
        self.job_max_parallelism = max_parallelism
        self.graph: nx.MultiDiGraph[str] = nx.MultiDiGraph(name=name)
        for v in vertices:
            self.graph.add_node(v.id, vertex=v)
        for e in edges:
            self.graph.add_edge(e.source, e.target, key=e.key, edge=e)
        self._vertices = {v.id: v for v in vertices}
        self._edges = list(edges)
        self._validate()

    # ----------------------------------------------------------------- loading and saving
    @classmethod
    def from_json(cls, path_or_dict: str | Path | Mapping[str, Any]) -> JobGraph:
        if isinstance(path_or_dict, Mapping):
            data, where = dict(path_or_dict), "job graph"
        else:
            path = Path(path_or_dict)
            where = str(path)
            data = read_json(path, GraphError, "job-graph file")
        _GRAPH.read(data, where)
        job_max = _int_field(data, "max_parallelism", where)
        raw_vertices = data.get("vertices")
        raw_edges = data.get("edges", [])
        if not isinstance(raw_vertices, list) or not raw_vertices:
            raise GraphError(f"{where}: 'vertices' must be a non-empty list.")
        if not isinstance(raw_edges, list):
            raise GraphError(f"{where}: 'edges' must be a list.")
        check_size(len(raw_vertices), len(raw_edges), where)
        vertices = [cls._parse_vertex(i, raw) for i, raw in enumerate(raw_vertices)]
        seen: set[str] = set()
        for v in vertices:
            if v.id in seen:
                raise GraphError(f"vertex '{v.id}': duplicate vertex id; ids must be unique.")
            seen.add(v.id)
        kinds = {v.id: v.kind for v in vertices}
        edges = cls._parse_edges(raw_edges, kinds, {v.id: v.parallelism for v in vertices})
        return cls(str(data.get("name", Path(where).stem if where != "job graph" else "job")), vertices, edges, job_max)

    @staticmethod
    def _parse_vertex(position: int, raw: Any) -> Vertex:
        if not isinstance(raw, dict):
            raise GraphError(f"vertex #{position}: must be {_VERTEX.shape}.")
        vid = raw.get("id")
        if not isinstance(vid, str) or not vid:
            raise GraphError(f"vertex #{position}: needs a non-empty string 'id'.")
        where = f"vertex '{vid}'"
        kind = raw.get("kind")
        if kind not in VERTEX_KINDS:
            raise GraphError(f"{where}: unknown kind {kind!r}; use one of {', '.join(VERTEX_KINDS)}.")
        kind = VertexKind(kind)
        _VERTEX_OF_KIND.get(kind, _VERTEX).check_names(raw, where, qualifier=f" for kind {kind}")
        fields: dict[str, Any] = {"id": vid, "kind": kind}
        fields["parallelism"] = _int_field(raw, "parallelism", where, 1)
        fields["max_parallelism"] = _int_field(raw, "max_parallelism", where)
        if kind == "source":
            for name, default, low in (("records", None, 0), ("keys", 1, 1), ("splits", 1, 1), ("seed", 0, None)):
                value = _int_field(raw, name, where, default)
                if value is None:
                    raise GraphError(f"{where}: a source needs 'records' (how many records it emits).")
                if low is not None and value < low:
                    raise GraphError(f"{where}: '{name}' must be at least {low}, got {value}.")
                fields[name] = value
        if kind == "filter":
            fields["drop_every"] = _int_field(raw, "drop_every", where, 5)
            if fields["drop_every"] < 1:
                raise GraphError(f"{where}: 'drop_every' must be at least 1.")
        if kind == "sink":
            delivery = raw.get("delivery", "exactly_once")
            if delivery not in DELIVERIES:
                raise GraphError(f"{where}: unknown delivery {delivery!r}; use exactly_once or at_least_once.")
            fields["delivery"] = Delivery(delivery)
        return Vertex(**fields)

    @staticmethod
    def _parse_edges(raw_edges: list[Any], kinds: Mapping[str, VertexKind], parallelism: dict[str, int]) -> list[Edge]:
        edges: list[Edge] = []
        next_gate: dict[str, int] = {}
        for key, raw in enumerate(raw_edges):
            if not isinstance(raw, dict):
                raise GraphError(f"edge #{key}: must be {_EDGE.shape}.")
            where = f"edge #{key} ({raw.get('from')} -> {raw.get('to')})"
            _EDGE.check_names(raw, where)
            src, dst = (_vertex_named(raw.get(end), end, kinds, where) for end in ("from", "to"))
            default_partitioner = "forward" if parallelism[src] == parallelism[dst] else "rebalance"
            partitioner = raw.get("partitioner", default_partitioner)
            if partitioner not in PARTITIONERS:
                raise GraphError(f"{where}: unknown partitioner {partitioner!r}; use one of {', '.join(PARTITIONERS)}.")
            exchange = raw.get("exchange", "pipelined")
            if exchange not in EXCHANGES:
                raise GraphError(f"{where}: unknown exchange {exchange!r}; use pipelined or blocking.")
            if "gate" in raw:
                gate = _int_field(raw, "gate", where)
                if gate is None:
                    raise GraphError(f"{where}: field 'gate' must be an integer, got null; leave it out for the default.")
            elif kinds[dst] in ONE_GATE_PER_INPUT:
                gate = next_gate.get(dst, 0)
            else:
                gate = 0
            next_gate[dst] = max(next_gate.get(dst, 0), gate + 1)
            edges.append(Edge(key, src, dst, Partitioner(partitioner), Exchange(exchange), gate))
        return edges

    def to_json(self) -> dict[str, Any]:
        """The graph as a JSON-ready dict in DESIGN's shape, with defaults made explicit."""
        out: dict[str, Any] = {"name": self.name}
        if self.job_max_parallelism is not None:
            out["max_parallelism"] = self.job_max_parallelism
        out["vertices"] = [self._vertex_json(v) for v in self._vertices.values()]
        out["edges"] = [
            {"from": e.source, "to": e.target, "partitioner": e.partitioner, "exchange": e.exchange, "gate": e.gate}
            for e in self._edges
        ]
        return out

    @staticmethod
    def _vertex_json(v: Vertex) -> dict[str, Any]:
        d: dict[str, Any] = {"id": v.id, "kind": v.kind, "parallelism": v.parallelism}
        if v.max_parallelism is not None:
            d["max_parallelism"] = v.max_parallelism
        if v.kind == "source":
            d.update(records=v.records, keys=v.keys, splits=v.splits, seed=v.seed)
        elif v.kind == "filter":
            d["drop_every"] = v.drop_every
        elif v.kind == "sink":
            d["delivery"] = v.delivery
        return d

    def save(self, path: str | Path) -> None:
        """Write the graph as JSON atomically (write, then rename)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        tmp.replace(path)

    def with_parallelism(self, parallelism: Mapping[str, int]) -> JobGraph:
        """The same job at other parallelisms; max parallelism stays what it was (it fixes the key groups)."""
        for vid in parallelism:
            if vid not in self._vertices:
                raise GraphError(f"vertex '{vid}': no such vertex to rescale; vertices are {', '.join(self._vertices)}.")
        vertices = []
        for v in self._vertices.values():
            fields = {f: getattr(v, f) for f in Vertex.__slots__}
            fields["max_parallelism"] = self.max_parallelism(v.id)
            fields["parallelism"] = parallelism.get(v.id, v.parallelism)
            vertices.append(Vertex(**fields))
        return JobGraph(self.name, vertices, list(self._edges), self.job_max_parallelism)

    # ----------------------------------------------------------------- queries
    def vertex(self, vid: str) -> Vertex:
        return self._vertices[vid]

    @property
    def vertices(self) -> list[Vertex]:
        return list(self._vertices.values())

    @property
    def edges(self) -> list[Edge]:
        return list(self._edges)

    def edge(self, key: int) -> Edge:
        return self._edges[key]

    def in_edges(self, vid: str) -> list[Edge]:
        return [e for e in self._edges if e.target == vid]

    def out_edges(self, vid: str) -> list[Edge]:
        return [e for e in self._edges if e.source == vid]

    def topological_order(self) -> list[str]:
        # lexicographical_topological_sort keeps the order deterministic across runs.
        return list(nx.lexicographical_topological_sort(self.graph))

    def max_parallelism(self, vid: str) -> int:
        """Effective max parallelism (number of key groups): vertex, then job, then Flink's default rule."""
        from cutcheck.model.keygroups import default_max_parallelism

        v = self._vertices[vid]
        if v.max_parallelism is not None:
            return v.max_parallelism
        if self.job_max_parallelism is not None:
            return self.job_max_parallelism
        return default_max_parallelism(v.parallelism)

    def gates(self, vid: str) -> dict[int, list[Edge]]:
        gates: dict[int, list[Edge]] = {}
        for e in self.in_edges(vid):
            gates.setdefault(e.gate, []).append(e)
        return dict(sorted(gates.items()))

    def __iter__(self) -> Iterator[Vertex]:
        return iter(self._vertices.values())

    # ----------------------------------------------------------------- validation
    def _validate(self) -> None:
        from cutcheck.model.partitioning import subtask_state_mapper

        for v in self._vertices.values():
            where = f"vertex '{v.id}'"
            if v.max_parallelism is not None and not 1 <= v.max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
                raise GraphError(f"{where}: max_parallelism {v.max_parallelism} is outside 1..{UPPER_BOUND_MAX_PARALLELISM}.")
            if self.job_max_parallelism is not None and not 1 <= self.job_max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
                raise GraphError(f"job: max_parallelism {self.job_max_parallelism} is outside 1..{UPPER_BOUND_MAX_PARALLELISM}.")
            if not 1 <= v.parallelism <= UPPER_BOUND_MAX_PARALLELISM:
                raise GraphError(f"{where}: parallelism {v.parallelism} is outside 1..{UPPER_BOUND_MAX_PARALLELISM}.")
            limit = self.max_parallelism(v.id)
            if not 1 <= v.parallelism <= limit:
                raise GraphError(f"{where}: parallelism {v.parallelism} is outside 1..max_parallelism ({limit}); lower it or raise max_parallelism.")
            ins, outs = self.in_edges(v.id), self.out_edges(v.id)
            if v.kind == "source" and ins:
                raise GraphError(f"{where}: a source cannot have inputs ({ins[0].describe()}).")
            if v.kind != "source" and not ins:
                raise GraphError(f"{where}: a {v.kind} needs at least one input edge.")
            if v.kind == "sink" and outs:
                raise GraphError(f"{where}: a sink cannot have outputs ({outs[0].describe()}).")
            if v.kind == "co_map" and len(ins) < 2:
                raise GraphError(f"{where}: a co_map needs at least two inputs, one gate each.")
            self._validate_gates(v, ins, subtask_state_mapper)
        for e in self._edges:
            src, dst = self._vertices[e.source], self._vertices[e.target]
            if e.source == e.target:
                raise GraphError(f"{e.describe()}: a vertex cannot feed itself (cycle).")
            if e.partitioner == "forward" and src.parallelism != dst.parallelism:
                raise GraphError(
                    f"{e.describe()}: forward partitioning does not allow a change of parallelism "
                    f"({src.parallelism} -> {dst.parallelism}); use rebalance or rescale."
                )
            if e.partitioner == "hash" and dst.kind not in KEYED_KINDS:
                raise GraphError(f"{e.describe()}: a hash edge must lead into a keyed vertex (keyed_count, broadcast_state), not a {dst.kind}.")
            if dst.kind == "keyed_count" and e.partitioner != "hash":
                raise GraphError(f"{e.describe()}: inputs of keyed_count '{dst.id}' must be hash-partitioned, got {e.partitioner}.")
        if not nx.is_directed_acyclic_graph(self.graph):
            cycle = nx.find_cycle(self.graph)
            path = " -> ".join([str(cycle[0][0])] + [str(c[1]) for c in cycle])
            raise GraphError(f"job graph has a cycle ({path}); cutcheck models acyclic jobs only.")

    def _validate_gates(self, v: Vertex, ins: list[Edge], subtask_state_mapper: Any) -> None:
        where = f"vertex '{v.id}'"
        gates: dict[int, list[Edge]] = {}
        for e in ins:
            if e.gate < 0:
                raise GraphError(f"{e.describe()}: gate {e.gate} is negative.")
            gates.setdefault(e.gate, []).append(e)
        if ins and sorted(gates) != list(range(len(gates))):
            raise GraphError(f"{where}: input gates must be numbered 0..{len(gates) - 1} without gaps, got {sorted(gates)}.")
        if v.kind in ONE_GATE_PER_INPUT:
            for g, edges in gates.items():
                if len(edges) > 1:
                    raise GraphError(f"{edges[1].describe()}: a {v.kind} reads each input through its own gate, but gate {g} is shared.")
        elif len(gates) > 1:
            raise GraphError(f"{where}: a {v.kind} has a single input gate (0); move every input to gate 0.")
        if v.kind == "broadcast_state":
            if len(ins) != 2:
                raise GraphError(f"{where}: broadcast_state needs exactly two inputs: data on gate 0, broadcast on gate 1.")
            if gates[1][0].partitioner != "broadcast":
                raise GraphError(f"{gates[1][0].describe()}: the broadcast input (gate 1) of '{v.id}' must use the broadcast partitioner.")
            if gates[0][0].partitioner == "broadcast":
                raise GraphError(f"{gates[0][0].describe()}: the data input (gate 0) of '{v.id}' cannot be broadcast.")
        for g, edges in gates.items():
            # Flink fails a restore with "Incompatible subtask mappings" when the edges of one gate
            # demand different input-state mappers; we refuse such a gate up front.
            mappers = {subtask_state_mapper(e.partitioner, "downstream").name for e in edges}
            if len(mappers) > 1:
                raise GraphError(
                    f"{where}: gate {g} mixes partitioners with incompatible subtask mappings "
                    f"({', '.join(sorted({e.partitioner for e in edges}))}); put them on separate gates of a co_map."
                )
