"""The execution graph: a job graph expanded at given parallelisms into subtasks, gates and channels.

Wiring follows Flink (facts §2.3): ALL_TO_ALL edges connect every producer subtask to every
consumer subtask; POINTWISE edges (forward, rescale) connect each consumer to a contiguous run of
producers (S ≥ T) or each producer to a contiguous run of consumers (S < T).

Indexing, used by the engine, the logs and rescaling alike:
* a result partition is (producer subtask, edge); its subpartitions are numbered per edge;
* an input gate is (consumer subtask, gate index); its channels are numbered within the gate in
  the order of the gate's edges (by edge key), then by producer index.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from model.graph import Edge, JobGraph
from model.partitioning import connection_pattern, pointwise_wiring
from model.partitioning import supports_unaligned as partitioner_supports_unaligned


@dataclass(frozen=True, slots=True, order=True)
class SubtaskId:
    vertex: str
    index: int

    def __str__(self) -> str:
        return f"{self.vertex}[{self.index}]"

    @classmethod
    def parse(cls, text: str) -> SubtaskId:
        """Parse ``vertex[i]``; raises ValueError on anything else."""
        if not text.endswith("]") or "[" not in text:
            raise ValueError(f"expected VERTEX[INDEX], got {text!r}")
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
        t = self.parallelism[vid]
        offsets = dict.fromkeys(range(t), 0)
        for e in sorted(edges, key=lambda e: e.key):
            s = self.parallelism[e.source]
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
                    ch = Channel(
                        edge=e.key,
                        producer=SubtaskId(e.source, u),
                        consumer=SubtaskId(vid, d),
                        subpartition=sub_of[(u, d)],
                        gate=gate,
                        gate_channel=offsets[d] + pos,
                    )
                    self.channels.append(ch)
                    self.partitions.setdefault((ch.producer, e.key), []).append(ch)
                    self.gates.setdefault((ch.consumer, gate), []).append(ch)
                offsets[d] += len(producers)
            for u in range(s):
                self.partitions.setdefault((SubtaskId(e.source, u), e.key), [])

    # ----------------------------------------------------------------- queries
    def channels_of_edge(self, edge: int) -> list[Channel]:
        return [c for c in self.channels if c.edge == edge]

    def input_gates(self, subtask: SubtaskId) -> dict[int, list[Channel]]:
        return {g: chs for (st, g), chs in sorted(self.gates.items(), key=lambda kv: kv[0][1]) if st == subtask}

    def output_partitions(self, subtask: SubtaskId) -> dict[int, list[Channel]]:
        return {e: chs for (st, e), chs in sorted(self.partitions.items(), key=lambda kv: kv[0][1]) if st == subtask}

    def edge_supports_unaligned(self, edge: int) -> bool:
        """Whether barriers on this edge may be unaligned (facts §3.7).

        Flink decides per consumer node: if any input edge of the node is pointwise or broadcast,
        every input edge of that node is forced aligned. A custom partitioner disables unaligned
        barriers too (Flink master disables them on its edge; 1.19 refuses the job unless forced);
        the model simplifies by forcing the whole consumer node aligned, like the pointwise rule.
        """
        target = self.job.edge(edge).target
        return all(partitioner_supports_unaligned(other.partitioner) for other in self.job.in_edges(target))

    def vertex_aligns_inputs(self, vertex: str) -> bool:
        """True when every input of the vertex is forced aligned (its in-edges never carry unaligned barriers)."""
        return not any(self.edge_supports_unaligned(e.key) for e in self.job.in_edges(vertex))
