"""Region failover for streaming jobs (issue 16, departure 8), each test citing the Flink behaviour.

Flink's default ``jobmanager.execution.failover-strategy`` is ``region``
(``RestartPipelinedRegionFailoverStrategy``): a failed task restarts its pipelined region, the rest
keeps running. ``SchedulerBase.restoreState`` aborts every pending checkpoint with
``JOB_FAILOVER_REGION`` and restores the latest completed checkpoint to the restarted subtasks only
(``CheckpointCoordinator.restoreLatestCheckpointedStateToSubtasks``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cutcheck.model.errors import ScenarioError
from cutcheck.model.execution import SubtaskId
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.checks.tracing import validate_run
from cutcheck.reference.engine import Engine
from cutcheck.reference.events.stream import Logged
from tests.reference.helpers import scenario
from tests.reference.test_rescale import rescale_graphs


def _two_components() -> dict[str, Any]:
    """A keyed component (one region) and a forward-only one (one region per subtask lane)."""
    return {"name": "two", "max_parallelism": 128,
            "vertices": [{"id": "a", "kind": "source", "parallelism": 2, "records": 300, "keys": 8, "splits": 2},
                         {"id": "ka", "kind": "keyed_count", "parallelism": 2},
                         {"id": "sa", "kind": "sink", "parallelism": 1},
                         {"id": "b", "kind": "source", "parallelism": 2, "records": 300, "keys": 8, "splits": 2},
                         {"id": "mb", "kind": "map", "parallelism": 2},
                         {"id": "sb", "kind": "sink", "parallelism": 2}],
            "edges": [{"from": "a", "to": "ka", "partitioner": "hash"},
                      {"from": "ka", "to": "sa", "partitioner": "rebalance"},
                      {"from": "b", "to": "mb", "partitioner": "forward"},
                      {"from": "mb", "to": "sb", "partitioner": "forward"}]}


def _engine(mode: str = "unaligned", seed: int = 1, **extra: Any) -> Engine:
    s = scenario(_two_components(), mode=mode, seed=seed, slow="ka",
                 failures=[{"after_checkpoint": 2, "target": "ka[0]"}], **extra)
    return Engine(Scenario.from_json(s))


def _run_to_failover(engine: Engine) -> tuple[dict[SubtaskId, Any], set[str], list[int]]:
    """Step until just before the failure fires; return the tasks, staged transactions and pending
    checkpoints of that moment."""
    seen: dict[str, Any] = {}

    def on_event(e: Logged) -> None:
        if e.kind == "failure" and "tasks" not in seen:
            seen.update(tasks=dict(engine.tasks), staged=set(engine.store.staged), pending=list(engine.coordinator.pending))

    engine.bus.subscribe(Logged, on_event)
    while "tasks" not in seen:
        engine.tick()
    return seen["tasks"], seen["staged"], seen["pending"]


@pytest.mark.parametrize("mode", ["unaligned", "aligned", "aligned_timeout"])
def test_a_failure_restarts_its_region_and_the_rest_keeps_running(mode: str) -> None:
    engine = _engine(mode)
    before, staged, _ = _run_to_failover(engine)
    region = {sid for sid in before if sid.vertex in ("a", "ka", "sa")}
    for sid, task in engine.tasks.items():
        assert (task is before[sid]) == (sid not in region), sid  # restarted: a new task; else the same one
    other_sinks = tuple(f"{sid}-a" for sid in before if sid.vertex == "sb")
    assert {t for t in staged if t.startswith(other_sinks)} <= set(engine.store.staged) | engine.store.committed
    report = engine.restore_reports[-1]
    assert report["region"] == sorted(str(s) for s in region)
    engine.run()
    assert engine.oracle.verdict().ok, engine.oracle.verdict()


def test_pending_checkpoints_are_aborted_as_job_failover_region() -> None:
    engine = _engine(interval=15)
    _, _, pending = _run_to_failover(engine)
    assert not engine.coordinator.pending
    aborted = {s.cp: s.reason for s in engine.coordinator.stats if s.status == "aborted"}
    assert all(aborted.get(cp) == "region failover" for cp in pending)
    assert engine.coordinator.failure_manager.failures == 0  # JOB_FAILOVER_REGION never counts


def test_a_forward_lane_is_a_region_of_its_own() -> None:
    """Pointwise (forward) edges join only the subtasks they wire (SchedulingPipelinedRegionComputeUtil)."""
    s = scenario(_two_components(), seed=2, failures=[{"after_checkpoint": 2, "target": "mb[1]"}])
    result = simulate(Scenario.from_json(s))
    assert result.ok and result.exactly_once.ok
    assert result.restores[0]["region"] == ["b[1]", "mb[1]", "sb[1]"]


def test_full_strategy_and_whole_job_regions_restart_globally() -> None:
    """``failover_strategy: "full"`` (RestartAllFailoverStrategy) restarts every task; so does a region
    failover whose region is the whole job, and a failover that rescales (a new submission)."""
    full = simulate(Scenario.from_json(scenario(_two_components(), failover_strategy="full",
                                                failures=[{"after_checkpoint": 2, "target": "mb[1]"}])))
    assert full.ok and "region" not in full.restores[0]
    rescaled = scenario(_two_components(), failures=[{"after_checkpoint": 2, "target": "mb[1]"}])
    rescaled["rescales"] = [{"on_failure": 0, "parallelism": {"ka": 3}}]
    result = simulate(Scenario.from_json(rescaled))
    assert result.ok and result.restores[0]["rescaled"] and "region" not in result.restores[0]
    connected = simulate(Scenario.from_json(scenario("keyed-pipeline.json", failures=[{"after_checkpoint": 2, "target": "count[0]"}])))
    assert "region" not in connected.restores[0]


def test_a_failover_before_any_checkpoint_at_the_new_parallelism_is_global() -> None:
    """The latest checkpoint was taken before a rescale: its state must be redistributed over the
    whole job (StateAssignmentOperation), so the engine restarts everything rather than one region."""
    s = scenario(_two_components(), failures=[{"after_checkpoint": 2, "target": "ka[0]"},
                                              {"after_checkpoint": 2, "delay": 3, "target": "mb[0]"}])
    s["rescales"] = [{"on_failure": 0, "parallelism": {"ka": 3}}]
    result = simulate(Scenario.from_json(s))
    assert result.ok and result.exactly_once.ok
    assert [(r["checkpoint"], r["rescaled"], "region" in r) for r in result.restores] == [(2, True, False)] * 2


def test_region_failovers_replay_through_the_protocol() -> None:
    for mode in ("unaligned", "aligned", "aligned_timeout"):
        for seed in range(1, 5):
            s = scenario(_two_components(), mode=mode, seed=seed, slow="ka", workers=2,
                         failures=[{"after_checkpoint": 2, "target": "ka[0]"}, {"after_checkpoint": 3, "target": "mb[1]"},
                                   {"at_step": 4, "target": "sb[0]"}, {"after_checkpoint": 5, "target": "worker:1"}])
            result = simulate(Scenario.from_json(s), trace=True)
            assert result.ok, (mode, seed, result.violations)
            assert validate_run(result.traces) == [], (mode, seed)


def test_failover_strategy_is_validated() -> None:
    with pytest.raises(ScenarioError, match="'failover_strategy' 'restart-all' is not one of region, full"):
        Scenario.from_json(scenario(_two_components(), failover_strategy="restart-all"))


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(rescale_graphs(), st.data())
def test_region_failovers_keep_exactly_once_on_generated_graphs(graph: dict[str, Any], data: Any) -> None:
    """Generated graphs (forward chains, several sources, keyed, broadcast and custom edges), three
    failures at random subtasks, before and after checkpoints: exactly-once holds, and every channel's
    trace, region restores included, replays through the proved protocol."""
    targets = [f"{v['id']}[{data.draw(st.integers(0, v['parallelism'] - 1))}]" for v in graph["vertices"]]
    failures = [{"after_checkpoint": data.draw(st.integers(1, 3)), "delay": data.draw(st.integers(0, 5)),
                 "target": data.draw(st.sampled_from(targets))} for _ in range(2)]
    failures.append({"at_step": data.draw(st.integers(1, 40)), "target": data.draw(st.sampled_from(targets))})
    s = scenario(graph, mode=data.draw(st.sampled_from(["unaligned", "aligned", "aligned_timeout"])),
                 seed=data.draw(st.integers(0, 999)), interval=30, failures=failures,
                 slow=graph["vertices"][-1]["id"], max_steps=200_000)
    result = simulate(Scenario.from_json(s), trace=True)
    assert result.ok, result.violations
    assert validate_run(result.traces) == []
    event(f"region restores: {sum(1 for r in result.restores if 'region' in r)}")
