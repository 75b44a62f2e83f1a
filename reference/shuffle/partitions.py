"""The pluggable shuffle service (FLIP-31): how result partitions are written and read.

As in Flink, the service has two sides:

* a ``ShuffleMaster`` (job side) registers a partition with its producer and returns a
  ``ShuffleDescriptor`` saying where consumers find it, and releases partitions externally;
* a ``ShuffleEnvironment`` per worker creates the partition writers and input gates of the tasks
  deployed there, releases partitions locally, and lists the partitions occupying local resources.

Two implementations, chosen per edge by its ``exchange``:

* ``pipelined``: in memory and credit-based, today's exchanges: the writer's subpartitions are
  connected to the consumers' input channels and the engine transmits buffer by buffer. The data
  live in the producer's worker and die with it (never re-consumable).
* ``blocking``: every finished buffer is persisted to a file in a directory (a temp dir unless the
  scenario names one), one file per subpartition. The partition is readable once complete, outlives
  its producer and its worker, is read later by consumers (credit-based from the file), and is
  deleted only when the master releases it.

Job-level ``reference.shuffle.service.ShuffleService.deploy`` wires a set of subtasks through these
interfaces; the streaming
engine deploys every subtask at once (``reference.shuffle.wiring.build_runtime``), the batch engine one
pipelined region at a time (``reference.batch``).
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import tempfile
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from cutcheck.model.execution import Channel, SubtaskId
from cutcheck.model.partitioning import make_selector
from cutcheck.reference.runtime.network import (
    END_OF_PARTITION,
    Buf,
    EndOfPartition,
    InputChannel,
    InputGate,
    OutputSubpartition,
    ResultPartition,
)
from cutcheck.reference.runtime.tasks import Task

if TYPE_CHECKING:
    from cutcheck.reference.runtime.doors import TaskRun
    from cutcheck.reference.runtime.records import Record

EXCHANGES = ("pipelined", "blocking")


# ------------------------------------------------------------------------------ descriptors
@dataclass(frozen=True, slots=True, order=True)
class ResultPartitionID:
    """A partition of one attempt: re-producing it (after a restart) gives a new id, as in Flink."""

    producer: SubtaskId
    edge: int
    attempt: int


@dataclass(frozen=True, slots=True)
class PartitionDescriptor:
    partition_id: ResultPartitionID
    exchange: str
    subpartitions: int


@dataclass(frozen=True, slots=True)
class ProducerDescriptor:
    producer: SubtaskId
    worker: int


@dataclass(frozen=True, slots=True)
class ShuffleDescriptor:
    """Where consumers find a partition: on the producer's worker (pipelined) or in a directory."""

    partition_id: ResultPartitionID
    exchange: str
    subpartitions: int
    worker: int | None  # the worker whose resources hold it; None when stored outside any worker
    path: str | None = None  # blocking: the partition's directory


class ShuffleMaster(Protocol):
    def register_partition_with_producer(self, partition: PartitionDescriptor, producer: ProducerDescriptor) -> ShuffleDescriptor:
        ...

    def release_partition_externally(self, descriptor: ShuffleDescriptor) -> None:
        ...


class ShuffleEnvironment(Protocol):
    worker: int

    def create_result_partition_writers(self, task: Task, partitions: list[tuple[ShuffleDescriptor, list[Channel]]]
                                        ) -> list[ResultPartition]:
        ...

    def create_input_gates(self, task: Task, gates: dict[int, list[Channel]]) -> list[InputGate]:
        ...

    def release_partitions_locally(self, ids: Iterable[ResultPartitionID]) -> None:
        ...

    def partitions_occupying_local_resources(self) -> list[ResultPartitionID]:
        ...


# ------------------------------------------------------------------------------ shared pieces
def _new_partition(engine: TaskRun, task: Task, edge_key: int, chans: list[Channel]) -> ResultPartition:
    """A writer's result partition: pool, channel selector and one subpartition per channel."""
    net, graph = engine.scenario.network, engine.graph
    edge = graph.edge(edge_key)
    n = len(chans)
    broadcast = edge.partitioner == "broadcast"
    selector = None
    if not broadcast:
        selector = make_selector(edge.partitioner, n, seed=engine.scenario.seed * 7919 + task.sid.index * 31 + edge_key,
                                 max_parallelism=graph.max_parallelism(edge.target))
    part = ResultPartition(edge=edge_key, subpartitions=[], pool=net.output_pool_size(n), selector=selector,
                           broadcast=broadcast, record_bytes=net.record_bytes, need=n if broadcast else 1,
                           key_routes={} if edge.partitioner in ("hash", "custom") else None,
                           unaligned_capable=engine.edge_unaligned[edge_key])
    for c in chans:
        sp = OutputSubpartition(index=c.subpartition, consumer=c.consumer.index, buffer_size=net.buffer_bytes)
        sp.partition, sp.task = part, task
        part.subpartitions.append(sp)
    task.partitions.append(part)
    task.bind_emit()
    return part


