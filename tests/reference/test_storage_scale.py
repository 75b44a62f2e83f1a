"""The storage inspection that streams (a compact file table, directories resolved once, re-rooting
from the unreferenced files only, Flink _metadata decoded straight into the reference sets) gives
the answers the previous one gave, field by field (tests/reference/storage_oracle.py is that previous
inspection), on small local and S3 bases: simulated runs, Flink-format bases with missing, moved,
copied and symlinked files, entropy layouts, and random layouts. Also: what it no longer does per
file (a realpath, a stat), its progress callback, the CLI's progress lines and streamed tables, and the
decoder's fast loop against the field-by-field reader. No timings (benchmarks/bench_storage_scale.py)."""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.commands import storage_output
from cutcheck.model.errors import StorageError
from cutcheck.reference.storage import flink_metadata_format as fmt
from cutcheck.reference.storage.filetable import FileTable, dir_files
from cutcheck.reference.storage.flink_metadata import any_referenced_files
from cutcheck.reference.storage.inspection import CheckpointListing, inspect
from cutcheck.reference.storage.meta import FORMAT
from cutcheck.reference.storage.scope import reroot
from cutcheck.reference.storage.store import FileInfo
from cutcheck.reference.storage.traversal import rerooted_files
from tests.reference import storage_oracle as oracle
from tests.reference.s3_server import S3, s3_fixture, s3_server_fixture  # noqa: F401
from tests.reference.test_storage_cli import JOB, simulated

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_storage_scale as bench  # noqa: E402

runner = CliRunner()
logging.getLogger("werkzeug").setLevel(logging.ERROR)
FIELDS = ("root", "checkpoints", "shared", "orphans", "taskowned", "unreadable", "base", "too_young", "context",
          "rerooted", "scope", "data_roots", "why_unreadable")


# What reference.storage.guard holds back from the previous answer (policy, not traversal): files of
# checkpoints that may be in progress are neither orphans nor too young, and entropy-shaped roots that
# hold another storage's _metadata are not data roots. Everything else is compared as it was.
POLICY = ("orphans", "too_young", "data_roots")
ADDED = ("in_progress", "empty_dirs", "foreign", "diagnoses", "context_files")


def assert_same(new: CheckpointListing, old: CheckpointListing) -> None:
    for name in FIELDS:
        if name not in POLICY:
            assert getattr(new, name) == getattr(old, name), name
    assert set(new.data_roots) | set(new.foreign) == set(old.data_roots) and not set(new.data_roots) & set(new.foreign)
    kept = dict(new.infos)
    assert kept == {p: i for p, i in old.infos.items() if p in kept}
    dropped = set(old.infos) - set(kept)
    assert all(not p.startswith(new.root.rstrip("/") + "/") for p in dropped)  # only beside the root, never under it
    assert set(new.orphans) <= set(old.orphans) and set(new.too_young) <= set(old.too_young)
    assert set(new.orphans) | set(new.too_young) | set(new.in_progress) == \
        {f for f in [*old.orphans, *old.too_young] if f not in dropped}
    fresh, was = new.to_json(), oracle.to_json(old)
    for name in (*POLICY, *ADDED):
        fresh.pop(name, None)
        was.pop(name, None)
    assert fresh == was


def both(root: Path | str, **kw: Any) -> tuple[CheckpointListing, CheckpointListing]:
    new = inspect(root, any_referenced_files, **kw)
    old = oracle.inspect(root, oracle.any_referenced_files, **kw)
    assert_same(new, old)
    return new, old


# ---------------------------------------------------------------------------- the same answers, locally
def test_a_simulated_run_with_leftovers(tmp_path: Path) -> None:
    _, ck = simulated(tmp_path)
    job = ck / JOB
    (job / "shared" / "leftover").write_bytes(b"x")
    (job / "chk-99").mkdir()
    (job / "chk-99" / "a").write_bytes(b"yy")
    (job / "chk-99" / "_metadata.inprogress").write_bytes(b"{}")
    (job / "taskowned" / "t1").write_bytes(b"z")
    old = 1_000_000_000.0
    os.utime(job / "shared" / "leftover", (old, old))
    for min_age in (0.0, 3600.0):
        new, _ = both(ck, min_age=min_age)
        assert new.orphans and new.taskowned and new.shared
    both(job)
    both(sorted(job.glob("chk-*"))[0])


