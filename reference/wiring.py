"""Builds the run-time objects (tasks, gates, partitions, channels) from the execution graph.

This is the pipelined shuffle environment of the engine: it creates partition writers (result
partitions with their pools) and input gates (with credits) and connects them in memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from model.execution import SubtaskId
from model.partitioning import make_selector
from reference.network import InputChannel, InputGate, OutputSubpartition, ResultPartition
from reference.tasks import Task

if TYPE_CHECKING:
    from reference.engine import Engine


class KeyCachedSelector:
    """Memoises a key-only selector (hash, custom): the channel is a pure function of the key,
    and a job has few keys, so the murmur hash runs once per key instead of once per record."""

    __slots__ = ("_inner", "_cache")

    def __init__(self, inner: object):
        self._inner = inner
        self._cache: dict[int, int] = {}

    def select(self, key: int) -> int:
        ch = self._cache.get(key)
        if ch is None:
            ch = self._cache[key] = self._inner.select(key)  # type: ignore[attr-defined]
        return ch


def build_runtime(engine: Engine) -> tuple[dict[SubtaskId, Task], list[OutputSubpartition]]:
    eg = engine.exec_graph
    net = engine.scenario.network
    graph = engine.graph
    tasks: dict[SubtaskId, Task] = {}
    for sid in eg.subtasks:
        tasks[sid] = Task(engine, sid, eg.parallelism[sid.vertex], graph.max_parallelism(sid.vertex))
    subpartitions: list[OutputSubpartition] = []
    # Input gates first, so that subpartitions can point at their receiving channel.
    receivers = {}
    for sid, task in tasks.items():
        for g, chans in eg.input_gates(sid).items():
            gate = InputGate(g, exclusive=net.exclusive, floating=net.floating)
            for c in chans:
                ch = InputChannel(gate=gate, task=task, index=c.gate_channel, edge=c.edge, producer=c.producer.index)
                ch.index_in_task = len(task.channels)
                gate.channels.append(ch)
                task.channels.append(ch)
                receivers[c] = ch
            task.gates.append(gate)
    for sid, task in tasks.items():
        for edge_key, chans in eg.output_partitions(sid).items():
            edge = graph.edge(edge_key)
            n = len(chans)
            broadcast = edge.partitioner == "broadcast"
            selector = None
            if not broadcast:
                selector = make_selector(
                    edge.partitioner, n, seed=engine.scenario.seed * 7919 + sid.index * 31 + edge_key,
                    max_parallelism=graph.max_parallelism(edge.target),
                )
                if edge.partitioner in ("hash", "custom"):
                    selector = KeyCachedSelector(selector)
            part = ResultPartition(edge=edge_key, subpartitions=[], pool=net.output_pool or n * net.exclusive + net.floating,
                                   selector=selector, broadcast=broadcast, record_bytes=net.record_bytes,
                                   need=n if broadcast else 1)
            for c in chans:
                sp = OutputSubpartition(index=c.subpartition, consumer=c.consumer.index, buffer_size=net.buffer_bytes)
                sp.channel, sp.partition, sp.task = receivers[c], part, task
                receivers[c].sender = sp
                if engine.tracing:
                    sp.trace = engine.traces.setdefault((edge_key, c.producer.index, c.consumer.index), [])
                part.subpartitions.append(sp)
                subpartitions.append(sp)
            task.partitions.append(part)
    return tasks, subpartitions
