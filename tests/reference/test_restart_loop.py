"""A job whose checkpoints always fail past its tolerance restarts for ever, in Flink as in the
engine: the verdict classes that run as Flink's outcome (``restart_loop``), and nothing else."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from cutcheck.reference import Scenario, simulate
from cutcheck.reference.checkpointing.failure_manager import RESTART_LOOP_FAILOVERS, CheckpointFailureManager
from cutcheck.reference.fuzzing.verdicts import LOOP_FAILOVERS, RESTART_LOOP, restart_loop, run_scenario

HERE = Path(__file__).resolve().parent / "regressions"

def _job(tolerable: int, timeout: int) -> dict[str, Any]:
    graph = {"name": "loop", "vertices": [
        {"id": "src", "kind": "source", "parallelism": 2, "records": 200, "keys": 5},
        {"id": "map", "kind": "map", "parallelism": 2},
        {"id": "sink", "kind": "sink", "parallelism": 2, "delivery": "exactly_once"}],
        "edges": [{"from": "src", "to": "map", "partitioner": "rebalance"},
                  {"from": "map", "to": "sink", "partitioner": "rebalance"}]}
    return {"graph": graph, "seed": 3, "max_steps": 4_000,
            "checkpoint": {"mode": "aligned", "interval": 5, "checkpoint_timeout": timeout,
                           "tolerable_failed": tolerable}}


def test_checkpoints_failing_past_a_finite_tolerance_are_a_restart_loop_not_a_finding() -> None:
    v = run_scenario(_job(tolerable=1, timeout=2))
    assert v.ok and v.looped and not v.refused
    assert v.violations[0]["invariant"] == RESTART_LOOP
    assert v.restarts >= LOOP_FAILOVERS
    assert ("failure", "checkpoint-failure", "") in v.coverage.hits


def test_only_a_liveness_stop_after_consecutive_checkpoint_failovers_is_a_loop() -> None:
    result = simulate(Scenario.from_json(_job(tolerable=1, timeout=2)))
    assert restart_loop(result, result.violations)
    liveness = result.violations
    # Anything besides LIVENESS is a finding however the job restarted.
    assert not restart_loop(result, [*liveness, {"invariant": "EXACTLY_ONCE", "detail": "lost 1"}])
    assert not restart_loop(result, [{"invariant": "LIVENESS", "detail": "deadlock at step 9: no action is enabled"}])
    # Too few failovers back at the same point (or progress since the last): a slow job, not a loop.
    assert not restart_loop(replace(result, failovers_without_progress=LOOP_FAILOVERS - 1), liveness)
    assert not restart_loop(replace(result, failovers_without_progress=0), liveness)


def test_checkpoints_completed_back_at_the_same_point_do_not_break_the_loop() -> None:
    """Once drawn by the trace-validation property: a slow source with a 6-step checkpoint timeout. Each
    restart completes checkpoints while the restored source is idle, all at the same position; once it
    emits, two checkpoints expire and the job fails over to that position again. Counting completed
    checkpoints as progress ran it 93 584 steps (1 080 failovers); it is the loop Flink would be in."""
    raw = json.loads((HERE / "restart-loop-idle-checkpoints-seed-55843.json").read_text())
    result = simulate(Scenario.from_json(raw))
    assert result.violations[0]["detail"].startswith("restart loop"), result.violations
    assert result.steps < 2_000
    first = result.checkpoint_failovers[-RESTART_LOOP_FAILOVERS]
    assert any(c["status"] == "completed" and c["end_step"] > first for c in result.checkpoints)
    assert restart_loop(result, result.violations)


def test_a_failover_that_restarts_from_further_on_begins_a_new_count() -> None:
    manager = CheckpointFailureManager(tolerable=0)
    point = ((("src[0]", "0", 6),), 0)
    assert [manager.job_failed_over(point) for _ in range(RESTART_LOOP_FAILOVERS - 1)] == [False] * 4
    assert manager.failovers_without_progress(point) == RESTART_LOOP_FAILOVERS - 1
    # A checkpoint completed since at a later point (or with fewer records in flight): no loop yet.
    assert manager.failovers_without_progress(((("src[0]", "0", 6),), 3)) == 0
    # A failover from there starts counting again.
    further = ((("src[0]", "0", 12),), 0)
    assert not manager.job_failed_over(further)
    assert manager.failovers_in_a_row == 1
    assert [manager.job_failed_over(further) for _ in range(RESTART_LOOP_FAILOVERS - 1)] == [False] * 3 + [True]


def test_an_at_least_once_sink_writing_again_after_each_restart_is_no_progress() -> None:
    """Once drawn by a guided campaign: an at-least-once job that tolerates no failed checkpoint and
    whose checkpoints never complete in their 22 steps. Its at-least-once sink writes the replayed
    records again after every restart; counting what sinks wrote as progress ran it to its step limit
    (343 failovers) as a finding. No checkpoint completed: it restarts from nothing each time."""
    raw = json.loads((HERE / "restart-loop-at-least-once-sink.json").read_text())
    result = simulate(Scenario.from_json(raw))
    assert result.violations[0]["detail"].startswith("restart loop"), result.violations
    assert not any(c["status"] == "completed" for c in result.checkpoints)
    v = run_scenario(raw)
    assert v.ok and v.looped


def test_a_job_that_tolerates_its_failed_checkpoints_finishes() -> None:
    # The same checkpoints, tolerated: the final one, over drained channels, completes in time.
    v = run_scenario(_job(tolerable=2**31 - 1, timeout=2))
    assert v.ok and not v.looped and v.violations == []


def test_checkpoints_that_complete_make_no_loop() -> None:
    v = run_scenario(_job(tolerable=0, timeout=400))
    assert v.ok and not v.looped and v.violations == []
