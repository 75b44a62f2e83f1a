"""storage ls/orphans read Flink's _metadata in pure Python by default; --reader flink is the cross-check.

No JVM here: the real Flink files are the ones stored under tests/flink/data (their state files are
not, so every such checkpoint is NOT RESTORABLE, which is the honest answer for a lone _metadata)."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

from typer.testing import CliRunner

from cutcheck.cli import app
from tests.reference.test_storage_cli import assert_user_error

runner = CliRunner()
DATA = Path(__file__).resolve().parents[1] / "flink" / "data" / "metadata"
JOB = "a" * 32


def _flink_checkpoint(base: Path) -> Path:
    source = next((DATA / "rocksdb" / "checkpoints").glob("*/chk-*"))
    target = base / JOB / "chk-3"
    target.mkdir(parents=True)
    shutil.copy(source / "_metadata", target / "_metadata")
    return target


def test_a_real_flink_checkpoint_is_read_without_pyflink_or_java(tmp_path: Path) -> None:
    _flink_checkpoint(tmp_path / "base")
    probe = textwrap.dedent(f"""
        import sys
        sys.modules["pyflink"] = None  # any import of PyFlink (and so of Java) fails
        sys.modules["py4j"] = None
        sys.argv = ["cutcheck", "storage", "ls", {str(tmp_path / "base")!r}]
        from cutcheck.cli import main
        main()
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 1, done.stdout + done.stderr  # its state files are not here
    assert "NOT RESTORABLE" in done.stdout and "chk-3" in done.stdout
    assert "Traceback" not in done.stderr


def test_an_unknown_format_version_is_named_and_blocks_deletion(tmp_path: Path) -> None:
    chk = tmp_path / "base" / JOB / "chk-1"
    chk.mkdir(parents=True)
    (chk / "_metadata").write_bytes(struct.pack(">II", 0x4960672D, 99) + bytes(20))
    stray = tmp_path / "base" / JOB / "shared" / "stray"
    stray.parent.mkdir()
    stray.write_text("x")
    listed = runner.invoke(app, ["storage", "ls", str(tmp_path / "base")])
    assert listed.exit_code == 1
    assert "UNREADABLE" in listed.stdout and "version 99" in listed.stdout
    deleted = runner.invoke(app, ["storage", "orphans", str(tmp_path / "base"), "--delete", "--min-age", "0"])
    assert_user_error(deleted, "version 99", "nothing is deleted")
    assert stray.read_text() == "x"


def test_an_unknown_reader_is_one_sentence(tmp_path: Path) -> None:
    _flink_checkpoint(tmp_path / "base")
    assert_user_error(runner.invoke(app, ["storage", "ls", str(tmp_path / "base"), "--reader", "jvm"]), "--reader")