class _GateFactory:
    """SingleInputGateFactory: gates with credits (and a debloater each, when debloating is on)."""

    engine: TaskRun

    def create_input_gates(self, task: Task, gates: dict[int, list[Channel]]) -> list[InputGate]:
        net = self.engine.scenario.network
        made = []
        for g, chans in gates.items():
            gate = InputGate(g, exclusive=net.exclusive, floating=net.floating)
            for c in chans:
                ch = InputChannel(gate=gate, task=task, index=c.gate_channel, edge=c.edge, producer=c.producer.index)
                ch.index_in_task = len(task.channels)
                gate.channels.append(ch)
                task.channels.append(ch)
            if self.engine.debloat is not None:
                self.engine.debloat.attach(self.engine, gate)
            task.gates.append(gate)
            made.append(gate)
        return made


# ------------------------------------------------------------------------------ pipelined
class PipelinedShuffleMaster:
    def __init__(self) -> None:
        self.registered: dict[ResultPartitionID, ShuffleDescriptor] = {}

    def register_partition_with_producer(self, partition: PartitionDescriptor, producer: ProducerDescriptor) -> ShuffleDescriptor:
        d = ShuffleDescriptor(partition.partition_id, "pipelined", partition.subpartitions, producer.worker)
        self.registered[d.partition_id] = d
        return d

    def release_partition_externally(self, descriptor: ShuffleDescriptor) -> None:
        self.registered.pop(descriptor.partition_id, None)  # the data live on the worker: nothing external


class PipelinedShuffleEnvironment(_GateFactory):
    """In-memory, credit-based exchanges: subpartitions are connected to input channels directly."""

    def __init__(self, engine: TaskRun, worker: int):
        self.engine = engine
        self.worker = worker
        self.partitions: dict[ResultPartitionID, ResultPartition] = {}

    def create_result_partition_writers(self, task: Task, partitions: list[tuple[ShuffleDescriptor, list[Channel]]]
                                        ) -> list[ResultPartition]:
        made = []
        for d, chans in partitions:
            part = _new_partition(self.engine, task, d.partition_id.edge, chans)
            self.partitions[d.partition_id] = part
            made.append(part)
        return made

    def release_partitions_locally(self, ids: Iterable[ResultPartitionID]) -> None:
        for pid in ids:
            self.partitions.pop(pid, None)

    def partitions_occupying_local_resources(self) -> list[ResultPartitionID]:
        return sorted(self.partitions)


# ------------------------------------------------------------------------------ blocking
_HEADER = struct.Struct("<qI")  # per buffer: sequence number of its first record, record count
_END = 0xFFFFFFFF  # record count of the end-of-partition marker
_FIELDS = 7  # a record is 7 int64 (reference.runtime.records)


@dataclass(slots=True)
class BlockingPartitionState:
    descriptor: ShuffleDescriptor
    finished: bool = False
    released: bool = False
    bytes_written: int = 0


class BlockingShuffleMaster:
    """Partitions live in ``<dir>/<partition>/sub-K.bin``; a ``DONE`` file marks a complete one."""

    def __init__(self, directory: str | None = None):
        if directory is None:
            self.root = Path(tempfile.mkdtemp(prefix="cutcheck-shuffle-"))
            self._owned = self.root
        else:
            Path(directory).mkdir(parents=True, exist_ok=True)
            self.root = Path(tempfile.mkdtemp(prefix="job-", dir=directory))
            self._owned = self.root
        self.partitions: dict[ResultPartitionID, BlockingPartitionState] = {}
        self.released_count = 0

    def register_partition_with_producer(self, partition: PartitionDescriptor, producer: ProducerDescriptor) -> ShuffleDescriptor:
        pid = partition.partition_id
        name = f"{re.sub(r'[^A-Za-z0-9_.-]', '_', pid.producer.vertex)}-{pid.producer.index}-e{pid.edge}-a{pid.attempt}"
        path = self.root / name
        path.mkdir()
        # Stored outside the producer's worker (worker None): it survives the worker.
        d = ShuffleDescriptor(pid, "blocking", partition.subpartitions, None, str(path))
        self.partitions[pid] = BlockingPartitionState(d)
        return d

    def release_partition_externally(self, descriptor: ShuffleDescriptor) -> None:
        state = self.partitions.get(descriptor.partition_id)
        if state is None or state.released:
            return
        state.released = True
        self.released_count += 1
        shutil.rmtree(descriptor.path or "", ignore_errors=True)

    def mark_finished(self, descriptor: ShuffleDescriptor) -> None:
        Path(descriptor.path or "", "DONE").write_bytes(b"")
        self.partitions[descriptor.partition_id].finished = True

    def is_available(self, pid: ResultPartitionID) -> bool:
        """Complete, not released, and still on disk (ALL_DATA_PRODUCED and re-consumable)."""
        s = self.partitions.get(pid)
        return s is not None and s.finished and not s.released and Path(s.descriptor.path or "", "DONE").exists()

    def close(self) -> None:
        shutil.rmtree(self._owned, ignore_errors=True)


