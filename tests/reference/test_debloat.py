"""Buffer debloating (FLIP-183, facts §4): the calculation on hand-computed values, the configuration,
the sender's trimming, the gate clock, and BOUND with debloating on (a Hypothesis property)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cutcheck.model.errors import ScenarioError
from cutcheck.model.inflight import NetworkConfig, worst_case_inflight_bytes
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.engine import Engine
from cutcheck.reference.runtime.debloat import (
    BufferDebloater,
    BufferSizeEMA,
    DebloatConfig,
    ThroughputCalculator,
    instant_throughput,
)
from cutcheck.reference.runtime.network import Buf
from tests.reference.helpers import scenario, small_graph
from tests.strategies import job_graph_dicts

# ------------------------------------------------------------------------------ ThroughputCalculator


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def test_instant_throughput_is_a_truncated_double() -> None:
    # (long) (1000.0 / 300 * 1000) = (long) 3333.33… = 3333
    assert instant_throughput(1000, 300) == 3333
    # (long) (7.0 / 3 * 1000) = (long) 2333.33… = 2333
    assert instant_throughput(7, 3) == 2333


def test_throughput_excludes_idle_time() -> None:
    clock = Clock()
    calc = ThroughputCalculator(clock)
    calc.incoming_data_size(500)  # t=0: resumes the measurement
    clock.now = 10
    calc.pause_measurement()  # measured 10
    clock.now = 50  # 40 idle steps: not measured
    calc.resume_measurement()
    calc.incoming_data_size(500)
    clock.now = 60
    # measured 10 + 10 = 20 steps for 1000 bytes: 1000 / 20 * 1000 = 50000 bytes per 1000 steps
    assert calc.calculate_throughput() == 50_000
    # The accumulators were reset and the clock keeps running from t=60: 30 steps, 300 bytes.
    clock.now = 90
    calc.incoming_data_size(300)
    assert calc.calculate_throughput() == 10_000  # 300 / 30 * 1000
    calc.pause_measurement()  # t=90: nothing more measured
    clock.now = 200
    assert calc.calculate_throughput() == 10_000  # time 0: the previous throughput is kept


# ------------------------------------------------------------------------------ BufferSizeEMA


def test_ema_steps_toward_the_desired_size_with_alpha_two_over_samples_plus_one() -> None:
    ema = BufferSizeEMA(max_buffer=32768, min_buffer=256, samples=19)  # α = 2 / 20 = 0.1
    # desired 0: (int) (32768 + 0.1 · (0 − 32768)) = (int) 29491.2 = 29491
    assert ema.calculate_buffer_size(0, 1) == 29491
    # (int) (29491 + 0.1 · (0 − 29491)) = (int) 26541.9 = 26541
    assert ema.calculate_buffer_size(0, 1) == 26541
    # total 10000 over 4 buffers: 10000 / 4 = 2500 (long division);
    # (int) (26541 + 0.1 · (2500 − 26541)) = (int) (26541 − 2404.1) = (int) 24136.9 = 24136
    assert ema.calculate_buffer_size(10000, 4) == 24136
    # long division truncates: 10001 / 4 = 2500 too; (int) (24136 − 2163.6) = (int) 21972.4 = 21972
    assert ema.calculate_buffer_size(10001, 4) == 21972


def test_ema_truncates_the_sum_not_the_increment() -> None:
    # Java's `int += double` is `int = (int) (int + double)`:
    # (int) (1001 + 0.1 · (0 − 1001)) = (int) 900.9 = 900, where (1001 + (int) −100.1) would be 901.
    ema = BufferSizeEMA(max_buffer=32768, min_buffer=1, samples=19, start=1001)
    assert ema.calculate_buffer_size(0, 1) == 900


def test_ema_growth_is_capped_at_twice_the_last_size() -> None:
    ema = BufferSizeEMA(max_buffer=32768, min_buffer=256, samples=19, start=1000)
    # desirable = min(1_000_000 / 1, 2 · 1000) = 2000; 1000 + 0.1 · (2000 − 1000) = 1100
    assert ema.calculate_buffer_size(1_000_000, 1) == 1100
    # desirable = min(1_000_000, 2200) = 2200; 1100 + 0.1 · 1100 = 1210
    assert ema.calculate_buffer_size(1_000_000, 1) == 1210


def test_ema_clamps_to_min_and_max() -> None:
    ema = BufferSizeEMA(max_buffer=32768, min_buffer=256, samples=19, start=300)
    assert ema.calculate_buffer_size(0, 1) == 270  # (int) (300 − 30) = 270
    assert ema.calculate_buffer_size(0, 1) == 256  # (int) (270 − 27) = 243, clamped up to 256
    ema = BufferSizeEMA(max_buffer=32768, min_buffer=256, samples=1)  # α = 1: jumps to desirable
    assert ema.calculate_buffer_size(10**9, 1) == 32768  # min(10^9, 65536) = 65536, clamped down


# ------------------------------------------------------------------------------ BufferDebloater


def test_debloater_skips_small_changes_and_announces_past_the_threshold() -> None:
    d = BufferDebloater(gate_index=0, target=1000, max_buffer=32768, min_buffer=256, threshold=25, samples=19)
    # throughput 100000 B/s, target 1000 ms: desired total = 100000 · 1000 / 1000 = 100000 B;
    # over 10 buffers: 10000 B each. EMA: (int) (32768 + 0.1 · (10000 − 32768)) = (int) 30491.2 = 30491.
    # threshold: (int) (32768 · 0.25) = 8192 > |30491 − 32768| = 2277, so the change is skipped.
    assert d.recalculate_buffer_size(100_000, 10) is None
    # estimated time to consume = 30491 · 10 · 1000 / 100000 = 3049 ms (long division of 3049.1)
    assert d.last_estimated_time_to_consume == 3049
    # The EMA keeps moving although nothing was announced:
    # (int) (30491 − 2049.1) = 28441 (diff 4327), (int) (28441 − 1844.1) = 26596 (diff 6172),
    # (int) (26596 − 1659.6) = 24936 (diff 7832): all below 8192, all skipped.
    assert [d.recalculate_buffer_size(100_000, 10) for _ in range(3)] == [None, None, None]
    assert d.ema.last_buffer_size == 24936
    # (int) (24936 − 1493.6) = (int) 23442.4 = 23442: |23442 − 32768| = 9326 ≥ 8192: announced.
    assert d.recalculate_buffer_size(100_000, 10) == 23442
    assert d.last_buffer_size == 23442


def test_debloater_always_announces_min_and_max_and_skips_equal_sizes() -> None:
    d = BufferDebloater(gate_index=0, target=1000, max_buffer=32768, min_buffer=256, threshold=25, samples=19)
    # 3276800 B/s over 10 buffers: 327680 each, capped at 2 · 32768; EMA clamps at 32768 = last: skipped.
    assert d.recalculate_buffer_size(3_276_800, 10) is None
    assert d.last_estimated_time_to_consume == 100  # 32768 · 10 · 1000 / 3276800
    d = BufferDebloater(gate_index=0, target=1000, max_buffer=32768, min_buffer=256, threshold=25, samples=1)
    # α = 1 and throughput 0: the size drops straight to the minimum, which is always announced.
    assert d.recalculate_buffer_size(0, 3) == 256
    d.last_buffer_size = 300  # a change of 44 < (int) (300 · 0.25) = 75 is still announced at the minimum
    assert d.recalculate_buffer_size(0, 3) == 256


def test_debloater_uses_at_least_one_buffer_and_java_int_products() -> None:
    d = BufferDebloater(gate_index=0, target=1000, max_buffer=32768, min_buffer=256, threshold=0, samples=1)
    # buffersInUse 0 counts as 1: desired 5000 / 1 = 5000, α = 1: 5000; threshold 0 announces any change
    assert d.recalculate_buffer_size(5000, 0) == 5000
    assert d.last_estimated_time_to_consume == 1000  # 5000 · 1 · 1000 / 5000
    # 10^9 B/s for 10^4 ms over 10^5 buffers: 10^5 B each, capped at 2 · 32768, clamped to 32768.
    # newSize · buffers is an int product in Java: 32768 · 100000 = 3276800000 wraps to −1018167296;
    # · 1000L = −1018167296000, / 10^9 = −1018 (truncated toward zero): Flink reports −1018 ms too.
    d = BufferDebloater(gate_index=0, target=10**4, max_buffer=32768, min_buffer=256, threshold=25, samples=1)
    d.recalculate_buffer_size(10**9, 100_000)
    assert d.last_estimated_time_to_consume == -1018


# ------------------------------------------------------------------------------ configuration


def test_config_defaults_are_flinks_with_a_step_for_a_millisecond() -> None:
    c = DebloatConfig()
    assert (c.enabled, c.target, c.period, c.samples, c.threshold, c.min_buffer) == (False, 1000, 200, 20, 25, 256)


@pytest.mark.parametrize("section, message", [
    ({"enabled": True, "bogus": 1}, "unknown field"),
    ({"enabled": "yes"}, "enabled"),
    ({"target": 0}, "target"),
    ({"period": -5}, "period"),
    ({"samples": 1.5}, "samples"),
    ({"threshold": 101}, "threshold"),
    ({"min_buffer": 4096}, "min_buffer"),
])
def test_bad_debloat_sections_are_scenario_errors(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        Scenario.from_json(scenario(small_graph(), debloat=section))


# ------------------------------------------------------------------------------ the engine


def _debloated(graph: Any = "keyed-pipeline.json", **over: Any) -> dict[str, Any]:
    s = scenario(graph, slow="count", seed=2, interval=100, floating=4, **over)
    s["schedule"]["records_per_action"] = 8
    s["debloat"] = {"enabled": True, "target": 100, "period": 20, "samples": 20, "min_buffer": 64}
    return s


def test_sender_trims_new_buffers_to_the_announced_size() -> None:
    engine = Engine(Scenario.from_json(scenario(small_graph())))
    sp = engine.subpartitions[0]
    part, task = sp.partition, sp.task
    for size, per_buffer in ((150, 2), (10, 1), (512, 8)):  # 64-byte records: floor(150/64)=2; max(64, 10)
        sp.queue.clear()
        sp.buffer_size = size
        for i in range(per_buffer * 3):
            task._append(part, sp, (i, 0, 0, 0, i, 0, -1))
        assert [len(b.recs) for b in sp.queue] == [per_buffer] * 3, size


def test_debloating_announces_and_shrinks_under_backpressure(tmp_path: Any) -> None:
    import pyarrow.parquet as pq

    r = simulate(Scenario.from_json(_debloated(mode="unaligned")), out_dir=tmp_path / "run")
    assert r.ok, r.violations
    d = r.summary()["debloat"]
    assert d["announcements"] > 0 and d["min_buffer_size"] < 512
    sizes = [c["buffer_size"] for c in r.checkpoints if c["status"] == "completed"]
    assert sizes and min(sizes) < 512 and max(sizes) <= 512
    events = pq.read_table(tmp_path / "run" / "events").to_pylist()
    rows = [e for e in events if e["kind"] == "debloat"]
    assert len(rows) == d["announcements"]
    assert "estimated time to consume" in rows[0]["detail"]
    cps = pq.read_table(tmp_path / "run" / "checkpoints").to_pylist()
    assert all(c["buffer_size"] is not None for c in cps if c["status"] == "completed")


def test_gate_clock_runs_only_while_its_task_has_data() -> None:
    """Measured time equals the steps at whose start the task had data from the gate (no recalculation
    happens: the period is longer than the run, so the accumulators are never reset)."""
    s = _debloated()
    s["debloat"]["period"] = 10**9
    engine = Engine(Scenario.from_json(s))
    task = engine.tasks[next(sid for sid in engine.tasks if sid.vertex == "count")]
    gate = task.gates[0]
    expected = 0
    while not engine.finished and engine.step < 3000:
        before = engine.step
        available = any(task.readable(ch) and (ch.recovered or ch.queue) for ch in gate.channels)
        engine.tick()
        if available and not engine.finished:
            expected += engine.step - before
    calc = gate.debloat.calculator
    running = engine.step - calc.start if calc.start != calc.NOT_TRACKED else 0
    assert 0 < calc.measurement_time + running == expected
    assert calc.accumulated_bytes == sum(ch.processed for ch in gate.channels) * 64


def _check_bound(engine: Engine, bound: Any, rb: int, max_buffer: int) -> None:
    assert engine.inflight_bytes() <= bound.total
    for t in engine.tasks.values():
        for p in t.partitions:
            held = sum(len(x.recs) for sp in p.subpartitions for x in sp.queue if isinstance(x, Buf))
            held += sum(len(sp.current or ()) for sp in p.subpartitions)
            assert held * rb <= bound.partitions[(t.sid, p.edge)]
            for sp in p.subpartitions:
                assert all(len(x.recs) * rb <= max(rb, max_buffer) for x in sp.queue if isinstance(x, Buf))
        for g in t.gates:
            queued = sum(len(x.recs) for ch in g.channels for x in ch.queue if isinstance(x, Buf))
            assert queued * rb <= bound.gates[(t.sid, g.index)]


@settings(max_examples=15)
@given(graph=job_graph_dicts(max_vertex_parallelism=3, blocking=False, max_middle=2),
       seed=st.integers(0, 1000), buffer_bytes=st.integers(64, 700), record_bytes=st.sampled_from([16, 48, 64]),
       exclusive=st.integers(1, 3), floating=st.integers(1, 4), mode=st.sampled_from(["aligned", "unaligned"]),
       per_action=st.sampled_from([None, 1, 8]), debloat=st.fixed_dictionaries({
           "enabled": st.just(True), "target": st.integers(1, 300), "period": st.integers(1, 30),
           "samples": st.integers(1, 30), "threshold": st.integers(0, 100), "min_buffer": st.integers(1, 64)}))
def test_bound_holds_at_every_step_with_debloating(graph: dict[str, Any], seed: int, buffer_bytes: int, record_bytes: int,
                                                   exclusive: int, floating: int, mode: str, per_action: int | None,
                                                   debloat: dict[str, Any]) -> None:
    s = scenario(graph, mode=mode, seed=seed, interval=30, buffer_bytes=buffer_bytes, floating=floating, max_steps=20_000)
    s["network"].update(record_bytes=record_bytes, exclusive=exclusive)
    s["schedule"]["records_per_action"] = per_action
    s["debloat"] = debloat
    engine = Engine(Scenario.from_json(s))
    net = NetworkConfig(buffer_bytes=buffer_bytes, record_bytes=record_bytes, exclusive=exclusive, floating=floating)
    bound = worst_case_inflight_bytes(engine.exec_graph, net)
    while not engine.finished and engine.step < 20_000:
        engine.tick()
        _check_bound(engine, bound, record_bytes, buffer_bytes)
    assert engine.finished
    assert engine.oracle.verdict().ok
