"""Every mutant of the engine layer is detected by the engine's own checks (and the unmutated run is clean).

A kill is a run the judge (``reference.judge``) finds VIOLATED: some check fired. A run that stopped
at its step limit is UNJUDGED (whether it would have finished is not decided) and a restart loop is
Flink's own ending: neither kills a mutant.
"""

from __future__ import annotations

from typing import Any

import pytest

from cutcheck.reference import Scenario, simulate
from cutcheck.reference.judge import Judgement, Outcome, judge
from tests.reference.helpers import scenario

FAIL = [{"after_checkpoint": 2, "delay": 0, "target": "count[0]"}]

# mutant -> (graph, scenario options, the invariant that kills it); each is a backpressured run where
# the faulty rule matters
KILLS: dict[str, tuple[str, dict[str, Any], str]] = {
    "no-output-state": ("keyed-pipeline.json", {"mode": "unaligned", "slow": "count"}, "CUT"),
    "process-after-barrier": ("keyed-pipeline.json", {"mode": "unaligned", "slow": "count", "floating": 8}, "CUT"),
    "partial-input-state": ("co-map.json", {"mode": "unaligned", "slow": "join"}, "CUT"),
    "early-checkpoint-in-recovery": ("keyed-pipeline.json", {"mode": "unaligned", "slow": "count", "failures": FAIL},
                                     "CUT"),
    "committer-drops-late": ("keyed-pipeline.json", {"mode": "aligned", "failures": FAIL}, "EXACTLY_ONCE"),
}


def _verdict(s: dict[str, Any]) -> Judgement:
    return judge(simulate(Scenario.from_json(s)))


def _first_kill(mutant: str, seeds: range, max_steps: int = 400_000) -> tuple[int, Judgement] | None:
    """The first seed whose run a check finds violated; unjudged runs and restart loops are no kill."""
    graph, opts, _ = KILLS[mutant]
    for seed in seeds:
        v = _verdict(scenario(graph, seed=seed, mutants=[mutant], max_steps=max_steps, **opts))
        if v.outcome is Outcome.VIOLATED:
            return seed, v
    return None


@pytest.mark.parametrize("mutant", sorted(KILLS))
def test_mutant_is_killed(mutant: str) -> None:
    kill = _first_kill(mutant, range(1, 31))
    assert kill is not None, f"{mutant} survived 30 seeds"
    seed, verdict = kill
    assert verdict.invariant == KILLS[mutant][2], (seed, verdict.findings)


@pytest.mark.parametrize("mutant", sorted(KILLS))
def test_same_runs_are_clean_without_the_mutant(mutant: str) -> None:
    graph, opts, _ = KILLS[mutant]
    for seed in range(1, 4):
        v = _verdict(scenario(graph, seed=seed, **opts))
        assert v.outcome is Outcome.HOLDS, (seed, v.findings)


def test_a_run_stopped_at_its_step_limit_is_unjudged_not_a_kill() -> None:
    """Cut short before any checkpoint could go wrong, the mutated run fails (LIVENESS at the step
    limit) but no check found the mutant: the judge leaves it unjudged and it kills nothing."""
    graph, opts, _ = KILLS["committer-drops-late"]
    v = _verdict(scenario(graph, seed=1, mutants=["committer-drops-late"], max_steps=30, **opts))
    assert v.outcome is Outcome.UNJUDGED and not v.ok
    assert v.findings[0]["invariant"] == "LIVENESS" and "did not finish within 30 steps" in v.reason
    assert _first_kill("committer-drops-late", range(1, 4), max_steps=30) is None
