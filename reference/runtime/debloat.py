"""Buffer debloating (FLIP-183, facts §4): per input gate, throughput without idle time, an EMA of
the buffer size that would hold ``target`` worth of data, announced to the senders.

The calculation classes mirror Flink's ``ThroughputCalculator``, ``BufferSizeEMA`` and
``BufferDebloater`` line by line, with Java's int/long/double arithmetic made explicit (``_int``,
``_long``, ``_d2i``), so that a unit test can check them against hand-computed values.

Time. The engine has no clock, only scheduler steps, so **one step stands for one millisecond**:
``target`` and ``period`` are steps, throughput is bytes per 1000 steps, and the estimated time to
consume is steps. A gate's measurement clock runs on exactly the steps at whose start its task has
data it could process from that gate (some channel readable, with data or an event at its head),
whether or not the scheduler then picks that action; so time blocked on an empty gate is excluded,
as Flink's ``SingleInputGate.getNext`` pauses the calculator, while time spent backpressured with
input waiting counts, as in Flink (the task is busy, not idle). Bytes are the records the task
consumed from the gate's channels (``record_bytes`` each); events count 0 bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from cutcheck.model.errors import InvalidArgument, ScenarioError
from cutcheck.model.sections import Field, Section, int_fields

if TYPE_CHECKING:
    from cutcheck.reference.runtime.doors import TaskRun
    from cutcheck.reference.runtime.network import InputGate

MILLIS_IN_SECOND = 1000
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def _int(x: int) -> int:
    """Java int overflow: wrap to 32-bit two's complement."""
    return (x + 2**31) % 2**32 - 2**31


def _long(x: int) -> int:
    """Java long overflow: wrap to 64-bit two's complement."""
    return (x + 2**63) % 2**64 - 2**63


def _ldiv(a: int, b: int) -> int:
    """Java integral division: truncates toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _d2i(x: float, lo: int = _INT_MIN, hi: int = _INT_MAX) -> int:
    """Java's (int) / (long) narrowing of a double: NaN → 0, saturate, truncate toward zero."""
    if x != x:
        return 0
    if x >= hi:
        return hi
    if x <= lo:
        return lo
    return int(x)  # int() truncates toward zero


def _d2l(x: float) -> int:
    return _d2i(x, _LONG_MIN, _LONG_MAX)


# ---------------------------------------------------------------------------------------- config
@dataclass(frozen=True, slots=True)
class DebloatConfig:
    """Scenario section ``debloat``; Flink's keys (facts §4.1) with times in steps (= ms).

    ``max buffer`` is not here: it is ``network.buffer_bytes`` (Flink: the segment size).
    """

    enabled: bool = False  # taskmanager.network.memory.buffer-debloat.enabled
    target: int = 1000  # ...buffer-debloat.target: 1 s
    period: int = 200  # ...buffer-debloat.period: 200 ms
    samples: int = 20  # ...buffer-debloat.samples
    threshold: int = 25  # ...buffer-debloat.threshold-percentages
    min_buffer: int = 256  # taskmanager.memory.min-segment-size: 256 B

    @classmethod
    def from_json(cls, data: Any, max_buffer: int, where: str = "scenario") -> DebloatConfig:
        """Validate the section (unknown fields are errors) against the network's buffer size."""
        if data is None:  # no section: debloating is off, so min_buffer is never compared with the buffer size
            return cls()
        cfg = cls(**DEBLOAT.read(data, where))
        if cfg.min_buffer > max_buffer:
            raise ScenarioError(f"{where}: debloat.min_buffer ({cfg.min_buffer}) exceeds network.buffer_bytes "
                                f"({max_buffer}), the maximum buffer size; lower it.")
        return cfg

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


DEBLOAT = Section.of("debloat", DebloatConfig, {
    "enabled": Field(bool),
    **int_fields(("target", "period", "samples", "min_buffer"), low=1),
    "threshold": Field(int, low=0, high=100, says="a percentage 0..100"),
})