def test_a_flink_base_with_missing_moved_copied_and_symlinked_files(tmp_path: Path) -> None:
    base = tmp_path / "one" / "ckpts"
    shape = bench.build_local(str(base), 400)
    job = base / bench.JOB
    new, _ = both(base, min_age=3600)
    assert len(new.orphans) == shape["orphans"] and all(c.restorable for c in new.checkpoints)
    referenced = sorted(new.shared)
    os.remove(referenced[0])  # a checkpoint loses a file
    os.symlink(referenced[1], job / "shared" / "a-link")  # symlinks are never orphans
    (job / "taskowned").mkdir()
    (job / "taskowned" / "cl").write_bytes(b"c")
    os.symlink(base, tmp_path / "link")
    new, _ = both(base)
    assert any(c.missing for c in new.checkpoints)
    both(tmp_path / "link")  # through a symlinked root
    shutil.copytree(tmp_path / "one", tmp_path / "copy")  # a copy names the original's absolute paths
    new, _ = both(tmp_path / "copy" / "ckpts")
    assert any(c.outside for c in new.checkpoints)
    both(tmp_path / "copy" / "ckpts", keep=[str(base)])
    shutil.rmtree(tmp_path / "one")  # moved: the original is gone, the copy's files are kept by re-rooting
    new, _ = both(tmp_path / "copy" / "ckpts")
    assert new.rerooted and not set(new.rerooted) & set(new.orphans)


def test_data_files_under_random_prefixes(tmp_path: Path) -> None:
    meta_dir = tmp_path / "b" / "ckpts" / JOB / "chk-3"
    meta_dir.mkdir(parents=True)
    data = {prefix: tmp_path / "b" / prefix / "ckpts" / JOB / "shared" for prefix in ("Xy12", "Ab9Z", "toolong")}
    files: list[str] = []
    for prefix, d in data.items():
        d.mkdir(parents=True)
        for i in range(3):
            (d / f"f{i}").write_bytes(b"s" * i)
            if i < 2 and prefix != "toolong":
                files.append(str(d / f"f{i}"))
    _write_json_metadata(meta_dir, 3, files)
    new, _ = both(tmp_path / "b" / "_entropy_" / "ckpts")
    assert len(new.data_roots) == 3 and len(new.orphans) == 2


def _write_json_metadata(directory: Path, cp: int, files: list[str], shared: list[str] | None = None) -> None:
    meta = {"format": FORMAT, "job": JOB, "checkpoint": cp, "kind": "checkpoint", "attempt": 0, "parallelism": {},
            "trigger_step": 0, "end_step": 0, "sharing": "shared", "tasks": [],
            "files": {"exclusive": files, "shared": shared or [], "taskowned": []}}
    (directory / "_metadata").write_text(json.dumps(meta))


