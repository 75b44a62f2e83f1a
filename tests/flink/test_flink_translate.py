"""The translation without running it: every operator of every vertex kind gets a pinned uid and its
vertex's parallelism, and every partitioner becomes Flink's own (gateway only, no cluster)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cutcheck.flink_bridge.env import Cluster
from cutcheck.flink_bridge.runner import RunOptions, environment, job_config, needs_forced, prepare
from cutcheck.flink_bridge.translate import ProbeSpec, build, sink_dirs
from tests.flink.helpers import FLINK_MARKS

pytestmark = FLINK_MARKS

ALL_PARTITIONERS: dict[str, Any] = {
    "name": "all-partitioners", "max_parallelism": 128,
    "vertices": [
        {"id": "a", "kind": "source", "parallelism": 2, "records": 100, "keys": 16, "splits": 4},
        {"id": "b", "kind": "source", "parallelism": 1, "records": 30, "keys": 16, "splits": 1, "seed": 4},
        {"id": "f", "kind": "filter", "parallelism": 2, "drop_every": 7},
        {"id": "bm", "kind": "map", "parallelism": 2},
        {"id": "m", "kind": "map", "parallelism": 3},
        {"id": "u", "kind": "union", "parallelism": 2},
        {"id": "c", "kind": "keyed_count", "parallelism": 2},
        {"id": "k", "kind": "sink", "parallelism": 2},
        {"id": "g", "kind": "sink", "parallelism": 1}],
    "edges": [
        {"from": "a", "to": "f", "partitioner": "forward"},
        {"from": "f", "to": "m", "partitioner": "custom"},
        {"from": "b", "to": "bm", "partitioner": "broadcast"},
        {"from": "bm", "to": "u", "partitioner": "rebalance"},
        {"from": "m", "to": "u", "partitioner": "shuffle"},
        {"from": "u", "to": "c", "partitioner": "hash"},
        {"from": "c", "to": "k", "partitioner": "rescale"},
        {"from": "m", "to": "g", "partitioner": "global"}]}


def _stream_graph(tmp_path: Any, data: dict[str, Any]) -> Any:
    opts = RunOptions(mode="aligned")
    graph, _ = prepare(data, opts)
    env = environment(job_config(Cluster(None, 1), opts, str(tmp_path / "ck"), True, None, None))
    build(env, graph, sink_dirs(graph, str(tmp_path)), ProbeSpec())
    return env, graph


def test_every_operator_has_a_uid_and_its_vertex_parallelism(tmp_path: Any) -> None:
    env, graph = _stream_graph(tmp_path, ALL_PARTITIONERS)
    nodes = list(env._generate_stream_graph(clear_transformations=False).getStreamNodes().toArray())
    uids = {str(n.getTransformationUID()): int(n.getParallelism()) for n in nodes}
    assert None not in uids and "None" not in uids, "an operator without a pinned uid"
    for v in graph.vertices:
        assert uids[v.id] == v.parallelism, v.id
    assert uids["a/seq"] == 2 and uids["c/key5"] == 2 and uids["m/custom1"] == 2, "helpers run at the producer's parallelism"
    assert uids["m/custom1/values"] == 3, "and after the exchange at the consumer's"
    assert uids["k/format"] == 2 and uids["g/format"] == 1


def test_every_partitioner_is_flinks(tmp_path: Any) -> None:
    env, _ = _stream_graph(tmp_path, ALL_PARTITIONERS)
    plan = json.loads(env.get_execution_plan())
    strategies = {p["ship_strategy"] for n in plan["nodes"] for p in n.get("predecessors", [])}
    for expected in ("FORWARD", "REBALANCE", "SHUFFLE", "BROADCAST", "GLOBAL", "HASH", "CUSTOM", "RESCALE"):
        assert expected in strategies, (expected, strategies)


def test_custom_partitioner_under_unaligned_is_accepted_with_forced() -> None:
    graph, _ = prepare(ALL_PARTITIONERS, RunOptions(mode="unaligned"))  # refused before: Flink needs unaligned.forced
    assert needs_forced(graph, RunOptions(mode="unaligned")) and not needs_forced(graph, RunOptions(mode="aligned"))


TWO_INPUTS: dict[str, Any] = {
    "name": "two-inputs",
    "vertices": [
        {"id": "a", "kind": "source", "parallelism": 2, "records": 50, "keys": 4},
        {"id": "b", "kind": "source", "parallelism": 1, "records": 20, "keys": 4, "seed": 2},
        {"id": "cm", "kind": "co_map", "parallelism": 2, "max_parallelism": 64},
        {"id": "bs", "kind": "broadcast_state", "parallelism": 2},
        {"id": "m", "kind": "map", "parallelism": 2},
        {"id": "k", "kind": "sink", "parallelism": 2}],
    "edges": [
        {"from": "a", "to": "cm", "partitioner": "rebalance"},
        {"from": "b", "to": "cm", "partitioner": "rescale"},
        {"from": "cm", "to": "bs", "partitioner": "hash"},
        {"from": "b", "to": "bs", "partitioner": "broadcast"},
        {"from": "bs", "to": "m", "partitioner": "forward"},
        {"from": "m", "to": "k", "partitioner": "forward"}]}


def _job_vertices(tmp_path: Any, data: dict[str, Any], chaining: bool) -> tuple[int, dict[str, int]]:
    opts = RunOptions(mode="unaligned")
    graph, _ = prepare(data, opts)
    env = environment(job_config(Cluster(None, 1), opts, str(tmp_path / "ck"), True, None, None, graph))
    build(env, graph, sink_dirs(graph, str(tmp_path)), ProbeSpec(), chaining)
    stream_graph = env._generate_stream_graph(clear_transformations=False)
    maxpar = {str(n.getTransformationUID()): int(n.getMaxParallelism()) for n in stream_graph.getStreamNodes().toArray()}
    return int(stream_graph.getJobGraph().getNumberOfVertices()), maxpar


def test_co_map_and_broadcast_state_are_two_input_operators(tmp_path: Any) -> None:
    env, graph = _stream_graph(tmp_path, TWO_INPUTS)
    nodes = {str(n.getTransformationUID()): n for n in env._generate_stream_graph(clear_transformations=False)
             .getStreamNodes().toArray()}
    assert len(list(nodes["cm"].getInEdges())) == 2 and len(list(nodes["bs"].getInEdges())) == 2
    partitioners = {str(e.getPartitioner()) for e in nodes["bs"].getInEdges()}
    assert partitioners == {"HASH", "BROADCAST"}, partitioners
    assert int(nodes["cm"].getMaxParallelism()) == 64, "explicit per-vertex max parallelism reaches Flink"


def test_chaining_off_gives_every_vertex_a_task_of_its_own(tmp_path: Any) -> None:
    on, _ = _job_vertices(tmp_path / "on", TWO_INPUTS, True)
    off, _ = _job_vertices(tmp_path / "off", TWO_INPUTS, False)
    # on: bs -> m -> k (forward, one input each) chain into one task; off: each is its own
    assert off >= on + 2, (on, off)


@pytest.mark.parametrize("partitioner", ["rebalance", "forward"])
def test_two_edges_between_one_pair_are_two_flink_edges(partitioner: str, tmp_path: Any) -> None:
    data = {"name": "twice", "vertices": [
        {"id": "a", "kind": "source", "parallelism": 2, "records": 20, "keys": 4},
        {"id": "u", "kind": "union", "parallelism": 2},
        {"id": "k", "kind": "sink", "parallelism": 2}],
        "edges": [{"from": "a", "to": "u", "partitioner": partitioner}, {"from": "a", "to": "u", "partitioner": partitioner},
                  {"from": "u", "to": "k", "partitioner": "forward"}]}
    env, _ = _stream_graph(tmp_path, data)
    nodes = {str(n.getTransformationUID()): n for n in env._generate_stream_graph(clear_transformations=False)
             .getStreamNodes().toArray()}
    assert [str(e.getPartitioner()) for e in nodes["u"].getInEdges()] == [partitioner.upper()] * 2
