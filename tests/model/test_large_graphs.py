"""Large job graphs: everything computed per job edge equals the per-channel ExecutionGraph.

The fast paths (``channel_count``, ``channel_counts``, ``job_pipelined_regions``,
``job_worst_case_inflight_bytes``) never build a channel; here they are held equal, key for key and
in the same order, to the per-channel computations on generated graphs, and the linear wiring of
``ExecutionGraph`` is held equal to the quadratic one it replaced. Then they run on jobs far beyond
what per-channel expansion can hold (no timing is asserted; a run-away would hit the suite timeout).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import job_graphs

from cutcheck.model.errors import GraphError
from cutcheck.model.execution import (
    MAX_CHANNELS,
    Channel,
    ExecutionGraph,
    SubtaskId,
    channel_count,
    channel_counts,
    check_channel_budget,
    edge_channels,
    subtasks_of,
)
from cutcheck.model.graph import Edge, JobGraph
from cutcheck.model.inflight import NetworkConfig, job_worst_case_inflight_bytes, worst_case_inflight_bytes
from cutcheck.model.partitioning import connection_pattern, pointwise_wiring
from cutcheck.model.regions import job_pipelined_regions, pipelined_regions

Wiring = tuple[list[Channel], dict[tuple[SubtaskId, int], list[Channel]], dict[tuple[SubtaskId, int], list[Channel]]]


def quadratic_wiring(job: JobGraph) -> Wiring:
    """ExecutionGraph's wiring as it was written before it became linear (the oracle)."""
    parallelism = {v.id: v.parallelism for v in job.vertices}
    channels: list[Channel] = []
    partitions: dict[tuple[SubtaskId, int], list[Channel]] = {}
    gates: dict[tuple[SubtaskId, int], list[Channel]] = {}

    def wire_gate(vid: str, gate: int, edges: list[Edge]) -> None:
        t = parallelism[vid]
        offsets = dict.fromkeys(range(t), 0)
        for e in sorted(edges, key=lambda e: e.key):
            s = parallelism[e.source]
            if connection_pattern(e.partitioner) == "POINTWISE":
                wiring = pointwise_wiring(s, t)
                pairs = [(u, d) for d in range(t) for u in wiring.producers_of[d]]
                sub_of = {(u, d): wiring.consumers_of[u].index(d) for (u, d) in pairs}
            else:
                pairs = [(u, d) for d in range(t) for u in range(s)]
                sub_of = {(u, d): d for (u, d) in pairs}
            for d in range(t):
                producers = [u for (u, dd) in pairs if dd == d]
                for pos, u in enumerate(producers):
                    ch = Channel(e.key, SubtaskId(e.source, u), SubtaskId(vid, d), sub_of[(u, d)], gate, offsets[d] + pos)
                    channels.append(ch)
                    partitions.setdefault((ch.producer, e.key), []).append(ch)
                    gates.setdefault((ch.consumer, gate), []).append(ch)
                offsets[d] += len(producers)
            for u in range(s):
                partitions.setdefault((SubtaskId(e.source, u), e.key), [])

    for vid in job.topological_order():
        for g, edges in job.gates(vid).items():
            wire_gate(vid, g, edges)
    for key in partitions:
        partitions[key].sort(key=lambda c: c.subpartition)
    return channels, partitions, gates


@st.composite
def networks(draw: st.DrawFn) -> NetworkConfig:
    buffer_bytes = draw(st.integers(1, 65536))
    return NetworkConfig(buffer_bytes=buffer_bytes, record_bytes=draw(st.integers(1, buffer_bytes)),
                         exclusive=draw(st.integers(1, 10)), floating=draw(st.integers(1, 20)),
                         output_pool=draw(st.none() | st.integers(1, 50)))