# ---------------------------------------------------------------------------------------- Flink's classes
class ThroughputCalculator:
    """``org.apache.flink.runtime.throughput.ThroughputCalculator``; ``clock`` returns the step."""

    NOT_TRACKED = -1
    __slots__ = ("clock", "current_throughput", "accumulated_bytes", "measurement_time", "start")

    def __init__(self, clock: Callable[[], int]):
        self.clock = clock
        self.current_throughput = 0
        self.accumulated_bytes = 0
        self.measurement_time = 0
        self.start = self.NOT_TRACKED

    def incoming_data_size(self, size: int) -> None:
        if self.start == self.NOT_TRACKED:  # force resuming measurement
            self.start = self.clock()
        self.accumulated_bytes += size

    def pause_measurement(self) -> None:
        if self.start != self.NOT_TRACKED:
            self.measurement_time += self.clock() - self.start
        self.start = self.NOT_TRACKED

    def resume_measurement(self) -> None:
        if self.start == self.NOT_TRACKED:
            self.start = self.clock()

    def calculate_throughput(self) -> int:
        if self.start != self.NOT_TRACKED:
            now = self.clock()
            self.measurement_time += now - self.start
            self.start = now
        throughput = self.throughput_of(self.accumulated_bytes, self.measurement_time)
        self.accumulated_bytes = self.measurement_time = 0
        return throughput

    def throughput_of(self, data_size: int, time: int) -> int:
        if data_size < 0 or time < 0:
            raise InvalidArgument("size and time must be non negative")
        if time == 0:
            return self.current_throughput  # nothing measured: keep the previous value
        self.current_throughput = instant_throughput(data_size, time)
        return self.current_throughput


def instant_throughput(data_size: int, time: int) -> int:
    """``(long) ((double) dataSize / time * MILLIS_IN_SECOND)``."""
    return _d2l(float(data_size) / time * MILLIS_IN_SECOND)


class BufferSizeEMA:
    """``org.apache.flink.runtime.throughput.BufferSizeEMA``: α = 2/(samples+1), growth capped at ×2."""

    __slots__ = ("max_buffer", "min_buffer", "alpha", "last_buffer_size")

    def __init__(self, max_buffer: int, min_buffer: int, samples: int, start: int | None = None):
        self.max_buffer = max_buffer
        self.min_buffer = min_buffer
        self.alpha = 2.0 / (samples + 1)
        self.last_buffer_size = max_buffer if start is None else start

    def calculate_buffer_size(self, total_bytes: int, total_buffers: int) -> int:
        if total_bytes < 0 or total_buffers <= 0:
            raise InvalidArgument("total bytes must be non negative and buffers positive")
        # long arithmetic: min(total / buffers, 2L * last)
        desirable = min(_ldiv(total_bytes, total_buffers), _long(2 * self.last_buffer_size))
        # int += double is int = (int) (int + double): the sum truncates toward zero
        self.last_buffer_size = _d2i(self.last_buffer_size + self.alpha * float(_long(desirable - self.last_buffer_size)))
        self.last_buffer_size = max(self.min_buffer, min(self.last_buffer_size, self.max_buffer))
        return self.last_buffer_size


class BufferDebloater:
    """``org.apache.flink.runtime.throughput.BufferDebloater``: one per input gate."""

    __slots__ = ("gate_index", "target", "max_buffer", "min_buffer", "threshold_factor", "last_buffer_size",
                 "ema", "last_estimated_time_to_consume")

    def __init__(self, gate_index: int, target: int, max_buffer: int, min_buffer: int, threshold: int, samples: int):
        self.gate_index = gate_index
        self.target = target  # Flink calls it targetTotalBufferSize, but it is a duration in ms
        self.max_buffer = max_buffer
        self.min_buffer = min_buffer
        self.threshold_factor = threshold / 100.0
        self.last_buffer_size = max_buffer  # the last announced size
        self.ema = BufferSizeEMA(max_buffer, min_buffer, samples)
        self.last_estimated_time_to_consume = 0

    def recalculate_buffer_size(self, throughput: int, buffers_in_use: int) -> int | None:
        """The new size to announce, or None when the change is skipped."""
        actual = max(1, buffers_in_use)
        desired_total = _ldiv(_long(throughput * self.target), MILLIS_IN_SECOND)
        new_size = self.ema.calculate_buffer_size(desired_total, actual)
        # newSize * actualBuffersInUse is an int product, then widened to long by * 1000L
        self.last_estimated_time_to_consume = _ldiv(_long(_int(new_size * actual) * MILLIS_IN_SECOND), max(1, throughput))
        if self._skip_update(new_size):
            return None
        self.last_buffer_size = new_size
        return new_size

    def _skip_update(self, new_size: int) -> bool:
        if new_size == self.last_buffer_size:
            return True
        if new_size <= self.min_buffer or new_size >= self.max_buffer:
            return False  # a size at min or max is always announced
        delta = _d2i(self.last_buffer_size * self.threshold_factor)
        return abs(new_size - self.last_buffer_size) < delta


