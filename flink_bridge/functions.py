"""The Python functions that run inside Flink (PyFlink thread mode), one per vertex kind.

They are pickled by reference, so the embedded interpreter imports this module: keep it free of
anything heavier than reference.runtime.records. A record travels as a 6-tuple of longs
``(rid, key, value, split, offset, count)``, the engine's record without its counter index.

Two test hooks ride along in every function (``Probe``): a per-record delay, which makes the
vertex slow so that backpressure builds in-flight data, and the injected failure. The failure is
armed from outside (the driver creates ``armed`` once Flink reports checkpoint N completed) and
fires exactly once, in whichever subtask of the failing vertex sees a record first: creating
``fired`` with O_EXCL is the machine-wide "once", and survives the restart it causes.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from pyflink.common import Row
from pyflink.datastream.functions import (
    BroadcastProcessFunction,
    CoMapFunction,
    FilterFunction,
    KeyedBroadcastProcessFunction,
    KeyedProcessFunction,
    MapFunction,
    RuntimeContext,
)
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

from cutcheck.reference.runtime.records import SourceLayout, filter_keeps, map_value


class InjectedFailure(RuntimeError):
    """The failure cutcheck injects; its message names the subtask and the armed checkpoint."""


@dataclass(slots=True)
class Probe:
    vertex: str
    delay_s: float = 0.0
    armed: str | None = None  # path of the marker the driver creates after checkpoint N
    fired: str | None = None  # path created (O_EXCL) by the one subtask that fails

    def __getstate__(self) -> dict:  # slots dataclasses need this for (cloud)pickle on 3.11
        return {"vertex": self.vertex, "delay_s": self.delay_s, "armed": self.armed, "fired": self.fired}

    def __setstate__(self, state: dict) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)


class _Probed:
    """Mixin: the delay and the once-only failure, checked before each record."""

    def _init_probe(self, probe: Probe | None) -> None:
        self.probe = probe
        self.subtask = -1
        self.done = probe is None or probe.armed is None

    def _open_probe(self, ctx: RuntimeContext) -> None:
        self.subtask = subtask_index(ctx)

    def _tick(self) -> None:
        p = self.probe
        if p is None:
            return
        if p.delay_s:
            time.sleep(p.delay_s)
        if self.done or not os.path.exists(p.armed):  # type: ignore[arg-type]
            return
        try:
            fd = os.open(p.fired, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # type: ignore[arg-type]
        except FileExistsError:
            self.done = True  # fired before (this run, or the attempt before a restart)
            return
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{p.vertex}[{self.subtask}] {time.time():.3f}\n")
        self.done = True
        raise InjectedFailure(f"cutcheck injected failure in {p.vertex}[{self.subtask}]")


class Generate(MapFunction, _Probed):
    """Source record j of a SourceLayout, from NumberSequenceSource's j (rid, key, split, offset as the engine's)."""

    def __init__(self, layout: SourceLayout, probe: Probe | None = None):
        self.layout = layout
        self._init_probe(probe)

    def open(self, runtime_context: RuntimeContext) -> None:
        self._open_probe(runtime_context)

    def map(self, j: int) -> tuple:
        self._tick()
        lay = self.layout
        rec = lay.record(j % lay.splits, j // lay.splits)
        return (rec[0], rec[1], rec[2], rec[3], rec[4], 0)


class Map(MapFunction, _Probed):
    def __init__(self, probe: Probe | None = None):
        self._init_probe(probe)

    def open(self, runtime_context: RuntimeContext) -> None:
        self._open_probe(runtime_context)

    def map(self, r: tuple) -> tuple:
        self._tick()
        return (r[0], r[1], map_value(r[2]), r[3], r[4], r[5])


class Identity(MapFunction, _Probed):
    """A union vertex: Flink's union is not an operator, so cutcheck's union is an identity map."""

    def __init__(self, probe: Probe | None = None):
        self._init_probe(probe)

    def open(self, runtime_context: RuntimeContext) -> None:
        self._open_probe(runtime_context)

    def map(self, r: tuple) -> tuple:
        self._tick()
        return r


class Filter(FilterFunction, _Probed):
    def __init__(self, drop_every: int, probe: Probe | None = None):
        self.drop_every = drop_every
        self._init_probe(probe)

    def open(self, runtime_context: RuntimeContext) -> None:
        self._open_probe(runtime_context)

    def filter(self, r: tuple) -> bool:
        self._tick()
        return filter_keeps(r[0], self.drop_every)


class AddKey(MapFunction):
    """What PyFlink's key_by does (Row(key, record) for its KeyByKeySelector), as an operator we can give a uid."""

    def map(self, r: tuple) -> Row:
        return Row(r[1], r)