@dataclass(slots=True)
class BlockingWriter:
    """The writer of one blocking partition: persists each finished buffer of each subpartition."""

    descriptor: ShuffleDescriptor
    partition: ResultPartition
    master: BlockingShuffleMaster
    ended: list[bool] = field(default_factory=list)

    def file(self, sub: int) -> Path:
        return Path(self.descriptor.path or "", f"sub-{sub}.bin")

    def persist(self, sp: OutputSubpartition) -> None:
        """Write the head of ``sp``'s queue to its file (the partition's network buffer is then free)."""
        head = sp.queue.popleft()
        with self.file(sp.index).open("ab") as f:
            if isinstance(head, Buf):
                f.write(_HEADER.pack(head.seq0, len(head.recs)))
                f.write(array("q", [v for rec in head.recs for v in rec]).tobytes())
                sp.transmitted += len(head.recs)
                self.partition.in_use -= 1
                self.master.partitions[self.descriptor.partition_id].bytes_written += len(head.recs) * self.partition.record_bytes
            elif isinstance(head, EndOfPartition):
                f.write(_HEADER.pack(sp.emitted, _END))
                self.ended[sp.index] = True
                if all(self.ended):
                    self.master.mark_finished(self.descriptor)
            # Barriers never reach a blocking partition: batch jobs take no checkpoints.


@dataclass(slots=True)
class BlockingReader:
    """Reads one subpartition file into one input channel, a buffer per credit, once it is complete."""

    descriptor: ShuffleDescriptor
    sub: int
    channel: InputChannel
    master: BlockingShuffleMaster
    offset: int = 0
    done: bool = False

    def can_read(self) -> bool:
        return (not self.done and self.master.is_available(self.descriptor.partition_id)
                and self.channel.gate.can_receive(self.channel))

    def read(self) -> None:
        ch = self.channel
        with Path(self.descriptor.path or "", f"sub-{self.sub}.bin").open("rb") as f:
            f.seek(self.offset)
            seq0, n = _HEADER.unpack(f.read(_HEADER.size))
            self.offset += _HEADER.size
            if n == _END:
                ch.queue.append(END_OF_PARTITION)
                self.done = True
                return
            vals = array("q")
            vals.frombytes(f.read(8 * _FIELDS * n))
            self.offset += 8 * _FIELDS * n
        recs: list[Record] = [tuple(vals[i:i + _FIELDS]) for i in range(0, len(vals), _FIELDS)]  # type: ignore[misc]
        ch.gate.take_buffer(ch)
        ch.queue.append(Buf(recs, seq0))


class BlockingShuffleEnvironment(_GateFactory):
    def __init__(self, engine: TaskRun, worker: int, master: BlockingShuffleMaster):
        self.engine = engine
        self.worker = worker
        self.master = master
        self.writers: dict[ResultPartitionID, BlockingWriter] = {}

    def create_result_partition_writers(self, task: Task, partitions: list[tuple[ShuffleDescriptor, list[Channel]]]
                                        ) -> list[ResultPartition]:
        made = []
        for d, chans in partitions:
            part = _new_partition(self.engine, task, d.partition_id.edge, chans)
            self.writers[d.partition_id] = BlockingWriter(d, part, self.master, [False] * len(chans))
            made.append(part)
        return made

    def reader(self, channel: InputChannel, descriptor: ShuffleDescriptor, sub: int) -> BlockingReader:
        return BlockingReader(descriptor, sub, channel, self.master)

    def release_partitions_locally(self, ids: Iterable[ResultPartitionID]) -> None:
        for pid in ids:
            self.writers.pop(pid, None)  # the files stay: only the master releases them

    def partitions_occupying_local_resources(self) -> list[ResultPartitionID]:
        """Only partitions still being written hold this worker's buffers; complete ones are files."""
        return sorted(pid for pid, w in self.writers.items() if not all(w.ended))


def blocking_dir_size(path: str | os.PathLike[str]) -> int:
    """Bytes under a shuffle directory (for tests and reports)."""
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