# ---------------------------------------------------------------------------------------- the engine's driver
@dataclass(slots=True)
class GateDebloat:
    """The per-gate measurement and debloater (Flink creates both in SingleInputGateFactory)."""

    calculator: ThroughputCalculator
    debloater: BufferDebloater
    seen_records: int = 0  # records of the gate's channels consumed at the last look


@dataclass(slots=True)
class DebloatStats:
    announcements: int = 0
    recalculations: int = 0
    min_size: int = 0
    # Estimated time to consume, over recalculations of gates with a measured throughput (before any
    # data the throughput is 0 and the estimate, size · buffers · 1000 / max(1, 0), means nothing).
    measured: int = 0
    last_estimate_max: int = 0
    estimate_sum: int = 0


class Debloating:
    """Drives every gate's debloater from the engine's step loop (StreamTask's debloat timer)."""

    def __init__(self, config: DebloatConfig, max_buffer: int, record_bytes: int):
        self.config = config
        self.max_buffer = max_buffer
        self.record_bytes = record_bytes
        self.next_due = config.period
        self.stats = DebloatStats(min_size=max_buffer)

    @classmethod
    def of(cls, engine: TaskRun) -> Debloating | None:
        net = engine.scenario.network
        cfg = DebloatConfig.from_json(engine.scenario.extra.get("debloat"), net.buffer_bytes)
        return cls(cfg, net.buffer_bytes, net.record_bytes) if cfg.enabled else None

    def attach(self, engine: TaskRun, gate: InputGate) -> None:
        c = self.config
        gate.debloat = GateDebloat(ThroughputCalculator(lambda: engine.step),
                                   BufferDebloater(gate.index, c.target, self.max_buffer, c.min_buffer, c.threshold, c.samples))

    def on_step(self, engine: TaskRun) -> None:
        """At the start of a step: account the bytes consumed in the last step, recalculate when the
        period is due, then run or pause each gate's clock by whether its task has data to process."""
        due = engine.step >= self.next_due
        if due:
            self.next_due = engine.step + self.config.period
        for t in engine.tasks.values():
            for gate in t.gates:
                gd = gate.debloat
                if gd is None:
                    continue
                consumed = sum(ch.processed for ch in gate.channels)
                if consumed > gd.seen_records:
                    gd.calculator.incoming_data_size((consumed - gd.seen_records) * self.record_bytes)
                gd.seen_records = consumed
                if due:
                    self._recalculate(engine, t, gate, gd)
                if any(t.readable(ch) and (ch.recovered or ch.queue) for ch in gate.channels):
                    gd.calculator.resume_measurement()
                else:
                    gd.calculator.pause_measurement()

    def _recalculate(self, engine: TaskRun, task: Any, gate: InputGate, gd: GateDebloat) -> None:
        throughput = gd.calculator.calculate_throughput()
        # Buffers in use: data buffers a channel holds (exclusive and floating), plus queued recovered ones.
        in_use = sum(ch.nbuf + len(ch.recovered) for ch in gate.channels)
        old = gd.debloater.last_buffer_size
        new = gd.debloater.recalculate_buffer_size(throughput, in_use)
        estimate = gd.debloater.last_estimated_time_to_consume
        s = self.stats
        s.recalculations += 1
        if throughput > 0:
            s.measured += 1
            s.estimate_sum += estimate
            s.last_estimate_max = max(s.last_estimate_max, estimate)
        if new is None:
            return
        s.announcements += 1
        s.min_size = min(s.min_size, new)
        for ch in gate.channels:
            if ch.sender is not None:
                ch.sender.buffer_size = new  # announceBufferSize: the sender trims its next buffers
        engine.event("debloat", f"{task.sid} gate {gate.index}: buffer size {old} -> {new} B, throughput {throughput} "
                                f"B per 1000 steps, buffers in use {in_use}, estimated time to consume {estimate} steps")

    def summary(self, engine: TaskRun) -> dict[str, Any]:
        s = self.stats
        return {"config": self.config.to_json(), "announcements": s.announcements,
                "recalculations": s.recalculations, "min_buffer_size": s.min_size,
                "buffer_size_now": current_buffer_size(engine),
                "estimated_time_to_consume_mean": round(s.estimate_sum / s.measured, 1) if s.measured else 0,
                "estimated_time_to_consume_max": s.last_estimate_max}


def current_buffer_size(engine: TaskRun) -> int:
    """The mean announced buffer size over the job's (pipelined) subpartitions, in bytes."""
    sps = engine.subpartitions
    configured: int = engine.scenario.network.buffer_bytes
    return sum(sp.buffer_size for sp in sps) // len(sps) if sps else configured
