"""Held-out adversarial cases (issue 26), local disk: other ways to guess a root or a job, and other references
a command could miss. Each case hashes every file, runs the destructive command, checks that nothing any
_metadata references (or the user named) moved, restores every batch and hashes again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.reference.adversarial_helpers import (
    JOB_A,
    JOB_B,
    age_tree,
    assert_kept,
    checkpoint,
    moved,
    relative_handles,
    restore_all,
    storage,
    tree,
    write,
)
from tests.reference.test_storage_cli import assert_user_error


def two_jobs(base: Path) -> dict[str, Path]:
    """Job A (checkpoints 4 and 5) and job B restored from A in claim mode (its chk-9 names A's shared file),
    plus one real orphan in A's shared/ and an aborted chk-3 of A."""
    a, b = base / JOB_A, base / JOB_B
    s1, s2, claimed = a / "shared" / "s1", a / "shared" / "s2", a / "shared" / "claimed-by-b"
    checkpoint(a, 4, [s1], [a / "chk-4" / "p4"])
    checkpoint(a, 5, [s1, s2], [a / "chk-5" / "p5"])
    checkpoint(b, 9, [claimed, b / "shared" / "b1"], [b / "chk-9" / "p9"])
    orphan = write(a / "shared" / "orphan")
    aborted = write(a / "chk-3" / "aborted")
    age_tree(base)
    return {"a": a, "b": b, "claimed": claimed, "orphan": orphan, "aborted": aborted, "s1": s1, "s2": s2}


def delete_and_restore(base: Path, given: str, must_keep: list[Path], *extra: str,
                       quarantine_base: Path | None = None) -> list[str]:
    """orphans --delete on ``given``: nothing of ``must_keep`` moves, every batch restores, the tree is as before."""
    before = tree(base)
    done = storage("orphans", given, "--delete", "--min-age", "0", *extra)
    after = tree(base)
    assert_kept(before, after, must_keep)
    gone = moved(before, after)
    restore_all(quarantine_base or base)
    assert tree(base) == before
    assert done.exit_code in (0, 2), done.stdout + done.stderr
    return gone


# ---------------------------------------------------------------------------- guessing a root or a job
@pytest.mark.parametrize("form", ["{a}/../{A}", "{a}//", "{a}/.", "file:{a}", "file://{a}", "file://localhost{a}",
                                  "{a}/chk-5/.."])
def test_every_spelling_of_a_job_directory_is_the_same_directory(tmp_path: Path, form: str) -> None:
    base = tmp_path / "ck"
    j = two_jobs(base)
    given = form.format(a=j["a"], A=JOB_A)
    gone = delete_and_restore(base, given, [j["claimed"], j["s1"], j["s2"]])
    assert gone == sorted(map(str, [j["orphan"], j["aborted"]]))


def test_a_directory_given_through_a_symlinked_parent(tmp_path: Path) -> None:
    base = tmp_path / "real" / "ck"
    j = two_jobs(base)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    gone = delete_and_restore(base, str(tmp_path / "link" / "ck" / JOB_A), [j["claimed"], j["s1"], j["s2"]])
    assert gone == sorted(map(str, [j["orphan"], j["aborted"]]))


@pytest.mark.parametrize("given", ["job", "base"])
def test_a_claim_restored_job_reached_through_a_symlink_in_the_base_keeps_its_files(tmp_path: Path, given: str) -> None:
    """Job B's directory lives elsewhere and is linked into the base: its _metadata is under the base as the
    operator sees it, so the file of A it claimed stays."""
    base = tmp_path / "ck"
    j = two_jobs(base)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.rename(j["b"], elsewhere / JOB_B)
    (base / JOB_B).symlink_to(elsewhere / JOB_B)
    (base / "loop").symlink_to(base)  # a link back up is walked once
    delete_and_restore(base, str(j["a"] if given == "job" else base), [j["claimed"], j["s1"], j["s2"]])


def test_a_claimed_file_named_through_another_spelling_of_the_base_is_kept(tmp_path: Path) -> None:
    """B's _metadata names A's file as file://localhost/…/../… through a symlink: the same file, kept."""
    base = tmp_path / "real" / "ck"
    j = two_jobs(base)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    odd = f"file://localhost{tmp_path}/link/ck/{JOB_B}/../{JOB_A}/shared/claimed-by-b"
    checkpoint(j["b"], 9, [odd, j["b"] / "shared" / "b1"], [j["b"] / "chk-9" / "p9"], create=False)
    age_tree(base)
    delete_and_restore(base, str(j["a"]), [j["claimed"], j["s1"], j["s2"]])


def test_savepoints_kept_below_the_checkpoint_base_keep_what_a_claim_restored_job_names(tmp_path: Path) -> None:
    """state.savepoints.dir inside the checkpoint base. Job B was restored in claim mode from savepoint-x, whose
    _metadata Flink removed on subsumption; B still names its files. orphans on the savepoints directory must
    read B's _metadata (above the directory given) and keep them."""
    base = tmp_path / "ck"
    sp = base / "savepoints"
    keep = sp / "savepoint-0a0a0a-1111111111" / "kept-by-b"
    other = checkpoint(sp, 0, [], [sp / "savepoint-0b0b0b-2222222222" / "x"],
                       chk_dir=sp / "savepoint-0b0b0b-2222222222")
    write(keep)
    checkpoint(base / JOB_B, 9, [keep], [base / JOB_B / "chk-9" / "p9"])
    age_tree(base)
    assert other.exists()
    delete_and_restore(base, str(sp), [keep])


def test_a_base_configured_inside_another_jobs_checkpoint_keeps_what_that_checkpoint_names(tmp_path: Path) -> None:
    outer = tmp_path / "ck" / JOB_A / "chk-5"
    inner = outer / "nested"
    named = write(inner / "named-by-outer")
    checkpoint(tmp_path / "ck" / JOB_A, 5, [], [named])
    checkpoint(inner / JOB_B, 2, [inner / JOB_B / "shared" / "s"])
    age_tree(tmp_path / "ck")
    delete_and_restore(tmp_path / "ck", str(inner), [named])


def test_a_metadata_naming_files_outside_the_base_moves_nothing_outside(tmp_path: Path) -> None:
    base = tmp_path / "ck"
    j = two_jobs(base)
    outside = write(tmp_path / "outside" / "state")
    relative = write(tmp_path / "outside" / "relative-state")
    checkpoint(j["a"], 6, [j["s1"], outside, "../../../outside/relative-state"], create=False)
    age_tree(tmp_path)
    before = tree(tmp_path)
    ls = storage("ls", str(j["a"]))
    assert ls.exit_code == 1 and "OUTSIDE" in ls.stdout, ls.stdout
    refused = storage("orphans", str(j["a"]), "--delete", "--min-age", "0")
    assert_user_error(refused, "can never be restored")
    forced = storage("orphans", str(j["a"]), "--delete", "--min-age", "0", "--force")
    assert forced.exit_code == 0, forced.stdout + forced.stderr
    after = tree(tmp_path)
    assert_kept(before, after, [outside, relative, j["claimed"], j["s1"]])
    restore_all(base)
    assert tree(tmp_path) == before


def test_a_savepoint_with_relative_paths_given_directly(tmp_path: Path) -> None:
    """A savepoint names its files relative to its own directory (Flink's relative handles): given alone,
    nothing it names moves, the stray file does."""
    base = tmp_path / "sp"
    sp = base / "savepoint-c0ffee-3333333333"
    names = ["shared-state", "private-state", "rocks-meta"]
    checkpoint(sp.parent, 0, [names[0]], [names[1]], meta=names[2], chk_dir=sp, create=False)
    (sp / "_metadata").write_bytes(relative_handles((sp / "_metadata").read_bytes(), names))
    files = [write(sp / n) for n in names]
    stray = write(sp / "stray")
    age_tree(base)
    assert storage("ls", str(sp)).exit_code == 0
    gone = delete_and_restore(base, str(sp), files)
    assert gone == [str(stray)]


def test_a_plain_file_handle_with_a_relative_path_keeps_its_file_from_any_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Flink qualifies every plain file handle's path; a relative one (a hand-made or foreign _metadata) must not
    make the answer depend on where the command runs: the file it may mean stays, from any directory."""
    base = tmp_path / "ck"
    j = two_jobs(base)
    checkpoint(j["b"], 12, ["shared/orphan"], create=False)  # A's orphan, read from inside A
    age_tree(base)
    for cwd in (tmp_path, j["a"], j["b"]):
        monkeypatch.chdir(cwd)
        gone = delete_and_restore(base, str(j["a"]), [j["orphan"], j["claimed"]])
        assert gone == [str(j["aborted"])]


def test_taskowned_files_under_an_entropy_root_are_never_moved(tmp_path: Path) -> None:
    meta_root = tmp_path / "X" / "ck"
    data = tmp_path / "X" / "Ab12" / "ck" / JOB_A
    checkpoint(meta_root / JOB_A, 5, [data / "shared" / "s1"], [data / "chk-5" / "p5"],
               meta=data / "chk-5" / "meta")
    owned = [write(data / "taskowned" / "channel-state"), write(meta_root / JOB_A / "taskowned" / "op-state")]
    orphan = write(data / "shared" / "orphan")
    age_tree(tmp_path / "X")
    gone = delete_and_restore(tmp_path / "X", str(tmp_path / "X" / "_entropy_" / "ck"), owned,
                              quarantine_base=meta_root)
    assert gone == [str(orphan)]


# ---------------------------------------------------------------------------- references a command could miss
@pytest.mark.parametrize("damage", ["truncated", "version 99", "empty", "garbage"])
@pytest.mark.parametrize("whose", ["own", "sibling", "keep"])
def test_an_undecodable_metadata_anywhere_keeps_everything_and_says_so(tmp_path: Path, damage: str, whose: str) -> None:
    base = tmp_path / "ck"
    j = two_jobs(base)
    keep_dir = tmp_path / "other"
    checkpoint(keep_dir / JOB_B, 1, [j["orphan"]], create=False)
    meta = {"own": j["a"] / "chk-5", "sibling": j["b"] / "chk-9", "keep": keep_dir / JOB_B / "chk-1"}[whose] / "_metadata"
    raw = meta.read_bytes()
    meta.write_bytes({"truncated": raw[: len(raw) // 2], "version 99": raw[:4] + (99).to_bytes(4, "big") + raw[8:],
                      "empty": b"", "garbage": b"\x00\xff" * 40}[damage])
    age_tree(tmp_path)
    before = tree(tmp_path)
    done = storage("orphans", str(j["a"]), "--delete", "--min-age", "0", "--keep-referenced-by", str(keep_dir))
    assert_user_error(done, "nothing is deleted")
    assert tree(tmp_path) == before
    ls = storage("ls", str(j["a"]), "--keep-referenced-by", str(keep_dir))
    assert ls.exit_code == 1 and "UNREADABLE" in ls.stdout, ls.stdout
    life = storage("lifecycle", str(j["a"]), "--keep-referenced-by", str(keep_dir))
    assert_user_error(life, "no lifecycle rule can be called safe")
    assert tree(tmp_path) == before


@pytest.mark.parametrize("spelling", ["{k}/", "file://{k}", "{link}"])
def test_keep_referenced_by_in_any_spelling_keeps_its_files(tmp_path: Path, spelling: str) -> None:
    base = tmp_path / "ck"
    j = two_jobs(base)
    keep_dir = tmp_path / "copy"
    checkpoint(keep_dir / JOB_B, 1, [j["orphan"]], create=False)
    (tmp_path / "link").symlink_to(keep_dir)
    age_tree(tmp_path)
    gone = delete_and_restore(base, str(j["a"]), [j["orphan"], j["claimed"]], "--keep-referenced-by",
                              spelling.format(k=keep_dir, link=tmp_path / "link"))
    assert gone == [str(j["aborted"])]


def test_quarantine_checkpoint_never_moves_a_file_another_job_claimed(tmp_path: Path) -> None:
    base = tmp_path / "ck"
    j = two_jobs(base)
    chk5 = j["a"] / "chk-5"
    (chk5 / "p5").unlink()  # broken: a file it names is gone
    private_claimed = chk5 / "claimed-private"
    write(private_claimed)
    checkpoint(j["b"], 10, [j["claimed"], private_claimed], create=False)
    age_tree(base)
    before = tree(base)
    done = storage("quarantine-checkpoint", str(chk5))
    assert done.exit_code == 0, done.stdout + done.stderr
    after = tree(base)
    assert_kept(before, after, [private_claimed, j["s1"], j["s2"], j["claimed"]])
    assert str(chk5 / "_metadata") in moved(before, after)
    restore_all(base)
    assert tree(base) == before


def test_checkpoints_of_another_job_under_the_base_name_this_jobs_exclusive_files(tmp_path: Path) -> None:
    """Legacy restore mode: B's checkpoint names a file in A's chk-3, whose own _metadata is gone."""
    base = tmp_path / "ck"
    j = two_jobs(base)
    checkpoint(j["b"], 11, [j["aborted"]], create=False)
    age_tree(base)
    gone = delete_and_restore(base, str(j["a"]), [j["aborted"], j["claimed"]])
    assert gone == [str(j["orphan"])]


def test_json_report_of_a_dry_run_names_no_referenced_file(tmp_path: Path) -> None:
    base = tmp_path / "ck"
    j = two_jobs(base)
    done = storage("orphans", str(base), "--min-age", "0", "--json", str(tmp_path / "o.json"))
    assert done.exit_code == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "o.json").read_text())
    assert sorted(report["orphans"]) == sorted(map(str, [j["orphan"], j["aborted"]]))


def test_a_claimed_file_under_a_random_prefix_is_kept_when_one_job_is_given(tmp_path: Path) -> None:
    """Entropy injection: A's shared files under X/<4 chars>/ck; B (same base) claims one of them. orphans on A's
    job directory through the marker keeps it, moves A's real orphan there, and nothing of B's."""
    meta_root = tmp_path / "X" / "ck"
    da, db = tmp_path / "X" / "Ab12" / "ck" / JOB_A, tmp_path / "X" / "Cd34" / "ck" / JOB_B
    claimed, own = da / "shared" / "claimed", da / "shared" / "s1"
    checkpoint(meta_root / JOB_A, 5, [own, claimed], [da / "chk-5" / "p"], meta=da / "chk-5" / "m")
    checkpoint(meta_root / JOB_A, 6, [own], [da / "chk-6" / "p"], meta=da / "chk-6" / "m")
    checkpoint(meta_root / JOB_B, 2, [claimed, db / "shared" / "b1"], [db / "chk-2" / "p"], meta=db / "chk-2" / "m")
    b_orphan = write(db / "shared" / "b-orphan")
    orphan = write(da / "shared" / "orphan")
    age_tree(tmp_path / "X")
    gone = delete_and_restore(tmp_path / "X", str(tmp_path / "X" / "_entropy_" / "ck" / JOB_A), [claimed, own, b_orphan],
                              quarantine_base=meta_root)
    assert gone == [str(orphan)]


@pytest.mark.parametrize("name", ["_METADATA", "_Metadata"])
def test_a_checkpoint_whose_metadata_is_named_in_another_case_keeps_its_files(tmp_path: Path, name: str) -> None:
    """On a case-insensitive file system (macOS, Windows shares) chk-3/_METADATA is chk-3's _metadata; the listing
    sees the name as stored. Its checkpoint's files must not be taken for orphans anywhere."""
    base = tmp_path / "ck"
    j = two_jobs(base)
    chk3 = checkpoint(j["a"], 3, [j["orphan"]], [j["a"] / "chk-3" / "p3"])
    os.rename(chk3 / "_metadata", chk3 / name)
    age_tree(base)
    before = tree(base)
    done = storage("orphans", str(j["a"]), "--delete", "--min-age", "0")
    assert_user_error(done, name, "nothing is deleted")
    assert tree(base) == before


def test_lifecycle_counts_another_jobs_reference_to_an_old_exclusive_file(tmp_path: Path) -> None:
    """B (restored from A in legacy mode) names a 12-day-old file of A's chk-3: the chk- rule for A must outlast it,
    with S3's rounding (an N-day rule may delete after N-1 days)."""
    base = tmp_path / "ck"
    a, b = base / JOB_A, base / JOB_B
    legacy = write(a / "chk-3" / "legacy-private")
    checkpoint(a, 4, [a / "shared" / "s1"], [a / "chk-4" / "p4"])
    checkpoint(a, 5, [a / "shared" / "s1"], [a / "chk-5" / "p5"])
    checkpoint(b, 11, [b / "shared" / "b1"], [legacy])
    age_tree(base, 86400)
    age_tree(legacy.parent, 12 * 86400)
    done = storage("lifecycle", str(a), "--json", str(tmp_path / "l.json"))
    assert done.exit_code == 0, done.stdout + done.stderr
    rules = {r["kind"]: r for r in json.loads((tmp_path / "l.json").read_text())["rules"]}
    assert rules["shared"]["days"] is None
    assert rules["chk"]["days"] is None or rules["chk"]["days"] - 1 > 12  # not deleted before its next checkpoint
