"""Where cutcheck may write: the one rule every command that writes an output follows.

cutcheck never overwrites or deletes what it did not write. An output directory (a run directory:
``simulate --out``, ``flink run --out``, ``logs synth``, ``fuzz --out``, ``verify --work-dir``) may
be replaced only when its ``run.json`` says cutcheck wrote it, the user passed ``--force``, *and*
everything in it is listed, unchanged, in the manifest cutcheck wrote when it finished the run
(``cutcheck-files.json``: every file with its size and modification time, every directory). A file
the user added or edited there (a notebook saved beside the logs) makes the directory refused, with
one sentence naming that file: replacing the directory would delete it. The working directory and
its parents, and a symbolic link (even to a run directory), are never replaced; a path that is a file is never taken for a directory. An output
file (``--json``, ``--png``) may be overwritten only when cutcheck wrote it (a JSON object with a
``written_by`` field, a PNG whose ``Software`` text chunk names cutcheck). Every check here runs
before any work starts, so a refusal costs nothing.

This is the only module of ``model`` that looks at the file system: every layer that writes run
directories (reference, spark_validation, flink_bridge) may import only ``model``, and the rule must
be the same for all of them. It reads, it never writes; ``staging_dir`` and ``replace_dir`` are the
two places that create and rename, and ``write_manifest`` (called by ``replace_dir``, and by runs
written in place when they finish) the one that records what a run directory holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from cutcheck.model.errors import CutcheckError

RUN_JSON = "run.json"
MANIFEST = "cutcheck-files.json"
WRITTEN_BY = "cutcheck"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class OutputRefused(CutcheckError):
    """An output path cutcheck may not write: it would overwrite or delete something it did not write."""


def mark(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with the field that says cutcheck wrote it (the first key, so people see it)."""
    return {"written_by": WRITTEN_BY, **{k: v for k, v in payload.items() if k != "written_by"}}


