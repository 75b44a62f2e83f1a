"""Every mutant of the engine layer is detected by the engine's own checks (and the unmutated run is clean)."""

from __future__ import annotations

from typing import Any

import pytest

from cutcheck.reference import Scenario, simulate
from tests.reference.helpers import scenario

FAIL = [{"after_checkpoint": 2, "delay": 0, "target": "count[0]"}]

# mutant -> (graph, scenario options); each is a backpressured run where the faulty rule matters
KILLS: dict[str, tuple[str, dict[str, Any]]] = {
    "no-output-state": ("keyed-pipeline.json", {"mode": "unaligned", "slow": "count"}),
    "process-after-barrier": ("keyed-pipeline.json", {"mode": "unaligned", "slow": "count", "floating": 8}),
    "partial-input-state": ("co-map.json", {"mode": "unaligned", "slow": "join"}),
    "early-checkpoint-in-recovery": ("keyed-pipeline.json", {"mode": "unaligned", "slow": "count", "failures": FAIL}),
    "committer-drops-late": ("keyed-pipeline.json", {"mode": "aligned", "failures": FAIL}),
}


def _first_kill(mutant: str, seeds: range) -> tuple[int, list[dict[str, str]], bool] | None:
    graph, opts = KILLS[mutant]
    for seed in seeds:
        s = scenario(graph, seed=seed, mutants=[mutant], **opts)
        r = simulate(Scenario.from_json(s))
        if not r.ok:
            return seed, r.violations, r.exactly_once.ok
    return None


@pytest.mark.parametrize("mutant", sorted(KILLS))
def test_mutant_is_killed(mutant: str) -> None:
    kill = _first_kill(mutant, range(1, 31))
    assert kill is not None, f"{mutant} survived 30 seeds"


@pytest.mark.parametrize("mutant", sorted(KILLS))
def test_same_runs_are_clean_without_the_mutant(mutant: str) -> None:
    graph, opts = KILLS[mutant]
    for seed in range(1, 4):
        r = simulate(Scenario.from_json(scenario(graph, seed=seed, **opts)))
        assert r.ok, (seed, r.violations, r.exactly_once)
