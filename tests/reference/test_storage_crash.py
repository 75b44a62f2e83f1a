"""A run killed (``os._exit``) after K file operations, for K spread over a whole run: the directory
always holds the latest checkpoint whose ``_metadata`` rename happened, intact and equal to what
the run completed, no checkpoint with a missing file, and a new run restores from it."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cutcheck.reference import Scenario, simulate
from cutcheck.reference.storage.config import StorageConfig
from cutcheck.reference.storage.files import CRASH_ENV
from cutcheck.reference.storage.fs import FsCheckpointStorage
from cutcheck.reference.storage.inspection import inspect
from cutcheck.reference.storage.memory import CompletedCheckpoint
from cutcheck.reference.storage.meta import load_checkpoint
from tests.reference.helpers import ROOT, scenario, small_graph
from tests.reference.test_storage_support import norm

CHILD = "import json, sys; from reference import Scenario, simulate; simulate(Scenario.from_json(json.loads(sys.argv[1])))"


class Recording(FsCheckpointStorage):
    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self.completed: dict[int, Any] = {}

    def complete(self, checkpoint: CompletedCheckpoint, retained: int) -> list[int]:
        self.completed[checkpoint.cp] = norm(checkpoint)
        return super().complete(checkpoint, retained)


def crash_scenario(base: Path) -> dict[str, Any]:
    s = scenario(small_graph(240), mode="unaligned", seed=5, slow="count", interval=30,
                 failures=[{"after_checkpoint": 3, "target": "count[1]"}])
    s["checkpoint"].update(retained=2, incremental=True)
    s["storage"] = {"dir": str(base), "inline_threshold": 0}
    return s


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[tuple[str, str]], dict[int, Any], str]:
    base = tmp_path_factory.mktemp("reference")
    log: list[tuple[str, str]] = []
    s = Scenario.from_json(crash_scenario(base))
    storage = Recording(StorageConfig.from_json(s.extra["storage"], incremental=True, seed=s.seed), op_log=log)  # type: ignore[arg-type]
    r = simulate(s, storage=storage)
    assert r.ok, r.violations
    return log, storage.completed, str(base)


def expected_latest(log: list[tuple[str, str]], k: int) -> int | None:
    """The checkpoint of the last _metadata rename among the first k operations."""
    commits = [int(Path(path).parent.name.split("-")[1]) for op, path in log[:k] if op == "commit"]
    return commits[-1] if commits else None


def crash_points(log: list[tuple[str, str]]) -> list[int]:
    commits = [i for i, (op, _) in enumerate(log) if op == "commit"]
    around = [commits[1], commits[1] + 1, commits[len(commits) // 2] + 2]  # just before / after a rename, in a subsumption
    rng = random.Random(11)
    return sorted({*around, *rng.sample(range(1, len(log)), 7)})


def test_the_reference_run_writes_enough_to_crash_in(reference_run: Any) -> None:
    log, completed, _ = reference_run
    assert len(completed) >= 5 and {op for op, _ in log} >= {"mkdir", "create", "write", "commit", "delete", "rmdir"}


def test_a_killed_run_leaves_the_latest_complete_checkpoint_restorable(tmp_path: Path, reference_run: Any) -> None:
    log, completed, _ = reference_run
    restored_runs = 0
    for k in crash_points(log):
        base = tmp_path / f"k{k}"
        env = {**os.environ, CRASH_ENV: str(k), "PYTHONPATH": str(ROOT)}
        child = subprocess.run([sys.executable, "-c", CHILD, json.dumps(crash_scenario(base))], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=300)
        assert child.returncode == 1 and child.stderr == "", (k, child.stderr[-2000:])  # killed, not an error
        listing = inspect(base)
        assert all(c.missing == [] for c in listing.checkpoints), k  # no torn checkpoint is ever offered
        want = expected_latest(log, k)
        ids = [c.id for c in listing.checkpoints]
        assert (max(ids) if ids else None) == want, (k, ids, want)
        if want is None:
            continue
        latest = next(c for c in listing.checkpoints if c.id == want)
        assert norm(load_checkpoint(latest.path)) == completed[want], k
        if restored_runs < 2 and want >= 2:  # and a new run takes over from there, exactly once
            restored_runs += 1
            r = simulate(Scenario.from_json(crash_scenario(base)), restore=latest.path, restore_mode="claim")
            assert r.ok, (k, r.violations, r.exactly_once)
            after = inspect(base)
            assert not set(after.orphans) & after.referenced
    assert restored_runs == 2