def is_cutcheck_run_dir(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a directory whose run.json says cutcheck wrote it."""
    try:
        with open(os.path.join(path, RUN_JSON), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested too deep
        return False
    return isinstance(data, dict) and data.get("written_by") == WRITTEN_BY


def _cutcheck_wrote_file(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
            if head == PNG_SIGNATURE:
                return _png_software(fh) == WRITTEN_BY
            data = json.loads(head + fh.read())
    except (OSError, ValueError, RecursionError, struct.error):
        return False
    return isinstance(data, dict) and data.get("written_by") == WRITTEN_BY


def _png_software(fh: BinaryIO) -> str | None:
    """The ``Software`` tEXt chunk of a PNG (matplotlib writes it from ``metadata={"Software": ...}``)."""
    while True:
        header = fh.read(8)
        if len(header) < 8:
            return None
        length, kind = struct.unpack(">I4s", header)
        body = fh.read(length)
        fh.read(4)  # CRC
        if kind == b"tEXt":
            name, _, value = body.partition(b"\0")
            if name == b"Software":
                return value.decode("latin-1")
        if kind == b"IEND":
            return None


def _protects_cwd(path: Path) -> bool:
    """True when replacing ``path`` would remove the working directory or one of its parents."""
    try:
        cwd = Path.cwd().resolve()
    except OSError:
        return False
    target = path.resolve()
    return target == cwd or target in cwd.parents


def _writable_parent(path: Path, option: str) -> None:
    parent = path.resolve().parent
    probe = parent
    while not probe.exists():  # the nearest existing ancestor decides: mkdir -p will start there
        probe = probe.parent
    if not probe.is_dir():
        raise OutputRefused(f"{option} {path}: {probe} is a file, not a directory; choose a path under a directory.")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise OutputRefused(f"{option} {path}: {probe} is not writable; choose a path you can write to.")


def write_manifest(root: str | os.PathLike[str]) -> None:
    """Record everything under ``root`` as cutcheck's: a file with its size and modification time, a
    directory as such. Called when a run directory is complete, while only cutcheck has written into it
    (a fresh staging sibling, or a directory a run created in place)."""
    root = Path(root)
    entries: dict[str, list[int] | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if rel == MANIFEST:
                continue
            st = os.lstat(full)
            entries[rel] = None if stat.S_ISDIR(st.st_mode) else [st.st_size, st.st_mtime_ns]
    tmp = root / f".{MANIFEST}.tmp-{os.getpid()}"
    try:
        tmp.write_text(json.dumps(mark({"entries": entries}), sort_keys=True) + "\n")
        os.replace(tmp, root / MANIFEST)
    finally:
        tmp.unlink(missing_ok=True)


def _not_cutchecks(root: Path) -> str | None:
    """Why ``root`` may hold something cutcheck did not write (the end of a sentence), or None."""
    try:
        with open(root / MANIFEST, encoding="utf-8") as fh:
            data = json.load(fh)
        entries = data["entries"] if isinstance(data, dict) and data.get("written_by") == WRITTEN_BY else None
    except (OSError, ValueError, RecursionError, KeyError):
        entries = None
    if not isinstance(entries, dict):
        return (f"it has no list of the files cutcheck wrote into it ({MANIFEST}; runs of older versions have "
                "none), so cutcheck cannot tell its files from yours and never replaces it; remove it yourself or "
                "name a new directory.")
    foreign_dir: str | None = None  # named only when no file is: a file is what the user would miss
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in (*dirnames, *sorted(filenames)):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if rel == MANIFEST:
                continue
            try:
                st = os.lstat(full)
            except FileNotFoundError:  # removed while we looked: nothing of anyone's is lost by it
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            if rel not in entries:
                if is_dir:
                    foreign_dir = foreign_dir or full
                    continue
                return (f"{full} was not written by cutcheck, and replacing the directory would delete it; move "
                        "it out of the directory, or name a new directory.")
            if entries[rel] != (None if is_dir else [st.st_size, st.st_mtime_ns]):
                return (f"{full} was changed after cutcheck wrote it, and replacing the directory would delete "
                        "the change; move it out of the directory, or name a new directory.")
    if foreign_dir is not None:
        return (f"{foreign_dir} was not made by cutcheck, and replacing the directory would delete it; move it "
                "out of the directory, or name a new directory.")
    return None


def check_output_dir(path: str | os.PathLike[str], *, force: bool, option: str = "--out") -> Path:
    """Refuse, before any work, an output directory cutcheck may not create or replace."""
    p = Path(path)
    if _protects_cwd(p):
        raise OutputRefused(f"{option} {path}: that is the working directory or one of its parents, which cutcheck "
                            "never replaces; name a new directory, for example {option} run-1.".replace("{option}", option))
    if p.is_symlink():  # replacing would put a directory where the user's link was (and not remove its target)
        raise OutputRefused(f"{option} {path}: a symbolic link (to {os.readlink(p)}), which cutcheck never replaces; "
                            "name the directory it points to, or a new directory.")
    if p.exists():
        if not p.is_dir():
            raise OutputRefused(f"{option} {path}: a file of that name exists; name a new directory.")
        if not is_cutcheck_run_dir(p):
            raise OutputRefused(f"{option} {path}: the directory exists and is not a run directory cutcheck wrote "
                                "(no run.json of cutcheck's), so it is never replaced; name a new directory.")
        foreign = _not_cutchecks(p)
        if foreign is not None:
            raise OutputRefused(f"{option} {path}: {foreign}")
        if not force:
            raise OutputRefused(f"{option} {path}: a run directory cutcheck wrote exists there; pass --force to "
                                "replace it, or name a new directory.")
    _writable_parent(p, option)
    return p


def check_output_file(path: str | os.PathLike[str] | None, *, option: str = "--json") -> Path | None:
    """Refuse, before any work, an output file cutcheck may not create or overwrite."""
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        raise OutputRefused(f"{option} {path}: that is a directory; name a file, for example {option} report.json.")
    if p.exists() and not _cutcheck_wrote_file(p):
        raise OutputRefused(f"{option} {path}: the file exists and cutcheck did not write it, so it is never "
                            "overwritten; name a new file or remove it yourself.")
    _writable_parent(p, option)
    return p


def staging_name(dest: Path) -> Path:
    """The temporary sibling a run directory is written into before it is renamed into place."""
    return dest.with_name(f".{dest.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def staging_dir(dest: str | os.PathLike[str]) -> Iterator[Path]:
    """A fresh temporary sibling of ``dest``, removed on any failure or interruption."""
    tmp = staging_name(Path(dest))
    tmp.parent.mkdir(parents=True, exist_ok=True)
    if tmp.exists():  # a leftover of this very pid: ours by construction
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def replace_dir(tmp: Path, dest: Path, *, force: bool) -> Path:
    """Move the finished ``tmp`` to ``dest``; an existing ``dest`` must pass :func:`check_output_dir` again."""
    dest = Path(dest)
    try:
        check_output_dir(dest, force=force)  # checked again: the directory may have changed during the run
    except OutputRefused:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
    try:
        write_manifest(tmp)
        if dest.exists():
            dest.rename(old)
        tmp.rename(dest)
    except BaseException:
        if old.exists() and not dest.exists():
            old.rename(dest)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old.exists():
        shutil.rmtree(old)
    return dest
