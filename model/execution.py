"""The execution graph: a job graph expanded at given parallelisms into subtasks, gates and channels.

Wiring follows Flink (facts §2.3): ALL_TO_ALL edges connect every producer subtask to every
consumer subtask; POINTWISE edges (forward, rescale) connect each consumer to a contiguous run of
producers (S ≥ T) or each producer to a contiguous run of consumers (S < T).

Indexing, used by the engine, the logs and rescaling alike:
* a result partition is (producer subtask, edge); its subpartitions are numbered per edge;
* an input gate is (consumer subtask, gate index); its channels are numbered within the gate in
  the order of the gate's edges (by edge key), then by producer index.

Counting needs no expansion: :func:`channel_count` and :func:`channel_counts` give, per job edge,
what an ExecutionGraph would hold (channels per edge, subpartitions per result partition, channels
per input gate), for any valid job. Building the ExecutionGraph itself is bounded: it refuses a job
of more than ``MAX_CHANNELS`` channels (the engine's budget) with one sentence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cutcheck.model.errors import GraphError, InvalidArgument
from cutcheck.model.graph import Edge, JobGraph
from cutcheck.model.partitioning import connection_pattern, pointwise_wiring
from cutcheck.model.partitioning import supports_unaligned as partitioner_supports_unaligned


@dataclass(frozen=True, slots=True, order=True)
class SubtaskId:
    vertex: str
    index: int

    def __str__(self) -> str:
        return f"{self.vertex}[{self.index}]"

    @classmethod
    def parse(cls, text: str) -> SubtaskId:
        """Parse ``vertex[i]``; raises InvalidArgument (a ValueError) on anything else."""
        if not text.endswith("]") or "[" not in text:
            raise InvalidArgument(f"expected VERTEX[INDEX], got {text!r}")
        vertex, _, rest = text.rpartition("[")
        return cls(vertex, int(rest[:-1]))


@dataclass(frozen=True, slots=True)
class Channel:
    """One physical channel: producer subpartition → consumer input-gate channel."""

    edge: int
    producer: SubtaskId
    consumer: SubtaskId
    subpartition: int  # index within the producer's result partition for this edge
    gate: int
    gate_channel: int  # index within the consumer's input gate

    def __str__(self) -> str:
        return f"{self.producer}->{self.consumer}#e{self.edge}"


# The engine's channel budget: the most channels an ExecutionGraph (and so a simulated run) may have.
# Measured with benchmarks/bench_graph.py on all-to-all jobs: the ExecutionGraph plus the engine's
# runtime take about 3.7 KB and 15-50 µs per channel, so 200 000 channels set up in 4-10 s within
# 700 MB (ExecutionGraph alone: about 120 bytes and 1.5 µs per channel). It bounds memory and set-up,
# not run time: each engine step scans every subpartition (about 0.1 s a step at 200 000 channels).
# Commands that need only counts per job edge (graph show, regions, inflight) are not bound by it.
MAX_CHANNELS = 200_000


def edge_channels(edge: Edge, upstream: int, downstream: int) -> int:
    """Channels of one job edge at these producer and consumer parallelisms, without building them.

    ALL_TO_ALL: every producer to every consumer. POINTWISE (facts §2.3): with S >= T each producer
    feeds exactly one consumer, with S < T each consumer reads exactly one producer: max(S, T).
    """
    if connection_pattern(edge.partitioner) == "POINTWISE":
        return max(upstream, downstream)
    return upstream * downstream


def channel_count(job: JobGraph, parallelism: Mapping[str, int] | None = None) -> int:
    """How many channels the job has at its parallelisms, or at ``parallelism`` where that names a
    vertex (other names are ignored; nothing is validated); a formula per job edge, no expansion."""
    p = {v.id: v.parallelism for v in job.vertices}
    p.update(parallelism or {})
    return sum(edge_channels(e, p[e.source], p[e.target]) for e in job.edges)


def check_channel_budget(job: JobGraph, limit: int = MAX_CHANNELS) -> None:
    """Raise GraphError when expanding the job into channels would exceed ``limit``."""
    total = channel_count(job)
    if total > limit:
        p = {v.id: v.parallelism for v in job.vertices}
        widest = max(job.edges, key=lambda e: edge_channels(e, p[e.source], p[e.target]))
        raise GraphError(
            f"job '{job.name}' has {total} channels, more than the engine's budget of {limit} channels; "
            f"{widest.describe()} alone has {edge_channels(widest, p[widest.source], p[widest.target])}, "
            f"so lower the parallelism of '{widest.source}' or '{widest.target}'."
        )


def edge_supports_unaligned(job: JobGraph, edge: int) -> bool:
    """Whether barriers on this edge may be unaligned (facts §3.7).

    Flink decides per consumer node: if any input edge of the node is pointwise or broadcast,
    every input edge of that node is forced aligned. A custom partitioner disables unaligned
    barriers too (Flink master disables them on its edge; 1.19 refuses the job unless forced);
    the model simplifies by forcing the whole consumer node aligned, like the pointwise rule.
    """
    target = job.edge(edge).target
    return all(partitioner_supports_unaligned(other.partitioner) for other in job.in_edges(target))


def subtasks_of(job: JobGraph) -> list[SubtaskId]:
    """Every subtask, topologically by vertex, then by index: the order of ``ExecutionGraph.subtasks``."""
    return [SubtaskId(vid, i) for vid in job.topological_order() for i in range(job.vertex(vid).parallelism)]


@dataclass(slots=True)
class ChannelCounts:
    """How many channels each job edge, result partition and input gate has, computed per job edge.

    The keys and their order are those of ``ExecutionGraph`` (``edges`` by edge key, ``partitions``
    and ``gates`` as :attr:`ExecutionGraph.partitions` and :attr:`ExecutionGraph.gates`); the values
    are the lengths of its lists. Nothing is built per channel, so any valid job fits.
    """

    job: JobGraph
    edges: dict[int, int] = field(default_factory=dict)
    partitions: dict[tuple[SubtaskId, int], int] = field(default_factory=dict)
    gates: dict[tuple[SubtaskId, int], int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.edges.values())


def channel_counts(job: JobGraph, parallelism: Mapping[str, int] | None = None) -> ChannelCounts:
    """Channels per job edge, result partition and input gate, as ExecutionGraph would wire them."""
    if parallelism:
        job = job.with_parallelism(parallelism)
    p = {v.id: v.parallelism for v in job.vertices}
    counts = ChannelCounts(job, {e.key: edge_channels(e, p[e.source], p[e.target]) for e in job.edges})
    for vid in job.topological_order():
        t = p[vid]
        consumers = [SubtaskId(vid, d) for d in range(t)]
        for g, edges in job.gates(vid).items():
            for e in sorted(edges, key=lambda e: e.key):
                s = p[e.source]
                if connection_pattern(e.partitioner) == "POINTWISE":
                    wiring = pointwise_wiring(s, t)
                    subpartitions = [len(c) for c in wiring.consumers_of]
                    reads = [len(r) for r in wiring.producers_of]
                else:
                    subpartitions, reads = [t] * s, [s] * t
                for u in range(s):
                    counts.partitions[(SubtaskId(e.source, u), e.key)] = subpartitions[u]
                for d in range(t):
                    if reads[d]:
                        key = (consumers[d], g)
                        counts.gates[key] = counts.gates.get(key, 0) + reads[d]
    return counts


@dataclass(slots=True)
class ExecutionGraph:
    """Subtasks, result partitions, input gates and channels of a job at given parallelisms."""

    job: JobGraph
    parallelism: dict[str, int] = field(default_factory=dict)
    subtasks: list[SubtaskId] = field(init=False)
    channels: list[Channel] = field(init=False)
    # (producer, edge) -> channels in subpartition order
    partitions: dict[tuple[SubtaskId, int], list[Channel]] = field(init=False)
    # (consumer, gate) -> channels in gate-channel order
    gates: dict[tuple[SubtaskId, int], list[Channel]] = field(init=False)

    def __init__(self, job: JobGraph, parallelism: Mapping[str, int] | None = None):
        if parallelism:
            job = job.with_parallelism(parallelism)
        check_channel_budget(job)
        self.job = job
        self.parallelism = {v.id: v.parallelism for v in job.vertices}
        self.subtasks = [SubtaskId(vid, i) for vid in job.topological_order() for i in range(self.parallelism[vid])]
        self.channels = []
        self.partitions = {}
        self.gates = {}
        for vid in job.topological_order():
            for g, edges in job.gates(vid).items():
                self._wire_gate(vid, g, edges)
        for key in self.partitions:
            self.partitions[key].sort(key=lambda c: c.subpartition)

    def _wire_gate(self, vid: str, gate: int, edges: list[Edge]) -> None:
        """Channels of one input gate, consumer by consumer, each edge's producers in order.

        Linear in the channels: a consumer reads producers ``producers_of[d]`` (pointwise) or all of
        them, and its subpartition in the producer's partition is its position among that
        producer's consumers (pointwise: contiguous, so ``d - consumers_of[u][0]``) or ``d``.
        """
        t = self.parallelism[vid]
        consumers = [SubtaskId(vid, d) for d in range(t)]
        offsets = [0] * t
        for e in sorted(edges, key=lambda e: e.key):
            s = self.parallelism[e.source]
            producers = [SubtaskId(e.source, u) for u in range(s)]
            # Every producer's partition exists, in producer order, even one that feeds no channel.
            lists = [self.partitions.setdefault((p, e.key), []) for p in producers]
            pointwise = connection_pattern(e.partitioner) == "POINTWISE"
            wiring = pointwise_wiring(s, t) if pointwise else None
            for d in range(t):
                reads: Sequence[int] = wiring.producers_of[d] if wiring is not None else range(s)
                if not reads:
                    continue
                gate_list = self.gates.setdefault((consumers[d], gate), [])
                offset = offsets[d]
                for pos, u in enumerate(reads):
                    sub = d - wiring.consumers_of[u][0] if wiring is not None else d
                    ch = Channel(e.key, producers[u], consumers[d], sub, gate, offset + pos)
                    self.channels.append(ch)
                    lists[u].append(ch)
                    gate_list.append(ch)
                offsets[d] = offset + len(reads)

    # ----------------------------------------------------------------- queries
    def channels_of_edge(self, edge: int) -> list[Channel]:
        return [c for c in self.channels if c.edge == edge]

    def input_gates(self, subtask: SubtaskId) -> dict[int, list[Channel]]:
        return {g: chs for (st, g), chs in sorted(self.gates.items(), key=lambda kv: kv[0][1]) if st == subtask}

    def output_partitions(self, subtask: SubtaskId) -> dict[int, list[Channel]]:
        return {e: chs for (st, e), chs in sorted(self.partitions.items(), key=lambda kv: kv[0][1]) if st == subtask}

    def edge_supports_unaligned(self, edge: int) -> bool:
        """Whether barriers on this edge may be unaligned; see :func:`edge_supports_unaligned`."""
        return edge_supports_unaligned(self.job, edge)

    def vertex_aligns_inputs(self, vertex: str) -> bool:
        """True when every input of the vertex is forced aligned (its in-edges never carry unaligned barriers)."""
        return not any(self.edge_supports_unaligned(e.key) for e in self.job.in_edges(vertex))
