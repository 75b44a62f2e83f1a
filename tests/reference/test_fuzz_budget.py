"""``--seconds`` is a wall: no scenario overruns it, search and shrinking share it, the split is reported.

The planted slow scenario: the engine's step is replaced by one that only waits ``IDLE_STEP`` and
counts the step, so every job runs to its step limit (tens of thousands of steps: tens of seconds).
Without the wall, the first such scenario alone would run past any of these budgets.

The slack allowed past the wall is stated, not a timing benchmark: one deadline check interval
(``CHECK_EVERY`` planted steps, measured here, on this machine, now) plus ``AFTER_WALL`` for what a
campaign does once the wall has passed (Hypothesis is stopped, shrinking returns what it has), and,
for a command, ``CLI_SETUP`` for what it does before its campaign's clock starts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cutcheck.reference.core.deadline import CHECK_EVERY, BudgetExhausted, walled
from cutcheck.reference.engine import Engine
from cutcheck.reference.fuzzing import campaigns
from cutcheck.reference.fuzzing.campaigns import hypothesis_campaign, seed_campaign
from cutcheck.reference.fuzzing.kill import kill
from cutcheck.reference.fuzzing.shrink import shrink_scenario
from cutcheck.reference.fuzzing.verdicts import Verdict, run_scenario, scenario_of_seed

IDLE_STEP = 0.001  # seconds a planted step waits
AFTER_WALL = 0.5  # seconds: a campaign's own work after the wall, which runs no scenario
CLI_SETUP = 0.5  # seconds: what a command does before its campaign's clock starts (0.04-0.3 s measured)
SECONDS = 3.0


def _idle_tick(engine: Engine) -> bool:
    time.sleep(IDLE_STEP)
    engine.step += 1
    return True


@pytest.fixture(scope="module")
def slack() -> float:
    """One deadline check interval of the planted engine, measured, plus the campaign's own work."""
    t = time.perf_counter()
    for _ in range(CHECK_EVERY):
        time.sleep(IDLE_STEP)
    return (time.perf_counter() - t) + AFTER_WALL