@pytest.mark.parametrize("seed", range(12))
def test_random_layouts(tmp_path: Path, seed: int) -> None:
    """Jobs with checkpoints naming files relatively, absolutely, under other jobs, through symlinks, in
    directories that were moved, and files that do not exist; leftovers everywhere."""
    rng = random.Random(seed)
    base = tmp_path / "base"
    jobs = [f"{rng.getrandbits(128):032x}" for _ in range(rng.randint(1, 3))]
    every: list[Path] = []
    for job in jobs:
        for sub in ("shared", "taskowned", *(f"chk-{n}" for n in range(1, rng.randint(2, 4)))):
            d = base / job / sub
            d.mkdir(parents=True)
            for i in range(rng.randint(0, 6)):
                (d / f"{sub}-{i}").write_bytes(b"x" * rng.randint(0, 9))
                every.append(d / f"{sub}-{i}")
    if rng.random() < 0.5:
        os.symlink(base / jobs[0] / "shared", base / jobs[0] / "shared-link")
    old_place = tmp_path / "was" / "base"
    for job in jobs:
        for chk in sorted((base / job).glob("chk-*")):
            refs: list[str] = []
            for f in rng.sample(every, min(len(every), rng.randint(1, 8))):
                form = rng.choice(["abs", "rel", "moved", "link", "filelink", "missing"])
                if form == "abs":
                    refs.append(str(f))
                elif form == "rel":
                    refs.append(os.path.relpath(f, chk))
                elif form == "filelink":  # a link as the last component resolves to its target
                    link = chk / f"ln-{rng.getrandbits(32)}"
                    os.symlink(f, link)
                    refs.append(str(link))
                elif form == "moved":
                    refs.append(str(old_place / f.relative_to(base)))
                elif form == "link" and (base / jobs[0] / "shared-link").exists() and f.parent.name == "shared" \
                        and f.parent.parent.name == jobs[0]:
                    refs.append(str(base / jobs[0] / "shared-link" / f.name))
                else:
                    refs.append(str(chk / f"gone-{rng.getrandbits(16)}"))
            if rng.random() < 0.9:
                _write_json_metadata(chk, int(chk.name[4:]), refs)
    if not list(base.rglob("_metadata")):
        _write_json_metadata(base / jobs[0] / "chk-1", 1, [])
    for root in [base, *(base / j for j in jobs)]:
        for min_age in (0.0, 3600.0):
            try:
                both(root, min_age=min_age)
            except Exception as exc:  # the same refusal, the same sentence
                with pytest.raises(type(exc), match=None) as again:
                    oracle.inspect(root, oracle.any_referenced_files, min_age=min_age)
                assert str(again.value) == str(exc)


# ---------------------------------------------------------------------------- the same answers on S3
def test_the_same_answers_on_s3(s3: S3) -> None:
    from cutcheck.reference.storage.s3 import S3Store

    bucket = s3.bucket("scale-same")
    every, refs, orphans = bench.layout(300, "ckpts")
    for key in [*every, "ckpts/taskowned-elsewhere/x", f"ckpts/{bench.JOB}/taskowned/t"]:
        s3.put(bucket, key, b"sst")
    for cp, files in refs.items():
        s3.put(bucket, f"ckpts/{bench.JOB}/chk-{cp}/_metadata",
               bench.flink_metadata(cp, bench.subtasks_of([f"{bucket}/{f}" for f in files[:-1]], "s3://"), 3))
    for root in (f"/{bucket}/ckpts", f"/{bucket}/ckpts/{bench.JOB}"):
        new = inspect(root, store=S3Store(s3.endpoint))
        old = oracle.inspect(root, store=S3Store(s3.endpoint))
        assert_same(new, old)
        assert len(new.orphans) > len(orphans) and all(c.restorable for c in new.checkpoints)


# ---------------------------------------------------------------------------- nothing per file that need not be
def test_no_realpath_and_no_stat_per_listed_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "ckpts"
    bench.build_local(str(base), 2000)
    calls = {"realpath": 0, "stat": 0, "listing": 0}
    realpath, stat = os.path.realpath, os.stat

    def counted_realpath(*a: Any, **k: Any) -> Any:
        calls["realpath"] += 1
        return realpath(*a, **k)

    def counted_stat(*a: Any, **k: Any) -> Any:
        calls["listing" if "dir_fd" in k else "stat"] += 1  # the listing's lstat is relative to its directory
        return stat(*a, **k)

    monkeypatch.setattr(os.path, "realpath", counted_realpath)
    monkeypatch.setattr(os, "stat", counted_stat)
    listing = inspect(base, any_referenced_files)
    assert len(listing.infos) == 2000 and len(listing.orphans) == 200
    assert calls["realpath"] < 50 and calls["stat"] < 50, calls  # the previous inspection: over 2000 of each
    assert calls["listing"] in (0, 2000), calls  # one lstat a file, by the listing (0: no fstatat here)


