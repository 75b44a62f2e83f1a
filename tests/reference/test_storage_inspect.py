"""``orphans``: every planted orphan is found (an abandoned earlier run under the same job id, a
crashed run's pending checkpoint, stray files), a referenced file never is (a Hypothesis
property), and deleting the orphans leaves every checkpoint restorable."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cutcheck.model.errors import StorageError
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.storage.config import StorageConfig
from cutcheck.reference.storage.fs import FsCheckpointStorage
from cutcheck.reference.storage.inspection import delete_orphans, inspect, orphan_reason
from cutcheck.reference.storage.memory import CompletedCheckpoint
from cutcheck.reference.storage.meta import load_checkpoint
from tests.reference.helpers import scenario, small_graph
from tests.reference.test_storage_support import (
    PARALLELISM,
    SIDS,
    advance,
    files_under,
    initial_state,
    make_snapshot,
    norm,
)

JOB = "0" * 32


def _run(base: Path, **kw: object) -> dict:
    s = scenario(small_graph(400), mode="aligned", seed=2, interval=30, **kw)  # type: ignore[arg-type]
    s["checkpoint"].update(retained=2, incremental=True, max_concurrent=3)
    s["storage"] = {"dir": str(base), "inline_threshold": 100}
    return s


def test_orphans_of_an_abandoned_run_under_the_same_job_id(tmp_path: Path) -> None:
    """The seed thread: a run crashes and is abandoned, its chk-N directories are removed, and the
    job is brought up fresh with the same id in the same directory. Which files may go?"""
    first = simulate(Scenario.from_json({**_run(tmp_path), "max_steps": 400}))
    assert [v["invariant"] for v in first.violations] == ["LIVENESS"]  # stopped dead, mid-run
    for chk in (tmp_path / JOB).glob("chk-*"):
        shutil.rmtree(chk)
    planted = files_under(str(tmp_path))
    assert any("/shared/" in f for f in planted)
    stray = [tmp_path / JOB / "chk-77" / "_metadata.inprogress", tmp_path / JOB / "chk-77" / "4f1c-data", tmp_path / "notes.txt"]
    for f in stray:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("left behind")
    second = simulate(Scenario.from_json(_run(tmp_path, failures=[{"after_checkpoint": 2, "target": "count[0]"}])))
    assert second.ok, second.violations
    listing = inspect(tmp_path)
    # chk-77 is newer than the newest completed checkpoint: in progress (never an orphan without --force)
    assert set(listing.orphans) == planted | {str(stray[2])}  # nothing of the second run
    assert set(listing.in_progress) == {str(f) for f in stray[:2]}
    assert not set(listing.orphans) & listing.referenced
    assert orphan_reason(listing, str(stray[0])) == "metadata of a checkpoint that never completed"
    assert "no _metadata" in orphan_reason(listing, str(stray[1]))
    assert {orphan_reason(listing, f) for f in planted if "/shared/" in f} == {"shared file no checkpoint references"}
    kept = {c.path: norm(load_checkpoint(c.path)) for c in listing.checkpoints}
    assert sorted(delete_orphans(listing)) == sorted(listing.orphans)
    after = inspect(tmp_path)
    assert after.orphans == [] and set(after.in_progress) == {str(f) for f in stray[:2]} and {c.path: norm(load_checkpoint(c.path)) for c in after.checkpoints} == kept
    assert (tmp_path / JOB / "chk-77").exists()  # in progress: kept whole


def test_a_crashed_runs_pending_checkpoint_is_orphaned_and_a_restore_cleans_nothing_else(tmp_path: Path) -> None:
    first = simulate(Scenario.from_json({**_run(tmp_path), "max_steps": 350}))
    assert first.violations
    listing = inspect(tmp_path)
    pending = set(listing.orphans)  # the files of checkpoints acknowledged but never completed
    latest = max(listing.checkpoints, key=lambda c: c.id)
    r = simulate(Scenario.from_json(_run(tmp_path)), restore=latest.path, restore_mode="claim")
    assert r.ok, r.violations
    assert set(inspect(tmp_path).orphans) == pending


# ---------------------------------------------------------------------------- the property
@st.composite
def directories(draw: st.DrawFn) -> tuple[list[tuple[str, str]], list[str], int]:
    """A history: checkpoints that complete or abort, runs that crash and restart; then stray files."""
    ops = draw(st.lists(st.sampled_from(["complete", "complete", "abort", "crash", "restore", "savepoint"]),
                        min_size=1, max_size=12))
    strays = draw(st.lists(st.sampled_from(["shared", "chk", "job", "root", "tmp-metadata", "savepoint-dir"]),
                           max_size=5))
    return ops, strays, draw(st.integers(0, 3))  # type: ignore[return-value]


@settings(max_examples=30, deadline=None)
@given(directories())
def test_orphans_never_lists_a_referenced_file(history: tuple[list[str], list[str], int]) -> None:
    ops, strays, seed = history
    root = tempfile.mkdtemp(prefix="cutcheck-orphans-")
    try:
        rng, state, cp = random.Random(seed), initial_state(), 0
        config = StorageConfig(dir=root, incremental=True, inline_threshold=60, seed=seed)
        fs, runs = FsCheckpointStorage(config), 0
        for op in ops:
            if op == "restore":
                latest = fs.held[-1].path if fs.held else None
                if latest is None:
                    continue
                runs += 1
                mode = rng.choice(["claim", "no_claim"])  # claim continues in the job directory, no_claim in a new one
                fs = FsCheckpointStorage(replace(config, job=None if mode == "claim" else f"run{runs}"), restore=latest,
                                         restore_mode=mode)
                cp = fs.restored.cp  # type: ignore[union-attr]
                continue
            cp += 1
            kind = "savepoint" if op == "savepoint" else "checkpoint"
            fs.begin(cp, kind)
            advance(state, rng)
            acks = {sid: make_snapshot(cp, sid, state, rng) for sid in SIDS}
            for sid in SIDS[: len(SIDS) if op in ("complete", "savepoint") else rng.randrange(1, len(SIDS))]:
                fs.acknowledge(acks[sid])
            if op in ("complete", "savepoint"):
                fs.complete(CompletedCheckpoint(cp, kind, 0, dict(PARALLELISM), acks), 2)
            elif op == "abort":
                fs.abort(cp)
            # "crash": the acknowledged files stay, the checkpoint never completes
        planted = set()
        for i, where in enumerate(strays):
            path = {"shared": f"{JOB}/shared/stray-{i}", "chk": f"{JOB}/chk-{900 + i}/stray", "job": f"{JOB}/stray-{i}",
                    "root": f"stray-{i}", "tmp-metadata": f"{JOB}/chk-{950 + i}/_metadata.inprogress",
                    "savepoint-dir": f"savepoint-000000-{i:012x}/stray"}[where]
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            Path(full).write_text("x")
            planted.add(full)
        if not any(f.endswith(os.sep + "_metadata") for f in files_under(root)):
            with pytest.raises(StorageError, match="no _metadata of a completed checkpoint"):
                inspect(root)  # nothing completed: no file can be called an orphan
            return
        listing = inspect(root)
        referenced = listing.referenced | {os.path.join(c.path, "_metadata") for c in listing.checkpoints}
        assert not set(listing.orphans) & referenced
        assert planted <= set(listing.in_progress)  # written after the newest completed checkpoint
        for f in planted:  # old leftovers instead: only those of a chk-N above the newest completed stay in progress
            os.utime(f, (time.time() - 7200, time.time() - 7200))
        listing = inspect(root)
        assert not set(listing.orphans) & referenced
        running = {f for f in planted if "/chk-9" in f}  # ids far above any completed checkpoint
        assert running <= set(listing.in_progress) and planted - running <= set(listing.orphans)
        assert all(c.missing == [] for c in listing.checkpoints)
        before = {c.path: norm(load_checkpoint(c.path)) for c in listing.checkpoints}
        delete_orphans(listing)
        assert {c.path: norm(load_checkpoint(c.path)) for c in inspect(root).checkpoints} == before
        assert all(os.path.exists(f) for f in listing.in_progress)  # never moved without --force
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_symlinked_root_names_no_referenced_file_an_orphan(tmp_path: Path) -> None:
    """Checkpoints name files by the path they were written under; reading through a symlink must
    still see them as referenced (paths are compared resolved), or --delete would break them."""
    r = simulate(Scenario.from_json(_run(tmp_path / "real")))
    assert r.ok, r.violations
    os.symlink(tmp_path / "real", tmp_path / "link")
    listing = inspect(tmp_path / "link")
    assert listing.checkpoints and listing.orphans == []
    assert listing.referenced == inspect(tmp_path / "real").referenced
