"""The job's shuffle service: the masters (one per exchange kind) and every worker's environments,
and ``deploy``, which wires a set of subtasks through them (reference.shuffle.partitions has the interfaces and
both implementations)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cutcheck.model.execution import Channel, SubtaskId
from cutcheck.reference.runtime.network import InputChannel, OutputSubpartition
from cutcheck.reference.runtime.tasks import Task
from cutcheck.reference.shuffle.partitions import (
    BlockingReader,
    BlockingShuffleEnvironment,
    BlockingShuffleMaster,
    BlockingWriter,
    PartitionDescriptor,
    PipelinedShuffleEnvironment,
    PipelinedShuffleMaster,
    ProducerDescriptor,
    ResultPartitionID,
    ShuffleDescriptor,
    ShuffleMaster,
)

if TYPE_CHECKING:
    from cutcheck.reference.runtime.doors import TaskRun


@dataclass(slots=True)
class Deployment:
    tasks: dict[SubtaskId, Task]
    subpartitions: list[OutputSubpartition]  # pipelined: transmitted by the engine
    writers: list[BlockingWriter]
    readers: list[BlockingReader]


class ShuffleService:
    """The job's shuffle masters (one per exchange kind) and every worker's environments."""

    def __init__(self, engine: TaskRun, workers: int, blocking_dir: str | None = None):
        self.engine = engine
        self.workers = workers
        self.blocking_dir = blocking_dir
        self.pipelined = PipelinedShuffleMaster()
        self._blocking: BlockingShuffleMaster | None = None
        self.envs: dict[tuple[str, int], PipelinedShuffleEnvironment | BlockingShuffleEnvironment] = {}
        self.descriptors: dict[tuple[SubtaskId, int], ShuffleDescriptor] = {}  # the current attempt's

    @property
    def blocking(self) -> BlockingShuffleMaster:
        if self._blocking is None:  # no directory until a blocking partition is registered
            self._blocking = BlockingShuffleMaster(self.blocking_dir)
        return self._blocking

    def worker_of(self, sid: SubtaskId) -> int:
        """Subtask i of every vertex runs on worker i mod workers."""
        return sid.index % self.workers

    def master(self, exchange: str) -> ShuffleMaster:
        return self.blocking if exchange == "blocking" else self.pipelined

    def environment(self, exchange: str, worker: int) -> PipelinedShuffleEnvironment | BlockingShuffleEnvironment:
        env = self.envs.get((exchange, worker))
        if env is None:
            env = (BlockingShuffleEnvironment(self.engine, worker, self.blocking) if exchange == "blocking"
                   else PipelinedShuffleEnvironment(self.engine, worker))
            self.envs[(exchange, worker)] = env
        return env

    def deploy(self, subtasks: Iterable[SubtaskId], running: dict[SubtaskId, Task] | None = None) -> Deployment:
        """Create the tasks, gates and partitions of ``subtasks`` and connect their channels.

        Pipelined channels connect to the peer in this deployment, or else to the running ``peer``
        task (which only the test-only fault ``restart-failed-task-only`` makes happen); blocking
        channels get a reader of the producer's registered partition.
        """
        engine, eg, graph = self.engine, self.engine.exec_graph, self.engine.graph
        running = running or {}
        wanted = set(subtasks)
        order = [sid for sid in eg.subtasks if sid in wanted]
        tasks = {sid: Task(engine, sid, eg.parallelism[sid.vertex], graph.max_parallelism(sid.vertex)) for sid in order}
        dep = Deployment(tasks, [], [], [])
        receivers: dict[Channel, InputChannel] = {}
        for sid, task in tasks.items():  # input gates first, so that subpartitions can find their channel
            gates = eg.input_gates(sid)
            first = {g: graph.edge(chans[0].edge).exchange for g, chans in gates.items()}
            for g, chans in gates.items():
                self.environment(first[g], self.worker_of(sid)).create_input_gates(task, {g: chans})
                for c, ch in zip(chans, task.gates[-1].channels, strict=True):
                    receivers[c] = ch
        for sid, task in tasks.items():
            worker = self.worker_of(sid)
            for edge_key, chans in eg.output_partitions(sid).items():
                exchange = graph.edge(edge_key).exchange
                pid = ResultPartitionID(sid, edge_key, engine.attempt)
                d = self.master(exchange).register_partition_with_producer(
                    PartitionDescriptor(pid, exchange, len(chans)), ProducerDescriptor(sid, worker))
                self.descriptors[(sid, edge_key)] = d
                env = self.environment(exchange, worker)
                (part,) = env.create_result_partition_writers(task, [(d, chans)])
                if exchange == "blocking":
                    dep.writers.append(env.writers[pid])  # type: ignore[union-attr]
                    continue
                for c, sp in zip(chans, part.subpartitions, strict=True):
                    receiver = receivers.get(c) or _running_channel(running, c)
                    if receiver is not None:
                        _connect(engine, sp, receiver, c)
                    dep.subpartitions.append(sp)
        for c, ch in receivers.items():
            exchange = graph.edge(c.edge).exchange
            if exchange == "blocking":
                d = self.descriptors[(c.producer, c.edge)]
                env = self.environment("blocking", self.worker_of(c.consumer))
                dep.readers.append(env.reader(ch, d, c.subpartition))  # type: ignore[union-attr]
            elif ch.sender is None and c.producer in running:
                part = next(p for p in running[c.producer].partitions if p.edge == c.edge)
                _connect(engine, part.subpartitions[c.subpartition], ch, c)
        return dep

    def close(self) -> None:
        if self._blocking is not None:
            self._blocking.close()


def _running_channel(running: dict[SubtaskId, Task], c: Channel) -> InputChannel | None:
    task = running.get(c.consumer)
    if task is None:
        return None
    for ch in task.channels:
        if ch.edge == c.edge and ch.producer == c.producer.index:
            return ch
    return None


def _connect(engine: TaskRun, sp: OutputSubpartition, ch: InputChannel, c: Channel) -> None:
    sp.channel, ch.sender = ch, sp
    sp.events = engine.channel_events((c.edge, c.producer.index, c.consumer.index), c.gate)


