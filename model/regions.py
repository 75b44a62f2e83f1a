"""Pipelined regions and region failover, as Flink computes them (facts §6.2, §6.4).

A *region* is a set of subtasks that must run (and restart) together because data flows between
them through must-be-pipelined exchanges. In this model the exchange ``pipelined`` is
MUST_BE_PIPELINED and ``blocking`` (a persisted, re-consumable partition) is a region boundary.

Regions are computed in two steps, like ``SchedulingPipelinedRegionComputeUtil``:

1. connected components of subtasks over channels of pipelined edges;
2. the components are nodes of a directed *region graph* (A → B when a subtask of A produces a
   blocking partition that a subtask of B consumes); every strongly connected component of that
   graph (a cycle of regions, FLINK-17330) merges into one region.

:func:`job_pipelined_regions` computes the same regions per job edge, without building a channel,
so it answers for any valid job (``graph regions`` uses it); the property tests hold the two equal.

A *partition* is ``(producer SubtaskId, edge key)``, exactly the keys of
:attr:`ExecutionGraph.partitions`. Failover (``RestartPipelinedRegionFailoverStrategy``) starts
from the failed subtask's region and, breadth first over regions, adds the producer region of every
partition a restarting region consumes that is not available, and every consumer region of every
partition a restarting region produces. The caller says which partitions are available: a pipelined
partition never is; a blocking one is when it finished and was not lost. Flink also leaves out
vertices still in CREATED state; the model restarts whole regions.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterator, Mapping, Sequence

import networkx as nx

from cutcheck.model.errors import ScenarioError
from cutcheck.model.execution import ExecutionGraph, SubtaskId, subtasks_of
from cutcheck.model.graph import Edge, JobGraph
from cutcheck.model.partitioning import connection_pattern, pointwise_wiring

Partition = tuple[SubtaskId, int]
Region = frozenset[SubtaskId]

__all__ = [
    "Partition",
    "Region",
    "failover_regions",
    "failover_set",
    "job_pipelined_regions",
    "pipelined_regions",
    "region_of",
]


def _is_pipelined(execution_graph: ExecutionGraph, edge: int) -> bool:
    return execution_graph.job.edge(edge).exchange == "pipelined"


def pipelined_regions(execution_graph: ExecutionGraph) -> list[Region]:
    """The pipelined regions of the execution graph; every subtask is in exactly one.

    Regions are sorted by their first subtask in ``execution_graph.subtasks`` order (topological
    by vertex, then by index), so the result is the same on every run.
    """
    eg = execution_graph
    position = {st: i for i, st in enumerate(eg.subtasks)}

    # Step 1: connected components over must-be-pipelined channels.
    pipelined: nx.Graph[SubtaskId] = nx.Graph()
    pipelined.add_nodes_from(eg.subtasks)
    pipelined.add_edges_from((c.producer, c.consumer) for c in eg.channels if _is_pipelined(eg, c.edge))
    raw = [frozenset(component) for component in nx.connected_components(pipelined)]
    raw.sort(key=lambda region: min(position[st] for st in region))
    raw_index = {st: i for i, region in enumerate(raw) for st in region}

    # Step 2: merge cycles of the region graph built from the other (blocking) channels.
    region_graph: nx.DiGraph[int] = nx.DiGraph()
    region_graph.add_nodes_from(range(len(raw)))
    for c in eg.channels:
        if not _is_pipelined(eg, c.edge):
            a, b = raw_index[c.producer], raw_index[c.consumer]
            if a != b:
                region_graph.add_edge(a, b)
    merged = [frozenset().union(*(raw[i] for i in scc)) for scc in nx.strongly_connected_components(region_graph)]
    merged.sort(key=lambda region: min(position[st] for st in region))
    return merged


def job_pipelined_regions(job: JobGraph, parallelism: Mapping[str, int] | None = None) -> list[Region]:
    """:func:`pipelined_regions` of ``ExecutionGraph(job, parallelism)``, computed per job edge.

    The same regions in the same order, without building a channel: step 1 is a union-find over
    subtasks where an ALL_TO_ALL pipelined edge joins every subtask of both vertices (p_up + p_down
    unions instead of p_up * p_down channels) and a POINTWISE one joins the pairs it wires; in step 2
    an ALL_TO_ALL blocking edge enters the region graph through one hub node (every producer region
    -> hub -> every consumer region), which keeps which regions reach which, and so the strongly
    connected components, with p_up + p_down arcs instead of p_up * p_down.
    """
    if parallelism:
        job = job.with_parallelism(parallelism)
    subtasks = subtasks_of(job)
    base: dict[str, int] = {}
    for i, st in enumerate(subtasks):
        base.setdefault(st.vertex, i)
    width = {v.id: v.parallelism for v in job.vertices}
    parent = list(range(len(subtasks)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    def wired(e: Edge) -> Iterator[tuple[int, int]]:
        """Producer and consumer positions of a pointwise edge's channels."""
        wiring = pointwise_wiring(width[e.source], width[e.target])
        for d, producers in enumerate(wiring.producers_of):
            for u in producers:
                yield base[e.source] + u, base[e.target] + d

    def span(vid: str) -> range:
        return range(base[vid], base[vid] + width[vid])

    blocking = [e for e in job.edges if e.exchange != "pipelined"]
    for e in job.edges:
        if e.exchange != "pipelined":
            continue
        if connection_pattern(e.partitioner) == "POINTWISE":
            for a, b in wired(e):
                union(a, b)
        else:
            for x in (*span(e.source), *span(e.target)):
                union(base[e.source], x)

    # Raw regions numbered by their first subtask (roots are the smallest position, see union).
    raw_index: list[int] = []
    first: dict[int, int] = {}
    for i in range(len(subtasks)):
        raw_index.append(first.setdefault(find(i), len(first)))
    raw: list[list[int]] = [[] for _ in first]
    for i, r in enumerate(raw_index):
        raw[r].append(i)

    # Nodes are raw region numbers, plus one ("hub", edge key) node per all-to-all blocking edge.
    region_graph: nx.DiGraph[int | tuple[str, int]] = nx.DiGraph()
    region_graph.add_nodes_from(range(len(raw)))
    for e in blocking:
        if connection_pattern(e.partitioner) == "POINTWISE":
            region_graph.add_edges_from((raw_index[a], raw_index[b]) for a, b in wired(e))
        else:
            hub = ("hub", e.key)
            region_graph.add_edges_from((raw_index[a], hub) for a in span(e.source))
            region_graph.add_edges_from((hub, raw_index[b]) for b in span(e.target))
    merged = []
    for scc in nx.strongly_connected_components(region_graph):
        members = sorted(i for r in scc if isinstance(r, int) for i in raw[r])
        if members:
            merged.append((members[0], frozenset(subtasks[i] for i in members)))
    merged.sort(key=lambda item: item[0])
    return [region for _, region in merged]


