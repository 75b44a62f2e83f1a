"""The deletion-safety classes of issue 26 on a local disk. Each test hashes every file before and
after the destructive commands, checks that only what may go went (into the quarantine, same bytes),
and restores afterwards: the tree is then byte for byte what it was.

* a guessed data root: an entropy-shaped sibling holding another environment's checkpoints;
* in progress: a chk-N newer than the newest completed checkpoint and seconds-old shared files;
* broken checkpoints: diagnosed, set aside whole with quarantine-checkpoint, empty chk-N removed;
* bookkeeping: a --delete interrupted part-way, a run that loses to a concurrent one."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.reference.storage import quarantine as q
from cutcheck.reference.storage.inspection import inspect
from cutcheck.reference.storage.quarantine import quarantine, restore_batch
from tests.reference.helpers import scenario, small_graph
from tests.reference.test_storage_claim import claim_chain
from tests.reference.test_storage_cli import JOB, assert_user_error, simulated
from tests.reference.test_storage_safety import (
    age,
    assert_every_checkpoint_restores,
    assert_only_moved,
    outside_quarantine,
    plant,
    tree,
)

runner = CliRunner()


def storage(*args: str) -> object:
    return runner.invoke(app, ["storage", *args])


def age_all(root: Path, seconds: float = 7200) -> None:
    """Every file under root given one modification time, ``seconds`` ago."""
    t = time.time() - seconds
    for d, _, names in os.walk(root):
        for f in names:
            os.utime(os.path.join(d, f), (t, t))


def restore_all(base: Path) -> None:
    """Every batch back, newest first (each restore names exactly what it put back)."""
    while (base / ".cutcheck-quarantine").exists():
        back = storage("restore-quarantine", str(base))
        assert back.exit_code == 0, back.stdout + back.stderr


# ---------------------------------------------------------------------------- no guessed data root
def test_a_random_prefix_shaped_sibling_with_checkpoints_of_its_own_is_never_touched(tmp_path: Path) -> None:
    """X/_entropy_/ck is ours (random prefixes X/<4 chars>/ck); X/prod/ck is another environment's live
    checkpoints, with the same job id. orphans --delete on ours moves nothing of prod's."""
    s = scenario(small_graph(300), mode="aligned", seed=5, interval=30)
    s["checkpoint"].update(retained=2, incremental=True)
    s["storage"] = {"inline_threshold": 0, "entropy": "_entropy_", "entropy_length": 4}
    (tmp_path / "s.json").write_text(json.dumps(s))
    ours = tmp_path / "X" / "_entropy_" / "ck"
    assert runner.invoke(app, ["simulate", str(tmp_path / "s.json"), "--checkpoint-dir", str(ours)]).exit_code == 0
    prod_s = {**s, "storage": {"inline_threshold": 0}}
    (tmp_path / "prod.json").write_text(json.dumps(prod_s))
    prod = tmp_path / "X" / "prod" / "ck"
    assert runner.invoke(app, ["simulate", str(tmp_path / "prod.json"), "--checkpoint-dir", str(prod)]).exit_code == 0
    other = tmp_path / "X" / "data" / "ck" / "some-other-app" / "file"  # entropy-shaped, no _metadata, not our job
    other.parent.mkdir(parents=True)
    other.write_text("not ours")
    planted = [tmp_path / "X" / "Zq9r" / "ck" / JOB / "shared" / "aborted-upload"]
    planted[0].parent.mkdir(parents=True)
    planted[0].write_text("stale")
    age_all(tmp_path / "X")
    age(planted, 3 * 3600)  # left before the newest checkpoint completed
    before = tree(tmp_path / "X")
    ls = storage("ls", str(ours))
    assert ls.exit_code == 0 and "holds checkpoints of its own" in ls.stdout and "X/prod/ck" in ls.stdout
    done = storage("orphans", str(ours), "--delete", "--min-age", "0", "--json", str(tmp_path / "o.json"))
    assert done.exit_code == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "o.json").read_text())["removed"] == [str(planted[0])]
    assert_only_moved(before, tree(tmp_path / "X"), planted)
    assert storage("ls", str(prod)).exit_code == 0 and other.exists()
    assert assert_every_checkpoint_restores(tmp_path / "prod.json", [prod], tmp_path / "scratch") == 2
    restore_all(tmp_path / "X" / "ck")
    assert tree(tmp_path / "X") == before


def test_a_trailing_slash_names_the_same_directory(tmp_path: Path) -> None:
    _, ck = simulated(tmp_path / "run")
    plant(ck)
    assert inspect(str(ck) + "/").orphans == inspect(ck).orphans and inspect(ck).orphans


