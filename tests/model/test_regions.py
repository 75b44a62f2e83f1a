"""Pipelined regions and region failover (facts §6.2, §6.4), checked against brute-force oracles."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import job_graphs

from cutcheck.model.errors import ScenarioError
from cutcheck.model.execution import ExecutionGraph, SubtaskId
from cutcheck.model.graph import JobGraph
from cutcheck.model.regions import Partition, failover_regions, failover_set, pipelined_regions, region_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def pipelined(eg: ExecutionGraph, edge: int) -> bool:
    return eg.job.edge(edge).exchange == "pipelined"


def blocking_partitions(eg: ExecutionGraph) -> set[Partition]:
    return {key for key in eg.partitions if not pipelined(eg, key[1])}


def oracle_regions(eg: ExecutionGraph) -> set[frozenset[SubtaskId]]:
    """Union-find over pipelined channels, then merge raw regions that reach each other (no NetworkX)."""
    parent = {s: s for s in eg.subtasks}

    def find(s: SubtaskId) -> SubtaskId:
        while parent[s] != s:
            s = parent[s]
        return s

    for c in eg.channels:
        if pipelined(eg, c.edge):
            parent[find(c.producer)] = find(c.consumer)
    raw: dict[SubtaskId, set[SubtaskId]] = {}
    for s in eg.subtasks:
        raw.setdefault(find(s), set()).add(s)
    roots = list(raw)
    reach = {a: {a} for a in roots}
    for c in eg.channels:
        if not pipelined(eg, c.edge):
            reach[find(c.producer)].add(find(c.consumer))
    changed = True
    while changed:  # transitive closure by fixpoint
        changed = False
        for a in roots:
            new = set().union(*(reach[b] for b in reach[a]))
            if new != reach[a]:
                reach[a], changed = new, True
    merged = {frozenset().union(*(raw[b] for b in roots if b in reach[a] and a in reach[b])) for a in roots}
    return merged


def oracle_failover(eg: ExecutionGraph, failed: SubtaskId, available: set[Partition]) -> frozenset[SubtaskId]:
    """The closure Flink's BFS computes, as a fixpoint over channels and regions."""
    regions = oracle_regions(eg)
    restart = set(next(r for r in regions if failed in r))
    changed = True
    while changed:
        changed = False
        for c in eg.channels:
            add = None
            if c.producer in restart and c.consumer not in restart:
                add = c.consumer
            elif c.consumer in restart and c.producer not in restart and (c.producer, c.edge) not in available:
                add = c.producer
            if add is not None:
                restart |= next(r for r in regions if add in r)
                changed = True
    return frozenset(restart)


def downstream_closure(eg: ExecutionGraph, start: frozenset[SubtaskId]) -> set[SubtaskId]:
    seen = set(start)
    frontier = list(start)
    while frontier:
        s = frontier.pop()
        for c in eg.channels:
            if c.producer == s and c.consumer not in seen:
                seen.add(c.consumer)
                frontier.append(c.consumer)
    return seen


# ----------------------------------------------------------------------- examples
def test_streaming_example_is_one_region() -> None:
    eg = ExecutionGraph(JobGraph.from_json(EXAMPLES / "keyed-pipeline.json"))
    assert pipelined_regions(eg) == [frozenset(eg.subtasks)]


def test_batch_example_regions() -> None:
    eg = ExecutionGraph(JobGraph.from_json(EXAMPLES / "batch.json"))
    regions = [sorted(str(s) for s in r) for r in pipelined_regions(eg)]
    assert regions == [
        ["clean[0]", "src[0]"],
        ["clean[1]", "src[1]"],
        ["count[0]"],
        ["count[1]"],
        ["count[2]"],
        ["map[0]", "sink[0]"],
        ["map[1]", "sink[1]"],
    ]


def test_batch_failover_with_and_without_available_partitions() -> None:
    eg = ExecutionGraph(JobGraph.from_json(EXAMPLES / "batch.json"))
    failed = SubtaskId("count", 1)
    everything = failover_set(eg, failed, set())
    assert everything == frozenset(eg.subtasks)  # nothing persisted: every producer reruns
    kept = failover_set(eg, failed, blocking_partitions(eg))
    assert sorted(map(str, kept)) == ["count[1]", "map[0]", "map[1]", "sink[0]", "sink[1]"]
    assert sorted(map(str, failover_set(eg, SubtaskId("sink", 1), blocking_partitions(eg)))) == ["map[1]", "sink[1]"]
    # losing one of count[1]'s inputs reruns only that producer's region
    lost = (SubtaskId("clean", 0), 1)
    partial = failover_set(eg, failed, blocking_partitions(eg) - {lost})
    assert partial == kept | {SubtaskId("src", 0), SubtaskId("clean", 0), SubtaskId("count", 0), SubtaskId("count", 2)}


def test_failover_regions_are_reported_in_region_order() -> None:
    eg = ExecutionGraph(JobGraph.from_json(EXAMPLES / "batch.json"))
    regions = pipelined_regions(eg)
    chosen = failover_regions(eg, SubtaskId("count", 1), blocking_partitions(eg))
    assert chosen == [regions[3], regions[5], regions[6]]


