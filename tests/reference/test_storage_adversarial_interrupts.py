"""Held-out adversarial cases (issue 26), local disk: interruptions and races around orphans --delete and
restore-quarantine. The command runs in a child process that kills itself (SIGKILL, or Ctrl-C's SIGINT) at
a chosen move, or meets a failing file system; afterwards nothing referenced has moved, every batch restores,
and the tree is byte for byte what it was, with no stray file left in the quarantine."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cutcheck.reference.storage import flink_metadata
from tests.interrupts import interruptible
from tests.reference.adversarial_helpers import (
    JOB_A,
    JOB_B,
    QUARANTINE,
    age_tree,
    assert_kept,
    checkpoint,
    moved,
    restore_all,
    storage,
    tree,
    write,
)
from tests.reference.test_storage_cli import assert_user_error

ORPHANS = 60


def layout(base: Path) -> dict[str, list[Path]]:
    """Job A with two checkpoints, job B claiming one of A's shared files, and ORPHANS orphans in A's shared/."""
    a, b = base / JOB_A, base / JOB_B
    live = [a / "shared" / f"live-{i}" for i in range(5)]
    checkpoint(a, 4, live[:3], [a / "chk-4" / "p4"])
    checkpoint(a, 5, live, [a / "chk-5" / "p5"])
    claimed = a / "shared" / "claimed"
    checkpoint(b, 9, [claimed], [b / "chk-9" / "p9"])
    orphans = [write(a / "shared" / f"orphan-{i:03d}") for i in range(ORPHANS)]
    age_tree(base)
    kept = [p for p in map(Path, tree(base)) if p not in orphans]
    return {"orphans": orphans, "kept": kept}


# The child: the CLI, with one step of the file system replaced, as the environment would behave.
CHILD = """
import os, signal, sys
from cutcheck.reference.storage import quarantine_moves as qm, quarantine as q
mode, at = sys.argv[1], int(sys.argv[2])
count = [0]
real_link, real_remove = os.link, os.remove
def tick():
    count[0] += 1
    return count[0] == at
if mode in ("kill", "int"):
    real_move = q._move
    def move(src, dst):
        if tick():
            os.kill(os.getpid(), signal.SIGKILL if mode == "kill" else signal.SIGINT)
        return real_move(src, dst)
    q._move = move
elif mode == "kill-between":  # after the link, before the unlink: both names exist
    def remove(path):
        if "/shared/" in path and QUARANTINE not in path and tick():
            os.kill(os.getpid(), signal.SIGKILL)
        return real_remove(path)
    qm.os.remove = remove
elif mode == "eperm":  # unlink refused, as in a read-only directory
    def remove(path):
        if "/shared/" in path and QUARANTINE not in path and tick():
            raise PermissionError(13, "Permission denied", path)
        return real_remove(path)
    qm.os.remove = remove
elif mode == "nospace":
    def link(src, dst, **kw):
        if tick():
            raise OSError(28, "No space left on device")
        return real_link(src, dst, **kw)
    qm.os.link = link
