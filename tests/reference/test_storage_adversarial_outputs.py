"""Held-out adversarial cases (issue 26) for what commands leave behind: nothing in the working directory after
fuzz, simulate or a storage command (run as an operator would, from an empty directory, in a child process),
and --force on an output directory that is a symbolic link to a run directory replaces nothing of the user's."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reference.adversarial_helpers import JOB_A, age_tree, checkpoint, write
from tests.reference.helpers import scenario, small_graph


def cutcheck(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "HYPOTHESIS"))}
    return subprocess.run([sys.executable, "-m", "cutcheck", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=env)


def snapshot(root: Path) -> dict[str, str]:
    return {os.path.relpath(os.path.join(d, f), root): hashlib.sha256(Path(d, f).read_bytes()).hexdigest()
            for d, _, files in os.walk(root) for f in files}


@pytest.mark.parametrize("args", [["fuzz", "--examples", "2"], ["fuzz", "--examples", "2", "--seeds"]])
def test_fuzz_leaves_nothing_in_the_working_directory(tmp_path: Path, args: list[str]) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    done = cutcheck(cwd, *args)
    assert done.returncode in (0, 1), done.stderr
    assert sorted(os.listdir(cwd)) == []


def test_storage_commands_leave_nothing_in_the_working_directory(tmp_path: Path) -> None:
    base = tmp_path / "ck"
    checkpoint(base / JOB_A, 5, [base / JOB_A / "shared" / "s1"])
    write(base / JOB_A / "shared" / "orphan")
    age_tree(base)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    for args in (["ls", str(base)], ["lifecycle", str(base)], ["orphans", str(base), "--delete"],
                 ["restore-quarantine", str(base)], ["purge", str(base), "--older-than", "0"]):
        done = cutcheck(cwd, "storage", *args)
        assert done.returncode in (0, 1, 2) and "Traceback" not in done.stderr, (args, done.stderr)
        assert sorted(os.listdir(cwd)) == [], args


def test_force_on_a_symlink_to_a_run_directory_keeps_the_users_link_and_data(tmp_path: Path) -> None:
    s = scenario(small_graph(50), mode="aligned", seed=1, interval=20)
    (tmp_path / "s.json").write_text(json.dumps(s))
    real = tmp_path / "runs" / "first"
    assert cutcheck(tmp_path, "simulate", str(tmp_path / "s.json"), "--out", str(real)).returncode == 0
    link = tmp_path / "latest"
    link.symlink_to(real)
    before = snapshot(tmp_path / "runs")
    done = cutcheck(tmp_path, "simulate", str(tmp_path / "s.json"), "--out", str(link), "--force")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: ") and "symbolic link" in done.stderr and len(done.stderr.splitlines()) == 1
    assert link.is_symlink() and snapshot(tmp_path / "runs") == before
    assert sorted(os.listdir(tmp_path)) == ["latest", "runs", "s.json"]
    assert os.listdir(tmp_path / "runs") == ["first"]
    again = cutcheck(tmp_path, "simulate", str(tmp_path / "s.json"), "--out", str(real), "--force")
    assert again.returncode == 0, again.stderr  # the directory itself, named: replaced as before