# ---------------------------------------------------------------------------- in progress
def test_a_checkpoint_in_progress_is_never_moved_without_force(tmp_path: Path) -> None:
    scenario_path, ck = simulated(tmp_path / "run")
    newest = max(c.id for c in inspect(ck).checkpoints)
    age_all(ck)
    running = [ck / JOB / f"chk-{newest + 1}" / "a1-operator-state", ck / JOB / f"chk-{newest + 2}" / "_metadata.inprogress"]
    for p in running:
        p.parent.mkdir(parents=True)
        p.write_text("being written")
    age(running)  # old by the clock: the chk-N number alone says in progress
    uploaded = ck / JOB / "shared" / "seconds-old-sst"
    uploaded.write_text("uploading")
    before = tree(ck)
    for min_age in ("0", "1h", "30d"):
        done = storage("orphans", str(ck), "--delete", "--min-age", min_age, "--json", str(tmp_path / "o.json"))
        assert done.exit_code == 0, done.stdout + done.stderr
        report = json.loads((tmp_path / "o.json").read_text())
        assert report["removed"] == [] and sorted(report["in_progress"]) == sorted(map(str, [*running, uploaded]))
        assert "3 unreferenced file(s) belong to a checkpoint that may be in progress" in done.stdout
        assert outside_quarantine(tree(ck)) == before
    forced = storage("orphans", str(ck), "--delete", "--min-age", "0", "--force")
    assert forced.exit_code == 0 and "moved 3 file(s)" in forced.stdout, forced.stdout
    assert_only_moved(before, tree(ck), [*running, uploaded])
    assert assert_every_checkpoint_restores(scenario_path, [ck], tmp_path / "scratch") == 3
    restore_all(ck)
    assert tree(ck) == before


# ---------------------------------------------------------------------------- broken checkpoints
def test_a_checkpoint_a_claim_restore_broke_is_diagnosed_and_set_aside_reversibly(tmp_path: Path) -> None:
    base = tmp_path / "ck"
    chk5, lost = claim_chain(base)
    empty = base / "run4" / "chk-3"  # a discard cut short leaves an empty directory
    empty.mkdir()
    age_all(base)
    before = tree(base)
    ls = storage("ls", str(base), "--json", str(tmp_path / "ls.json"))
    assert ls.exit_code == 1 and "Likely cause: a claim restore" in ls.stdout and lost in ls.stdout
    assert "empty checkpoint directory(ies)" in ls.stdout and "run4/chk-3" in ls.stdout
    (d,) = json.loads((tmp_path / "ls.json").read_text())["diagnoses"]
    assert d["cause"] == "claim restore" and d["action"] == f"cutcheck storage quarantine-checkpoint {chk5}"
    refused = storage("orphans", str(base), "--delete", "--min-age", "0")
    assert_user_error(refused, "can never be restored", f"cutcheck storage quarantine-checkpoint {chk5}")
    assert tree(base) == before
    assert_user_error(storage("quarantine-checkpoint", str(base / "run4" / "chk-12")), "is restorable")
    aside = storage("quarantine-checkpoint", chk5, "--json", str(tmp_path / "aside.json"))
    assert aside.exit_code == 0, aside.stdout + aside.stderr
    moved = [m["original"] for m in json.loads((tmp_path / "aside.json").read_text())["quarantine"]["files"]]
    assert os.path.join(chk5, "_metadata") in moved and all(m.startswith(chk5 + os.sep) for m in moved)
    assert not os.path.exists(chk5)
    after = storage("ls", str(base))
    assert after.exit_code == 0, after.stdout  # every remaining checkpoint restores
    cleaned = storage("orphans", str(base), "--delete", "--min-age", "0")
    assert cleaned.exit_code == 0 and "1 empty directory(ies)" in cleaned.stdout, cleaned.stdout + cleaned.stderr
    assert not empty.exists()
    assert all(c.restorable for c in inspect(base).checkpoints)
    restore_all(base)
    assert tree(base) == before and empty.is_dir()


def test_a_restorable_checkpoint_is_not_set_aside_and_a_job_directory_is_refused(tmp_path: Path) -> None:
    _, ck = simulated(tmp_path / "run")
    before = tree(ck)
    newest = max(inspect(ck).checkpoints, key=lambda c: c.id)
    assert_user_error(storage("quarantine-checkpoint", newest.path), "is restorable", "--force")
    assert_user_error(storage("quarantine-checkpoint", str(ck / JOB)), "not one checkpoint directory")
    assert tree(ck) == before


