"""Hypothesis strategies for VALID job graphs, shared by every suite.

``job_graph_dicts()`` draws the JSON form (a dict ``JobGraph.from_json`` accepts), ``job_graphs()``
the loaded ``JobGraph``. The graphs use every vertex kind and partitioner, multi-edges (the same
pair of vertices joined twice), blocking exchanges and parallelism 1..8, and are well formed
beyond validity: every vertex that is not a sink feeds something, so every record can reach a sink.

Validity is built in, not filtered for: a vertex's inputs come only from earlier vertices (no
cycle); forward is drawn only between equal parallelisms; keyed_count inputs are hash; a
single-gate vertex (map, filter, union, sink) draws all its inputs from one subtask-mapper family
so that its gate is consistent; broadcast_state has a data input on gate 0 and a broadcast input
on gate 1; co_map, keyed_count and broadcast_state get one gate per input.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from cutcheck.model.execution import ExecutionGraph
from cutcheck.model.graph import JobGraph

MAX_PARALLELISM = 8

# Partitioners grouped by the downstream SubtaskStateMapper they imply (facts §2.2); one gate may
# only mix partitioners of one family. "forward" is allowed only between equal parallelisms.
SINGLE_GATE_FAMILIES = (("forward", "rescale", "broadcast"), ("rebalance", "shuffle"), ("global",), ("custom",))
ANY_INPUT = ("forward", "rescale", "rebalance", "shuffle", "global", "custom", "broadcast")
MIDDLE_KINDS = ("map", "filter", "keyed_count", "union", "co_map", "broadcast_state")


def _pick(draw: Any, options: tuple[str, ...], src_p: int, dst_p: int) -> str:
    allowed = [p for p in options if p != "forward" or src_p == dst_p]
    return draw(st.sampled_from(allowed))


@st.composite
def job_graph_dicts(
    draw: Any,
    max_vertex_parallelism: int = MAX_PARALLELISM,
    blocking: bool = True,
    max_middle: int = 4,
) -> dict[str, Any]:
    """A valid job graph as a JSON-ready dict.

    Vertex parallelism is 1..``max_vertex_parallelism``; ``blocking=False`` keeps every exchange
    pipelined (a streaming job), otherwise some graphs mix in blocking exchanges; ``max_middle``
    bounds the vertices between sources and sinks.
    """
    vertices: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    par: dict[str, int] = {}
    kind_of: dict[str, str] = {}
    p = st.integers(1, max_vertex_parallelism)
    blocking_share = draw(st.sampled_from([0.0, 0.0, 0.3, 0.6])) if blocking else 0.0

    def exchange() -> str:
        if blocking_share == 0.0:
            return "pipelined"
        return "blocking" if draw(st.integers(0, 9)) < blocking_share * 10 else "pipelined"

    def add_vertex(vid: str, kind: str, parallelism: int, **extra: Any) -> None:
        vertices.append({"id": vid, "kind": kind, "parallelism": parallelism, **extra})
        par[vid] = parallelism
        kind_of[vid] = kind

    for i in range(draw(st.integers(1, 2))):
        add_vertex(
            f"src{i}", "source", draw(p),
            records=draw(st.integers(0, 60)), keys=draw(st.integers(1, 8)),
            splits=draw(st.integers(1, 4)), seed=draw(st.integers(0, 1000)),
        )

    def draw_inputs(n: int) -> list[str]:
        producers = [v for v in par if kind_of[v] != "sink"]
        return [draw(st.sampled_from(producers)) for _ in range(n)]

    def parallelism_near(inputs: list[str]) -> int:
        # Often equal to the first input's parallelism, so forward edges occur.
        return draw(st.one_of(st.just(par[inputs[0]]), p))

    def connect(vid: str, kind: str, inputs: list[str]) -> None:
        dst_p = par[vid]
        if kind == "keyed_count":
            for g, src in enumerate(inputs):
                edges.append({"from": src, "to": vid, "partitioner": "hash", "exchange": exchange(), "gate": g})
        elif kind == "broadcast_state":
            data_options = ("hash", *[x for x in ANY_INPUT if x != "broadcast"])
            edges.append({"from": inputs[0], "to": vid, "partitioner": _pick(draw, data_options, par[inputs[0]], dst_p),
                          "exchange": exchange(), "gate": 0})
            edges.append({"from": inputs[1], "to": vid, "partitioner": "broadcast", "exchange": exchange(), "gate": 1})
        elif kind == "co_map":
            for g, src in enumerate(inputs):
                edges.append({"from": src, "to": vid, "partitioner": _pick(draw, ANY_INPUT, par[src], dst_p),
                              "exchange": exchange(), "gate": g})
        else:  # one gate: every input from the same mapper family
            family = draw(st.sampled_from(SINGLE_GATE_FAMILIES))
            for src in inputs:
                edges.append({"from": src, "to": vid, "partitioner": _pick(draw, family, par[src], dst_p),
                              "exchange": exchange(), "gate": 0})

    n_inputs = {"map": (1, 2), "filter": (1, 2), "keyed_count": (1, 2), "union": (1, 3),
                "co_map": (2, 3), "broadcast_state": (2, 2), "sink": (1, 2)}
    for i in range(draw(st.integers(0, max_middle))):
        kind = draw(st.sampled_from(MIDDLE_KINDS))
        low, high = n_inputs[kind]
        inputs = draw_inputs(draw(st.integers(low, high)))
        vid = f"{kind}{i}"
        extra = {"drop_every": draw(st.integers(1, 6))} if kind == "filter" else {}
        add_vertex(vid, kind, parallelism_near(inputs), **extra)
        connect(vid, kind, inputs)

    for i in range(draw(st.integers(1, 2))):
        inputs = draw_inputs(draw(st.integers(1, 2)))
        vid = f"sink{i}"
        add_vertex(vid, "sink", parallelism_near(inputs), delivery=draw(st.sampled_from(["exactly_once", "at_least_once"])))
        connect(vid, "sink", inputs)

    # Every vertex that is not a sink feeds something: give each dangling one a sink of its own.
    fed = {e["from"] for e in edges}
    for vid in [v for v in par if kind_of[v] != "sink" and v not in fed]:
        sink = f"{vid}_out"
        add_vertex(sink, "sink", draw(st.sampled_from([par[vid], draw(p)])), delivery="exactly_once")
        connect(sink, "sink", [vid])

    graph: dict[str, Any] = {"name": "generated", "vertices": vertices, "edges": edges}
    job_max = draw(st.sampled_from([None, None, max_vertex_parallelism, 16, 128]))
    if job_max is not None:
        graph["max_parallelism"] = job_max
    return graph


def job_graphs(**kwargs: Any) -> st.SearchStrategy[JobGraph]:
    """Valid ``JobGraph`` objects (see :func:`job_graph_dicts` for the options)."""
    return job_graph_dicts(**kwargs).map(JobGraph.from_json)


def execution_graphs(**kwargs: Any) -> st.SearchStrategy[ExecutionGraph]:
    """Execution graphs of valid job graphs at their own parallelisms."""
    return job_graphs(**kwargs).map(ExecutionGraph)
