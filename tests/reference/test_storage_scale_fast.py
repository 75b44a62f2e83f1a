"""The storage inspection's shortcuts for the usual case (a job's references all listed files of its ``shared/``)
give the general path's answers: references resolved in any order, with repeats, by the one-directory path, and
Flink ``_metadata`` read without sorting (``sort=False``, as ``storage ls/orphans`` read it). Each test also checks
that the shortcut was taken, so that it cannot silently fall back to the general path. No timings
(benchmarks/bench_storage_scale.py)."""

from __future__ import annotations

import os
import random
import re
import time
from pathlib import Path

import pytest

from cutcheck.reference.storage.filetable import FileTable
from cutcheck.reference.storage.flink_metadata import any_referenced_files
from cutcheck.reference.storage.local_scan import scan_local
from cutcheck.reference.storage.references import Canonical
from cutcheck.reference.storage.store import LOCAL
from cutcheck.reference.storage.traversal import Kept
from tests.reference.test_storage_scale import bench


def _table(base: Path) -> FileTable:
    table = FileTable()
    for d, files in scan_local(str(base)):
        table.add(d, files)
    return table


def _general(table: FileTable, refs: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[int]]:
    """The general path's answer (the shortcut switched off), on a fresh copy of the marks."""
    with monkeypatch.context() as m:
        m.setattr(Canonical, "_all_listed", lambda self, refs: None)
        by_scope, sizes = Canonical(LOCAL, table).resolve({"shared": list(refs)}, Kept(table))
    return by_scope["shared"], list(sizes["shared"])


def _marked(table: FileTable) -> set[str]:
    return {p for _, f in table.directories() for p, m in zip(f.paths, f.marks, strict=True) if m}


