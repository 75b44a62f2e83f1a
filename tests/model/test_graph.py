"""Job graphs: every validation rule names the vertex or edge it refuses; JSON round trips."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import job_graph_dicts, job_graphs

from cutcheck.model.errors import GraphError
from cutcheck.model.graph import JobGraph

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

BASE: dict[str, Any] = {
    "name": "base",
    "max_parallelism": 128,
    "vertices": [
        {"id": "src", "kind": "source", "parallelism": 2, "records": 100, "keys": 8, "splits": 2},
        {"id": "map", "kind": "map", "parallelism": 3},
        {"id": "count", "kind": "keyed_count", "parallelism": 2},
        {"id": "sink", "kind": "sink", "parallelism": 1},
    ],
    "edges": [
        {"from": "src", "to": "map", "partitioner": "rebalance"},
        {"from": "map", "to": "count", "partitioner": "hash"},
        {"from": "count", "to": "sink", "partitioner": "rebalance"},
    ],
}


def graph(**changes: Any) -> dict[str, Any]:
    g = copy.deepcopy(BASE)
    g.update(copy.deepcopy(changes))
    return g


def vertex(g: dict[str, Any], vid: str) -> dict[str, Any]:
    return next(v for v in g["vertices"] if v["id"] == vid)


def refused(data: Any) -> str:
    with pytest.raises(GraphError) as info:
        JobGraph.from_json(data)
    message = str(info.value)
    assert "\n" not in message and message.endswith(".")
    return message


def with_vertex(vid: str, **fields: Any) -> dict[str, Any]:
    g = graph()
    vertex(g, vid).update(fields)
    return g


def no_job_max(g: dict[str, Any]) -> dict[str, Any]:
    del g["max_parallelism"]
    return g


def with_edges(*edges: dict[str, Any], vertices: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    g = graph()
    if vertices is not None:
        g["vertices"] = vertices
    g["edges"] = list(edges)
    return g


def e(src: str, dst: str, partitioner: str = "rebalance", **more: Any) -> dict[str, Any]:
    return {"from": src, "to": dst, "partitioner": partitioner, **more}


SRC = {"id": "src", "kind": "source", "parallelism": 2, "records": 10}
SRC2 = {"id": "src2", "kind": "source", "parallelism": 1, "records": 10}
SINK = {"id": "sink", "kind": "sink", "parallelism": 1}


def v(vid: str, kind: str, parallelism: int = 2, **more: Any) -> dict[str, Any]:
    return {"id": vid, "kind": kind, "parallelism": parallelism, **more}


# (rule, graph, fragments the message must contain: the offending vertex or edge, and the rule)
INVALID: list[tuple[str, Callable[[], Any], tuple[str, ...]]] = [
    (
        "cycle",
        lambda: with_edges(
            e("src", "a"), e("a", "b", "forward"), e("b", "a"), e("b", "sink"),
            vertices=[SRC, v("a", "map"), v("b", "map"), SINK],
        ),
        ("cycle", "a -> b"),
    ),
    (
        "self loop",
        lambda: with_edges(e("src", "a"), e("a", "a"), e("a", "sink"), vertices=[SRC, v("a", "map"), SINK]),
        ("edge #1 (a -> a)", "cycle"),
    ),
    ("forward with unequal parallelism", lambda: with_edges(e("src", "map", "forward"), e("map", "count", "hash"),
                                                            e("count", "sink")), ("edge #0 (src -> map)", "forward")),
    ("parallelism 0", lambda: with_vertex("map", parallelism=0), ("vertex 'map'", "parallelism 0")),
    ("negative parallelism", lambda: with_vertex("map", parallelism=-3), ("vertex 'map'", "parallelism -3")),
    ("parallelism 0, default max parallelism", lambda: no_job_max(with_vertex("map", parallelism=0)),
     ("vertex 'map'", "parallelism 0")),
    ("parallelism above 32768, default max parallelism", lambda: no_job_max(with_vertex("map", parallelism=40000)),
     ("vertex 'map'", "40000", "32768")),
    ("parallelism above max parallelism", lambda: with_vertex("map", parallelism=200), ("vertex 'map'", "200", "128")),
    ("parallelism above vertex max", lambda: with_vertex("count", parallelism=5, max_parallelism=4), ("vertex 'count'", "5")),
    ("default max parallelism too small", lambda: with_vertex("map", parallelism=40000),
     ("vertex 'map'", "40000")),
    ("vertex max parallelism above 32768", lambda: with_vertex("count", max_parallelism=40000),
     ("vertex 'count'", "40000", "32768")),
    ("vertex max parallelism 0", lambda: with_vertex("count", max_parallelism=0), ("vertex 'count'", "max_parallelism 0")),
    ("job max parallelism above 32768", lambda: graph(max_parallelism=32769), ("job", "32769", "32768")),
    ("parallelism not an integer", lambda: with_vertex("map", parallelism="3"), ("vertex 'map'", "parallelism")),
    ("parallelism a boolean", lambda: with_vertex("map", parallelism=True), ("vertex 'map'", "parallelism")),
    ("parallelism null", lambda: with_vertex("map", parallelism=None), ("vertex 'map'", "parallelism")),
    ("hash into a non-keyed vertex",
     lambda: with_edges(e("src", "map", "hash"), e("map", "count", "hash"), e("count", "sink")),
     ("edge #0 (src -> map)", "hash", "keyed")),
    ("non-hash into keyed_count",
     lambda: with_edges(e("src", "map"), e("map", "count", "rebalance"), e("count", "sink")),
     ("edge #1 (map -> count)", "hash")),
    ("unknown kind", lambda: with_vertex("map", kind="flatmap"), ("vertex 'map'", "flatmap")),
    ("unknown vertex field", lambda: with_vertex("map", colour="red"), ("vertex 'map'", "colour")),
    ("source field on a map", lambda: with_vertex("map", records=5), ("vertex 'map'", "records")),
    ("unknown edge field",
     lambda: with_edges(e("src", "map"), e("map", "count", "hash", weight=2), e("count", "sink")),
     ("edge #1 (map -> count)", "weight")),
    ("unknown graph field", lambda: graph(owner="me"), ("owner",)),
    ("unknown partitioner",
     lambda: with_edges(e("src", "map", "roundrobin"), e("map", "count", "hash"), e("count", "sink")),
     ("edge #0 (src -> map)", "roundrobin")),
    ("unknown exchange",
     lambda: with_edges(e("src", "map", exchange="batch"), e("map", "count", "hash"), e("count", "sink")),
     ("edge #0 (src -> map)", "batch")),
    ("unknown delivery", lambda: with_vertex("sink", delivery="twice"), ("vertex 'sink'", "twice")),
    ("source without records", lambda: with_edges(e("src", "sink"), vertices=[v("src", "source", 1), SINK]),
     ("vertex 'src'", "records")),
    ("source with inputs",
     lambda: with_edges(e("src", "map"), e("map", "src2"), e("map", "sink"), vertices=[SRC, v("map", "map"), SRC2, SINK]),
     ("vertex 'src2'", "source", "edge #1 (map -> src2)")),
    ("sink with outputs",
     lambda: with_edges(e("src", "sink"), e("sink", "map"), vertices=[SRC, SINK, v("map", "map")]),
     ("vertex 'sink'", "edge #1 (sink -> map)")),
    ("vertex without inputs", lambda: with_edges(e("src", "sink"), vertices=[SRC, v("map", "map"), SINK]),
     ("vertex 'map'", "input")),
    ("gate numbering gap",
     lambda: with_edges(e("src", "co", gate=0), e("src2", "co", gate=2), e("co", "sink"),
                        vertices=[SRC, SRC2, v("co", "co_map"), SINK]),
     ("vertex 'co'", "gaps", "[0, 2]")),
    ("negative gate",
     lambda: with_edges(e("src", "co", gate=-1), e("src2", "co", gate=0), e("co", "sink"),
                        vertices=[SRC, SRC2, v("co", "co_map"), SINK]),
     ("edge #0 (src -> co)", "-1")),
    ("gate null", lambda: with_edges(e("src", "sink", gate=None), vertices=[SRC, SINK]), ("edge #0 (src -> sink)", "gate")),
    ("single-gate vertex on gate 1",
     lambda: with_edges(e("src", "u", gate=0), e("src2", "u", gate=1), e("u", "sink"),
                        vertices=[SRC, SRC2, v("u", "union"), SINK]),
     ("vertex 'u'", "single input gate")),
    ("shared gate on a co_map",
     lambda: with_edges(e("src", "co", gate=0), e("src2", "co", gate=0), e("co", "sink"),
                        vertices=[SRC, SRC2, v("co", "co_map"), SINK]),
     ("edge #1 (src2 -> co)", "gate 0", "shared")),
    ("co_map with one input",
     lambda: with_edges(e("src", "co"), e("co", "sink"), vertices=[SRC, v("co", "co_map"), SINK]),
     ("vertex 'co'", "two inputs")),
    ("broadcast_state broadcast input not broadcast",
     lambda: with_edges(e("src", "bs", "hash", gate=0), e("src2", "bs", "rebalance", gate=1), e("bs", "sink"),
                        vertices=[SRC, SRC2, v("bs", "broadcast_state"), SINK]),
     ("edge #1 (src2 -> bs)", "gate 1", "broadcast")),
    ("broadcast_state data input broadcast",
     lambda: with_edges(e("src", "bs", "broadcast", gate=0), e("src2", "bs", "broadcast", gate=1), e("bs", "sink"),
                        vertices=[SRC, SRC2, v("bs", "broadcast_state"), SINK]),
     ("edge #0 (src -> bs)", "gate 0")),
    ("broadcast_state with one input",
     lambda: with_edges(e("src", "bs", "hash"), e("bs", "sink"), vertices=[SRC, v("bs", "broadcast_state"), SINK]),
     ("vertex 'bs'", "two inputs")),
    ("incompatible subtask mappings within a gate",
     lambda: with_edges(e("src", "u", "rebalance"), e("src2", "u", "global"), e("u", "sink"),
                        vertices=[SRC, SRC2, v("u", "union"), SINK]),
     ("vertex 'u'", "gate 0", "incompatible", "global", "rebalance")),
    ("forward and rebalance within a gate",
     lambda: with_edges(e("src", "u", "forward"), e("src2", "u", "rebalance"), e("u", "sink"),
                        vertices=[SRC, SRC2, v("u", "union"), SINK]),
     ("vertex 'u'", "incompatible")),
    ("duplicate vertex id", lambda: graph(vertices=[*BASE["vertices"], v("map", "filter")]), ("vertex 'map'", "duplicate")),
    ("edge to an unknown vertex",
     lambda: with_edges(e("src", "map"), e("map", "nowhere"), e("map", "count", "hash"), e("count", "sink")),
     ("edge #1 (map -> nowhere)", "'nowhere'")),
    ("edge from an unknown vertex",
     lambda: with_edges(e("ghost", "map"), e("map", "count", "hash"), e("count", "sink")), ("edge #0 (ghost -> map)",)),
    ("vertex without id", lambda: graph(vertices=[{"kind": "map"}, *BASE["vertices"]]), ("vertex #0", "id")),
    ("vertex not an object", lambda: graph(vertices=[*BASE["vertices"], 7]), ("vertex #4",)),
    ("edge not an object", lambda: graph(edges=[*BASE["edges"], "src->sink"]), ("edge #3",)),
    ("no vertices", lambda: graph(vertices=[]), ("vertices",)),
    ("vertices not a list", lambda: graph(vertices={"src": SRC}), ("vertices",)),
    ("edges not a list", lambda: graph(edges="src->sink"), ("edges",)),
]


@pytest.mark.parametrize(("rule", "make", "fragments"), INVALID, ids=[case[0] for case in INVALID])
def test_invalid_graph_names_offender(rule: str, make: Callable[[], Any], fragments: tuple[str, ...]) -> None:
    message = refused(make())
    for fragment in fragments:
        assert fragment in message, f"{rule}: {fragment!r} not in {message!r}"


def test_base_graph_is_valid() -> None:
    # The invalid cases are one change away from this graph, so it must itself be valid.
    g = JobGraph.from_json(BASE)
    assert [x.id for x in g.vertices] == ["src", "map", "count", "sink"]


def test_bad_json_file_names_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"vertices": [')
    message = refused(bad)
    assert str(bad) in message and "JSON" in message


def test_missing_file_names_path(tmp_path: Path) -> None:
    message = refused(tmp_path / "absent.json")
    assert "absent.json" in message


def test_json_array_file(tmp_path: Path) -> None:
    bad = tmp_path / "list.json"
    bad.write_text("[1, 2]")
    assert str(bad) in refused(bad)


def test_directory_instead_of_file(tmp_path: Path) -> None:
    assert str(tmp_path) in refused(tmp_path)


def test_binary_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    assert str(bad) in refused(bad)


# ------------------------------------------------------------------------------- examples
@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.name)
def test_examples_are_valid_and_small(path: Path) -> None:
    g = JobGraph.from_json(path)
    assert g.name == path.stem
    assert sum(x.records for x in g.vertices if x.kind == "source") <= 5000
    assert all(x.delivery == "exactly_once" for x in g.vertices if x.kind == "sink")


def test_multi_edge_example_keeps_both_edges() -> None:
    g = JobGraph.from_json(EXAMPLES / "multi-edge.json")
    pairs = [(x.source, x.target) for x in g.edges]
    assert len(pairs) != len(set(pairs))
    assert g.graph.number_of_edges("src", "both") == 2
    assert sorted(g.gates("both")) == [0, 1]


def test_batch_example_has_both_exchanges() -> None:
    g = JobGraph.from_json(EXAMPLES / "batch.json")
    assert {x.exchange for x in g.edges} == {"pipelined", "blocking"}


# ------------------------------------------------------------------------------- defaults
def test_defaults_follow_flink() -> None:
    g = JobGraph.from_json(
        {"vertices": [SRC, v("a", "map", 2), v("b", "map", 3), SINK],
         "edges": [{"from": "src", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "sink"}]}
    )
    # equal parallelism -> forward, otherwise rebalance (facts §2.1); pipelined, gate 0
    assert [x.partitioner for x in g.edges] == ["forward", "rebalance", "rebalance"]
    assert {x.exchange for x in g.edges} == {"pipelined"}
    assert g.max_parallelism("a") == 128


def test_default_gates_number_inputs_of_multi_gate_kinds() -> None:
    g = JobGraph.from_json(
        {"vertices": [SRC, SRC2, v("co", "co_map"), SINK],
         "edges": [e("src", "co"), e("src2", "co"), e("co", "sink")]}
    )
    assert [x.gate for x in g.edges] == [0, 1, 0]


# ------------------------------------------------------------------------------- round trip
@given(job_graph_dicts())
def test_json_round_trip(data: dict[str, Any]) -> None:
    g = JobGraph.from_json(data)
    again = JobGraph.from_json(g.to_json())
    assert again.to_json() == g.to_json()
    assert again.vertices == g.vertices
    assert again.edges == g.edges
    assert again.name == g.name
    assert json.loads(json.dumps(g.to_json())) == g.to_json()


@given(job_graphs())
def test_save_and_load(tmp_path_factory: pytest.TempPathFactory, g: JobGraph) -> None:
    path = tmp_path_factory.mktemp("graphs") / "g.json"
    g.save(path)
    assert JobGraph.from_json(path).to_json() == g.to_json()


@given(job_graphs())
def test_multigraph_mirrors_edges(g: JobGraph) -> None:
    assert g.graph.number_of_edges() == len(g.edges)
    for x in g.edges:
        assert g.graph.edges[x.source, x.target, x.key]["edge"] == x
    order = g.topological_order()
    assert sorted(order) == sorted(x.id for x in g.vertices)
    position = {vid: i for i, vid in enumerate(order)}
    assert all(position[x.source] < position[x.target] for x in g.edges)


# ------------------------------------------------------------------------------- fuzz
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 40000) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
FIELDS = ["id", "kind", "parallelism", "max_parallelism", "records", "keys", "splits", "seed", "drop_every",
          "delivery", "from", "to", "partitioner", "exchange", "gate", "name", "vertices", "edges", "x"]


@given(job_graph_dicts(), st.data())
def test_any_corruption_is_a_graph_error_or_valid(data: dict[str, Any], draw: st.DataObject) -> None:
    """Whatever one field is replaced with, loading either succeeds or raises GraphError (no crash)."""
    target_kind = draw.draw(st.sampled_from(["graph", "vertex", "edge"]))
    if target_kind == "graph" or not data["edges"]:
        target = data
    else:
        items = data["vertices"] if target_kind == "vertex" else data["edges"]
        target = items[draw.draw(st.integers(0, len(items) - 1))]
    field = draw.draw(st.sampled_from(FIELDS))
    if draw.draw(st.booleans()) and field in target:
        del target[field]
    else:
        target[field] = draw.draw(json_values)
    try:
        JobGraph.from_json(data)
    except GraphError as exc:
        assert str(exc) and "\n" not in str(exc)