def test_cycle_of_regions_merges() -> None:
    """facts §6.2: pointwise pipelined plus all-to-all blocking between the same vertices is one region."""
    job = JobGraph.from_json(
        {
            "vertices": [
                {"id": "a", "kind": "source", "parallelism": 2, "records": 1},
                {"id": "b", "kind": "co_map", "parallelism": 2},
                {"id": "sink", "kind": "sink", "parallelism": 2},
            ],
            "edges": [
                {"from": "a", "to": "b", "partitioner": "forward", "gate": 0},
                {"from": "a", "to": "b", "partitioner": "rebalance", "exchange": "blocking", "gate": 1},
                {"from": "b", "to": "sink", "partitioner": "forward"},
            ],
        }
    )
    eg = ExecutionGraph(job)
    assert pipelined_regions(eg) == [frozenset(eg.subtasks)]
    # without the blocking edge, the forward chains stay two regions
    job2 = JobGraph.from_json(
        {
            "vertices": [
                {"id": "a", "kind": "source", "parallelism": 2, "records": 1},
                {"id": "sink", "kind": "sink", "parallelism": 2},
            ],
            "edges": [{"from": "a", "to": "sink", "partitioner": "forward"}],
        }
    )
    assert len(pipelined_regions(ExecutionGraph(job2))) == 2


def test_unknown_failed_subtask() -> None:
    eg = ExecutionGraph(JobGraph.from_json(EXAMPLES / "batch.json"))
    with pytest.raises(ScenarioError, match=r"count\[7\]"):
        failover_set(eg, SubtaskId("count", 7), set())
    with pytest.raises(ScenarioError, match=r"nope\[0\]"):
        region_of(pipelined_regions(eg), SubtaskId("nope", 0))


# ----------------------------------------------------------------------- properties
@given(job_graphs())
def test_regions_partition_the_subtasks(job: JobGraph) -> None:
    eg = ExecutionGraph(job)
    regions = pipelined_regions(eg)
    assert all(regions)
    assert sum(len(r) for r in regions) == len(eg.subtasks)
    assert frozenset().union(*regions) == frozenset(eg.subtasks)
    position = {s: i for i, s in enumerate(eg.subtasks)}
    firsts = [min(position[s] for s in r) for r in regions]
    assert firsts == sorted(firsts)
    assert pipelined_regions(eg) == regions  # deterministic
    for s in eg.subtasks:
        assert s in region_of(regions, s)


@given(job_graphs())
def test_regions_match_oracle(job: JobGraph) -> None:
    eg = ExecutionGraph(job)
    regions = pipelined_regions(eg)
    assert set(regions) == oracle_regions(eg)
    index = {s: i for i, r in enumerate(regions) for s in r}
    for c in eg.channels:
        if pipelined(eg, c.edge):
            assert index[c.producer] == index[c.consumer]


@given(job_graphs(blocking=False))
def test_streaming_regions_are_connected_components(job: JobGraph) -> None:
    eg = ExecutionGraph(job)
    regions = pipelined_regions(eg)
    # with only pipelined exchanges, a region is exactly the subtasks joined to one by channels,
    # whichever the direction
    for region in regions:
        first = min(region)
        seen, frontier = {first}, [first]
        while frontier:
            s = frontier.pop()
            for c in eg.channels:
                for a, b in ((c.producer, c.consumer), (c.consumer, c.producer)):
                    if a == s and b not in seen:
                        seen.add(b)
                        frontier.append(b)
        assert seen == region


@given(job_graphs(), st.data())
def test_failover_set_properties(job: JobGraph, data: st.DataObject) -> None:
    eg = ExecutionGraph(job)
    regions = pipelined_regions(eg)
    failed = data.draw(st.sampled_from(eg.subtasks))
    blocking = sorted(blocking_partitions(eg), key=lambda p: (str(p[0]), p[1]))
    available = set(data.draw(st.lists(st.sampled_from(blocking), unique=True))) if blocking else set()
    restart = failover_set(eg, failed, available)

    assert region_of(regions, failed) <= restart
    assert downstream_closure(eg, frozenset([failed])) <= restart  # every consumer, transitively
    for c in eg.channels:
        if c.producer in restart:
            assert c.consumer in restart
        if c.consumer in restart and (c.producer, c.edge) not in available:
            assert c.producer in restart
    for r in regions:
        assert r <= restart or not (r & restart)  # whole regions only
    assert restart == oracle_failover(eg, failed, available)
    assert frozenset().union(*failover_regions(eg, failed, available)) == restart


@given(job_graphs(), st.data())
def test_failover_with_all_blocking_available_stays_downstream(job: JobGraph, data: st.DataObject) -> None:
    eg = ExecutionGraph(job)
    regions = pipelined_regions(eg)
    failed = data.draw(st.sampled_from(eg.subtasks))
    restart = failover_set(eg, failed, blocking_partitions(eg))
    start = region_of(regions, failed)
    downstream = downstream_closure(eg, start)
    # no region is pulled in only as a producer upstream of a blocking edge: every restarted
    # region is the failed one or is reached from it through its consumers
    for r in regions:
        if r <= restart:
            assert r == start or r & downstream
    assert restart >= downstream


@given(job_graphs(), st.data())
def test_failover_with_nothing_available_restarts_all_ancestors(job: JobGraph, data: st.DataObject) -> None:
    eg = ExecutionGraph(job)
    failed = data.draw(st.sampled_from(eg.subtasks))
    restart = failover_set(eg, failed, set())
    ancestors = {failed}
    frontier = [failed]
    while frontier:
        s = frontier.pop()
        for c in eg.channels:
            if c.consumer == s and c.producer not in ancestors:
                ancestors.add(c.producer)
                frontier.append(c.producer)
    assert ancestors <= restart
