"""Network buffers and the worst-case in-flight bound (FLIP-183; invariant BOUND).

FLIP-183 states the worst case of in-flight data between two subtasks, with every buffer upstream
and downstream full::

    (bufferSize * subpartitions * exclusiveBuffers + bufferSize * floatingBuffers)   per result partition
  + (bufferSize * channels * exclusiveBuffers + bufferSize * floatingBuffers)         per input gate

The engine enforces exactly these limits, and this module is where they are written once:

* a result partition (one producer subtask, one edge) holds at most ``output_pool_size(subpartitions)``
  buffers, counting the queued ones and the one being filled;
* an input gate holds at most ``input_gate_buffers(channels)`` buffers
  (``channels * exclusive + floating``);
* a buffer holds at most ``buffer_bytes`` bytes (debloating may cap it lower, never higher).

So BOUND reads: the in-flight bytes of a run never exceed ``worst_case_inflight_bytes(...).total``,
and those of one partition or gate never exceed its entry. A blocking exchange is bounded the same
way: its partitions' network buffers count; what the blocking shuffle has already persisted is
storage, not in-flight data. Each result partition's pool has the FLIP-183 worst-case size
``subpartitions * exclusive + floating`` unless ``output_pool`` fixes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from cutcheck.model.errors import ScenarioError
from cutcheck.model.execution import ChannelCounts, ExecutionGraph, SubtaskId, channel_counts
from cutcheck.model.graph import JobGraph
from cutcheck.model.sections import Section

__all__ = ["InflightBound", "NetworkConfig", "job_worst_case_inflight_bytes", "worst_case_inflight_bytes"]


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    """Buffer sizes and counts of the simulated network (DESIGN scenario ``network``).

    ``exclusive`` buffers belong to each input channel and to each output subpartition;
    ``floating`` buffers to each input gate and to each result partition. ``output_pool`` (when
    set) replaces ``subpartitions * exclusive + floating`` as the buffer count of every result
    partition.
    """

    buffer_bytes: int = 4096
    record_bytes: int = 64
    exclusive: int = 2
    floating: int = 8
    output_pool: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "output_pool" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ScenarioError(f"network: '{f.name}' must be a positive integer, got {value!r}.")
        if self.record_bytes > self.buffer_bytes:
            raise ScenarioError(
                f"network: 'record_bytes' ({self.record_bytes}) exceeds 'buffer_bytes' ({self.buffer_bytes}); "
                "a record must fit in one buffer."
            )

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None, where: str = "") -> NetworkConfig:
        """Build from a scenario's ``network`` object; unknown fields are errors."""
        return cls(**NETWORK.read(data, where))

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def output_pool_size(self, subpartitions: int) -> int:
        """Buffers one result partition may hold (queued plus being filled)."""
        if self.output_pool is not None:
            return self.output_pool
        return subpartitions * self.exclusive + self.floating

    def input_gate_buffers(self, channels: int) -> int:
        """Buffers one input gate may hold: ``exclusive`` per channel plus the gate's ``floating``."""
        return channels * self.exclusive + self.floating


# The counts' ranges are checked by NetworkConfig itself (it is also built in code, not only from JSON).
NETWORK = Section.of("network", NetworkConfig)


@dataclass(frozen=True, slots=True)
class InflightBound:
    """The worst-case in-flight bytes, per result partition, per input gate, and in total.

    ``partitions`` maps ``(producer, edge)`` and ``gates`` maps ``(consumer, gate)`` to bytes; the
    keys are those of :attr:`ExecutionGraph.partitions` and :attr:`ExecutionGraph.gates`.
    """

    partitions: dict[tuple[SubtaskId, int], int] = field(default_factory=dict)
    gates: dict[tuple[SubtaskId, int], int] = field(default_factory=dict)

    @property
    def upstream(self) -> int:
        return sum(self.partitions.values())

    @property
    def downstream(self) -> int:
        return sum(self.gates.values())

    @property
    def total(self) -> int:
        return self.upstream + self.downstream


def worst_case_inflight_bytes(execution_graph: ExecutionGraph, network: NetworkConfig | None = None) -> InflightBound:
    """The FLIP-183 worst case: every buffer of every result partition and input gate full."""
    network = network or NetworkConfig()
    size = network.buffer_bytes
    partitions = {
        key: size * network.output_pool_size(len(channels)) for key, channels in execution_graph.partitions.items()
    }
    gates = {key: size * network.input_gate_buffers(len(channels)) for key, channels in execution_graph.gates.items()}
    return InflightBound(partitions=partitions, gates=gates)


def job_worst_case_inflight_bytes(job: JobGraph | ChannelCounts, network: NetworkConfig | None = None) -> InflightBound:
    """:func:`worst_case_inflight_bytes` of ``ExecutionGraph(job)``, from channel counts per job edge.

    The same keys, order and values, without building a channel; pass :func:`channel_counts` of
    the job when you already have them.
    """
    counts = job if isinstance(job, ChannelCounts) else channel_counts(job)
    network = network or NetworkConfig()
    size = network.buffer_bytes
    partitions = {key: size * network.output_pool_size(n) for key, n in counts.partitions.items()}
    gates = {key: size * network.input_gate_buffers(n) for key, n in counts.gates.items()}
    return InflightBound(partitions=partitions, gates=gates)
