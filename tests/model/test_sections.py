"""The one validator of JSON sections (model/sections.py) and the sentences it refuses with."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cutcheck.model.errors import GraphError, ScenarioError
from cutcheck.model.graph import JobGraph
from cutcheck.model.sections import Field, Section, reject_unknown
from cutcheck.reference.scenario import Scenario

DEMO = Section("demo", {
    "count": Field(int, low=1, default=3),
    "share": Field(int, low=0, high=100),
    "on": Field(bool),
    "mode": Field(str, choices=("a", "b"), nullable=True),
    "free": Field(),
})


def test_unknown_fields_are_named_with_the_known_ones() -> None:
    with pytest.raises(ScenarioError) as exc:
        DEMO.read({"count": 2, "zeta": 1, "alpha": 0}, "s.json")
    assert str(exc.value) == "s.json: demo: unknown field(s) alpha, zeta; known: count, free, mode, on, share."


def test_absent_section_reads_as_its_defaults_and_a_non_object_is_refused() -> None:
    assert DEMO.read(None, "s.json") == {"count": 3}
    with pytest.raises(ScenarioError, match=r"^s\.json: demo: must be a JSON object\.$"):
        DEMO.read([1], "s.json")
    with pytest.raises(ScenarioError, match="must be a JSON object"):
        Section("entry", {}, optional=False).read(None, "s.json")


@pytest.mark.parametrize("field, value, sentence", [
    ("count", 0, "s.json: demo.count must be a positive integer, got 0."),
    ("count", True, "s.json: demo.count must be a positive integer, got True."),
    ("share", 101, "s.json: demo.share must be an integer in 0..100, got 101."),
    ("on", "yes", "s.json: demo.on must be true or false, got 'yes'."),
    ("mode", "c", "s.json: demo.mode 'c' is not one of a, b."),
])
def test_a_bad_value_is_one_sentence_naming_the_field(field: str, value: object, sentence: str) -> None:
    with pytest.raises(ScenarioError) as exc:
        DEMO.read({field: value}, "s.json")
    assert str(exc.value) == sentence


@given(st.integers(-1000, 1000))
def test_an_int_range_accepts_exactly_its_values(value: int) -> None:
    inside = 0 <= value <= 100
    try:
        assert DEMO.read({"share": value}, "s")["share"] == value and inside
    except ScenarioError:
        assert not inside


def test_a_top_level_field_is_quoted_and_the_error_class_is_the_sections() -> None:
    top = Section("", {"seed": Field(int, low=0)}, error=GraphError)
    with pytest.raises(GraphError, match=r"^g\.json: 'seed' must be a non-negative integer, got -1\.$"):
        top.read({"seed": -1}, "g.json")
    with pytest.raises(GraphError, match="for kind map; known: id"):
        reject_unknown({"records": 1}, ("id",), "vertex 'm'", GraphError, " for kind map")


def test_a_spec_for_a_field_the_config_lacks_is_a_bug_caught_at_definition() -> None:
    from cutcheck.reference.scenario import Schedule

    with pytest.raises(TypeError, match="speed"):
        Section.of("schedule", Schedule, {"speed": Field(int)})


def test_scenario_and_graph_sections_share_the_sentence() -> None:
    graph = {"vertices": [{"id": "s", "kind": "source", "records": 5}, {"id": "k", "kind": "sink"}],
             "edges": [{"from": "s", "to": "k"}]}
    with pytest.raises(ScenarioError, match=r"scenario: checkpoint: unknown field\(s\) intervall; known: "):
        Scenario.from_json({"graph": graph, "checkpoint": {"intervall": 5}})
    with pytest.raises(ScenarioError, match=r"scenario: failures\[0\]\.delay must be a non-negative integer, got -1"):
        Scenario.from_json({"graph": graph, "failures": [{"target": "s[0]", "after_checkpoint": 1, "delay": -1}]})
    with pytest.raises(GraphError, match=r"edge #0 \(s -> k\): unknown field\(s\) weight; known: exchange, from"):
        JobGraph.from_json({**graph, "edges": [{"from": "s", "to": "k", "weight": 2}]})
    assert Scenario.from_json({"graph": graph, "checkpoint": {}, "network": None}).checkpoint.interval == 200
