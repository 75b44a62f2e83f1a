"""One judge: simulate, fuzz and verify give a run the same verdict, and every verdict names the checks
it skipped and why (``reference.judge``)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import networkx as nx
from typer.testing import CliRunner

from cutcheck.reference import Scenario, simulate
from cutcheck.reference.checks.tracing import validate_traces
from cutcheck.reference.fuzzing.verdicts import FEATURE_CYCLE, run_scenario, scenario_of_seed
from cutcheck.reference.judge import Check, Outcome, Skip, State, judge
from tests.reference.test_restart_loop import _job

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "scenarios" / "keyed-unaligned.json"
RESUBMIT_SEED = FEATURE_CYCLE.index("resubmit") + len(FEATURE_CYCLE)  # seed 32: a resubmitted second job
AT_LEAST_ONCE = ROOT / "tests" / "reference" / "regressions" / "at-least-once-count-gaps-seed-100186.json"


def _simulate_cli(args: list[str]) -> tuple[int, str]:
    from cutcheck.cli import app

    res = CliRunner().invoke(app, ["simulate", *args])
    return res.exit_code, res.output


def _scenario_file(tmp_path: Path, sdict: dict[str, object]) -> str:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(sdict))
    return str(path)


def test_a_resubmitted_second_job_is_judged_the_same_by_simulate_and_fuzz(tmp_path: Path) -> None:
    """The trace model starts every channel before any checkpoint, so the traces of a job that started
    from the first job's checkpoint are rejected (its failover restores a checkpoint the model never
    saw completed): fuzz skipped them, ``simulate --trace`` rejected them and exited 1. Now both skip
    trace validation of that job, say why, and agree that the run holds."""
    sdict = scenario_of_seed(RESUBMIT_SEED)
    result = simulate(Scenario.from_json(sdict), checkpoint_dir=tmp_path / "direct", trace=True)
    assert result.summary()["resubmit"]["jobs"] == 2 and result.started_from is not None
    assert validate_traces(result.traces), "the model would reject this second job's traces"
    fuzz = run_scenario(sdict)
    trace = fuzz.judgement.check(Check.TRACE)
    assert fuzz.judgement.outcome is Outcome.HOLDS and trace is not None
    assert trace.state is State.SKIPPED and trace.skip is Skip.STARTED_RESTORED
    code, output = _simulate_cli([_scenario_file(tmp_path, sdict), "--trace", "--checkpoint-dir", str(tmp_path / "cp")])
    assert code == 0, output
    assert "trace validation: skipped: the job started from the first job's" in output
    assert "verdict: holds;" in output and "trace skipped" in output


def test_a_fuzz_campaign_says_how_many_runs_skipped_trace_validation_and_why() -> None:
    from cutcheck.cli import app

    res = CliRunner().invoke(app, ["fuzz", "--seeds", "--seed", str(RESUBMIT_SEED), "--examples", "1"])
    assert res.exit_code == 0, res.output
    assert f"trace skipped in 1 run: {Skip.STARTED_RESTORED.value}" in res.output


def test_at_least_once_duplicates_are_judged_the_same_by_simulate_and_fuzz(tmp_path: Path) -> None:
    """Duplicates and count gaps after a failover are what AT_LEAST_ONCE promises: fuzz accepted them
    and ``simulate`` called the same run an EXACTLY_ONCE violation (exit 1); now both accept them."""
    raw = json.loads(AT_LEAST_ONCE.read_text())
    result = simulate(Scenario.from_json(raw), checkpoint_dir=tmp_path / "direct")
    assert not result.exactly_once.ok and result.violations[0]["invariant"] == "EXACTLY_ONCE"
    verdict = judge(result)
    eo = verdict.check(Check.EXACTLY_ONCE)
    assert verdict.outcome is Outcome.HOLDS and eo is not None and eo.state is State.HELD and "at least once" in eo.note
    assert run_scenario(raw).judgement.outcome is Outcome.HOLDS
    code, output = _simulate_cli([_scenario_file(tmp_path, raw), "--checkpoint-dir", str(tmp_path / "cp")])
    assert code == 0, output
    assert "at least once holds" in output and "EXACTLY_ONCE violated" not in output


def test_a_run_that_was_not_traced_says_trace_validation_was_skipped() -> None:
    verdict = judge(simulate(Scenario.from_json(EXAMPLE)))
    trace = verdict.check(Check.TRACE)
    assert verdict.outcome is Outcome.HOLDS and trace is not None
    assert trace.state is State.SKIPPED and trace.skip is Skip.NOT_TRACED
    assert "trace skipped (the run was not traced)" in verdict.describe()


def test_a_restart_loop_is_flinks_ending_everywhere_and_its_output_is_not_judged(tmp_path: Path) -> None:
    sdict = _job(tolerable=1, timeout=2)
    verdict = judge(simulate(Scenario.from_json(sdict)))
    eo = verdict.check(Check.EXACTLY_ONCE)
    assert verdict.outcome is Outcome.RESTART_LOOP and verdict.ok
    assert eo is not None and eo.state is State.SKIPPED and eo.skip is Skip.RESTARTS_FOR_EVER
    assert run_scenario(sdict).looped
    code, output = _simulate_cli([_scenario_file(tmp_path, sdict)])
    assert code == 0, output
    assert "restart loop (not a finding)" in output and "LIVENESS violated" not in output


def test_the_command_modules_import_one_another_without_a_cycle() -> None:
    """verify and fuzz imported each other; what they share is commands/campaign.py."""
    graph = nx.DiGraph()
    for path in (ROOT / "commands").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "cutcheck.commands":
                graph.add_edges_from((path.stem, a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cutcheck.commands."):
                graph.add_edge(path.stem, (node.module or "").split(".")[2])
    assert graph.has_edge("verify", "campaign") and graph.has_edge("fuzz", "campaign")
    # (storage and flink register their sub-commands from modules that import them back: not this test's)
    assert [c for c in nx.simple_cycles(graph) if {"fuzz", "verify", "campaign"} & set(c)] == []


def test_a_step_limit_stop_is_unjudged_only_while_the_output_up_to_it_holds() -> None:
    from dataclasses import replace

    from cutcheck.reference.checks.oracle import ExactlyOnce

    ran = simulate(Scenario.from_json(EXAMPLE))
    stop = [{"invariant": "LIVENESS", "detail": "the job did not finish within 90 steps", "step": "90"}]
    clean = replace(ran, violations=stop, complete=False, exactly_once=ExactlyOnce(ok=True, pending=5, prefix=True))
    assert judge(clean).outcome is Outcome.UNJUDGED
    duplicated = replace(clean, exactly_once=ExactlyOnce(ok=False, duplicated=2, prefix=True))
    verdict = judge(duplicated)  # a duplicate is wrong in any prefix: a finding, not an unjudged stop
    assert verdict.outcome is Outcome.VIOLATED and [f["invariant"] for f in verdict.findings] == ["LIVENESS", "EXACTLY_ONCE"]
    eo = verdict.check(Check.EXACTLY_ONCE)
    assert eo is not None and eo.state is State.FAILED and "prefix" in eo.note