@pytest.mark.parametrize("seed", range(10))
def test_one_directorys_references_in_any_order_resolve_as_the_general_path(
        tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    shared = tmp_path / "b" / "job" / "shared"
    (shared / "sub").mkdir(parents=True)
    (tmp_path / "b" / "via").symlink_to(shared, target_is_directory=True)
    names = [f"{rng.getrandbits(40):010x}" for _ in range(rng.randrange(1, 40))]
    for n in names:
        (shared / n).write_bytes(b"x" * rng.randrange(0, 9))
    (shared / "sub" / "deep").write_bytes(b"d")
    (shared / "ln").symlink_to(shared / names[0])
    refs = [str(shared / n) for n in rng.sample(names, rng.randrange(1, len(names) + 1))]
    refs += rng.sample(refs, rng.randrange(0, len(refs) + 1))  # repeats, as two handles may name one file
    rng.shuffle(refs)
    plain = seed % 2 == 0  # half the cases the usual one; the others hold one reference the shortcut must refuse
    odd = None if plain else rng.choice(["missing", "sub/deep", "ln", "..", ".", "via"])
    via = odd == "via"  # all named through a symlinked directory: not the listing's canonical directory
    if odd is not None and not via:
        refs.insert(rng.randrange(len(refs) + 1), f"{shared}/{odd}")
    if via:
        refs = [r.replace(str(shared), str(tmp_path / "b" / "via")) for r in refs]

    want = _general(_table(tmp_path / "b"), refs, monkeypatch)
    table = _table(tmp_path / "b")
    taken = []
    shortcut = Canonical._all_listed

    def spy(self: Canonical, refs: list[str]) -> object:
        answer = shortcut(self, refs)
        if refs:  # the scopes without references are the general path's (nothing to resolve)
            taken.append(answer is not None)
        return answer

    monkeypatch.setattr(Canonical, "_all_listed", spy)
    by_scope, sizes = Canonical(LOCAL, table).resolve({"shared": list(refs)}, Kept(table))
    assert (by_scope["shared"], list(sizes["shared"])) == want
    assert _marked(table) == {p for p, s in zip(*want, strict=True) if s >= 0 and p in table}
    assert taken == [plain]  # the shortcut takes exactly the plain case
    found = table.find(by_scope["shared"][0])
    if found is not None:  # the table's own string, not a copy
        assert by_scope["shared"][0] is found[0].paths[found[1]]


def test_flink_metadata_read_unsorted_names_what_the_sorted_read_names(tmp_path: Path) -> None:
    base = tmp_path / "ckpts"
    bench.build_local(str(base), 3000)
    chk = base / bench.JOB / "chk-2"
    sorted_refs, unsorted = any_referenced_files(str(chk)), any_referenced_files(str(chk), sort=False)
    assert sorted_refs.files["shared"] == sorted(set(sorted_refs.files["shared"]))
    assert unsorted.files["shared"] != sorted_refs.files["shared"]  # the file's own order (the test means something)
    for scope, paths in sorted_refs.files.items():
        assert sorted(set(unsorted.files[scope])) == paths
    assert (unsorted.id, unsorted.kind, unsorted.job, unsorted.inlined_bytes, unsorted.metadata_bytes) == \
        (sorted_refs.id, sorted_refs.kind, sorted_refs.job, sorted_refs.inlined_bytes, sorted_refs.metadata_bytes)
    table = _table(base)
    by_scope, _ = Canonical(LOCAL, table).resolve(unsorted.files, Kept(table))
    assert by_scope["shared"] == sorted_refs.files["shared"]
    assert all(os.path.isfile(p) for p in by_scope["shared"])


# ---------------------------------------------------------------------------- a dry run's deferred listing
def _base(tmp_path: Path) -> Path:
    """A Flink-format base of 3000 files (benchmarks' layout): 10 % orphans, two days old; some of those made
    young, and a chk-N newer than the newest completed checkpoint (in progress)."""
    base = tmp_path / "ckpts"
    bench.build_local(str(base), 3000)
    shared = base / bench.JOB / "shared"
    _, _, orphans = bench.layout(3000, str(base))
    now = time.time()
    for f in orphans[:7]:
        os.utime(f, (now - 60, now - 60))  # too young for --min-age 1h, older than the newest _metadata
    for chk in base.glob(f"{bench.JOB}/chk-*"):
        os.utime(chk / "_metadata", (now, now))
    (base / bench.JOB / "chk-9").mkdir()
    (base / bench.JOB / "chk-9" / "part").write_bytes(b"running")
    assert len(os.listdir(shared)) > 2000
    return base


def _answers(listing: object) -> dict[str, object]:
    names = ("orphans", "too_young", "in_progress", "taskowned", "rerooted", "empty_dirs", "unreadable", "data_roots")
    out: dict[str, object] = {n: getattr(listing, n) for n in names}
    out["checkpoints"] = [(c.key, c.files, c.missing, c.outside) for c in listing.checkpoints]  # type: ignore[attr-defined]
    out["shared"] = listing.shared  # type: ignore[attr-defined]
    infos = listing.infos  # type: ignore[attr-defined]
    unreferenced = [*listing.orphans, *listing.too_young, *listing.in_progress]  # type: ignore[attr-defined]
    out["unreferenced_infos"] = [(infos[f].size, infos[f].mtime) for f in unreferenced]
    return out


def test_a_deferred_listing_finds_what_an_eager_one_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cutcheck.reference.storage import local_scan
    from cutcheck.reference.storage.inspection import inspect

    base = _base(tmp_path)
    monkeypatch.setattr(local_scan, "SPLIT", 1000)  # shared/ (2700 files) is a large directory
    eager = inspect(base, any_referenced_files, min_age=3600)
    deferred = inspect(base, any_referenced_files, min_age=3600, referenced_sizes=False)
    assert _answers(deferred) == _answers(eager)
    assert eager.orphans and eager.too_young and eager.in_progress  # each kind met
    shared = deferred.infos.files_in(str(base / bench.JOB / "shared"))
    assert shared is not None and shared.pending  # deferred, and its referenced files never stat'ed:
    referenced = next(p for p, m in zip(shared.paths, shared.marks, strict=True) if m)
    assert deferred.infos[referenced].size == 0 and eager.infos[referenced].size == 3
    assert not eager.infos.files_in(str(base / bench.JOB / "shared")).pending


def test_a_file_that_vanishes_before_its_deferred_stat_is_left_out(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from cutcheck.reference.storage import local_scan
    from cutcheck.reference.storage.inspection import inspect

    base = _base(tmp_path)
    monkeypatch.setattr(local_scan, "SPLIT", 1000)
    _, _, orphans = bench.layout(3000, str(base))
    gone = orphans[-1]

    def reader(directory: str) -> object:  # the orphan is removed after the listing, before its stat
        if os.path.exists(gone):
            os.remove(gone)
        return any_referenced_files(directory)

    deferred = inspect(base, reader, min_age=3600, referenced_sizes=False)  # type: ignore[arg-type]
    eager = inspect(base, any_referenced_files, min_age=3600)
    assert gone not in deferred.orphans and gone not in deferred.infos
    assert _answers(deferred) == _answers(eager) and len(deferred.infos) == len(eager.infos)


def test_the_dry_run_prints_what_an_eager_listing_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from cutcheck.cli import app
    from cutcheck.reference.storage import local_scan

    base = _base(tmp_path)
    runner = CliRunner()
    printed = []
    for split in (1000, 10**9):  # shared/ deferred, then listed eagerly (never reaches SPLIT)
        monkeypatch.setattr(local_scan, "SPLIT", split)
        result = runner.invoke(app, ["storage", "orphans", str(base), "--json", str(tmp_path / f"o{split}.json")])
        assert result.exit_code == 0, result.output
        ages = re.sub(r"\b\d+ s\b", "N s", result.output)  # the too-young files' ages grow between the runs
        printed.append((ages, (tmp_path / f"o{split}.json").read_text()))
    assert printed[0] == printed[1]
    assert "too young" in printed[0][0] and "in progress" in printed[0][0]


def test_rerooting_passes_over_runs_in_the_one_directory_of_the_files_in_question() -> None:
    """rerooted_files with sorted references (a run of one directory passed over whole when every file in question
    lies in it) is still scope.reroot restricted to those files."""
    from cutcheck.reference.storage.scope import reroot
    from cutcheck.reference.storage.traversal import rerooted_files

    rng = random.Random(5)
    names = ["a", "b", "job", "chk-1", "shared", "x", "y"]
    passed_over = 0
    for _ in range(400):
        def path() -> str:
            return "/" + "/".join(rng.choice(names) for _ in range(rng.randint(1, 4)))
        home = rng.choice(["/b/job/shared", "/b/job", "/a/x"])
        present = {f"{home}/{rng.choice(names)}" for _ in range(rng.randint(1, 6))}
        if rng.random() < 0.3:
            present.add(path())  # not always one directory
        unkept = {f for f in present if rng.random() < 0.7} or {next(iter(present))}
        refs = {f"{home}/{rng.choice(names)}" for _ in range(rng.randint(0, 8))} - unkept  # referenced: kept
        refs |= {path() for _ in range(rng.randint(0, 4))} - unkept
        refs |= {f"{home}/{n}/{rng.choice(names)}" for n in rng.sample(names, 2)} if rng.random() < 0.3 else set()
        directory, anchors = path(), [path() for _ in range(rng.randint(0, 3))]
        want = reroot(sorted(refs), directory, [*anchors, os.path.dirname(directory)], present) & unkept
        assert rerooted_files([(sorted(refs), directory)], anchors, unkept) == want
        passed_over += len({os.path.dirname(f) for f in unkept}) == 1 and any(r.startswith(home + "/") for r in refs)
    assert passed_over > 50  # the shortcut's case is met often


@pytest.mark.parametrize("case", ["plain", "file:///", "dotdot", "short", "deeper", "two dirs", "relative", "odd name"])
def test_a_handles_files_added_at_once_are_those_added_one_by_one(case: str) -> None:
    from cutcheck.reference.storage.flink_metadata import _Collector
    from cutcheck.reference.storage.flink_metadata_format import StateRef

    head = {"file:///": "file:///b/job/shared", "dotdot": "file:/b/job/x/../shared", "relative": "b/shared"}.get(
        case, "file:/b/job/shared")
    paths = [f"{head}/{i:06d}-{'x' * (i % 5)}.sst" for i in range(40)]
    random.Random(case).shuffle(paths)
    if case == "short":
        paths.append(f"{head}/..")
    elif case == "deeper":
        paths.append(f"{head}/sub/f.sst")
    elif case == "two dirs":
        paths.append("file:/b/job/chk-3/f.sst")
    elif case == "odd name":
        paths.append(f"{head}/ab")
    at_once, one_by_one = _Collector("/b/job/chk-3"), _Collector("/b/job/chk-3")
    at_once.add_files(list(paths))
    for p in paths:
        one_by_one.append(StateRef("file", 3, p))
    assert at_once.files == one_by_one.files and sum(map(len, at_once.files.values())) == len(paths)
    taken = at_once._one_folder(list(paths))  # added once more: whether the shortcut takes this case
    assert taken is (case in ("plain", "file:///", "dotdot"))
