"""Bad input to simulate, fuzz and verify: exit 2, one sentence naming the field, no traceback, and
no file that existed before is changed (issue 14, items 2 and 3).

Every case runs the real console entry (``python -m cutcheck ...``) in a prepared directory whose every
file is hashed before and after.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def tree_hashes(root: Path) -> dict[str, str]:
    """Every file and directory under ``root``: a content hash per file, "dir" per directory."""
    found: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        found[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return found


def cutcheck(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cutcheck", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture()
def work(tmp_path: Path) -> Path:
    """tmp/keyed-pipeline.json, tmp/scen/s.json (examples/scenarios/keyed-unaligned.json) and a stray file."""
    shutil.copy(EXAMPLES / "keyed-pipeline.json", tmp_path / "keyed-pipeline.json")
    (tmp_path / "scen").mkdir()
    shutil.copy(EXAMPLES / "scenarios" / "keyed-unaligned.json", tmp_path / "scen" / "s.json")
    (tmp_path / "notes.txt").write_text("the user's own file\n")
    return tmp_path


def scenario_file(work: Path, name: str, change: Callable[[dict[str, Any], dict[str, Any]], None]) -> Path:
    """A copy of the example scenario with its graph inline, changed by ``change(scenario, graph)``."""
    scen = json.loads((work / "scen" / "s.json").read_text())
    graph = json.loads((work / "keyed-pipeline.json").read_text())
    scen["graph"] = graph
    change(scen, graph)
    path = work / "scen" / f"{name}.json"
    path.write_text(json.dumps(scen))
    return path


def assert_refused(res: subprocess.CompletedProcess[str], *names: str) -> None:
    said = res.stdout + res.stderr
    assert res.returncode == 2, said
    assert "Traceback" not in said, said
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert lines[0].rstrip().endswith((".", ")")), lines[0]  # one sentence
    for name in names:
        assert name in lines[0], (name, lines[0])


def _fail(target: str, **when: int) -> Callable[[dict[str, Any], dict[str, Any]], None]:
    def change(s: dict[str, Any], g: dict[str, Any]) -> None:
        s["failures"] = [{"target": target, **when}]
    return change


def _set(section: str | None, key: str, value: Any) -> Callable[[dict[str, Any], dict[str, Any]], None]:
    def change(s: dict[str, Any], g: dict[str, Any]) -> None:
        (s.setdefault(section, {}) if section else s)[key] = value
    return change


def _vertex(vid: str, key: str, value: Any) -> Callable[[dict[str, Any], dict[str, Any]], None]:
    def change(s: dict[str, Any], g: dict[str, Any]) -> None:
        next(v for v in g["vertices"] if v["id"] == vid)[key] = value
    return change


def _wide(s: dict[str, Any], g: dict[str, Any]) -> None:
    g["max_parallelism"] = 32768
    for v in g["vertices"]:
        if v["id"] in ("map", "count"):
            v["parallelism"] = 5000


def _wide_rescale(s: dict[str, Any], g: dict[str, Any]) -> None:
    g["max_parallelism"] = 4096
    s["rescales"] = [{"on_failure": 0, "parallelism": {"map": 2000, "count": 2000}}]


SCENARIO_CASES = {
    "subtask-out-of-range": (_fail("count[99]", after_checkpoint=2), ["failures[0].target", "count[99]"]),
    "unknown-vertex": (_fail("nope[0]", after_checkpoint=2), ["failures[0].target", "nope[0]"]),
    "no-such-worker": (_fail("worker:99", after_checkpoint=2), ["failures[0].target", "worker:99"]),
    "checkpoint-never-reached": (_fail("count[0]", after_checkpoint=10**6), ["failures[0].after_checkpoint"]),
    "zero-checkpoint": (_fail("count[0]", after_checkpoint=0), ["failures[0].after_checkpoint"]),
    "zero-step": (_fail("count[0]", at_step=0), ["failures[0].at_step"]),
    "negative-step": (_fail("count[0]", at_step=-5), ["failures[0].at_step"]),
    "step-beyond-max-steps": (_fail("count[0]", at_step=10**7), ["failures[0].at_step", "max_steps"]),
    "negative-delay": (_fail("count[0]", after_checkpoint=1, delay=-1), ["failures[0].delay"]),
    "max-steps-zero": (_set(None, "max_steps", 0), ["max_steps"]),
    "max-steps-negative": (_set(None, "max_steps", -1), ["max_steps"]),
    "slowdown-zero": (_set("schedule", "slowdown", 0), ["schedule.slowdown"]),
    "slowdown-negative": (_set("schedule", "slowdown", -3), ["schedule.slowdown"]),
    "flush-weight-zero": (_set("schedule", "flush_weight", 0), ["schedule.flush_weight"]),
    "workers-zero": (_set(None, "workers", 0), ["workers"]),
    "records-beyond-budget": (_vertex("src", "records", 10**12), ["records", "100000000"]),
    "splits-beyond-budget": (_vertex("src", "splits", 10**9), ["splits"]),
    "channels-beyond-budget": (_wide, ["parallelism", "channels"]),
    "rescale-channels-beyond-budget": (_wide_rescale, ["rescales[0]", "channels"]),
    "rescale-unknown-vertex": (lambda s, g: s.update(rescales=[{"on_failure": 0, "parallelism": {"nope": 2}}]),
                               ["rescales[0]", "nope"]),
    "delay-with-at-step": (_fail("count[0]", at_step=50, delay=5), ["failures[0]", "delay"]),
    "two-rescales-one-failure": (
        lambda s, g: s.update(rescales=[{"on_failure": 0, "parallelism": {"count": 3}},
                                        {"on_failure": 0, "parallelism": {"sink": 2}}]), ["rescales[1]", "failure 0"]),
    "timeout-negative": (_set("checkpoint", "timeout", -5), ["checkpoint.timeout"]),
    "timeout-not-a-number": (_set("checkpoint", "timeout", "abc"), ["checkpoint.timeout"]),
    "incremental-not-a-boolean": (_set("checkpoint", "incremental", "yes"), ["checkpoint.incremental"]),
    "rescale-beyond-max-parallelism": (
        lambda s, g: s.update(rescales=[{"on_failure": 0, "parallelism": {"count": 1000}}]), ["rescales[0]", "count"]),
}


@pytest.mark.parametrize("case", sorted(SCENARIO_CASES))
def test_simulate_refuses_a_bad_scenario(work: Path, case: str) -> None:
    change, names = SCENARIO_CASES[case]
    path = scenario_file(work, case, change)
    before = tree_hashes(work)
    res = cutcheck(["simulate", str(path), "--out", str(work / "run"), "--json", str(work / "r.json")], work)
    assert_refused(res, *names)
    assert tree_hashes(work) == before  # nothing written, nothing changed: refused before the run


def test_a_job_beyond_the_channel_budget_is_refused_before_any_channel_exists(
        work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget is a per-edge formula: the refusal never expands the job into its 25 million
    channels (how fast that is, is measured by benchmarks/bench_graph.py, not asserted here)."""
    from cutcheck.model import execution
    from cutcheck.reference import Scenario
    from cutcheck.reference.scenario import ScenarioError

    def expanded(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the job was expanded into channels before it was refused")

    monkeypatch.setattr(execution.ExecutionGraph, "__init__", expanded)
    path = scenario_file(work, "wide", _wide)
    with pytest.raises(ScenarioError, match="channels"):
        Scenario.from_json(path)


@pytest.mark.parametrize("args, names", [
    (["simulate", "scen"], ["scen", "directory"]),
    (["simulate", "missing.json"], ["missing.json"]),
    (["simulate", "notes.txt"], ["notes.txt", "JSON"]),
    (["simulate", "scen/s.json", "--seed", "-1"], ["--seed"]),
    (["simulate", "scen/s.json", "--json", "notes.txt"], ["--json", "notes.txt"]),
    (["simulate", "scen/s.json", "--json", "scen"], ["--json"]),
    (["simulate", "scen/s.json", "--out", "notes.txt"], ["--out", "notes.txt"]),
    (["simulate", "scen/s.json", "--out", "scen"], ["--out", "scen"]),
    (["simulate", "scen/s.json", "--out", "."], ["--out", "working directory"]),
    (["simulate", "scen/s.json", "--out", "notes.txt/run"], ["--out", "notes.txt"]),
    (["simulate", "scen/s.json", "--rescale", "count=0"], ["--rescale"]),
    (["fuzz", "--examples", "0"], ["--examples"]),
    (["fuzz", "--examples", "-3"], ["--examples"]),
    (["fuzz", "--seconds", "0"], ["--seconds"]),
    (["fuzz", "--seconds", "-1"], ["--seconds"]),
    (["fuzz", "--workers", "0"], ["--workers"]),
    (["fuzz", "--workers", "-2", "--seeds"], ["--workers"]),
    (["fuzz", "--workers", "2", "--seconds", "5"], ["--seconds"]),
    (["fuzz", "--mutant", "no-such-bug"], ["--mutant", "no-such-bug"]),
    (["fuzz", "--examples", "1", "--out", "."], ["--out"]),
    (["fuzz", "--examples", "1", "--out", "scen"], ["--out", "scen"]),
    (["fuzz", "--examples", "1", "--out", "notes.txt"], ["--out", "notes.txt"]),
    (["fuzz", "--examples", "1", "--json", "notes.txt"], ["--json", "notes.txt"]),
    (["verify", "--profile", "forever"], ["--profile"]),
    (["verify", "--examples", "empty"], ["empty"]),
    (["verify", "--work-dir", "scen"], ["--work-dir", "scen"]),
    (["verify", "--work-dir", "notes.txt"], ["--work-dir", "notes.txt"]),
    (["verify", "--work-dir", "."], ["--work-dir"]),
    (["verify", "--mutant", "no-such-bug"], ["--mutant"]),
    (["verify", "--json", "notes.txt"], ["--json", "notes.txt"]),
])
def test_commands_refuse_bad_options(work: Path, args: list[str], names: list[str]) -> None:
    (work / "empty").mkdir()
    before = tree_hashes(work)
    res = cutcheck(args, work)
    assert_refused(res, *names)
    assert tree_hashes(work) == before


def test_out_dot_dot_from_the_scenarios_directory_is_refused(work: Path) -> None:
    before = tree_hashes(work)
    res = cutcheck(["simulate", "s.json", "--out", ".."], work / "scen")
    assert_refused(res, "--out ..")
    assert tree_hashes(work) == before and (work / "scen" / "s.json").is_file()


def test_fuzz_says_how_many_scenarios_ran(work: Path) -> None:
    res = cutcheck(["fuzz", "--examples", "3", "--json", "f.json", "--out", "campaign"], work)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "3 scenarios ran" in res.stdout
    report = json.loads((work / "f.json").read_text())
    assert report["scenarios_run"] == 3 and sum(report["covered"]["modes"].values()) == 3
    assert json.loads((work / "campaign" / "run.json").read_text())["written_by"] == "cutcheck"
    res = cutcheck(["fuzz", "--examples", "2", "--seeds", "--out", "campaign", "--force"], work)
    assert res.returncode == 0 and "2 scenarios ran" in res.stdout, res.stdout + res.stderr


@pytest.mark.parametrize(("args", "name"), [
    (["verify", "--seed", "-1"], "--seed"),
    (["verify", "--seed", "x"], "--seed"),
    (["fuzz", "--seed", "x"], "--seed"),
    (["fuzz", "--examples", "many"], "--examples"),
])
def test_option_values_click_rejects_are_one_sentence_too(work: Path, args: list[str], name: str) -> None:
    """Parse errors come from Typer's copy of click even where click itself is installed beside it."""
    before = tree_hashes(work)
    assert_refused(cutcheck(args, work), name)
    assert tree_hashes(work) == before
