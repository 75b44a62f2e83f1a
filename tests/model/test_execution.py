"""ExecutionGraph: subtasks, partitions, gates and channels wired as Flink wires them (facts §2.3)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import job_graphs

from cutcheck.model.errors import GraphError
from cutcheck.model.execution import ExecutionGraph, SubtaskId
from cutcheck.model.graph import JobGraph

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POINTWISE = {"forward", "rescale"}


def pair(partitioner: str, s: int, t: int) -> ExecutionGraph:
    return ExecutionGraph(
        JobGraph.from_json(
            {
                "vertices": [
                    {"id": "up", "kind": "source", "parallelism": s, "records": 1},
                    {"id": "down", "kind": "sink", "parallelism": t},
                ],
                "edges": [{"from": "up", "to": "down", "partitioner": partitioner}],
            }
        )
    )


def consumers_of(eg: ExecutionGraph) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for c in sorted(eg.channels, key=lambda c: (c.producer.index, c.subpartition)):
        out.setdefault(c.producer.index, []).append(c.consumer.index)
    return out


def producers_of(eg: ExecutionGraph) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for c in sorted(eg.channels, key=lambda c: (c.consumer.index, c.gate_channel)):
        out.setdefault(c.consumer.index, []).append(c.producer.index)
    return out


# ----------------------------------------------------------------------- facts §2.3 examples
@pytest.mark.parametrize(
    ("s", "t", "expected"),
    [
        (4, 2, {0: [0, 1], 1: [2, 3]}),
        (3, 2, {0: [0], 1: [1, 2]}),
        (2, 2, {0: [0], 1: [1]}),
        (5, 1, {0: [0, 1, 2, 3, 4]}),
    ],
)
def test_pointwise_downscale_reads_contiguous_producers(s: int, t: int, expected: dict[int, list[int]]) -> None:
    assert producers_of(pair("rescale", s, t)) == expected


@pytest.mark.parametrize(
    ("s", "t", "expected"),
    [
        (2, 4, {0: [0, 1], 1: [2, 3]}),
        (3, 5, {0: [0, 1], 1: [2, 3], 2: [4]}),
        (1, 3, {0: [0, 1, 2]}),
    ],
)
def test_pointwise_upscale_feeds_contiguous_consumers(s: int, t: int, expected: dict[int, list[int]]) -> None:
    eg = pair("rescale", s, t)
    assert consumers_of(eg) == expected
    # each consumer reads a distinct subpartition of its one producer
    for (producer, _edge), channels in eg.partitions.items():
        assert [c.subpartition for c in channels] == list(range(len(expected[producer.index])))


def test_all_to_all_subpartition_is_consumer_index() -> None:
    eg = pair("rebalance", 3, 4)
    assert len(eg.channels) == 12
    assert all(c.subpartition == c.consumer.index for c in eg.channels)
    assert all(c.gate_channel == c.producer.index for c in eg.channels)


def test_gate_channels_ordered_by_edge_then_producer() -> None:
    eg = ExecutionGraph(JobGraph.from_json(EXAMPLES / "union.json"))
    gate = eg.gates[(SubtaskId("merge", 1), 0)]
    assert [(c.edge, c.producer.index) for c in gate] == [(0, 0), (0, 1), (1, 0)]
    assert [c.gate_channel for c in gate] == [0, 1, 2]


def test_multi_edge_keeps_separate_partitions_and_gates() -> None:
    eg = ExecutionGraph(JobGraph.from_json(EXAMPLES / "multi-edge.json"))
    src0 = SubtaskId("src", 0)
    assert sorted(eg.output_partitions(src0)) == [0, 1]
    assert sorted(eg.input_gates(SubtaskId("both", 2))) == [0, 1]
    assert {c.edge for c in eg.gates[(SubtaskId("both", 2), 1)]} == {1}


def test_parallelism_override_keeps_max_parallelism() -> None:
    job = JobGraph.from_json(EXAMPLES / "keyed-pipeline.json")
    eg = ExecutionGraph(job, {"count": 5})
    assert eg.parallelism == {"src": 2, "map": 3, "count": 5, "sink": 1}
    assert eg.job.max_parallelism("count") == job.max_parallelism("count")
    assert len([s for s in eg.subtasks if s.vertex == "count"]) == 5


def test_parallelism_override_unknown_vertex() -> None:
    job = JobGraph.from_json(EXAMPLES / "keyed-pipeline.json")
    with pytest.raises(GraphError, match="'nope'"):
        ExecutionGraph(job, {"nope": 2})


def test_parallelism_override_breaking_forward_is_refused() -> None:
    job = JobGraph.from_json(EXAMPLES / "batch.json")
    with pytest.raises(GraphError, match=r"edge #0 \(src -> clean\)"):
        ExecutionGraph(job, {"clean": 3})


def test_subtask_id_parse() -> None:
    assert SubtaskId.parse("count[3]") == SubtaskId("count", 3)
    assert str(SubtaskId.parse("a[b][0]")) == "a[b][0]"
    for bad in ("count", "count[x]", "count[1"):
        with pytest.raises(ValueError):
            SubtaskId.parse(bad)


def test_unaligned_support_follows_consumer_node() -> None:
    eg = ExecutionGraph(JobGraph.from_json(EXAMPLES / "broadcast-state.json"))
    # a broadcast input forces every input of 'apply' aligned; the sink's rebalance stays unaligned
    assert [eg.edge_supports_unaligned(k) for k in range(3)] == [False, False, True]
    assert eg.vertex_aligns_inputs("apply") and not eg.vertex_aligns_inputs("sink")


# ----------------------------------------------------------------------- properties
@given(job_graphs())
def test_subtasks_are_topological_and_complete(job: JobGraph) -> None:
    eg = ExecutionGraph(job)
    assert len(eg.subtasks) == len(set(eg.subtasks)) == sum(v.parallelism for v in job.vertices)
    order = {vid: i for i, vid in enumerate(job.topological_order())}
    keys = [(order[s.vertex], s.index) for s in eg.subtasks]
    assert keys == sorted(keys)


@given(job_graphs())
def test_channel_counts_match_wiring_rules(job: JobGraph) -> None:
    eg = ExecutionGraph(job)
    per_edge = Counter(c.edge for c in eg.channels)
    for e in job.edges:
        s, t = job.vertex(e.source).parallelism, job.vertex(e.target).parallelism
        expected = max(s, t) if e.partitioner in POINTWISE else s * t
        assert per_edge[e.key] == expected, e
        assert len(eg.channels_of_edge(e.key)) == expected
    assert len(eg.channels) == sum(per_edge.values())


@given(job_graphs())
def test_pointwise_wiring_is_contiguous_and_total(job: JobGraph) -> None:
    eg = ExecutionGraph(job)
    for e in job.edges:
        if e.partitioner not in POINTWISE:
            continue
        s, t = job.vertex(e.source).parallelism, job.vertex(e.target).parallelism
        chans = eg.channels_of_edge(e.key)
        ups = {u: sorted(c.consumer.index for c in chans if c.producer.index == u) for u in range(s)}
        downs = {d: sorted(c.producer.index for c in chans if c.consumer.index == d) for d in range(t)}
        assert all(ups[u] and ups[u] == list(range(ups[u][0], ups[u][-1] + 1)) for u in range(s))
        assert all(downs[d] and downs[d] == list(range(downs[d][0], downs[d][-1] + 1)) for d in range(t))
        if s >= t:
            assert all(len(ups[u]) == 1 for u in range(s))
        else:
            assert all(len(downs[d]) == 1 for d in range(t))
        if e.partitioner == "forward":
            assert all(c.producer.index == c.consumer.index for c in chans)


@given(job_graphs())
def test_every_channel_once_in_partition_and_gate(job: JobGraph) -> None:
    eg = ExecutionGraph(job)
    in_partitions = Counter(c for chans in eg.partitions.values() for c in chans)
    in_gates = Counter(c for chans in eg.gates.values() for c in chans)
    everything = Counter(eg.channels)
    assert in_partitions == everything == in_gates
    assert all(n == 1 for n in everything.values())
    for (producer, edge), chans in eg.partitions.items():
        assert all(c.producer == producer and c.edge == edge for c in chans)
        assert [c.subpartition for c in chans] == list(range(len(chans)))
    for (consumer, gate), chans in eg.gates.items():
        assert all(c.consumer == consumer and c.gate == gate for c in chans)
        assert [c.gate_channel for c in chans] == list(range(len(chans)))
        assert [(c.edge, c.producer.index) for c in chans] == sorted((c.edge, c.producer.index) for c in chans)


@given(job_graphs())
def test_partitions_and_gates_cover_the_job(job: JobGraph) -> None:
    eg = ExecutionGraph(job)
    expected_partitions = {(SubtaskId(e.source, i), e.key) for e in job.edges for i in range(job.vertex(e.source).parallelism)}
    expected_gates = {
        (SubtaskId(v.id, i), g) for v in job.vertices for g in job.gates(v.id) for i in range(v.parallelism)
    }
    assert set(eg.partitions) == expected_partitions
    assert set(eg.gates) == expected_gates
    for st_ in eg.subtasks:
        assert set(eg.input_gates(st_)) == set(job.gates(st_.vertex))
        assert set(eg.output_partitions(st_)) == {e.key for e in job.out_edges(st_.vertex)}


@given(job_graphs())
def test_unaligned_support_rule(job: JobGraph) -> None:
    eg = ExecutionGraph(job)
    for v in job.vertices:
        ins = job.in_edges(v.id)
        forced = any(e.partitioner in {"forward", "rescale", "broadcast", "custom"} for e in ins)
        assert all(eg.edge_supports_unaligned(e.key) == (not forced) for e in ins)
        if ins:
            assert eg.vertex_aligns_inputs(v.id) == forced


@given(job_graphs(), st.data())
def test_rescaled_execution_graph_rewires(job: JobGraph, data: st.DataObject) -> None:
    keyed = [
        v.id for v in job.vertices
        if v.kind == "keyed_count" and all(e.partitioner != "forward" for e in job.out_edges(v.id))
    ]
    if not keyed:
        return
    vid = data.draw(st.sampled_from(keyed))
    p = data.draw(st.integers(1, min(8, job.max_parallelism(vid))))
    eg = ExecutionGraph(job, {vid: p})
    assert eg.parallelism[vid] == p
    for e in job.in_edges(vid):
        assert len(eg.channels_of_edge(e.key)) == job.vertex(e.source).parallelism * p
