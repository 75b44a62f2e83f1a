"""How a job graph names its vertices and how a scenario names its graph: the refusals of the code the
type checker made explicit (an edge end checked to be a declared vertex; a scenario's ``graph`` checked
to be a path or an object before it is loaded), each one sentence naming where."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cutcheck.model.errors import GraphError, ScenarioError
from cutcheck.model.graph import JobGraph
from cutcheck.reference.scenario import Scenario

GRAPH = {"vertices": [{"id": "s", "kind": "source", "records": 5}, {"id": "k", "kind": "sink"}],
         "edges": [{"from": "s", "to": "k"}]}


@pytest.mark.parametrize(("edge", "message"), [
    ({"from": "x", "to": "k"}, "edge #0 (x -> k): 'from' names no vertex ('x'); declare it under 'vertices'."),
    ({"from": "s", "to": 7}, "edge #0 (s -> 7): 'to' names no vertex (7); declare it under 'vertices'."),
    ({"to": "k"}, "edge #0 (None -> k): 'from' names no vertex (None); declare it under 'vertices'."),
    ({"from": "x", "to": "y"}, "edge #0 (x -> y): 'from' names no vertex ('x'); declare it under 'vertices'."),
])
def test_an_edge_end_must_name_a_declared_vertex(edge: dict[str, object], message: str) -> None:
    with pytest.raises(GraphError) as raised:
        JobGraph.from_json({**GRAPH, "edges": [edge]})
    assert str(raised.value) == message


def test_edge_ends_name_the_vertices_they_join() -> None:
    job = JobGraph.from_json(GRAPH)
    assert [(e.source, e.target) for e in job.edges] == [("s", "k")]


@pytest.mark.parametrize(("graph", "message"), [
    (None, "scenario: missing 'graph' (a path to a job-graph JSON file, or the graph inline)."),
    (5, "scenario: 'graph' must be a path or an inline job graph object."),
    (["s", "k"], "scenario: 'graph' must be a path or an inline job graph object."),
])
def test_a_scenario_graph_is_a_path_or_an_object(graph: object, message: str) -> None:
    scenario: dict[str, object] = {} if graph is None else {"graph": graph}
    with pytest.raises(ScenarioError) as raised:
        Scenario.from_json(scenario)
    assert str(raised.value) == message


def test_a_scenario_graph_path_is_read_relative_to_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "g.json").write_text(json.dumps(GRAPH))
    (tmp_path / "s.json").write_text(json.dumps({"graph": "g.json"}))
    scenario = Scenario.from_json(tmp_path / "s.json")
    assert scenario.graph_ref == str(tmp_path / "g.json")
    assert [v.id for v in scenario.graph.vertices] == ["s", "k"]
    inline = Scenario.from_json({"graph": GRAPH})
    assert inline.graph_ref == GRAPH


def test_a_broken_inline_graph_is_named_as_the_scenario_s_graph() -> None:
    with pytest.raises(ScenarioError) as raised:
        Scenario.from_json({"graph": {**GRAPH, "edges": [{"from": "s", "to": "nope"}]}})
    assert str(raised.value) == ("scenario: graph: edge #0 (s -> nope): 'to' names no vertex ('nope'); "
                                 "declare it under 'vertices'.")