@pytest.fixture
def endless(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(Engine, "tick", _idle_tick)
    yield


def test_the_engine_loop_stops_at_the_wall_and_nowhere_else(endless: None, slack: float) -> None:
    sdict = scenario_of_seed(1)
    t = time.monotonic()
    with pytest.raises(BudgetExhausted), walled(t + 0.5):
        run_scenario(sdict)
    assert time.monotonic() - t <= 0.5 + slack
    # Outside a wall nothing is cut: the same planted job runs on to its step limit (a finding).
    v = run_scenario(dict(sdict, max_steps=2 * CHECK_EVERY))
    assert v.invariant == "LIVENESS", v.violations


def test_a_hypothesis_campaign_cuts_a_scenario_at_the_wall(endless: None, slack: float) -> None:
    t = time.monotonic()
    result = hypothesis_campaign(examples=10**6, seconds=SECONDS, seed=1)
    elapsed = time.monotonic() - t
    assert elapsed <= SECONDS + slack, (elapsed, slack)
    assert result.cut_by_wall == 1 and result.examples == 0 and result.failure is None
    assert result.limits["search_stopped_by"] == "budget"
    assert result.split == {"budget": SECONDS, "searched": pytest.approx(elapsed, abs=slack), "shrank": 0.0,
                            "cut_by_wall": 1}


def test_a_seed_campaign_cuts_a_scenario_at_the_wall(endless: None, slack: float) -> None:
    t = time.monotonic()
    result = seed_campaign(range(10**6), seconds=SECONDS)
    elapsed = time.monotonic() - t
    assert elapsed <= SECONDS + slack, (elapsed, slack)
    assert result.cut_by_wall == 1 and result.verdicts == [] and result.ok
    assert result.limits["search_stopped_by"] == "budget"


def test_a_guided_campaign_cuts_a_scenario_at_the_wall(endless: None, slack: float) -> None:
    from cutcheck.reference.fuzzing.guided import guided_campaign
    t = time.monotonic()
    result = guided_campaign(seconds=SECONDS, seed=1)
    elapsed = time.monotonic() - t
    assert elapsed <= SECONDS + slack, (elapsed, slack)
    assert result.cut_by_wall == 1 and result.examples == 0 and result.ok
    assert result.to_json()["cut_by_wall"] == 1


def test_the_mutation_check_hunt_ends_at_its_budget(endless: None, slack: float) -> None:
    t = time.monotonic()
    result = kill("no-output-state", seconds=2.0)
    assert time.monotonic() - t <= 2.0 + slack
    assert not result.killed and result.examples == 0


@pytest.mark.parametrize("extra", [[], ["--seeds"]])
def test_fuzz_with_nothing_judged_in_its_budget_says_so_and_exits_2(endless: None, slack: float,
                                                                     extra: list[str]) -> None:
    from cutcheck.cli import app

    t = time.monotonic()
    res = CliRunner().invoke(app, ["fuzz", "--seconds", f"{SECONDS:g}", *extra])
    elapsed = time.monotonic() - t
    assert res.exit_code == 2, res.output
    assert elapsed <= SECONDS + slack + CLI_SETUP, (elapsed, slack)
    assert "error: --seconds 3: no scenario finished within the budget (1 cut by it, unjudged)" in res.output
    assert "Traceback" not in res.output


def _slow_after_first_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scenarios run normally until the campaign's first finding; from then on every one is endless,
    so shrinking (Hypothesis's and the scenario's) can only end at the wall."""
    found = []
    real_run, real_tick = campaigns.run_scenario, Engine.tick

    def run(sdict: dict[str, object], *args: object, **kw: object) -> Verdict:
        v = real_run(sdict, *args, **kw)  # type: ignore[arg-type]
        found.append(not v.ok)
        return v

    def tick(engine: Engine) -> bool:
        return _idle_tick(engine) if any(found) else real_tick(engine)

    monkeypatch.setattr(campaigns, "run_scenario", run)
    monkeypatch.setattr(Engine, "tick", tick)


def test_shrinking_stops_at_the_wall_with_a_replayable_counterexample(monkeypatch: pytest.MonkeyPatch,
                                                                       slack: float, tmp_path: Path) -> None:
    _slow_after_first_finding(monkeypatch)
    seconds = 5.0
    t = time.monotonic()
    result = hypothesis_campaign(examples=10**6, seconds=seconds, mutants=("no-output-state",), seed=3)
    elapsed = time.monotonic() - t
    assert elapsed <= seconds + slack, (elapsed, slack)
    assert result.failure is not None, "the planted fault was not found before the wall"
    assert result.limits["search_stopped_by"] == "finding" and result.limits["shrink_stopped_by"] == "budget"
    assert result.cut_by_wall >= 1
    split = result.split
    assert split["searched"] < seconds and split["shrank"] > 0
    assert split["searched"] + split["shrank"] == pytest.approx(elapsed, abs=slack)
    monkeypatch.undo()  # the counterexample replays on the real engine, to the same finding
    assert run_scenario(result.failure.scenario).invariant == result.failure.invariant


def test_scenario_shrinking_stops_at_its_deadline(slack: float, monkeypatch: pytest.MonkeyPatch) -> None:
    found = hypothesis_campaign(examples=40, mutants=("no-output-state",), seed=3, shrink=False).failure
    assert found is not None
    monkeypatch.setattr(Engine, "tick", _idle_tick)
    t = time.monotonic()
    shrunk = shrink_scenario(found, t + 1.0)
    assert time.monotonic() - t <= 1.0 + slack
    assert not shrunk.complete and shrunk.verdict is found and shrunk.runs == 1


def test_fuzz_prints_and_writes_the_split(tmp_path: Path) -> None:
    from cutcheck.cli import app

    report = tmp_path / "fuzz.json"
    res = CliRunner().invoke(app, ["fuzz", "--seconds", "4", "--mutant", "no-output-state", "--json", str(report)])
    assert res.exit_code == 1, res.output
    split = json.loads(report.read_text())["split"]
    assert split["budget"] == 4 and split["searched"] + split["shrank"] <= 4 + AFTER_WALL
    assert f"budget 4 s: searched {split['searched']:.1f} s, shrank {split['shrank']:.1f} s" in res.output


def test_a_seed_campaign_with_a_finding_leaves_the_end_of_its_budget_to_shrinking(tmp_path: Path) -> None:
    """A seed campaign goes on after its first finding (it writes up to five), but only to SEARCH_SHARE
    of the budget: the rest shrinks the first one, inside the same wall."""
    from cutcheck.cli import app

    report = tmp_path / "fuzz.json"
    res = CliRunner().invoke(app, ["fuzz", "--seeds", "--seconds", "4", "--mutant", "no-output-state", "--json",
                                   str(report)])
    assert res.exit_code == 1, res.output
    written = json.loads(report.read_text())
    split = written["split"]
    assert split["searched"] <= campaigns.SEARCH_SHARE * 4 + AFTER_WALL and split["shrank"] > 0, split
    assert split["searched"] + split["shrank"] <= 4 + AFTER_WALL
    assert written["limits"]["search_stopped_by"] == "budget" and len(written["verdicts"]) > 1
    assert f"budget 4 s: searched {split['searched']:.1f} s, shrank {split['shrank']:.1f} s" in res.output