class Count(KeyedProcessFunction, _Probed):
    """keyed_count: the per-key count in keyed ValueState (restored and redistributed by key group)."""

    def __init__(self, probe: Probe | None = None):
        self._init_probe(probe)

    def open(self, runtime_context: RuntimeContext) -> None:
        self._open_probe(runtime_context)
        self.state = runtime_context.get_state(ValueStateDescriptor("count", _long_type()))

    def process_element(self, r: tuple, ctx: KeyedProcessFunction.Context):
        self._tick()
        c = (self.state.value() or 0) + 1
        self.state.update(c)
        yield (r[0], r[1], r[2], r[3], r[4], c)


class CoIdentity(CoMapFunction, _Probed):
    """A co_map vertex: the engine's co_map passes the records of both gates on unchanged."""

    def __init__(self, probe: Probe | None = None):
        self._init_probe(probe)

    def open(self, runtime_context: RuntimeContext) -> None:
        self._open_probe(runtime_context)

    def map1(self, r: tuple) -> tuple:
        self._tick()
        return r

    def map2(self, r: tuple) -> tuple:
        self._tick()
        return r


def broadcast_descriptor() -> MapStateDescriptor:
    """The broadcast state of a broadcast_state vertex: rid -> how often it was applied (the engine's multiset)."""
    from pyflink.common import Types

    return MapStateDescriptor("broadcast", Types.LONG(), Types.LONG())


class _BroadcastApply(_Probed):
    """broadcast_state: broadcast elements (gate 1) go into broadcast state, both inputs pass on unchanged."""

    def _apply(self, r: tuple, ctx) -> tuple:  # noqa: ANN001 - PyFlink's Context classes differ per function
        self._tick()
        state = ctx.get_broadcast_state(broadcast_descriptor())
        state.put(r[0], (state.get(r[0]) or 0) + 1)
        return r


class Broadcast(BroadcastProcessFunction, _BroadcastApply):
    """broadcast_state whose data input (gate 0) is not hash-partitioned."""

    def __init__(self, probe: Probe | None = None):
        self._init_probe(probe)

    def open(self, runtime_context: RuntimeContext) -> None:
        self._open_probe(runtime_context)

    def process_element(self, r: tuple, ctx: BroadcastProcessFunction.ReadOnlyContext):
        self._tick()
        yield r

    def process_broadcast_element(self, r: tuple, ctx: BroadcastProcessFunction.Context):
        yield self._apply(r, ctx)


class KeyedBroadcast(KeyedBroadcastProcessFunction, _BroadcastApply):
    """broadcast_state whose data input (gate 0) is hash-partitioned (keyed by the record's key)."""

    def __init__(self, probe: Probe | None = None):
        self._init_probe(probe)

    def open(self, runtime_context: RuntimeContext) -> None:
        self._open_probe(runtime_context)

    def process_element(self, r: tuple, ctx: KeyedBroadcastProcessFunction.ReadOnlyContext):
        self._tick()
        yield r

    def process_broadcast_element(self, r: tuple, ctx: KeyedBroadcastProcessFunction.Context):
        yield self._apply(r, ctx)


class Format(MapFunction, _Probed):
    """The sink's line: rid,key,value,count,split,offset,subtask (FileSink part names do not carry the subtask)."""

    def __init__(self, probe: Probe | None = None):
        self._init_probe(probe)

    def open(self, runtime_context: RuntimeContext) -> None:
        self._open_probe(runtime_context)

    def map(self, r: tuple) -> str:
        self._tick()
        return f"{r[0]},{r[1]},{r[2]},{r[5]},{r[3]},{r[4]},{self.subtask}"


def subtask_index(ctx: RuntimeContext) -> int:
    try:
        return ctx.get_index_of_this_subtask()
    except Exception:
        # PyFlink 2.x thread mode calls RuntimeContext.getIndexOfThisSubtask(), which Flink 2.0 removed
        # (it moved to getTaskInfo()); go through the Java object ourselves.
        return int(ctx._runtime_context.getTaskInfo().getIndexOfThisSubtask())  # type: ignore[attr-defined]


def custom_partition(key: int, partitions: int) -> int:
    """The graph's 'custom' partitioner: key modulo parallelism."""
    return key % partitions


def record_key(r: tuple) -> int:
    return r[1]


def _long_type():
    from pyflink.common import Types

    return Types.LONG()
