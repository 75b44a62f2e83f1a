"""A job whose checkpoints always fail past its tolerance restarts for ever, in Flink as in the
engine: the verdict classes that run as Flink's outcome (``restart_loop``), and nothing else."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cutcheck.reference import Scenario, simulate
from cutcheck.reference.fuzzing.verdicts import LOOP_FAILOVERS, RESTART_LOOP, restart_loop, run_scenario


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
    # Too few checkpoint failovers: a slow job, not a loop.
    assert not restart_loop(replace(result, checkpoint_failovers=result.checkpoint_failovers[:LOOP_FAILOVERS - 1]),
                            liveness)
    # A checkpoint completed since the loop would have begun: the job was still making progress.
    since = result.checkpoint_failovers[-LOOP_FAILOVERS]
    late = {"id": 10**6, "status": "completed", "end_step": since + 1}
    assert not restart_loop(replace(result, checkpoints=[*result.checkpoints, late]), liveness)


def test_a_job_that_tolerates_its_failed_checkpoints_finishes() -> None:
    # The same checkpoints, tolerated: the final one, over drained channels, completes in time.
    v = run_scenario(_job(tolerable=2**31 - 1, timeout=2))
    assert v.ok and not v.looped and v.violations == []


def test_checkpoints_that_complete_make_no_loop() -> None:
    v = run_scenario(_job(tolerable=0, timeout=400))
    assert v.ok and not v.looped and v.violations == []
