"""simulate never destroys what it did not write, never says "lost" of a run it stopped, and says
when a scheduled failure or rescale never fired (issue 14, items 2 and 3)."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cutcheck.model.outputs import OutputRefused, is_cutcheck_run_dir
from cutcheck.reference import Scenario, simulate
from tests.interrupts import interruptible
from tests.test_bad_input_simulate_fuzz import EXAMPLES, cutcheck, tree_hashes


@pytest.fixture()
def work(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLES / "keyed-pipeline.json", tmp_path / "keyed-pipeline.json")
    (tmp_path / "scen").mkdir()
    shutil.copy(EXAMPLES / "scenarios" / "keyed-unaligned.json", tmp_path / "scen" / "s.json")
    return tmp_path


def _scenario(work: Path, name: str, **over: Any) -> Path:
    scen = json.loads((work / "scen" / "s.json").read_text())
    scen.update(over)
    path = work / "scen" / f"{name}.json"
    path.write_text(json.dumps(scen))
    return path


def _leftovers(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if ".tmp-" in p.name or ".old-" in p.name]


def test_an_existing_directory_that_is_not_a_run_is_never_replaced(work: Path) -> None:
    mine = work / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    before = tree_hashes(work)
    res = cutcheck(["simulate", "scen/s.json", "--out", "mine"], work)
    assert res.returncode == 2 and "not a run directory cutcheck wrote" in res.stderr, res.stderr
    res = cutcheck(["simulate", "scen/s.json", "--out", "mine", "--force"], work)  # --force does not change that
    assert res.returncode == 2, res.stderr
    assert tree_hashes(work) == before and not _leftovers(work)


def test_the_working_directory_its_parents_and_files_are_never_replaced(work: Path) -> None:
    before = tree_hashes(work)
    for args, cwd in ((["--out", "."], work), (["--out", "..", "--force"], work / "scen"),
                      (["--out", "s.json", "--force"], work / "scen")):
        res = cutcheck(["simulate", "s.json" if cwd.name == "scen" else "scen/s.json", *args], cwd)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert tree_hashes(work) == before and not _leftovers(work)


def test_a_cutcheck_run_is_replaced_only_with_force(work: Path) -> None:
    res = cutcheck(["simulate", "scen/s.json", "--out", "run"], work)
    assert res.returncode == 0, res.stdout + res.stderr
    assert is_cutcheck_run_dir(work / "run")
    assert json.loads((work / "run" / "run.json").read_text())["written_by"] == "cutcheck"
    before = tree_hashes(work)
    res = cutcheck(["simulate", "scen/s.json", "--out", "run"], work)
    assert res.returncode == 2 and "--force" in res.stderr, res.stderr
    assert tree_hashes(work) == before
    res = cutcheck(["simulate", "scen/s.json", "--out", "run", "--force"], work)
    assert res.returncode == 0, res.stdout + res.stderr
    assert is_cutcheck_run_dir(work / "run")
    assert sorted(p.name for p in work.iterdir()) == ["keyed-pipeline.json", "run", "scen"]


def test_force_never_deletes_a_file_the_user_saved_inside_a_run(work: Path) -> None:
    res = cutcheck(["simulate", "scen/s.json", "--out", "run"], work)
    assert res.returncode == 0, res.stdout + res.stderr
    (work / "run" / "analysis.ipynb").write_text('{"cells": []}')
    before = tree_hashes(work)
    res = cutcheck(["simulate", "scen/s.json", "--out", "run", "--force"], work)
    assert res.returncode == 2 and "analysis.ipynb was not written by cutcheck" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert tree_hashes(work) == before and not _leftovers(work)
    (work / "run" / "analysis.ipynb").rename(work / "analysis.ipynb")  # moved out: the run may go
    res = cutcheck(["simulate", "scen/s.json", "--out", "run", "--force"], work)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_library_api_refuses_what_cutcheck_did_not_write(work: Path) -> None:
    scen = Scenario.from_json(work / "scen" / "s.json")
    other = work / "other"
    other.mkdir()
    (other / "data.csv").write_text("1,2\n")
    before = tree_hashes(work)
    with pytest.raises(OutputRefused):
        simulate(scen, out_dir=other)
    with pytest.raises(OutputRefused):
        simulate(scen, out_dir=other, force=True)
    assert tree_hashes(work) == before
    first = simulate(scen, out_dir=work / "run")
    assert first.run_dir == work / "run"
    with pytest.raises(OutputRefused):
        simulate(scen, out_dir=work / "run")  # force defaults to False
    simulate(scen, out_dir=work / "run", force=True)
    assert not _leftovers(work)


def test_ctrl_c_removes_the_temporary_run_and_exits_130(work: Path) -> None:
    graph = json.loads((work / "keyed-pipeline.json").read_text())
    graph["vertices"][0]["records"] = 400_000
    path = _scenario(work, "long", graph=graph, failures=[], max_steps=10**9)
    proc = interruptible([sys.executable, "-m", "cutcheck", "simulate", str(path), "--out", "run"], cwd=work,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not _leftovers(work) and time.monotonic() < deadline:  # the run has started writing
        time.sleep(0.05)
    assert _leftovers(work), "the run never started"
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, (stdout, stderr)
    assert stderr.strip().splitlines() == ["interrupted"], stderr
    assert not _leftovers(work) and not (work / "run").exists()


def test_a_failure_that_never_fires_is_reported_and_strict_makes_it_an_error(work: Path) -> None:
    # checkpoint 5000 is reachable in principle (max_steps 200 000), but this job ends long before
    path = _scenario(work, "late", failures=[{"after_checkpoint": 5000, "target": "count[0]"}],
                     rescales=[{"on_failure": 0, "parallelism": {"count": 3}}])
    res = cutcheck(["simulate", str(path), "--json", "r.json"], work)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "NEVER FIRED" in res.stdout and "failures[0]" in res.stdout and "rescales[0]" in res.stdout
    summary = json.loads((work / "r.json").read_text())
    assert [f["index"] for f in summary["never_fired"]["failures"]] == [0]
    assert [r["index"] for r in summary["never_fired"]["rescales"]] == [0]
    res = cutcheck(["simulate", str(path), "--strict"], work)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "never fired" in lines[0] and "failures[0]" in lines[0], res.stderr
    res = cutcheck(["simulate", "scen/s.json", "--strict", "--json", "ok.json"], work)  # its failure fires
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads((work / "ok.json").read_text())["never_fired"] == {"failures": [], "rescales": []}


def test_a_run_stopped_by_a_violation_reports_pending_not_lost(work: Path) -> None:
    r = simulate(Scenario.from_json(_scenario(work, "short", max_steps=3000)), out_dir=work / "run")
    assert [v["invariant"] for v in r.violations] == ["LIVENESS"]
    eo = r.exactly_once
    assert eo.lost == 0 and eo.pending > 0 and eo.prefix and not r.complete
    run = json.loads((work / "run" / "run.json").read_text())
    assert run["complete"] is False and run["summary"]["exactly_once"]["lost"] == 0
    full = simulate(Scenario.from_json(work / "scen" / "s.json"))
    assert full.ok and full.complete and full.exactly_once.pending == 0 and not full.exactly_once.prefix


def test_progress_is_reported_without_changing_the_run(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.import_module("cutcheck.reference.simulate"), "PROGRESS_EVERY", 1000)
    scen = Scenario.from_json(work / "scen" / "s.json")
    seen: list[tuple[int, int]] = []
    a = simulate(scen, progress=lambda step, most: seen.append((step, most)))
    b = simulate(scen)
    assert seen and all(most == scen.max_steps for _, most in seen) and seen == sorted(seen)
    assert (a.steps, a.checkpoints, a.exactly_once) == (b.steps, b.checkpoints, b.exactly_once)


def test_simulate_output_never_holds_progress_when_piped(work: Path) -> None:
    res = cutcheck(["simulate", "scen/s.json"], work)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert "simulating: step" not in res.stdout
    assert os.linesep in res.stdout


def test_verify_names_what_each_check_asserted_and_reports_values(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stages are stubbed (the real ones take minutes and Spark); the example scenario really runs."""
    from types import SimpleNamespace

    from typer.testing import CliRunner

    from cutcheck import proofs, spark_validation
    from cutcheck.cli import app
    from cutcheck.proofs.registry import ProofResult
    from cutcheck.reference.faults.catalogue import MUTANTS
    from cutcheck.reference.fuzzing import campaigns as fz

    monkeypatch.setattr(proofs, "run", lambda: [
        ProofResult("cut-unaligned", "proved", "unbounded", 0.1),
        ProofResult("cut-unaligned[no-output-state]", "counterexample", "4", 0.1, expected="counterexample")])
    monkeypatch.setattr(fz, "hypothesis_campaign", lambda **kw: fz.CampaignResult(
        examples=3, seconds=0.5, covered=fz.ScenarioMix(modes={"aligned": 2, "unaligned": 1}, with_failures=2, restarted=2)))
    monkeypatch.setattr(fz, "kill", lambda m, **kw: fz.KillResult(m, True, 0.1, 2, "CUT", 4))
    monkeypatch.setattr(spark_validation, "validate", lambda **kw: SimpleNamespace(
        ok=True, lost=0, duplicated=0, phantom=0, count_gaps=0, to_dict=lambda: {"ok": True, "lost": 0}))
    examples = work / "ex"
    examples.mkdir()
    (examples / "a-scenario-with-a-rather-long-name-that-must-not-be-cut.json").write_text(
        (work / "scen" / "s.json").read_text().replace("../keyed-pipeline.json", str(work / "keyed-pipeline.json")))
    monkeypatch.chdir(work)
    res = CliRunner().invoke(app, ["verify", "--examples", str(examples), "--work-dir", "vw", "--json", "v.json"])
    assert res.exit_code == 0, res.output
    for text in ("proofs", "negative controls", "1 of 1 proved", "1 of 1 refuted", "3 scenarios ran", "mutants",
                 f"{len(MUTANTS)} of {len(MUTANTS)} found", "no-output-state: found by CUT", "example a-scenario-with-a-rather-long-name-that-must-not-be-cut", "spark validation",
                 "What each check asserts", "injected", "exactly once", "everything holds in"):
        assert text in res.output, text
    assert "…" not in res.output
    report = json.loads((work / "v.json").read_text())
    assert report["ok"] is True and isinstance(report["seconds"], float)
    assert report["fuzz"]["scenarios_run"] == 3 and report["spark"]["a-scenario-with-a-rather-long-name-that-must-not-be-cut"] == {"ok": True, "lost": 0}

    def strings(value: Any) -> list[str]:
        if isinstance(value, dict):
            return [s for v in value.values() for s in strings(v)]
        if isinstance(value, list):
            return [s for v in value for s in strings(v)]
        return [value] if isinstance(value, str) else []

    assert not [s for s in strings(report) if s.lstrip().startswith(("{", "["))]  # values, never JSON in a string
    assert [r["check"] for r in report["rows"]][:4] == ["proofs", "negative controls", "fuzz", "mutants"]
    assert is_cutcheck_run_dir(work / "vw") and not _leftovers(work)
