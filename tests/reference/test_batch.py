"""Batch execution: region scheduling, region failover as facts §6.4 names it, the blocking shuffle
keeping partitions across a worker loss, exactly-once sinks committing at job end, and the test-only
fault that restarts only the failed task."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from cutcheck.model.errors import ScenarioError
from cutcheck.model.execution import ExecutionGraph, SubtaskId
from cutcheck.model.regions import failover_regions, pipelined_regions
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.batch import END_OF_INPUT_CHECKPOINT, BatchEngine, make_engine
from cutcheck.reference.engine import Engine
from cutcheck.reference.events.stream import Logged
from tests.reference.helpers import EXAMPLES, scenario


def _batch(failures: list[dict[str, Any]] | None = None, seed: int = 3, **extra: Any) -> Scenario:
    return Scenario.from_json(scenario("batch.json", seed=seed, failures=failures, **extra))


def stages(scn: Scenario) -> dict[str, tuple[int, int]]:
    """Region (as its sorted subtask names) -> (deploy step, finish step) in a run without failures."""
    engine = make_engine(dataclasses.replace(scn, failures=()))
    seen: dict[str, list[int]] = {}
    engine.bus.subscribe(Logged, lambda e: seen.setdefault(e.detail, []).append(e.step)
                         if e.kind in ("deploy", "region_finished") else None)
    engine.run()
    return {region: (steps[0], steps[1]) for region, steps in seen.items()}


def _mid(window: tuple[int, int]) -> int:
    return (window[0] + window[1]) // 2


def test_batch_example_runs_region_by_region_without_checkpoints() -> None:
    scn = _batch()
    assert isinstance(make_engine(scn), BatchEngine) and not isinstance(make_engine(Scenario.from_json(
        scenario("keyed-pipeline.json"))), BatchEngine)
    r = simulate(scn)
    assert r.ok, r.violations
    assert r.checkpoints == []
    b = r.summary()["batch"]
    assert b["regions"] == 7 and b["failovers"] == [] and b["partitions_persisted"] == 5  # 2 clean + 3 count
    st = stages(scn)
    src = [st["{clean[0], src[0]}"], st["{clean[1], src[1]}"]]
    counts = [st[f"{{count[{i}]}}"] for i in range(3)]
    sinks = [st["{map[0], sink[0]}"], st["{map[1], sink[1]}"]]
    # A region starts once every blocking partition it reads is complete (all-to-all edges: all producers).
    assert all(c[0] >= max(s[1] for s in src) for c in counts)
    assert all(k[0] >= max(c[1] for c in counts) for k in sinks)


def test_exactly_once_sinks_commit_at_job_end(tmp_path: Any) -> None:
    import pyarrow.parquet as pq

    r = simulate(_batch(), out_dir=tmp_path / "run")
    rows = pq.read_table(tmp_path / "run" / "output").to_pylist()
    assert rows and {row["checkpoint_id"] for row in rows} == {END_OF_INPUT_CHECKPOINT}
    events = pq.read_table(tmp_path / "run" / "events").to_pylist()
    commit_step = next(e["step"] for e in events if e["kind"] == "commit")
    assert commit_step == max(e["step"] for e in events if e["kind"] == "region_finished")
    assert r.ok


# Hand-derived from facts §6.4 for examples/batch.json (regions: {src[i], clean[i]} (forward, pipelined),
# {count[j]} (blocking in and out), {map[i], sink[i]} (forward, pipelined); clean->count is hash and
# count->map rebalance, so every count region reads every clean partition and feeds every map region).
SRC = [["clean[0]", "src[0]"], ["clean[1]", "src[1]"]]
COUNT = [["count[0]"], ["count[1]"], ["count[2]"]]
SINK = [["map[0]", "sink[0]"], ["map[1]", "sink[1]"]]


def test_failure_in_the_first_stage_names_all_its_consumers_and_restarts_the_running_ones() -> None:
    st = stages(_batch())
    at = _mid(st["{clean[0], src[0]}"])
    r = simulate(_batch([{"at_step": at, "target": "clean[0]"}]))
    assert r.ok, r.violations
    (fo,) = r.summary()["batch"]["failovers"]
    # The failed region, then every consumer region transitively (all CREATED, so not restarted);
    # the count regions read clean[1]'s partition: complete or not, its producer region is either
    # reusable or already named through the map regions' unavailable inputs.
    assert SRC[0] in fo["regions_named"] and all(c in fo["regions_named"] for c in COUNT + SINK)
    assert all(r in SRC for r in fo["regions_restarted"]) and SRC[0] in fo["regions_restarted"]


def test_failure_of_a_count_task_restarts_the_count_regions_not_the_finished_producers() -> None:
    st = stages(_batch())
    at = _mid(st["{count[1]}"])
    r = simulate(_batch([{"at_step": at, "target": "count[1]"}]))
    assert r.ok, r.violations
    (fo,) = r.summary()["batch"]["failovers"]
    # {count[1]}; its consumers {map[i], sink[i]} (CREATED); their inputs from count[0] and count[2] are
    # not complete, so those producer regions are named too; the clean partitions are complete: not.
    assert fo["regions_named"] == COUNT + SINK
    assert fo["regions_restarted"] == COUNT
    eg = ExecutionGraph(_batch().graph)
    blocking_done = {(SubtaskId("clean", i), 1) for i in range(2)}
    expect = failover_regions(eg, SubtaskId("count", 1), blocking_done, pipelined_regions(eg))
    assert [sorted(map(str, reg)) for reg in expect] == fo["regions_named"]


def test_failure_in_the_last_stage_restarts_its_region_only() -> None:
    st = stages(_batch())
    window = st["{map[0], sink[0]}"]
    r = simulate(_batch([{"at_step": _mid(window), "target": "sink[0]"}]))
    assert r.ok, r.violations
    (fo,) = r.summary()["batch"]["failovers"]
    assert fo["regions_named"] == [SINK[0]] and fo["regions_restarted"] == [SINK[0]]
    assert fo["records_recomputed"] > 0


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_losing_a_producers_worker_after_its_region_finished_restarts_no_producer(workers: int) -> None:
    """Blocking partitions live in the shuffle directory, not on the worker: the worker's running
    consumer tasks restart; every producer region (src/clean, count) stays finished."""
    scn = _batch(workers=workers)
    st = stages(scn)
    at = _mid(st["{map[0], sink[0]}"])
    r = simulate(_batch([{"at_step": at, "target": "worker:0"}], workers=workers))
    assert r.ok, r.violations
    (fo,) = r.summary()["batch"]["failovers"]
    assert fo["regions_restarted"] and all(reg in SINK for reg in fo["regions_restarted"])
    assert all(reg in SINK for reg in fo["regions_named"])


def test_full_failover_restarts_a_finished_sink_region_without_committing_twice() -> None:
    st = stages(_batch())
    first, second = sorted([st["{map[0], sink[0]}"], st["{map[1], sink[1]}"]], key=lambda w: w[1])
    # The run is deterministic: a skip here would hide the test for good, so the precondition is asserted.
    assert first[1] < second[1] - 1, "the two sink regions now finish together on this seed; choose one where they do not"
    target = "sink[1]" if st["{map[1], sink[1]}"] == second else "sink[0]"  # the one still running
    at = (first[1] + second[1]) // 2
    r = simulate(_batch([{"at_step": at, "target": target}], batch={"failover_strategy": "full"}))
    assert r.ok, (r.violations, r.exactly_once)
    (fo,) = r.summary()["batch"]["failovers"]
    assert len(fo["regions_restarted"]) == 7  # the finished sink region included


def test_released_partitions_are_gone_and_a_released_input_pulls_its_producer_back() -> None:
    scn = _batch()
    st = stages(scn)
    engine = make_engine(scn)
    assert isinstance(engine, BatchEngine)
    while engine.step < _mid(st["{map[0], sink[0]}"]):
        engine.tick()
    master = engine.shuffle.blocking
    clean = [engine.shuffle.descriptors[(SubtaskId("clean", i), 1)] for i in range(2)]
    count0 = engine.shuffle.descriptors[(SubtaskId("count", 0), 2)]
    # Every count region finished: the clean partitions went (RegionPartitionGroupReleaseStrategy).
    assert all(not master.is_available(d.partition_id) for d in clean)
    assert all(not Path(d.path).exists() for d in clean)  # type: ignore[arg-type]
    assert master.is_available(count0.partition_id) and Path(count0.path, "DONE").exists()  # type: ignore[arg-type]
    # Release count[0]'s partition by hand: map[0]'s failure must now re-run count[0], whose own inputs
    # (the clean partitions) are gone too, so the source regions and every consumer run again.
    master.release_partition_externally(count0)
    engine.fail("map[0]")
    (fo,) = engine.failovers
    assert fo.collected == SRC + COUNT + SINK
    engine.run()
    assert engine.oracle.verdict().ok


def test_restarting_only_the_failed_task_is_an_exactly_once_violation() -> None:
    st = stages(_batch())
    for target, region in (("sink[0]", "{map[0], sink[0]}"), ("map[1]", "{map[1], sink[1]}")):
        scn = _batch([{"at_step": _mid(st[region]), "target": target}])
        assert simulate(scn).ok
        faulty = dataclasses.replace(scn, mutants=("restart-failed-task-only",))
        r = simulate(faulty)
        assert not r.ok
        assert any(v["invariant"] == "EXACTLY_ONCE" for v in r.violations), r.violations


def test_region_failover_recomputes_less_than_a_full_restart() -> None:
    st = stages(_batch())
    fail = [{"at_step": _mid(st["{map[1], sink[1]}"]), "target": "map[1]"}]
    region = simulate(_batch(fail)).summary()["batch"]["records_recomputed"]
    full = simulate(_batch(fail, batch={"failover_strategy": "full"})).summary()["batch"]["records_recomputed"]
    assert 0 < region < full


def test_a_failure_where_nothing_runs_is_ignored() -> None:
    r = simulate(_batch([{"at_step": 5, "target": "sink[1]"}]))  # the sink region is not deployed yet
    assert r.ok and r.restarts == 0


@pytest.mark.parametrize("over, message", [
    ({"failures": [{"after_checkpoint": 1, "target": "sink[0]"}]}, "after_checkpoint"),
    ({"failures": [{"at_step": 9, "target": "worker:7"}], "workers": 2}, "names no worker"),
    ({"failures": [{"at_step": 9, "target": "count[5]"}]}, "not a subtask"),
    ({"batch": {"failover_strategy": "partial"}}, "failover_strategy"),
    ({"batch": {"shuffle_dir": 3}}, "shuffle_dir"),
    ({"batch": {"spill": True}}, "unknown field"),
    ({"failover_strategy": "full"}, "move it there"),
])
def test_bad_batch_scenarios_are_scenario_errors(over: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        simulate(Scenario.from_json({**scenario("batch.json"), **over}))


def test_streaming_jobs_fail_over_from_checkpoints() -> None:
    """A connected streaming job is one pipelined region, so its failover restarts everything."""
    s = Scenario.from_json(scenario("keyed-pipeline.json", failures=[{"after_checkpoint": 2, "target": "worker:0"}]))
    assert type(make_engine(s)) is Engine
    r = simulate(s)
    assert r.ok and r.restarts == 1 and "batch" not in r.summary()
    assert any(c["status"] == "completed" for c in r.checkpoints)


def test_example_file_is_the_one_the_readme_names() -> None:
    assert (EXAMPLES / "batch.json").exists()
