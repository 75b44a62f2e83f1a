"""Helpers of the held-out adversarial storage cases (tests/reference/test_storage_adversarial*.py): Flink-format
checkpoints laid out by hand on a local disk, and the one check every case makes: hash every file, run the
command, nothing any _metadata references (or the user named) moved, restore every batch, hash again. (No tests.)"""

from __future__ import annotations

import hashlib
import os
import struct
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.reference.storage import flink_metadata as mr
from tests.reference.s3_server import _file, _utf, flink_metadata

runner = CliRunner()
JOB_A = "a" * 32
JOB_B = "b" * 32
QUARANTINE = ".cutcheck-quarantine"


def storage(*args: str) -> Any:
    return runner.invoke(app, ["storage", *args])


def tree(root: Path) -> dict[str, str]:
    """sha256 of every regular file under root (the quarantine included); symbolic links are not followed."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            if not os.path.islink(p):
                out[p] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


def outside_quarantine(hashes: dict[str, str]) -> dict[str, str]:
    return {p: h for p, h in hashes.items() if f"{os.sep}{QUARANTINE}{os.sep}" not in p}


def age_tree(root: Path, seconds: float = 3 * 86400) -> None:
    t = time.time() - seconds
    for d, _, names in os.walk(root):
        for f in names:
            os.utime(os.path.join(d, f), (t, t), follow_symlinks=False)


def write(path: Path, text: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text is not None else f"bytes of {path.name}")
    return path


def checkpoint(job_dir: Path, n: int, shared: Iterable[str | Path], private: Iterable[str | Path] = (),
               meta: str | Path | None = None, create: bool = True, chk_dir: Path | None = None) -> Path:
    """``job_dir/chk-n/_metadata`` (Flink's format) naming ``shared``, ``private`` and a RocksDB metadata file
    (default: a file in the chk-N directory); every plain path named is created unless ``create`` is False."""
    d = chk_dir or job_dir / f"chk-{n}"
    meta_file = meta if meta is not None else d / "rocksdb-meta"
    shared, private = [str(s) for s in shared], [str(p) for p in private]
    if create:
        for p in [str(meta_file), *shared, *private]:
            if p.startswith("/") and not os.path.exists(p):
                write(Path(p))
    write(d / "_metadata")
    (d / "_metadata").write_bytes(flink_metadata(n, [(str(meta_file), shared, private)]))
    return d


def restore_all(base: str | Path, *extra: str) -> list[Any]:
    """Every batch back, newest first; the results of each restore."""
    done = []
    while True:
        back = storage("restore-quarantine", str(base), *extra)
        if back.exit_code != 0:
            assert "holds no .cutcheck-quarantine" in back.stderr or "no batch" in back.stderr \
                or "no such directory" in back.stderr, back.stdout + back.stderr
            return done
        done.append(back)


def assert_kept(before: dict[str, str], after: dict[str, str], kept: Iterable[str | Path]) -> None:
    """Every file in ``kept`` is where it was, with the same bytes."""
    now = outside_quarantine(after)
    for p in map(str, kept):
        assert now.get(p) == before[p], f"{p} was moved or changed"


def moved(before: dict[str, str], after: dict[str, str]) -> list[str]:
    now = outside_quarantine(after)
    return sorted(p for p in outside_quarantine(before) if p not in now)


def relative_handles(data: bytes, names: Iterable[str]) -> bytes:
    """A ``flink_metadata`` whose file handles for ``names`` are Flink's relative ones (a savepoint's, resolved
    against the directory of the _metadata) instead of plain file handles."""
    for n in names:
        data = data.replace(_file(n), bytes([mr.RELATIVE]) + _utf(n) + struct.pack(">q", 3))
    return data
