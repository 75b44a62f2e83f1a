"""Fuzz campaigns: every mutant is killed, counterexamples shrink and replay, Spark agrees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cutcheck.reference import Scenario, simulate
from cutcheck.reference.faults.catalogue import MUTANTS
from cutcheck.reference.fuzzing.campaigns import hypothesis_campaign, kill, seed_campaign
from cutcheck.reference.fuzzing.generate import scenario_from_seed


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_every_mutant_is_killed_within_its_budget(mutant: str) -> None:
    result = kill(mutant, seconds=120, max_seeds=400)
    assert result.killed, f"{mutant} survived {result.examples} scenarios"


def test_unmutated_seed_campaign_is_clean() -> None:
    result = seed_campaign(range(25))
    bad = [v for v in result.verdicts if not v["ok"]]
    assert not bad, bad


def test_planted_fault_shrinks_to_a_small_replayable_scenario(tmp_path: Path) -> None:
    result = hypothesis_campaign(examples=40, mutants=("no-output-state",), gen={"modes": ("unaligned",)}, seed=3)
    assert result.failure is not None, "the campaign did not find the planted fault"
    scen = result.failure.scenario
    assert len(scen["graph"]["vertices"]) <= 3, scen["graph"]
    # The shrunk scenario, with its recorded schedule, replays to the same violation.
    path = tmp_path / "counterexample.json"
    path.write_text(json.dumps(scen))
    replay = simulate(Scenario.from_json(path))
    assert not replay.ok
    assert replay.violations[0]["invariant"] == result.failure.violations[0]["invariant"]


def test_generated_scenarios_are_deterministic() -> None:
    assert scenario_from_seed(17) == scenario_from_seed(17)
    assert scenario_from_seed(17) != scenario_from_seed(18)


def test_fuzz_cli_reports_and_writes_a_counterexample(tmp_path: Path) -> None:
    from cutcheck.cli import app

    out = tmp_path / "campaign"  # a new directory: fuzz --out never writes into one it did not create
    res = CliRunner().invoke(app, ["fuzz", "--examples", "20", "--mutant", "no-output-state", "--out", str(out)])
    assert res.exit_code == 1, res.output
    assert "replay: cutcheck simulate" in res.output
    assert list(out.glob("counterexample-*.json")) and (out / "run.json").is_file()
    res = CliRunner().invoke(app, ["fuzz", "--examples", "5"])
    assert res.exit_code == 0, res.output


@pytest.mark.spark
def test_spark_campaign_gives_the_in_process_verdicts() -> None:
    from cutcheck.commands.fuzz import _spark_verdicts

    seeds = list(range(12))
    local = seed_campaign(seeds).verdicts
    distributed = _spark_verdicts(seeds, (), "local[2]")
    assert [(v["seed"], v["ok"]) for v in distributed] == [(v["seed"], v["ok"]) for v in local]
    killed_local = seed_campaign(seeds, mutants=("no-output-state",)).verdicts
    killed_spark = _spark_verdicts(seeds, ("no-output-state",), "local[2]")
    assert [v["ok"] for v in killed_spark] == [v["ok"] for v in killed_local]
    assert not all(v["ok"] for v in killed_spark)