# ---------------------------------------------------------------------------- honest bookkeeping
def test_an_interrupted_delete_restores_exactly_what_it_moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, ck = simulated(tmp_path / "run")
    many = [ck / JOB / "shared" / f"left-{i}" for i in range(40)]
    for p in many:
        p.write_text(f"stale {p.name}")
    age(many)
    before = tree(ck)
    real, calls = q._move, []

    def dying(src: str, dst: str) -> None:
        if len(calls) == 7:
            raise KeyboardInterrupt  # Ctrl-C, part-way
        calls.append(src)
        real(src, dst)

    monkeypatch.setattr(q, "_move", dying)
    cut = storage("orphans", str(ck), "--delete")
    assert cut.exit_code == 130, cut.stdout + cut.stderr  # Ctrl-C: the manifest names what moved
    monkeypatch.setattr(q, "_move", real)
    assert len([p for p in many if not p.exists()]) == 7
    back = storage("restore-quarantine", str(ck), "--json", str(tmp_path / "r.json"))
    assert back.exit_code == 0 and "restored 7 file(s)" in back.stdout, back.stdout + back.stderr
    assert sorted(json.loads((tmp_path / "r.json").read_text())["restored"]) == sorted(calls)
    assert tree(ck) == before  # and nothing stray: the quarantine is gone
    # killed hard: the last manifest write never happens, so the manifest is the plan (40 files, 7 moved)
    calls.clear()
    writes = []
    real_write = q._write_manifest

    def killed(batch: q.Batch) -> None:
        if writes:
            raise SystemExit(137)
        writes.append(batch.name)
        real_write(batch)

    monkeypatch.setattr(q, "_move", dying)
    monkeypatch.setattr(q, "_write_manifest", killed)
    assert storage("orphans", str(ck), "--delete").exit_code != 0
    monkeypatch.setattr(q, "_move", real)
    monkeypatch.setattr(q, "_write_manifest", real_write)
    back = storage("restore-quarantine", str(ck), "--json", str(tmp_path / "r.json"))
    assert back.exit_code == 0 and "restored 7 file(s)" in back.stdout and "33 file(s) of its plan were never moved" \
        in back.stdout, back.stdout + back.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert sorted(report["restored"]) == sorted(calls) and len(report["in_place"]) == 33
    assert tree(ck) == before


def test_a_run_that_loses_to_a_concurrent_one_keeps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, ck = simulated(tmp_path / "run")
    planted = plant(ck)
    before = tree(ck)
    first, second = inspect(ck, min_age=3600), inspect(ck, min_age=3600)  # both listed the same orphans
    won = quarantine(first, dict.fromkeys(first.orphans, "orphan"), min_age=3600)
    real_link = os.link

    def raced(src: str, dst: str, **kw: object) -> None:  # the other run unlinks between our link and our unlink
        real_link(src, dst, **kw)
        os.remove(src)

    lost = quarantine(second, dict.fromkeys(second.orphans, "orphan"), min_age=3600)
    assert len(won.files) == len(planted) and lost.files == []
    assert not (Path(lost.path) / "files").exists()  # no second copy
    # the link/unlink race itself: whoever unlinks second keeps no copy
    (ck / "x").write_text("x")
    monkeypatch.setattr(q.os, "link", raced)
    with pytest.raises(FileNotFoundError):
        q._move(str(ck / "x"), str(tmp_path / "stash" / "x"))
    monkeypatch.setattr(q.os, "link", real_link)
    assert not (tmp_path / "stash" / "x").exists()
    assert restore_batch(str(ck), os.path.basename(lost.path)).restored == []
    done = restore_batch(str(ck), os.path.basename(won.path))
    assert sorted(m.original for m in done.restored) == sorted(map(str, planted))
    assert tree(ck) == before
    shutil.rmtree(tmp_path / "stash", ignore_errors=True)


def test_json_of_the_restore_lists_the_directories_made_again(tmp_path: Path) -> None:
    _, ck = simulated(tmp_path / "run")
    newest = max(c.id for c in inspect(ck).checkpoints)
    empty = ck / JOB / f"chk-{newest - 5}"
    empty.mkdir()
    age([empty])
    assert storage("orphans", str(ck), "--delete", "--min-age", "0").exit_code == 0 and not empty.exists()
    back = storage("restore-quarantine", str(ck), "--json", str(tmp_path / "r.json"))
    assert back.exit_code == 0 and json.loads((tmp_path / "r.json").read_text())["dirs_made"] == [str(empty)]
    assert empty.is_dir()