def overrides(job: JobGraph, data: st.DataObject) -> dict[str, int]:
    """Other parallelisms that keep the job valid (forward edges keep equal ends)."""
    tied = {v for e in job.edges if e.partitioner == "forward" for v in (e.source, e.target)}
    free = [v.id for v in job.vertices if v.id not in tied]
    chosen = data.draw(st.lists(st.sampled_from(free), unique=True, max_size=2)) if free else []
    return {vid: data.draw(st.integers(1, min(9, job.max_parallelism(vid)))) for vid in chosen}


# ----------------------------------------------------------------------- the fast paths equal the per-channel ones
@given(job_graphs())
def test_linear_wiring_equals_the_quadratic_one(job: JobGraph) -> None:
    eg = ExecutionGraph(job)
    channels, partitions, gates = quadratic_wiring(job)
    assert eg.channels == channels
    assert list(eg.partitions.items()) == list(partitions.items())
    assert list(eg.gates.items()) == list(gates.items())
    assert eg.subtasks == subtasks_of(job)


@given(job_graphs(), st.data())
def test_channel_counts_equal_the_execution_graph(job: JobGraph, data: st.DataObject) -> None:
    parallelism = overrides(job, data)
    eg = ExecutionGraph(job, parallelism)
    counts = channel_counts(job, parallelism)
    assert list(counts.partitions.items()) == [(k, len(v)) for k, v in eg.partitions.items()]
    assert list(counts.gates.items()) == [(k, len(v)) for k, v in eg.gates.items()]
    assert counts.edges == {e.key: len(eg.channels_of_edge(e.key)) for e in job.edges}
    assert channel_count(job, parallelism) == counts.total == len(eg.channels)
    for e in job.edges:
        assert edge_channels(e, eg.parallelism[e.source], eg.parallelism[e.target]) == len(eg.channels_of_edge(e.key))


@given(job_graphs(), st.data())
def test_job_regions_equal_the_per_channel_regions(job: JobGraph, data: st.DataObject) -> None:
    parallelism = overrides(job, data)
    assert job_pipelined_regions(job, parallelism) == pipelined_regions(ExecutionGraph(job, parallelism))


@given(job_graphs(), networks(), st.data())
def test_job_inflight_equals_the_per_channel_bound(job: JobGraph, network: NetworkConfig, data: st.DataObject) -> None:
    parallelism = overrides(job, data)
    fast = job_worst_case_inflight_bytes(channel_counts(job, parallelism), network)
    slow = worst_case_inflight_bytes(ExecutionGraph(job, parallelism), network)
    assert list(fast.partitions.items()) == list(slow.partitions.items())
    assert list(fast.gates.items()) == list(slow.gates.items())
    assert fast.total == slow.total
    assert job_worst_case_inflight_bytes(job.with_parallelism(parallelism), network) == fast


@pytest.mark.parametrize("partitioner", ["rebalance", "rescale"])
@pytest.mark.parametrize(("s", "t"), [(1, 1), (3, 7), (7, 3), (4, 4), (1, 9), (9, 1)])
def test_edge_channels_formula(partitioner: str, s: int, t: int) -> None:
    job = two_vertices(s, t, partitioner)
    assert channel_count(job) == len(ExecutionGraph(job).channels) == (s * t if partitioner == "rebalance" else max(s, t))


def test_blocking_cycle_of_regions_merges_through_the_hub() -> None:
    """FLINK-17330: src[i]-co[i] are pipelined pairs; a blocking all-to-all src -> co makes every pair
    reach every other, so all merge into one region, as the per-channel region graph says."""
    job = JobGraph.from_json({
        "vertices": [{"id": "src", "kind": "source", "parallelism": 3, "records": 1},
                     {"id": "co", "kind": "co_map", "parallelism": 3}, {"id": "out", "kind": "sink", "parallelism": 2}],
        "edges": [{"from": "src", "to": "co", "partitioner": "forward", "gate": 0},
                  {"from": "src", "to": "co", "partitioner": "rebalance", "exchange": "blocking", "gate": 1},
                  {"from": "co", "to": "out", "partitioner": "rebalance", "exchange": "blocking"}],
    })
    regions = job_pipelined_regions(job)
    assert regions == pipelined_regions(ExecutionGraph(job))
    assert [len(r) for r in regions] == [6, 1, 1]


