"""The translation without running it: every operator of every vertex kind gets a pinned uid and its
vertex's parallelism, and every partitioner becomes Flink's own (gateway only, no cluster)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cutcheck.flink_bridge.env import Cluster
from cutcheck.flink_bridge.runner import RunOptions, environment, job_config, prepare
from cutcheck.flink_bridge.translate import ProbeSpec, build, sink_dirs
from cutcheck.model.errors import GraphError
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


def test_custom_partitioner_refuses_unaligned() -> None:
    with pytest.raises(GraphError, match="refuses unaligned checkpoints with a custom partitioner"):
        prepare(ALL_PARTITIONERS, RunOptions(mode="unaligned"))