def test_progress_reports_listing_and_reading(tmp_path: Path) -> None:
    base = tmp_path / "ckpts"
    bench.build_local(str(base), 500)
    seen: list[tuple[str, int, int | None]] = []
    inspect(base, any_referenced_files, progress=lambda *a: seen.append(a))
    listed = [d for stage, d, _ in seen if stage == "listed"]
    assert listed and listed[-1] == 500 and listed == sorted(listed)
    assert [(d, t) for stage, d, t in seen if stage == "read"] == [(0, 3), (1, 3), (2, 3), (3, 3)]


def test_the_cli_prints_progress_on_stderr_and_long_tables_row_by_row(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "ckpts"
    bench.build_local(str(base), 300)
    quiet = runner.invoke(app, ["storage", "ls", str(base)])
    assert quiet.exit_code == 0 and "listing" not in quiet.stderr and "┃ file" in quiet.stdout
    monkeypatch.setattr(storage_output, "PROGRESS_EVERY", 0.0)
    monkeypatch.setattr(storage_output, "RENDERED_ROWS", 5)
    loud = runner.invoke(app, ["storage", "ls", str(base)])
    assert loud.exit_code == 0
    assert f"listing {base}: " in loud.stderr and f"reading the _metadata under {base}: 3 of 3" in loud.stderr
    listing = inspect(base, any_referenced_files)
    lines = loud.stdout.splitlines()
    start = lines.index("file\tsize\treferenced by") + 1
    rows = [line.split("\t") for line in lines[start:start + len(listing.shared)]]
    assert [os.path.join(str(base), bench.JOB, r[0]) for r in rows] == list(listing.shared)
    assert [r[2] for r in rows] == [", ".join(k.split("/")[-1] for k in users) for users in listing.shared.values()]
    assert lines[-1] == quiet.stdout.splitlines()[-1]  # the same summary


# ---------------------------------------------------------------------------- parts against their definitions
def test_rerooted_files_is_reroot_restricted_to_the_files_in_question() -> None:
    rng = random.Random(3)
    names = ["a", "b", "ck", "job", "chk-1", "chk-2", "shared", "x", "y"]
    for _ in range(300):
        def path() -> str:
            return "/" + "/".join(rng.choice(names) for _ in range(rng.randint(1, 5)))
        refs = [path() for _ in range(rng.randint(0, 8))]
        directory, anchors = path(), [path() for _ in range(rng.randint(0, 3))]
        present = {path() for _ in range(rng.randint(0, 12))}
        unkept = {f for f in present if rng.random() < 0.7}
        want = reroot(refs, directory, [*anchors, os.path.dirname(directory)], present) & unkept
        assert rerooted_files([(refs, directory)], anchors, unkept) == want


def test_the_file_table_is_the_mapping_it_replaced() -> None:
    rng = random.Random(1)
    infos = {f"/b/{d}/{n}": FileInfo(f"/b/{d}/{n}", rng.randint(0, 99), rng.random()) for d in ("x", "x/y", "z")
             for n in rng.sample(range(100), 20)}
    table = FileTable()
    for d in ("x", "x/y", "z"):
        mine = [i for p, i in infos.items() if p.rpartition("/")[0] == f"/b/{d}"]
        table.add(f"/b/{d}", dir_files(f"/b/{d}", [i.path for i in mine[::2]], [i.size for i in mine[::2]],
                                      [i.mtime for i in mine[::2]], full=True))
        table.add(f"/b/{d}", dir_files(f"/b/{d}", [i.path for i in mine], [i.size for i in mine],
                                      [i.mtime for i in mine], full=True))  # merged, each file once
    assert dict(table) == infos and len(table) == len(infos) and sorted(table) == sorted(infos)
    assert dict(table.items()) == infos and sorted(table.values(), key=lambda i: i.path) == sorted(infos.values(), key=lambda i: i.path)
    assert "/b/x/nope" not in table and table.get("/b/x/nope") is None
    table.drop_under("/b/x")
    assert sorted(table) == sorted(p for p in infos if p.startswith("/b/z/"))


def _metadata_files() -> list[tuple[str, bytes]]:
    from tests.reference.test_metadata_reader_unit import metadata

    root = Path(__file__).resolve().parents[1] / "flink" / "data" / "metadata"
    real = [(str(p), p.read_bytes()) for p in sorted(root.rglob("_metadata"))]
    made = [(f"v{v}", metadata(v, "file:/ck/job")) for v in fmt.VERSIONS]
    every, refs, _ = bench.layout(200, "/ck")
    return [*real, *made, ("bench", bench.flink_metadata(1, bench.subtasks_of(refs[1], "file:"), 3))]


def test_the_decoders_fast_loop_reads_what_the_field_by_field_reader_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    cases = _metadata_files()
    assert len(cases) > 8
    fast = [fmt.decode(data, name) for name, data in cases]
    fast_errors = [_error(data[:n]) for _, data in cases[-3:] for n in range(0, len(data), 7)]
    monkeypatch.setattr(fmt._Decoder, "plain_files", lambda self, n: 0)
    assert [fmt.decode(data, name) for name, data in cases] == fast
    assert [_error(data[:n]) for _, data in cases[-3:] for n in range(0, len(data), 7)] == fast_errors


def _error(data: bytes) -> str:
    try:
        fmt.decode(data, "m")
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "read"


# ---------------------------------------------------------------------------- the local listing
def _tree(root: Path) -> None:
    for rel in ("job/chk-1/_metadata", "job/chk-1/b", "job/chk-1/a", "job/shared/z", "job/shared/y",
                "job/shared/deep/x", ".cutcheck-quarantine/batch/f", "top"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(rel.encode())
    (root / "job/empty").mkdir()
    (root / "job/shared/link").symlink_to(root / "top")  # a link: neither listed nor followed
    (root / "job/linked").symlink_to(root / "job/shared", target_is_directory=True)


def _flat(scan: Any) -> list[tuple[str, list[str], list[int], list[float]]]:
    return [(d, f.paths, list(f.sizes), list(f.mtimes)) for d, f in scan]


@pytest.mark.parametrize("at", [True, False])
def test_the_local_listing_lists_what_the_stores_scan_lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             at: bool) -> None:
    from cutcheck.reference.storage import local_scan
    from cutcheck.reference.storage.store import LOCAL

    _tree(tmp_path)
    monkeypatch.setattr(local_scan, "_AT", at)  # with fstatat, and by path where the platform has none
    seen: list[int] = []
    new = _flat(local_scan.scan_local(str(tmp_path), seen.append))
    assert new == _flat(LOCAL.scan(str(tmp_path)))
    assert sorted(p for _, paths, _, _ in new for p in paths) == sorted(
        str(tmp_path / r) for r in ("job/chk-1/_metadata", "job/chk-1/a", "job/chk-1/b", "job/shared/y",
                                    "job/shared/z", "job/shared/deep/x", "top"))
    assert sum(len(paths) for _, paths, _, _ in new) == 7 and seen[-1] == 7
    assert _flat(local_scan.scan_local(str(tmp_path / "top"))) == _flat(LOCAL.scan(str(tmp_path / "top")))


def test_the_local_listing_leaves_out_a_file_that_vanishes_before_its_stat(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from cutcheck.reference.storage import local_scan

    _tree(tmp_path)
    stat = os.stat

    def vanishing(path: Any, *a: Any, **k: Any) -> Any:
        if os.path.basename(str(path)) in ("a", "y", "z"):  # y and z: two in a row, the directory's last
            raise FileNotFoundError(path)
        return stat(path, *a, **k)

    monkeypatch.setattr(os, "stat", vanishing)
    listed = {d: paths for d, paths, _, _ in _flat(local_scan.scan_local(str(tmp_path)))}
    assert listed[str(tmp_path / "job/chk-1")] == [str(tmp_path / "job/chk-1/_metadata"), str(tmp_path / "job/chk-1/b")]
    assert str(tmp_path / "job/shared") not in listed  # every file of it vanished
    assert listed[str(tmp_path / "job/shared/deep")] == [str(tmp_path / "job/shared/deep/x")]


# ---------------------------------------------------------------------------- references resolved a run at a time
def _resolved_one_by_one(table: FileTable, refs: list[str]) -> tuple[list[str], list[int], set[str]]:
    """What each reference resolves to on its own: (canonical paths sorted, sizes or -1, the listed ones)."""
    canon = sorted({os.path.realpath(r) for r in refs})
    sizes = []
    for p in canon:
        size = table.size(p)
        if size is None and os.path.isfile(p):
            size = os.stat(p).st_size
        sizes.append(-1 if size is None else size)
    return canon, sizes, {p for p in canon if p in table}


@pytest.mark.parametrize("seed", range(12))
def test_references_resolved_a_run_at_a_time_are_those_resolved_one_by_one(tmp_path: Path, seed: int) -> None:
    from cutcheck.reference.storage.local_scan import scan_local
    from cutcheck.reference.storage.references import Canonical
    from cutcheck.reference.storage.store import LOCAL
    from cutcheck.reference.storage.traversal import Kept

    rng = random.Random(seed)
    base = tmp_path / "b"
    dirs = ["s", "s/sub", "s/sub/deep", "s.x", "t", "t/sub"]
    for d in dirs:
        (base / d).mkdir(parents=True)
    (base / "via").symlink_to(base / "s", target_is_directory=True)  # a symlinked directory: resolved
    (tmp_path / "outside").mkdir()
    refs = []
    for d in dirs:
        for k in range(rng.randrange(0, 6)):
            f = base / d / f"f{k}{rng.choice('ab')}"
            if rng.random() < 0.8:
                f.write_bytes(b"x" * rng.randrange(1, 9))
            if rng.random() < 0.7:  # referenced (listed, or missing when not written)
                refs.append(str(f))
    refs += [str(base / "missing-dir" / "f"), str(base / "via" / "f0a"), str(base / "s" / "nowhere")]
    (tmp_path / "outside" / "o").write_bytes(b"oo")  # exists but is not listed: unlisted, its size known
    refs.append(str(tmp_path / "outside" / "o"))
    if rng.random() < 0.5:
        (base / "t" / "ln").symlink_to(base / "s" / "sub" / "f0a")  # an unlisted link: resolved further
        refs.append(str(base / "t" / "ln"))
    table = FileTable()
    for d, files in scan_local(str(base)):
        table.add(d, files)
    want_paths, want_sizes, want_marked = _resolved_one_by_one(table, refs)
    for given in (sorted(set(refs)), refs[::-1]):  # as readers give them, and in any order
        marked_before = {p for _, f in table.directories() for p, m in zip(f.paths, f.marks, strict=True) if m}
        by_scope, sizes = Canonical(LOCAL, table).resolve({"shared": list(given)}, Kept(table))
        assert by_scope["shared"] == want_paths and list(sizes["shared"]) == want_sizes
        marked = {p for _, f in table.directories() for p, m in zip(f.paths, f.marks, strict=True) if m}
        assert marked == want_marked | marked_before and marked >= want_marked
        found = table.find(want_paths[0])
        if found is not None:  # the table's own string, not a copy
            assert by_scope["shared"][0] is found[0].paths[found[1]]


@pytest.mark.parametrize("layout", ["one job", "two jobs and a missing file"])
def test_the_streamed_shared_table_is_the_row_by_row_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         layout: str) -> None:
    from cutcheck.commands import storage as storage_cmd

    base = tmp_path / "ckpts"
    bench.build_local(str(base), 300)
    if layout != "one job":
        shutil.copytree(base / bench.JOB, base / "other-job")  # its _metadata name the first job's files
        listing = inspect(base, any_referenced_files)
        os.remove(next(iter(listing.shared)))  # referenced, now missing: its run goes file by file
    monkeypatch.setattr(storage_output, "RENDERED_ROWS", 5)
    fast = runner.invoke(app, ["storage", "ls", str(base)])
    print_rows = storage_output.print_rows
    monkeypatch.setattr(storage_cmd, "print_rows", lambda *a: print_rows(*a[:4]))  # rows joined one by one
    slow = runner.invoke(app, ["storage", "ls", str(base)])
    assert fast.exit_code == slow.exit_code == (0 if layout == "one job" else 1)
    assert fast.stdout == slow.stdout and fast.stdout.count("\n") > 250
    assert ("missing" in fast.stdout) == (layout != "one job")


def test_an_inspection_restores_the_garbage_collector_as_it_found_it(tmp_path: Path) -> None:
    import gc

    base = tmp_path / "ckpts"
    bench.build_local(str(base), 50)
    seen: list[bool] = []
    inspect(base, any_referenced_files, progress=lambda *a: seen.append(gc.isenabled()))
    assert seen and not any(seen) and gc.isenabled()  # paused while it ran, back afterwards
    with pytest.raises(StorageError):
        inspect(tmp_path / "nowhere", any_referenced_files)
    assert gc.isenabled()  # after a refusal too
    gc.disable()
    try:
        inspect(base, any_referenced_files)
        assert not gc.isenabled()  # a caller's own pause is left alone
    finally:
        gc.enable()


def test_orphan_reasons_worked_out_once_a_directory_are_each_files_own(tmp_path: Path) -> None:
    from cutcheck.reference.storage.guard import orphan_reason, orphan_reasons

    base = tmp_path / "ckpts"
    bench.build_local(str(base), 200)
    job = base / bench.JOB
    (job / "chk-9").mkdir()  # no _metadata: never completed
    strays = [job / "chk-1" / "_metadata.inprogress", job / "chk-1" / "loose", job / "chk-9" / "x",
              job / "chk-9" / "_metadata.inprogress", job / "shared" / "stray", job / "other"]
    for s in strays:
        s.write_bytes(b"s")
    listing = inspect(base, any_referenced_files)
    files = sorted({*listing.orphans, *map(str, strays), *list(listing.infos)[:50]})
    reasons = orphan_reasons(listing, files)
    assert reasons == {f: orphan_reason(listing, f) for f in files}
    assert len(set(reasons.values())) >= 5  # every kind of reason met


def test_listed_sizes_are_the_sizes_asked_one_by_one(tmp_path: Path) -> None:
    base = tmp_path / "ckpts"
    bench.build_local(str(base), 300)
    (base / bench.JOB / "shared" / "big").write_bytes(b"b" * 1000)
    listing = inspect(base, any_referenced_files)
    size = storage_output.sizer(listing, lambda li, p: li.store.stat(p).size if li.store.stat(p) else None)
    files = sorted([*list(listing.infos)[::7], str(base / "gone"), str(base / bench.JOB / "shared" / "gone"),
                    str(base / bench.JOB / "shared" / "big")])
    want = {f: sz for f in files if (sz := size(f)) is not None}
    assert storage_output.listed_sizes(listing, files, size) == want
    assert storage_output.listed_sizes(listing, files[::-1], size) == want  # unsorted: one by one
    assert want[str(base / bench.JOB / "shared" / "big")] == 1000 and str(base / "gone") not in want


def test_a_fresh_look_at_a_local_file_is_the_stores_stat(tmp_path: Path) -> None:
    from cutcheck.reference.storage.store import LOCAL
    from cutcheck.reference.storage.traversal import fresh_mtime

    (tmp_path / "f").write_bytes(b"f")
    os.utime(tmp_path / "f", (1000.5, 1000.5))
    (tmp_path / "d").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "f")
    for name in ("f", "d", "link", "gone"):
        info = LOCAL.stat(str(tmp_path / name))
        want = float("inf") if info is None else info.mtime
        assert fresh_mtime(LOCAL, str(tmp_path / name), FileTable()) == want
    assert fresh_mtime(LOCAL, str(tmp_path / "f"), FileTable()) == 1000.5
