"""The shuffle service (FLIP-31): the engine's exchanges go through ShuffleMaster/ShuffleEnvironment;
pipelined partitions live on their producer's worker; blocking ones are files that outlive it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cutcheck.model.execution import SubtaskId
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.batch import BatchEngine, make_engine
from cutcheck.reference.engine import Engine
from cutcheck.reference.events.stream import Logged
from cutcheck.reference.runtime.network import END_OF_PARTITION, Buf, EndOfPartition
from cutcheck.reference.shuffle.partitions import (
    BlockingReader,
    BlockingShuffleMaster,
    BlockingWriter,
    PartitionDescriptor,
    ProducerDescriptor,
    ResultPartitionID,
)
from cutcheck.reference.shuffle.service import ShuffleService
from tests.reference.helpers import scenario, small_graph


def test_streaming_wiring_goes_through_the_pipelined_environment() -> None:
    engine = Engine(Scenario.from_json(scenario("keyed-pipeline.json")))
    eg = engine.exec_graph
    assert len(engine.subpartitions) == len(eg.channels)
    for sp in engine.subpartitions:
        assert sp.channel.sender is sp and sp.partition.pool == engine.scenario.network.output_pool_size(
            len(sp.partition.subpartitions))
    service = ShuffleService(engine, workers=2)
    dep = service.deploy(eg.subtasks)
    assert not dep.writers and not dep.readers and len(dep.subpartitions) == len(eg.channels)
    # Subtask i of every vertex lives on worker i mod 2, and so do its pipelined partitions.
    for w in (0, 1):
        held = service.environment("pipelined", w).partitions_occupying_local_resources()
        assert held and all(pid.producer.index % 2 == w for pid in held)
    env = service.environment("pipelined", 0)
    env.release_partitions_locally(env.partitions_occupying_local_resources())
    assert env.partitions_occupying_local_resources() == []


def test_same_runs_through_the_interface_are_deterministic() -> None:
    s = Scenario.from_json(scenario(small_graph(), slow="count", failures=[{"after_checkpoint": 2, "target": "count[0]"}]))
    a, b = simulate(s), simulate(s)
    assert a.ok and a.summary() == b.summary()


def _blocking_partition(tmp_path: Path, subpartitions: int = 2) -> tuple[BlockingShuffleMaster, Any]:
    master = BlockingShuffleMaster(str(tmp_path))
    pid = ResultPartitionID(SubtaskId("src", 0), 0, 0)
    d = master.register_partition_with_producer(PartitionDescriptor(pid, "blocking", subpartitions),
                                                ProducerDescriptor(SubtaskId("src", 0), 1))
    return master, d


def test_blocking_partitions_are_files_outside_the_producers_worker(tmp_path: Path) -> None:
    master, d = _blocking_partition(tmp_path)
    assert d.worker is None and Path(d.path).is_dir() and Path(d.path).parent.parent == tmp_path
    master.release_partition_externally(d)
    assert not Path(d.path).exists() and not master.is_available(d.partition_id)
    master.close()
    assert list(tmp_path.iterdir()) == []


class _Part:  # the few ResultPartition fields the writer touches
    def __init__(self) -> None:
        self.in_use = 3
        self.record_bytes = 64


class _Sub:
    def __init__(self, index: int) -> None:
        from collections import deque

        self.index, self.queue, self.transmitted, self.emitted = index, deque(), 0, 0


class _Gate:
    def __init__(self, credits: int) -> None:
        self.credits = credits

    def can_receive(self, ch: Any) -> bool:
        return self.credits > 0

    def take_buffer(self, ch: Any) -> None:
        self.credits -= 1


class _Channel:
    def __init__(self, credits: int) -> None:
        from collections import deque

        self.queue: Any = deque()
        self.gate = _Gate(credits)


def test_a_blocking_partition_round_trips_through_its_files_once_complete(tmp_path: Path) -> None:
    master, d = _blocking_partition(tmp_path)
    part = _Part()
    writer = BlockingWriter(d, part, master, [False, False])  # type: ignore[arg-type]
    subs = [_Sub(0), _Sub(1)]
    recs = [(i, i % 3, i * 7, 0, i, 0, -1) for i in range(5)]
    subs[0].queue.extend([Buf(recs[:3], 0), Buf(recs[3:], 3), END_OF_PARTITION])
    subs[0].emitted = 5
    subs[1].queue.append(END_OF_PARTITION)
    ch = _Channel(credits=1)
    reader = BlockingReader(d, 0, ch, master)  # type: ignore[arg-type]
    for _ in range(3):
        writer.persist(subs[0])  # type: ignore[arg-type]
    assert part.in_use == 1 and subs[0].transmitted == 5
    assert not master.is_available(d.partition_id) and not reader.can_read()  # not complete yet
    writer.persist(subs[1])  # type: ignore[arg-type]
    assert master.is_available(d.partition_id)
    reader.read()
    assert not reader.can_read()  # credit-based: one buffer per credit
    ch.gate.credits = 5
    while reader.can_read():
        reader.read()
    bufs = [x for x in ch.queue if isinstance(x, Buf)]
    assert [(b.seq0, b.recs) for b in bufs] == [(0, recs[:3]), (3, recs[3:])]
    assert isinstance(ch.queue[-1], EndOfPartition) and reader.done
    master.close()


def test_blocking_partitions_outlive_their_producer_and_its_worker(tmp_path: Path) -> None:
    s = Scenario.from_json(scenario("batch.json", workers=2, batch={"shuffle_dir": str(tmp_path)}))
    engine = make_engine(s)
    assert isinstance(engine, BatchEngine)
    checked = []

    def on(e: Logged) -> None:
        if e.kind == "deploy" and e.detail.startswith("{count[") and not checked:
            # The producers (src/clean) finished; their partitions occupy no worker, only files.
            for w in (0, 1):
                held = engine.shuffle.environment("blocking", w).partitions_occupying_local_resources()
                assert held and all(pid.producer.vertex == "count" for pid in held)  # only those being written
                env = engine.shuffle.environment("pipelined", w)
                env.release_partitions_locally(env.partitions_occupying_local_resources())  # the worker is gone
            clean = [engine.shuffle.descriptors[(SubtaskId("clean", i), 1)] for i in range(2)]
            assert all(engine.shuffle.blocking.is_available(d.partition_id) for d in clean)
            assert all(sorted(p.name for p in Path(d.path).iterdir()) == ["DONE", "sub-0.bin", "sub-1.bin", "sub-2.bin"]
                       for d in clean)
            checked.append(True)

    engine.bus.subscribe(Logged, on)
    engine.run()
    assert checked and engine.oracle.verdict().ok
    assert list(tmp_path.iterdir()) == []  # released at job end, the job's directory removed
