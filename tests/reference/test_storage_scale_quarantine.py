"""`orphans --delete` and `restore-quarantine` on many orphans: the quarantine's bookkeeping is linear in
the number of files (counted in comparisons of planned moves, not timed: benchmarks/bench_storage_scale.py
times it), and what it moves still comes back exactly, whole or after an interruption. A move by hard link
reads no byte (the inode, size and time identify the file); bytes copied are identified by their sha256."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.commands import storage_output
from cutcheck.model.errors import StorageError
from cutcheck.reference.storage import quarantine as q
from cutcheck.reference.storage import quarantine_moves as moves
from cutcheck.reference.storage.flink_metadata import any_referenced_files
from cutcheck.reference.storage.inspection import inspect
from tests.reference.test_storage_cli import JOB, simulated
from tests.reference.test_storage_safety import age, tree

N = 300  # quadratic bookkeeping compares about N*N/2 = 45 000 planned moves; linear, none


def stale_files(tmp_path: Path) -> tuple[Path, list[Path]]:
    _, ck = simulated(tmp_path / "run")
    many = [ck / JOB / "shared" / f"left-{i:04d}" for i in range(N)]
    for p in many:
        p.write_text(f"stale {p.name}")
    age(many)
    return ck, many


def counting_comparisons(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A counter of ``Moved == Moved`` (what searching a list of planned moves costs, one a step)."""
    count = [0]
    real = q.Moved.__eq__

    def eq(self: q.Moved, other: object) -> bool:
        count[0] += 1
        return real(self, other)

    monkeypatch.setattr(q.Moved, "__eq__", eq)
    return count


def test_moving_many_orphans_compares_no_planned_move_with_another(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ck, many = stale_files(tmp_path)
    before = tree(ck)
    count = counting_comparisons(monkeypatch)
    listing = inspect(ck, any_referenced_files)
    batch = q.quarantine(listing, {f: "orphan" for f in listing.orphans})
    assert {m.original for m in batch.files} >= {str(p) for p in many}
    assert not any(p.exists() for p in many)
    assert count[0] <= len(batch.files), count[0]  # linear (it was about N*N/2)
    back = q.restore_batch(str(listing.base))
    assert len(back.restored) == len(batch.files)
    assert tree(ck) == before


def test_an_interrupted_move_of_many_orphans_is_linear_and_leaves_the_rest_in_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ck, many = stale_files(tmp_path)
    before = tree(ck)
    real, calls = q._move, []

    def dying(src: str, dst: str) -> None:
        if len(calls) == N // 2:
            raise KeyboardInterrupt  # Ctrl-C, half way
        calls.append(src)
        real(src, dst)

    monkeypatch.setattr(q, "_move", dying)
    count = counting_comparisons(monkeypatch)
    listing = inspect(ck, any_referenced_files)
    with pytest.raises(KeyboardInterrupt):
        q.quarantine(listing, {f: "orphan" for f in listing.orphans})
    assert count[0] <= len(listing.orphans), count[0]  # it was about N*N/2 * 3/4
    assert len([p for p in many if not p.exists()]) == N // 2
    monkeypatch.setattr(q, "_move", real)
    back = q.restore_batch(str(listing.base))
    assert sorted(m.original for m in back.restored) == sorted(calls)
    assert tree(ck) == before


def counting_hashes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files whose bytes the quarantine hashes (what reading every orphan costs on a real base)."""
    hashed: list[str] = []
    real = q._sha256

    def sha256(path: str) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(q, "_sha256", sha256)
    return hashed


def manifest_files(batch: q.Batch) -> list[dict[str, object]]:
    return json.loads(Path(batch.path, q.MANIFEST).read_text())["files"]


def test_a_local_move_by_hard_link_reads_no_byte_and_a_changed_file_is_never_restored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ck, many = stale_files(tmp_path)
    before = tree(ck)
    hashed = counting_hashes(monkeypatch)
    listing = inspect(ck, any_referenced_files)
    batch = q.quarantine(listing, {f: "orphan" for f in listing.orphans})
    assert hashed == []  # a hard link keeps the bytes: identified by inode, size and time instead
    recorded = manifest_files(batch)
    assert all(m["sha256"] == "" and m["inode"] and m["mtime_ns"] for m in recorded)
    stored = Path(batch.path, q.FILES, batch.files[0].stored)
    good = stored.read_bytes()
    stored.write_bytes(b"X" * len(good))  # the same size, other bytes, written now
    with pytest.raises(StorageError, match="inode, size or modification time differs"):
        q.restore_batch(str(listing.base))
    assert not Path(batch.files[0].original).exists()  # nothing was restored
    stored.write_bytes(good)  # the quarantined bytes again, in the same inode, at the time they had
    os.utime(stored, ns=(batch.files[0].mtime_ns, batch.files[0].mtime_ns))
    assert len(q.restore_batch(str(listing.base)).restored) == len(batch.files)
    assert tree(ck) == before


def refuse_links(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_link(src: str, dst: str, **_: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(moves.os, "link", no_link)


@pytest.mark.parametrize("probe", ["refuses links", "links, then refuses"])
def test_copied_bytes_are_identified_by_their_sha256(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     probe: str) -> None:
    ck, many = stale_files(tmp_path)
    before = tree(ck)
    refuse_links(monkeypatch)
    if probe == "links, then refuses":  # the file system seemed to link: the copy is hashed as it is made
        monkeypatch.setattr(q, "_links_work", lambda batch: True)
    listing = inspect(ck, any_referenced_files)
    batch = q.quarantine(listing, {f: "orphan" for f in listing.orphans})
    recorded = manifest_files(batch)
    assert {m["original"] for m in recorded} >= {str(p) for p in many}
    assert all(m["sha256"] == hashlib.sha256(Path(m["original"]).name.join(["stale ", ""]).encode()).hexdigest()
               for m in recorded if Path(m["original"]).name.startswith("left-"))
    assert all(not m["inode"] for m in recorded)
    stored = Path(batch.path, q.FILES, batch.files[-1].stored)
    good = stored.read_bytes()
    stored.write_bytes(b"X" * len(good))
    with pytest.raises(StorageError, match="sha256 differs"):
        q.restore_batch(str(listing.base))
    stored.write_bytes(good)
    assert len(q.restore_batch(str(listing.base)).restored) == len(batch.files)
    assert tree(ck) == before


def test_restore_streams_a_long_list_of_restored_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ck, many = stale_files(tmp_path)
    monkeypatch.setattr(storage_output, "RENDERED_ROWS", 10)  # past it, rows are lines, not a rendered table
    moved = CliRunner().invoke(app, ["storage", "orphans", str(ck), "--delete"])
    assert moved.exit_code == 0, moved.stdout + moved.stderr
    back = CliRunner().invoke(app, ["storage", "restore-quarantine", str(ck)])
    assert back.exit_code == 0, back.stdout + back.stderr
    lines = back.stdout.splitlines()
    assert "file\tsize" in lines
    assert {str(p) for p in many} <= {line.split("\t")[0] for line in lines}
    assert all(p.exists() for p in many)