from cutcheck.cli import main
sys.argv = ["cutcheck", *sys.argv[3:]]
main()
""".replace("QUARANTINE", repr(QUARANTINE))


def child(mode: str, at: int, *args: str) -> subprocess.CompletedProcess[str]:
    proc = interruptible([sys.executable, "-c", CHILD, mode, str(at), *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=os.getcwd())
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def assert_restores_exactly(base: Path, before: dict[str, str], kept: list[Path], expect_restored: int) -> None:
    after = tree(base)
    assert_kept(before, after, kept)
    assert len(moved(before, after)) == expect_restored
    results = restore_all(base)
    said = sum(int(re.search(r"^restored (\d+) file", r.stdout, re.M).group(1)) for r in results)  # type: ignore[union-attr]
    assert said == expect_restored, [r.stdout for r in results]
    assert tree(base) == before
    assert not (base / QUARANTINE).exists()


@pytest.mark.parametrize("at", [1, 17, ORPHANS])
def test_sigkill_in_the_middle_of_delete(tmp_path: Path, at: int) -> None:
    base = tmp_path / "ck"
    files = layout(base)
    before = tree(base)
    done = child("kill", at, "storage", "orphans", str(base / JOB_A), "--delete", "--min-age", "0")
    assert done.returncode == -signal.SIGKILL
    assert_restores_exactly(base, before, files["kept"], at - 1)


def test_sigkill_between_link_and_unlink_leaves_no_second_copy(tmp_path: Path) -> None:
    base = tmp_path / "ck"
    files = layout(base)
    before = tree(base)
    done = child("kill-between", 9, "storage", "orphans", str(base / JOB_A), "--delete", "--min-age", "0")
    assert done.returncode == -signal.SIGKILL
    assert_restores_exactly(base, before, files["kept"], 8)


def test_ctrl_c_in_the_middle_of_delete_is_one_line_and_restores(tmp_path: Path) -> None:
    base = tmp_path / "ck"
    files = layout(base)
    before = tree(base)
    done = child("int", 25, "storage", "orphans", str(base / JOB_A), "--delete", "--min-age", "0")
    assert done.returncode == 130 and done.stderr.strip() == "interrupted", done.stderr
    assert_restores_exactly(base, before, files["kept"], 24)


@pytest.mark.parametrize("at", [1, 30])
def test_sigkill_in_the_middle_of_restore_then_restore_again(tmp_path: Path, at: int) -> None:
    base = tmp_path / "ck"
    files = layout(base)
    before = tree(base)
    assert storage("orphans", str(base / JOB_A), "--delete", "--min-age", "0").exit_code == 0
    done = child("kill", at, "storage", "restore-quarantine", str(base))
    assert done.returncode == -signal.SIGKILL
    assert_kept(before, tree(base), files["kept"])
    restore_all(base)
    assert tree(base) == before and not (base / QUARANTINE).exists()


def test_a_full_disk_in_the_middle_of_delete_is_one_sentence_and_restores(tmp_path: Path) -> None:
    base = tmp_path / "ck"
    files = layout(base)
    before = tree(base)
    # The 12th link: the batch's link probe, then 11 files (the 11th fails).
    done = child("nospace", 12, "storage", "orphans", str(base / JOB_A), "--delete", "--min-age", "0")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert_restores_exactly(base, before, files["kept"], 10)


def test_two_concurrent_deletes_move_each_orphan_once(tmp_path: Path) -> None:
    base = tmp_path / "ck"
    files = layout(base)
    before = tree(base)
    args = [sys.executable, "-m", "cutcheck", "storage", "orphans", str(base / JOB_A), "--delete", "--min-age", "0"]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    after = tree(base)
    assert_kept(before, after, files["kept"])
    assert sorted(moved(before, after)) == sorted(map(str, files["orphans"]))
    stored = [p for p in after if f"/{QUARANTINE}/" in p and not p.endswith("manifest.json")]
    assert len(stored) == ORPHANS  # each orphan once, in one batch or the other
    assert_restores_exactly(base, before, files["kept"], ORPHANS)


def test_an_orphan_that_cannot_be_unlinked_is_one_sentence_and_nothing_is_lost(tmp_path: Path) -> None:
    """A read-only directory (EACCES on unlink; simulated, as the tests may run as root): the link made is
    taken back, the sentence names the file, and what moved before restores exactly."""
    base = tmp_path / "ck"
    files = layout(base)
    before = tree(base)
    done = child("eperm", 7, "storage", "orphans", str(base / JOB_A), "--delete", "--min-age", "0")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1, done.stderr
    stored = [p for p in tree(base) if f"/{QUARANTINE}/" in p and not p.endswith("manifest.json")]
    assert len(stored) == 6  # no second name of the 7th file left in the batch
    assert_restores_exactly(base, before, files["kept"], 6)


def test_a_quarantine_path_that_is_a_file_is_one_sentence(tmp_path: Path) -> None:
    base = tmp_path / "ck"
    layout(base)
    write(base / QUARANTINE, "the user's own file")
    before = tree(base)
    done = storage("orphans", str(base / JOB_A), "--delete", "--min-age", "0")
    assert_user_error(done, QUARANTINE)
    assert tree(base) == before


def test_a_batch_directory_of_the_same_name_already_present_is_never_reused(tmp_path: Path) -> None:
    """Another run of the same second and process id (a container's pid 1) made the batch name already: the run
    takes the next name and leaves that directory, and what the user put in it, alone."""
    base = tmp_path / "ck"
    files = layout(base)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time()))
    later = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() + 1))
    theirs = [write(base / QUARANTINE / f"{s}-{os.getpid()}" / "notes") for s in {stamp, later}]
    before = tree(base)
    done = storage("orphans", str(base / JOB_A), "--delete", "--min-age", "0")
    assert done.exit_code == 0, done.stdout + done.stderr
    after = tree(base)
    assert_kept(before, after, files["kept"])
    assert all(after[str(p)] == before[str(p)] for p in theirs)
    assert sorted(moved(before, after)) == sorted(map(str, files["orphans"]))
    back = storage("restore-quarantine", str(base))
    assert back.exit_code == 0 and f"restored {ORPHANS} file(s)" in back.stdout, back.stdout + back.stderr
    assert tree(base) == before


def test_files_created_and_a_checkpoint_completed_during_the_scan_are_never_moved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While cutcheck reads the _metadata, Flink uploads a shared file and completes chk-6, which names it
    and an older orphan-looking file."""
    base = tmp_path / "ck"
    files = layout(base)
    a = base / JOB_A
    real = flink_metadata.any_referenced_files
    late: list[Path] = []

    def reader(directory: str, **options: object) -> object:
        if not late:
            late.append(write(a / "shared" / "uploaded-during-scan"))
            checkpoint(a, 6, [late[0], files["orphans"][0]], [a / "chk-6" / "p6"])
            late.extend([a / "chk-6" / "p6", a / "chk-6" / "rocksdb-meta", a / "chk-6" / "_metadata"])
        return real(directory, **options)

    monkeypatch.setattr(flink_metadata, "any_referenced_files", reader)
    done = storage("orphans", str(a), "--delete", "--min-age", "0")
    assert_user_error(done, "chk-6 completed while cutcheck read the checkpoints", "nothing was moved")
    assert not (base / QUARANTINE).exists()
    assert all(p.exists() for p in [*late, *files["orphans"]])
    again = storage("orphans", str(a), "--delete", "--min-age", "0")  # the next run sees chk-6
    assert again.exit_code == 0 and files["orphans"][0].exists() and not files["orphans"][1].exists(), again.stdout


def test_a_copied_base_restores_into_itself_never_into_the_original(tmp_path: Path) -> None:
    """cp -r of a base with its quarantine: restore-quarantine on the copy must not write into the original (the
    manifest's paths are absolute); it refuses, naming the base the batch belongs to."""
    import shutil

    base = tmp_path / "ck"
    layout(base)
    assert storage("orphans", str(base / JOB_A), "--delete", "--min-age", "0").exit_code == 0
    copy = tmp_path / "ck-copy"
    shutil.copytree(base, copy, symlinks=True)
    before = {"base": tree(base), "copy": tree(copy)}
    done = storage("restore-quarantine", str(copy))
    assert_user_error(done, f"was made for {base} (its manifest.json says so), not for {copy}")
    assert {"base": tree(base), "copy": tree(copy)} == before


def test_a_manifest_naming_a_file_outside_its_batch_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "ck"
    layout(base)
    assert storage("orphans", str(base / JOB_A), "--delete", "--min-age", "0").exit_code == 0
    victim = write(tmp_path / "victim", "the user's")
    batch = next((base / QUARANTINE).iterdir())
    manifest = json.loads((batch / "manifest.json").read_text())
    manifest["files"][0]["stored"] = "../../../../victim"  # batch/files/ -> tmp_path
    (batch / "manifest.json").write_text(json.dumps(manifest))
    before = tree(tmp_path)
    assert_user_error(storage("restore-quarantine", str(base)), "outside")
    assert tree(tmp_path) == before and victim.exists()