def region_of(regions: Sequence[Region], subtask: SubtaskId) -> Region:
    """The region holding ``subtask``; raises ScenarioError if no region does."""
    for region in regions:
        if subtask in region:
            return region
    raise ScenarioError(f"subtask {subtask}: not in the execution graph; name a subtask as VERTEX[INDEX] within its parallelism.")


def failover_regions(
    execution_graph: ExecutionGraph,
    failed_subtask: SubtaskId,
    available_partitions: Collection[Partition] = frozenset(),
    regions: Sequence[Region] | None = None,
) -> list[Region]:
    """The regions to restart when ``failed_subtask`` fails, in the order of ``pipelined_regions``.

    ``available_partitions`` holds the ``(producer, edge)`` partitions that a restarted consumer can
    read again (finished blocking partitions that were not lost); every other partition a restarting
    region consumes pulls in its producer's region. ``regions`` may pass a precomputed
    ``pipelined_regions(execution_graph)``.
    """
    eg = execution_graph
    if regions is None:
        regions = pipelined_regions(eg)
    index = {st: i for i, region in enumerate(regions) for st in region}
    if failed_subtask not in index:
        region_of(regions, failed_subtask)  # raises the user-facing error
    available = frozenset(available_partitions)

    # Per region: the partitions its subtasks read, and the regions reading what its subtasks write.
    reads: list[set[Partition]] = [set() for _ in regions]
    feeds: list[set[int]] = [set() for _ in regions]
    for c in eg.channels:
        reads[index[c.consumer]].add((c.producer, c.edge))
        feeds[index[c.producer]].add(index[c.consumer])

    start = index[failed_subtask]
    visited = {start}
    queue = deque([start])
    while queue:
        r = queue.popleft()
        found = {index[producer] for (producer, edge) in reads[r] if (producer, edge) not in available}
        found |= feeds[r]
        for nxt in sorted(found - visited):
            visited.add(nxt)
            queue.append(nxt)
    return [regions[i] for i in sorted(visited)]


def failover_set(
    execution_graph: ExecutionGraph,
    failed_subtask: SubtaskId,
    available_partitions: Collection[Partition] = frozenset(),
    regions: Sequence[Region] | None = None,
) -> frozenset[SubtaskId]:
    """Every subtask to restart when ``failed_subtask`` fails (the union of :func:`failover_regions`)."""
    return frozenset().union(*failover_regions(execution_graph, failed_subtask, available_partitions, regions))
