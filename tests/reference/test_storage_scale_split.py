"""The local listing's large directories, looked at by two processes (reference.storage.local_scan: a forked
child takes the second half of the lstat calls): the same answer as one loop (what LocalStore.scan lists),
vanished files in either half left out, a failing child one StorageError sentence (exit 2 from the CLI),
Ctrl-C in this process taking the child with it, and no fork from a process with other threads. Also: the
storage commands import no engine (reference/__init__.py's names load on first use).
``SPLIT`` is lowered so that small directories split; no timings (benchmarks/bench_storage_scale.py)."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.model.errors import StorageError
from cutcheck.reference.storage import local_scan
from cutcheck.reference.storage.inspection import inspect
from cutcheck.reference.storage.store import LOCAL
from tests.reference.test_storage_cli import simulated


def _flat(scan: Any) -> list[tuple[str, list[str], list[int], list[float]]]:
    return [(d, f.paths, list(f.sizes), list(f.mtimes)) for d, f in scan]


def _forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids of the children local_scan forks from now on (SPLIT lowered to 2 names)."""
    pids: list[int] = []
    fork = os.fork

    def recording() -> int:
        pid = fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(local_scan, "SPLIT", 2)
    monkeypatch.setattr(os, "fork", recording)
    # Under pytest-xdist the worker has execnet's receiver thread besides the one running the test, so
    # local_scan would never split there; the child only lstat-s, writes to its pipe and _exits, which is
    # safe beside that thread. test_no_fork_from_a_process_with_other_threads keeps the real rule.
    monkeypatch.setattr(local_scan, "_other_threads", lambda: False)
    return pids


def _base(root: Path, files: int = 9) -> None:
    for i in range(files):
        (root / "job/shared" / f"f{i:02d}").parent.mkdir(parents=True, exist_ok=True)
        (root / "job/shared" / f"f{i:02d}").write_bytes(b"x" * i)
    (root / "job/chk-1").mkdir(parents=True)
    (root / "job/chk-1/_metadata").write_bytes(b"{}")
    (root / "job/shared/link").symlink_to(root / "job/shared/f00")  # neither listed nor followed


@pytest.mark.parametrize("at", [True, False])
def test_a_split_directory_lists_what_one_loop_lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: bool) -> None:
    _base(tmp_path)
    monkeypatch.setattr(local_scan, "_AT", at)
    pids = _forks(monkeypatch)
    split = _flat(local_scan.scan_local(str(tmp_path)))
    assert len(pids) == 1  # shared/ (9 files) split; chk-1 (1 file) did not
    assert split == _flat(LOCAL.scan(str(tmp_path)))
    shared = next(paths for d, paths, _, _ in split if d.endswith("shared"))
    assert shared == [str(tmp_path / "job/shared" / f"f{i:02d}") for i in range(9)]
    for pid in pids:
        with pytest.raises(ChildProcessError):  # reaped
            os.waitpid(pid, os.WNOHANG)


def test_files_that_vanish_in_either_half_are_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _base(tmp_path)
    stat = os.stat
    gone = {"f00", "f03", "f05", "f06", "f08"}  # the first half's first, the second half's first and last, a run

    def vanishing(path: Any, *a: Any, **k: Any) -> Any:
        if os.path.basename(str(path)) in gone:
            raise FileNotFoundError(path)
        return stat(path, *a, **k)

    monkeypatch.setattr(os, "stat", vanishing)  # the child is forked with it
    pids = _forks(monkeypatch)
    files = {d: (paths, sizes) for d, paths, sizes, _ in _flat(local_scan.scan_local(str(tmp_path)))}
    kept = [i for i in range(9) if f"f{i:02d}" not in gone]
    assert files[str(tmp_path / "job/shared")] == ([str(tmp_path / "job/shared" / f"f{i:02d}") for i in kept], kept)
    assert len(pids) == 1


def test_a_failing_child_is_one_storage_error_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, base = simulated(tmp_path)
    parent, stat_all = os.getpid(), local_scan._stat_all

    def dying_child(names: list[str], fd: int, prefix: str) -> Any:
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return stat_all(names, fd, prefix)

    monkeypatch.setattr(local_scan, "_stat_all", dying_child)
    pids = _forks(monkeypatch)
    with pytest.raises(StorageError, match=r"the helper process that looked at half of its \d+ files failed "
                                           r"\(killed by signal 9\); run the command again\.$"):
        inspect(base)
    assert pids
    result = CliRunner().invoke(app, ["storage", "ls", str(base)])
    assert result.exit_code == 2, result.output
    assert "killed by signal 9" in result.output and "Traceback" not in result.output


def test_an_interrupt_takes_the_child_with_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _base(tmp_path)
    parent, stat_all = os.getpid(), local_scan._stat_all
    release = os.pipe()  # never written: the child waits on it until it is killed

    def slow_child_interrupted_parent(names: list[str], fd: int, prefix: str) -> Any:
        if os.getpid() != parent:
            os.read(release[0], 1)
            return stat_all(names, fd, prefix)
        if prefix.endswith("/shared/"):  # Ctrl-C while this process looks at its half of the split directory
            raise KeyboardInterrupt
        return stat_all(names, fd, prefix)

    monkeypatch.setattr(local_scan, "_stat_all", slow_child_interrupted_parent)
    pids = _forks(monkeypatch)
    try:
        with pytest.raises(KeyboardInterrupt):
            list(local_scan.scan_local(str(tmp_path)))
    finally:
        os.close(release[0])
        os.close(release[1])
    assert len(pids) == 1
    with pytest.raises(ChildProcessError):  # killed and reaped, not left running
        os.waitpid(pids[0], os.WNOHANG)


def test_no_fork_from_a_process_with_other_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _base(tmp_path)
    real_rule = local_scan._other_threads
    pids = _forks(monkeypatch)
    monkeypatch.setattr(local_scan, "_other_threads", real_rule)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        listed = _flat(local_scan.scan_local(str(tmp_path)))
    finally:
        stop.set()
        other.join()
    assert pids == [] and listed == _flat(LOCAL.scan(str(tmp_path)))


def test_the_storage_commands_do_not_import_the_engine() -> None:
    """reference/__init__.py loads its public names on first use: `storage ls` pays for no engine, no pyarrow."""
    code = ("import sys\n"
            "from cutcheck.commands import storage\n"
            "from cutcheck.reference.storage import inspection, flink_metadata\n"
            "print(sorted(m for m in ('cutcheck.reference.simulate', 'cutcheck.reference.scenario', 'pyarrow')"
            " if m in sys.modules))\n"
            "import cutcheck.reference.simulate\n"  # the submodule first: the package's name stays the function
            "from cutcheck.reference import RunResult, Scenario, replay_command, simulate\n"
            "import cutcheck.reference as r\n"
            "print(simulate.__module__, Scenario.__module__, 'simulate' in dir(r))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["[]", "cutcheck.reference.simulate cutcheck.reference.scenario True"]
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = importlib.import_module("cutcheck.reference").nothing