# ----------------------------------------------------------------------- beyond per-channel expansion
def two_vertices(s: int, t: int, partitioner: str = "rebalance", exchange: str = "pipelined") -> JobGraph:
    return JobGraph.from_json({
        "name": "big", "max_parallelism": 32768,
        "vertices": [{"id": "src", "kind": "source", "parallelism": s, "records": 1},
                     {"id": "sink", "kind": "sink", "parallelism": t}],
        "edges": [{"from": "src", "to": "sink", "partitioner": partitioner, "exchange": exchange}],
    })


def wide_job(p: int) -> JobGraph:
    """Four vertices at parallelism ``p``, three all-to-all edges (hash into a keyed count)."""
    vertex: Any = lambda vid, kind, **extra: {"id": vid, "kind": kind, "parallelism": p, **extra}  # noqa: E731
    return JobGraph.from_json({
        "name": "wide", "max_parallelism": 32768,
        "vertices": [vertex("src", "source", records=1), vertex("map", "map"), vertex("count", "keyed_count"),
                     vertex("sink", "sink")],
        "edges": [{"from": "src", "to": "map", "partitioner": "rebalance"},
                  {"from": "map", "to": "count", "partitioner": "hash"},
                  {"from": "count", "to": "sink", "partitioner": "rebalance", "exchange": "blocking"}],
    })


def test_5000_by_5000_all_to_all() -> None:
    job = two_vertices(5000, 5000)
    assert channel_count(job) == 25_000_000
    counts = channel_counts(job)
    assert counts.edges == {0: 25_000_000}
    assert set(counts.partitions.values()) == set(counts.gates.values()) == {5000}
    [region] = job_pipelined_regions(job)
    assert len(region) == 10_000
    bound = job_worst_case_inflight_bytes(counts)
    per_side = 5000 * 4096 * (5000 * 2 + 8)  # FLIP-183 with the default network
    assert (bound.upstream, bound.downstream) == (per_side, per_side)


def test_max_parallelism_with_several_all_to_all_edges() -> None:
    job = wide_job(32768)
    assert channel_count(job) == 3 * 32768**2
    assert channel_count(job, {"sink": 1}) == 2 * 32768**2 + 32768
    regions = job_pipelined_regions(job)
    assert len(regions) == 1 + 32768 and len(regions[0]) == 3 * 32768  # the blocking edge is a boundary
    assert len(job_worst_case_inflight_bytes(job).gates) == 3 * 32768


def test_blocking_all_to_all_between_many_regions() -> None:
    """32768 single-subtask regions on each side of a blocking all-to-all edge: 2**30 channels,
    but the hub keeps the region graph at 65536 arcs."""
    regions = job_pipelined_regions(two_vertices(32768, 32768, exchange="blocking"))
    assert len(regions) == 65536 and all(len(r) == 1 for r in regions)


def test_execution_graph_refuses_beyond_the_budget() -> None:
    job = two_vertices(5000, 5000)
    with pytest.raises(GraphError) as info:
        ExecutionGraph(job)
    text = str(info.value)
    assert "25000000 channels" in text and f"budget of {MAX_CHANNELS} channels" in text
    assert text.count(". ") == 0 and text.endswith(".")
    with pytest.raises(GraphError, match="25000000"):
        ExecutionGraph(two_vertices(1, 1), {"src": 5000, "sink": 5000})
    check_channel_budget(two_vertices(447, 447))  # 199 809 channels: within the budget
    side = int(MAX_CHANNELS**0.5)
    assert len(ExecutionGraph(two_vertices(side, side)).channels) == side * side
