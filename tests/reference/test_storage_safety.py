"""Destructive operations on prepared trees: storage ls / orphans / restore-quarantine / purge.

Every test hashes every file before and after each command and asserts that nothing changed
except the orphans moved into the quarantine, and that every retained checkpoint still restores
afterwards (``cutcheck simulate --restore`` into a scratch checkpoint directory, which reads the
checkpoint without writing to it: the tree is hashed around the restores too)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.reference.storage.config import StorageConfig
from cutcheck.reference.storage.fs import FsCheckpointStorage
from cutcheck.reference.storage.inspection import inspect
from cutcheck.reference.storage.memory import CompletedCheckpoint
from cutcheck.reference.storage.meta import load_checkpoint
from cutcheck.reference.storage.quarantine import parse_age
from cutcheck.reference.storage.scope import QUARANTINE_DIR
from tests.reference.test_storage_cli import JOB, assert_user_error, simulated
from tests.reference.test_storage_support import (
    PARALLELISM,
    SIDS,
    advance,
    initial_state,
    make_snapshot,
    norm,
)

runner = CliRunner()
OLD = 7200.0  # seconds: older than the default --min-age


def tree(root: Path) -> dict[str, str]:
    """sha256 of every file under root, the quarantine included."""
    return {os.path.join(d, f): hashlib.sha256(Path(d, f).read_bytes()).hexdigest()
            for d, _, files in os.walk(root) for f in files}


def outside_quarantine(hashes: dict[str, str]) -> dict[str, str]:
    return {p: h for p, h in hashes.items() if f"{os.sep}{QUARANTINE_DIR}{os.sep}" not in p}


def age(paths: list[Path], seconds: float = OLD) -> None:
    for p in paths:
        os.utime(p, (time.time() - seconds, time.time() - seconds))


def plant(ck: Path, job: str = JOB) -> list[Path]:
    """Leftovers of crashed runs and aborted checkpoints, older than an hour."""
    planted = [ck / job / "shared" / "left-by-an-earlier-run", ck / job / "chk-2" / "8d1c-aborted",
               ck / job / "chk-1" / "_metadata.inprogress", ck / "stray.txt"]
    for p in planted:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"stale {p.name}")
    age(planted)
    return planted


def storage(*args: str) -> object:
    return runner.invoke(app, ["storage", *args])


def assert_only_moved(before: dict[str, str], after: dict[str, str], moved: list[Path]) -> None:
    """Outside the quarantine only the moved files are gone; each is in the quarantine, same bytes."""
    gone = {str(p) for p in moved}
    assert outside_quarantine(after) == {p: h for p, h in outside_quarantine(before).items() if p not in gone}
    quarantined = sorted(h for p, h in after.items() if p not in before and not p.endswith("manifest.json"))
    assert quarantined == sorted(before[p] for p in gone)


def assert_every_checkpoint_restores(scenario: Path, roots: list[Path], scratch: Path) -> int:
    """Restore every checkpoint under ``roots`` with the engine; the roots stay byte for byte as they were."""
    before = {r: tree(r) for r in roots}
    n = 0
    for root in roots:
        for c in inspect(root).checkpoints:
            n += 1
            result = runner.invoke(app, ["simulate", str(scenario), "--checkpoint-dir", str(scratch / f"r{n}"),
                                         "--restore", c.path])
            assert result.exit_code == 0, (c.path, result.stdout[-2000:], result.stderr)
            assert f"restore from checkpoint {c.id}" in result.stdout
    assert {r: tree(r) for r in roots} == before
    return n


def absolutize(root: Path) -> None:
    """Rewrite every _metadata with absolute paths, as cutcheck wrote them before paths became relative."""
    for meta in root.rglob("_metadata"):
        m = json.loads(meta.read_text())

        def fix(f: str, d: str = str(meta.parent)) -> str:
            return f if os.path.isabs(f) else os.path.normpath(os.path.join(d, f))

        m["files"] = {scope: [fix(f) for f in fs] for scope, fs in m["files"].items()}
        for t in m["tasks"]:
            for h in [t["operator"], t.get("channels"), *(h for _, h in t.get("key_groups", []))]:
                if h and "file" in h:
                    h["file"] = fix(h["file"])
        meta.write_text(json.dumps(m, indent=1) + "\n")


# ---------------------------------------------------------------------------- refusals
def test_a_directory_without_checkpoints_is_refused_and_untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    for rel in ("notes.txt", "src/main.py", "data/chk-3/x", "data/shared/y"):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(rel)
    age(list(home.rglob("*")))
    before = tree(tmp_path)
    for args in (["ls", str(home)], ["orphans", str(home), "--delete", "--min-age", "0", "--force"]):
        assert_user_error(storage(*args), "no _metadata of a completed checkpoint or savepoint")
    monkeypatch.chdir(home)  # the working directory
    assert_user_error(storage("orphans", ".", "--delete", "--min-age", "0"), "not a checkpoint directory")
    assert_user_error(storage("orphans", "notes.txt", "--delete"), "no such checkpoint directory")  # a file
    assert tree(tmp_path) == before and not list(tmp_path.rglob(QUARANTINE_DIR))


def test_a_checkpoint_far_below_the_directory_given_is_refused(tmp_path: Path) -> None:
    scenario, ck = simulated(tmp_path / "deep" / "er")
    (tmp_path / "mine.txt").write_text("not a checkpoint file")
    age([tmp_path / "mine.txt"])
    before = tree(tmp_path)
    assert_user_error(storage("orphans", str(tmp_path), "--delete", "--min-age", "0"), "its nearest _metadata is")
    assert tree(tmp_path) == before


def test_a_chk_dir_without_metadata_is_refused(tmp_path: Path) -> None:
    _, ck = simulated(tmp_path / "run")
    writing = ck / JOB / "chk-42"
    writing.mkdir()
    for name in ("_metadata.inprogress", "7a1e-state"):
        (writing / name).write_text("being written")
    age(list(writing.iterdir()))
    before = tree(tmp_path)
    for args in (["ls", str(writing)], ["orphans", str(writing), "--delete", "--min-age", "0", "--force"]):
        assert_user_error(storage(*args), "checkpoint directory without _metadata")
    assert tree(tmp_path) == before


def test_min_age_forms_and_young_files(tmp_path: Path) -> None:
    assert [parse_age(t) for t in ("3600", "3600s", "60m", "1h", "0", "2d")] == [3600, 3600, 3600, 3600, 0, 172800]
    assert_user_error(storage("orphans", str(tmp_path), "--min-age", "soon"), "--min-age 'soon'")
    scenario, ck = simulated(tmp_path / "run")
    old = plant(ck)
    young = [ck / JOB / "shared" / "just-uploaded", ck / JOB / "chk-43" / "being-written"]
    for p in young:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("new")
    # written after the newest checkpoint completed: in progress, never moved, whatever --min-age says
    for min_age in ("1h", "0"):
        dry = storage("orphans", str(ck), "--min-age", min_age)
        assert dry.exit_code == 0 and "may be in progress" in dry.stdout and "never moved without --force" in dry.stdout
        before = tree(ck)
        done = storage("orphans", str(ck), "--delete", "--min-age", min_age, "--json", str(tmp_path / "rm.json"))
        assert done.exit_code == 0, done.stderr
        report = json.loads((tmp_path / "rm.json").read_text())
        assert sorted(report["removed"]) == (sorted(map(str, old)) if min_age == "1h" else [])
        assert sorted(report["in_progress"]) == sorted(map(str, young))
        assert_only_moved(before, tree(ck), old if min_age == "1h" else [])
        assert all(p.exists() for p in young)
    age(young, 60)  # a minute old, before the newest checkpoint: no longer in progress, but younger than 1h
    dry = storage("orphans", str(ck), "--json", str(tmp_path / "dry.json"))
    report = json.loads((tmp_path / "dry.json").read_text())
    assert "too young" in dry.stdout and report["too_young"] == [str(young[0])]
    assert report["in_progress"] == [str(young[1])]  # chk-43 is newer than the newest completed checkpoint


# ---------------------------------------------------------------------------- delete, then restore everything
def test_delete_then_every_retained_checkpoint_restores(tmp_path: Path) -> None:
    scenario, ck = simulated(tmp_path / "run")
    planted = plant(ck)
    before = tree(ck)
    done = storage("orphans", str(ck), "--delete")
    assert done.exit_code == 0 and "moved 4 file(s)" in done.stdout, done.stdout + done.stderr
    assert_only_moved(before, tree(ck), planted)
    assert not (ck / JOB / "chk-2").exists() and not (ck / JOB / "chk-1").exists()  # emptied by cutcheck
    assert storage("ls", str(ck)).exit_code == 0
    assert assert_every_checkpoint_restores(scenario, [ck], tmp_path / "scratch") == 3


def test_a_moved_directory_still_restores(tmp_path: Path) -> None:
    scenario, ck = simulated(tmp_path / "run")
    planted = [p.relative_to(ck) for p in plant(ck)]
    moved = tmp_path / "elsewhere" / "ck"
    moved.parent.mkdir()
    ck.rename(moved)  # _metadata names files relative to itself: nothing points at the old place
    ls = storage("ls", str(moved))
    assert ls.exit_code == 0 and "NOT RESTORABLE" not in ls.stdout, ls.stdout
    before = tree(moved)
    assert storage("orphans", str(moved / JOB), "--delete").exit_code == 0  # a job directory as the target
    assert_only_moved(before, tree(moved), [moved / p for p in planted if p.parts[0] == JOB])
    assert (moved / "stray.txt").exists()  # outside the directory given: never an orphan
    assert assert_every_checkpoint_restores(scenario, [moved], tmp_path / "scratch") == 3


def test_old_absolute_metadata_moved_is_not_restorable_and_nothing_is_deleted(tmp_path: Path) -> None:
    scenario, ck = simulated(tmp_path / "run")
    absolutize(ck)
    planted = [p.relative_to(ck) for p in plant(ck)]
    moved = tmp_path / "elsewhere"
    ck.rename(moved)
    ls = storage("ls", str(moved))
    assert ls.exit_code == 1 and "NOT RESTORABLE" in ls.stdout and str(ck) in ls.stdout, ls.stdout
    before = tree(moved)
    assert_user_error(storage("orphans", str(moved), "--delete"), "can never be restored", "--force")
    assert tree(moved) == before
    latest = max(inspect(moved).checkpoints, key=lambda c: c.id)
    restore = runner.invoke(app, ["simulate", str(scenario), "--checkpoint-dir", str(tmp_path / "x"), "--restore", latest.path])
    assert restore.exit_code == 2 and str(ck) in restore.stderr  # ls told the truth: the engine cannot restore it
    # --force deletes true orphans only: the copies the old paths name are kept (re-rooted)
    forced = storage("orphans", str(moved), "--delete", "--force", "--json", str(tmp_path / "f.json"))
    assert forced.exit_code == 0 and "warning (--force)" in forced.stdout, forced.stdout + forced.stderr
    assert_only_moved(before, tree(moved), [moved / p for p in planted])
    assert json.loads((tmp_path / "f.json").read_text())["kept_rerooted"]
    moved.rename(ck)  # put back where its _metadata says: everything restores again
    assert assert_every_checkpoint_restores(scenario, [ck], tmp_path / "scratch") == 3


def test_a_copy_with_the_original_present_is_not_ok(tmp_path: Path) -> None:
    scenario, ck = simulated(tmp_path / "run")
    absolutize(ck)
    copy = tmp_path / "copy" / "ck"
    shutil.copytree(ck, copy)
    planted = plant(copy)
    original = tree(ck)
    ls = storage("ls", str(copy))
    assert ls.exit_code == 1 and "OUTSIDE" in ls.stdout and " ok " not in ls.stdout, ls.stdout
    assert storage("ls", str(copy), "--keep-referenced-by", str(ck)).exit_code == 0  # both declared part of it
    before = tree(copy)
    assert_user_error(storage("orphans", str(copy), "--delete"), "lies outside")
    assert tree(copy) == before
    assert storage("orphans", str(copy), "--delete", "--force").exit_code == 0
    assert_only_moved(before, tree(copy), planted)  # the copy's own state files stay
    assert tree(ck) == original
    shutil.rmtree(ck)
    copy.rename(ck)  # the copy takes the original's place: its files are all there
    assert storage("ls", str(ck)).exit_code == 0
    assert assert_every_checkpoint_restores(scenario, [ck], tmp_path / "scratch") == 3


def test_jobs_restored_in_claim_mode_keep_each_others_files(tmp_path: Path) -> None:
    scenario, ck = simulated(tmp_path / "run")
    chks = sorted((ck / JOB).glob("chk-*"), key=lambda p: int(p.name[4:]))
    s2 = json.loads(scenario.read_text())
    s2["storage"]["job"], s2["checkpoint"]["retained"], s2["failures"] = "otherjob", 1, []
    (tmp_path / "s2.json").write_text(json.dumps(s2))
    claim = runner.invoke(app, ["simulate", str(tmp_path / "s2.json"), "--checkpoint-dir", str(ck), "--restore",
                                str(chks[-1]), "--restore-mode", "claim"])
    assert claim.exit_code == 0, claim.stderr
    again = runner.invoke(app, ["simulate", str(scenario), "--checkpoint-dir", str(ck)])  # the job id, from scratch
    assert again.exit_code == 0, again.stderr
    needed = {f for f in inspect(ck / "otherjob").referenced if f.startswith(str(ck / JOB) + os.sep)}
    own = {f for c in inspect(ck / JOB).checkpoints for fs in c.files.values() for f in fs}
    assert needed - own, "the claimed job uses shared files of the first run that the new run does not"
    age([Path(f) for f in needed])
    planted = plant(ck)
    before = tree(ck)
    dry = storage("orphans", str(ck / JOB), "--json", str(tmp_path / "o.json"))
    assert dry.exit_code == 0 and not set(json.loads((tmp_path / "o.json").read_text())["orphans"]) & needed
    assert storage("orphans", str(ck / JOB), "--delete").exit_code == 0
    assert_only_moved(before, tree(ck), [p for p in planted if p.parent != ck])
    assert assert_every_checkpoint_restores(scenario, [ck / JOB, ck / "otherjob"], tmp_path / "scratch") == 4


def test_keep_referenced_by_protects_a_job_claimed_into_another_directory(tmp_path: Path) -> None:
    """A job restored in claim mode into another checkpoint directory B names A's shared files by
    absolute path; once A runs again, those are unreferenced in A. Only --keep-referenced-by B
    keeps them, and B is not restorable from B alone (ls says so) unless A is named too."""
    scenario, a = simulated(tmp_path / "run")
    chks = sorted((a / JOB).glob("chk-*"), key=lambda p: int(p.name[4:]))
    s2 = json.loads(scenario.read_text())
    s2["checkpoint"]["retained"], s2["failures"] = 1, []
    (tmp_path / "s2.json").write_text(json.dumps(s2))
    b = tmp_path / "b"
    claim = runner.invoke(app, ["simulate", str(tmp_path / "s2.json"), "--checkpoint-dir", str(b), "--restore",
                                str(chks[-1]), "--restore-mode", "claim"])
    assert claim.exit_code == 0, claim.stderr
    assert runner.invoke(app, ["simulate", str(scenario), "--checkpoint-dir", str(a)]).exit_code == 0
    needed = {f for f in inspect(b, keep=[a]).referenced if f.startswith(str(a) + os.sep)}
    assert needed, "B's checkpoints use A's shared files"
    age([Path(f) for f in needed])
    ls = storage("ls", str(b))
    assert ls.exit_code == 1 and "OUTSIDE" in ls.stdout, ls.stdout
    assert storage("ls", str(b), "--keep-referenced-by", str(a)).exit_code == 0
    assert storage("orphans", str(a), "--json", str(tmp_path / "alone.json")).exit_code == 0
    assert set(json.loads((tmp_path / "alone.json").read_text())["orphans"]) >= needed  # what --keep is for
    planted = plant(a)
    before = tree(a)
    assert storage("orphans", str(a), "--delete", "--keep-referenced-by", str(b)).exit_code == 0
    assert_only_moved(before, tree(a), planted)
    assert assert_every_checkpoint_restores(scenario, [a, b], tmp_path / "scratch") == 4


# ---------------------------------------------------------------------------- the quarantine
def test_restore_quarantine_round_trip_and_refusals(tmp_path: Path) -> None:
    _, ck = simulated(tmp_path / "run")
    plant(ck)
    before = tree(ck)
    assert storage("orphans", str(ck), "--delete").exit_code == 0
    assert storage("ls", str(ck)).stdout.count(QUARANTINE_DIR) == 0  # never scanned, never an orphan
    assert "0 orphan(s)" in storage("orphans", str(ck), "--min-age", "0").stdout
    (batch,) = (ck / QUARANTINE_DIR).iterdir()
    assert_user_error(storage("orphans", str(batch)), "inside cutcheck's quarantine")
    manifest = json.loads((batch / "manifest.json").read_text())
    assert manifest["complete"] and {m["reason"] for m in manifest["files"]} >= {"shared file no checkpoint references"}
    back = storage("restore-quarantine", str(ck))
    assert back.exit_code == 0 and "restored 4 file(s)" in back.stdout, back.stdout + back.stderr
    assert tree(ck) == before and not (ck / QUARANTINE_DIR).exists()
    assert_user_error(storage("restore-quarantine", str(ck)), f"holds no {QUARANTINE_DIR}")
    # a file that exists again at an original path is never overwritten
    assert storage("orphans", str(ck), "--delete").exit_code == 0
    (ck / "stray.txt").write_text("a new file with the same name")
    during = tree(ck)
    (batch,) = (ck / QUARANTINE_DIR).iterdir()
    assert_user_error(storage("restore-quarantine", str(ck), batch.name), "exists again")
    assert tree(ck) == during
    assert_user_error(storage("restore-quarantine", str(ck), "no-such-batch"), "no such batch")


def test_purge_is_a_dry_run_unless_yes(tmp_path: Path) -> None:
    _, ck = simulated(tmp_path / "run")
    plant(ck)
    assert storage("orphans", str(ck), "--delete").exit_code == 0
    (batch,) = (ck / QUARANTINE_DIR).iterdir()
    before = tree(ck)
    fresh = storage("purge", str(ck), "--older-than", "1", "--yes")
    assert fresh.exit_code == 0 and "removed 0 of 1 batch(es)" in fresh.stdout and tree(ck) == before
    manifest = json.loads((batch / "manifest.json").read_text())
    manifest["created_unix"] -= 2 * 86400  # quarantined two days ago
    (batch / "manifest.json").write_text(json.dumps(manifest))
    before = tree(ck)
    dry = storage("purge", str(ck), "--older-than", "1")
    assert dry.exit_code == 0 and "would remove 1 of 1" in dry.stdout and batch.name in dry.stdout
    assert tree(ck) == before
    gone = storage("purge", str(ck), "--older-than", "1", "--yes")
    assert gone.exit_code == 0 and "removed 1 of 1" in gone.stdout
    assert tree(ck) == outside_quarantine(before) and not (ck / QUARANTINE_DIR).exists()
    assert_user_error(storage("purge", str(tmp_path / "nope"), "--older-than", "1"), "no such directory")


# ---------------------------------------------------------------------------- relocatable metadata
def test_metadata_names_files_relative_so_the_whole_storage_moves(tmp_path: Path) -> None:
    """Shared files and entropy-injected data files too: moving the root above the marker keeps
    every checkpoint restorable."""
    base = tmp_path / "a" / "_entropy_" / "ckpts"
    fs = FsCheckpointStorage(StorageConfig(dir=str(base), incremental=True, inline_threshold=0, entropy="_entropy_"))
    state, rng = initial_state(), random.Random(5)
    advance(state, rng)
    acks = {sid: make_snapshot(1, sid, state, rng) for sid in SIDS}
    for snap in acks.values():
        fs.acknowledge(snap)
    done = fs.complete(CompletedCheckpoint(1, "checkpoint", 0, dict(PARALLELISM), acks), 1)
    assert done == []
    chk = tmp_path / "a" / "ckpts" / JOB / "chk-1"
    meta = json.loads((chk / "_metadata").read_text())
    assert all(not os.path.isabs(f) for fs_ in meta["files"].values() for f in fs_)
    want = norm(load_checkpoint(str(chk)))
    (tmp_path / "a").rename(tmp_path / "b")
    assert norm(load_checkpoint(str(tmp_path / "b" / "ckpts" / JOB / "chk-1"))) == want
    listing = inspect(tmp_path / "b" / "_entropy_" / "ckpts")
    assert listing.orphans == [] and all(c.restorable for c in listing.checkpoints)
