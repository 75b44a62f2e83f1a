"""`cutcheck storage ls|orphans` and `cutcheck simulate --checkpoint-dir/--restore/--restore-mode`:
tables and JSON, exit codes (1 when a checkpoint lost a file), bad input in one sentence, exit 2."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.reference.storage.config import StorageConfig
from cutcheck.reference.storage.fs import FsCheckpointStorage
from cutcheck.reference.storage.inspection import inspect
from cutcheck.reference.storage.memory import CompletedCheckpoint
from tests.reference.helpers import ROOT, scenario, small_graph
from tests.reference.test_storage_support import PARALLELISM, SIDS, advance, initial_state, make_snapshot

runner = CliRunner()
JOB = "0" * 32


def assert_user_error(result: Any, *fragments: str) -> None:
    """Exit 2, one 'error: ...' sentence on stderr, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    text = result.stderr.strip()
    assert "\n" not in text and text.startswith("error: ") and text.endswith("."), text
    assert "Traceback" not in result.stderr + result.stdout
    for fragment in fragments:
        assert fragment in text, (fragment, text)


def simulated(base: Path) -> tuple[Path, Path]:
    """A scenario file and the checkpoint directory its run left (3 retained, incremental).
    (Each test that changes a directory makes its own: a copy would still reference the original's
    shared files, whose paths are absolute as in Flink.)"""
    base.mkdir(parents=True, exist_ok=True)
    s = scenario(small_graph(400), mode="aligned", seed=4, interval=30, failures=[{"after_checkpoint": 3, "target": "count[1]"}])
    s["checkpoint"].update(retained=3, incremental=True, max_concurrent=2)
    s["storage"] = {"inline_threshold": 100}
    path = base / "scenario.json"
    path.write_text(json.dumps(s))
    ck = base / "ck"
    result = runner.invoke(app, ["simulate", str(path), "--checkpoint-dir", str(ck)])
    assert result.exit_code == 0, result.stdout + result.stderr
    return path, ck


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Read only."""
    return simulated(tmp_path_factory.mktemp("cli"))


def test_ls_shows_checkpoints_and_who_references_each_shared_file(run_dir: tuple[Path, Path], tmp_path: Path) -> None:
    _, ck = run_dir
    result = runner.invoke(app, ["storage", "ls", str(ck), "--json", str(tmp_path / "ls.json")])
    assert result.exit_code == 0, result.stdout + result.stderr
    listing = inspect(ck)
    for c in listing.checkpoints:
        assert os.path.basename(c.path) in result.stdout
    assert "referenced by" in result.stdout and f", job {JOB}" in result.stdout
    assert f"{len(listing.checkpoints)} checkpoint(s), {len(listing.shared)} shared file(s), 0 orphan(s)" in result.stdout
    data = json.loads((tmp_path / "ls.json").read_text())
    assert [c["id"] for c in data["checkpoints"]] == [c.id for c in listing.checkpoints]
    assert data["shared"] == listing.shared and data["orphans"] == []


def test_ls_exits_1_when_a_checkpoint_lost_a_file(tmp_path: Path) -> None:
    fs = FsCheckpointStorage(StorageConfig(dir=str(tmp_path), incremental=True, inline_threshold=0))
    state, rng = initial_state(), random.Random(1)
    advance(state, rng)
    acks = {sid: make_snapshot(1, sid, state, rng) for sid in SIDS}
    for snap in acks.values():
        fs.acknowledge(snap)
    fs.complete(CompletedCheckpoint(1, "checkpoint", 0, dict(PARALLELISM), acks), 1)
    os.remove(inspect(tmp_path).checkpoints[0].files["shared"][0])
    result = runner.invoke(app, ["storage", "ls", str(tmp_path)])
    assert result.exit_code == 1 and "1 MISSING" in result.stdout and "missing" in result.stdout


def test_orphans_dry_run_then_delete(tmp_path: Path) -> None:
    _, work = simulated(tmp_path / "run")
    planted = [work / JOB / "shared" / "left-by-an-earlier-run", work / JOB / "chk-2" / "8d1c-aborted"]
    for p in planted:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("stale")
        os.utime(p, (time.time() - 7200, time.time() - 7200))  # older than the default --min-age (1h)
    dry = runner.invoke(app, ["storage", "orphans", str(work), "--json", str(tmp_path / "o.json")])
    assert dry.exit_code == 0, dry.stderr
    assert "shared/left-by-an-earlier-run" in dry.stdout and "chk-2/8d1c-aborted" in dry.stdout
    assert "2 orphan(s)" in dry.stdout and all(p.exists() for p in planted)
    assert sorted(json.loads((tmp_path / "o.json").read_text())["orphans"]) == sorted(str(p) for p in planted)
    done = runner.invoke(app, ["storage", "orphans", str(work), "--delete"])
    assert done.exit_code == 0 and "moved 2 file(s)" in done.stdout, done.stdout
    assert not any(p.exists() for p in planted) and not (work / JOB / "chk-2").exists()
    (batch,) = (work / ".cutcheck-quarantine").iterdir()  # moved, not removed: one batch per run
    assert sorted((batch / "files" / p.relative_to(work)).read_text() for p in planted) == ["stale", "stale"]
    assert "0 orphan(s)" in runner.invoke(app, ["storage", "orphans", str(work)]).stdout


def test_bad_directories_are_one_sentence_exit_2(tmp_path: Path) -> None:
    assert_user_error(runner.invoke(app, ["storage", "ls", str(tmp_path / "nope")]), "no such checkpoint directory")
    (tmp_path / "file").write_text("x")
    assert_user_error(runner.invoke(app, ["storage", "orphans", str(tmp_path / "file")]), "no such checkpoint directory")
    bad = tmp_path / "d" / JOB / "chk-1"
    bad.mkdir(parents=True)
    (bad / "_metadata").write_text('{"format": "something else"}')
    assert_user_error(runner.invoke(app, ["storage", "orphans", str(tmp_path / "d")]), "not a cutcheck checkpoint",
                      "no file is called an orphan")
    ls = runner.invoke(app, ["storage", "ls", str(tmp_path / "d")])  # an unreadable checkpoint is not vouched for
    assert ls.exit_code == 1 and "UNREADABLE" in ls.stdout and "1 unreadable _metadata" in ls.stdout


def test_simulate_restores_from_an_earlier_runs_checkpoint(tmp_path: Path) -> None:
    path, work = simulated(tmp_path / "run")
    oldest = min(inspect(work).checkpoints, key=lambda c: c.id)
    for mode in ("no_claim", "claim"):
        latest = max(inspect(work).checkpoints, key=lambda c: c.id) if mode == "claim" else oldest
        result = runner.invoke(app, ["simulate", str(path), "--checkpoint-dir", str(work), "--restore", latest.path,
                                     "--restore-mode", mode])
        assert result.exit_code == 0, (mode, result.stdout, result.stderr)
        assert f"restore from checkpoint {latest.id}" in result.stdout


def test_simulate_restore_errors_are_one_sentence(run_dir: tuple[Path, Path], tmp_path: Path) -> None:
    path, ck = run_dir
    assert_user_error(runner.invoke(app, ["simulate", str(path), "--restore", str(tmp_path / "missing")]),
                      "no such checkpoint directory")
    latest = max(inspect(ck).checkpoints, key=lambda c: c.id)
    assert_user_error(runner.invoke(app, ["simulate", str(path), "--restore", latest.path, "--restore-mode", "steal"]),
                      "--restore-mode 'steal'")
    s = json.loads(path.read_text())
    s["storage"] = {"dir": str(tmp_path / "x"), "colour": "blue"}
    (tmp_path / "s.json").write_text(json.dumps(s))
    assert_user_error(runner.invoke(app, ["simulate", str(tmp_path / "s.json")]), "storage: unknown field(s) colour")
    used = runner.invoke(app, ["simulate", str(path), "--checkpoint-dir", str(ck)])  # a fresh run into a used directory
    assert_user_error(used, "already holds a checkpoint")


def test_the_installed_entry_point_prints_no_traceback(tmp_path: Path) -> None:
    child = subprocess.run([sys.executable, "-m", "cutcheck", "storage", "ls", str(tmp_path / "nope")],
                           capture_output=True, text=True, cwd=ROOT)
    assert child.returncode == 2 and child.stderr.startswith("error: ") and "Traceback" not in child.stderr
