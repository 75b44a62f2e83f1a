"""Where cutcheck may write: the one rule every command that writes an output follows.

cutcheck never overwrites or deletes what it did not write. An output directory (a run directory:
``simulate --out``, ``flink run --out``, ``logs synth``, ``fuzz --out``) may be replaced only when
its ``run.json`` says cutcheck wrote it *and* the user passed ``--force``; the working directory and
its parents are never replaced; a path that is a file is never taken for a directory. An output
file (``--json``, ``--png``) may be overwritten only when cutcheck wrote it (a JSON object with a
``written_by`` field, a PNG whose ``Software`` text chunk names cutcheck). Every check here runs
before any work starts, so a refusal costs nothing.

This is the only module of ``model`` that looks at the file system: every layer that writes run
directories (reference, spark_validation, flink_bridge) may import only ``model``, and the rule must
be the same for all of them. It reads, it never writes; ``staging_dir`` and ``replace_dir`` are the
two places that create and rename.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cutcheck.model.errors import CutcheckError

RUN_JSON = "run.json"
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
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("written_by") == WRITTEN_BY


def _cutcheck_wrote_file(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
            if head == PNG_SIGNATURE:
                return _png_software(fh) == WRITTEN_BY
            data = json.loads(head + fh.read())
    except (OSError, ValueError, struct.error):
        return False
    return isinstance(data, dict) and data.get("written_by") == WRITTEN_BY


def _png_software(fh: Any) -> str | None:
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


def check_output_dir(path: str | os.PathLike[str], *, force: bool, option: str = "--out") -> Path:
    """Refuse, before any work, an output directory cutcheck may not create or replace."""
    p = Path(path)
    if _protects_cwd(p):
        raise OutputRefused(f"{option} {path}: that is the working directory or one of its parents, which cutcheck "
                            "never replaces; name a new directory, for example {option} run-1.".replace("{option}", option))
    if p.exists() or p.is_symlink():
        if not p.is_dir():
            raise OutputRefused(f"{option} {path}: a file of that name exists; name a new directory.")
        if not is_cutcheck_run_dir(p):
            raise OutputRefused(f"{option} {path}: the directory exists and is not a run directory cutcheck wrote "
                                "(no run.json of cutcheck's), so it is never replaced; name a new directory.")
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
