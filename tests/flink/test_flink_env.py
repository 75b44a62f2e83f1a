"""Preparing apache-flink releases (cutcheck flink env) and the per-release tables, without the network
and without Flink: a release is a fake package index made here (a directory of two wheels built in the
test), and Java is what the test says it is."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from cutcheck.flink_bridge import launch, releases, versions
from cutcheck.flink_bridge.rest import FlinkCheckpoint, JobStats
from cutcheck.flink_bridge.runner import FlinkRun, JobRun, RunOptions
from cutcheck.flink_bridge.worker import decode_run, encode_run
from cutcheck.model.errors import CutcheckError, EnvironmentProblem
from cutcheck.model.graph import JobGraph
from tests.flink.helpers import EXAMPLES, cli_error, invoke

FAKE = "0.99.1"  # a release line the test adds to the table: its wheels come from the test's directory


def _error_line(result: Any) -> str:
    return cli_error(result)[1]


def _wheel(directory: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A minimal pure-Python wheel pip installs offline."""
    dist = f"{name.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    content = {**files,
               f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
               f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: cutcheck-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for path, text in content.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    target = directory / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w") as zf:
        for path, text in content.items():
            zf.writestr(path, text)
        zf.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return target


@pytest.fixture()
def fake_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of our own, Java 17, the fake release line in the table, and a wheel directory holding it."""
    monkeypatch.setenv("CUTCHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(releases, "java_major", lambda: (17, "/test/java"))
    line = versions.ReleaseLine((0, 99), (1,), ((3, 11), (3, 13)), (11, 17), "test")
    monkeypatch.setattr(versions, "RELEASES", (*versions.RELEASES, line))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "apache-flink", FAKE, {"pyflink/__init__.py": "", "pyflink/version.py": f"__version__ = '{FAKE}'\n"})
    _wheel(wheels, "networkx", "3.9.9", {"networkx/__init__.py": ""})
    return wheels


def test_prepare_list_and_remove_from_a_local_index(fake_index: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    made = invoke("flink", "env", FAKE, "--find-links", str(fake_index))
    assert made.exit_code == 0, made.output
    env = releases.env_dir(FAKE)
    assert env == tmp_path / "cache" / "flink" / FAKE
    assert json.loads((env / releases.MARKER).read_text())["version"] == FAKE
    got = subprocess.run([str(env / "bin" / "python"), "-c", "from pyflink.version import __version__; print(__version__)"],
                         capture_output=True, text=True, check=True)
    assert got.stdout.strip() == FAKE
    # the console scripts point at the final place, not the temporary sibling they were made in
    pip = (env / "bin" / "pip").read_text().splitlines()[0]
    assert pip.startswith(f"#!{env}/bin/python"), pip
    assert [p.name for p in (tmp_path / "cache" / "flink").iterdir() if p.name.startswith(f".{FAKE}.tmp")] == []
    again = invoke("flink", "env", FAKE, "--find-links", str(fake_index))
    assert again.exit_code == 0 and "already prepared" in again.output
    listed = invoke("flink", "env", "--list")
    assert listed.exit_code == 0 and FAKE in listed.output
    [entry] = releases.list_prepared()
    assert entry.version == FAKE and entry.size_bytes > 1_000_000  # a virtualenv with pip in it
    assert releases.require_prepared(FAKE).interpreter == env / "bin" / "python"
    # a release whose worker cannot run a job (this one has no JVM side at all) is one sentence, and no run
    # directory; this process needs no PyFlink for it (an import of it fails here)
    monkeypatch.setitem(sys.modules, "pyflink", None)
    broken = _error_line(invoke("flink", "run", str(EXAMPLES / "keyed-pipeline.json"), "--out", str(tmp_path / "r"),
                                 "--flink", FAKE))
    assert f"the apache-flink {FAKE} worker" in broken and "its log is" in broken, broken
    assert not (tmp_path / "r").exists()
    launch.close_all()
    gone = invoke("flink", "env", "--remove", FAKE)
    assert gone.exit_code == 0, gone.output
    assert not env.exists() and releases.list_prepared() == []
    assert "not prepared" in _error_line(invoke("flink", "env", "--remove", FAKE))


def test_a_failed_install_leaves_nothing_but_its_log(fake_index: Path) -> None:
    (fake_index / "networkx-3.9.9-py3-none-any.whl").unlink()  # the worker's requirement is missing from the index
    line = _error_line(invoke("flink", "env", FAKE, "--find-links", str(fake_index)))
    assert "pip could not install the release" in line and "networkx" in line
    base = releases.releases_dir()
    assert sorted(p.name for p in base.iterdir() if not p.name.endswith(".lock")) == [f"{FAKE}.pip.log"]


def test_ctrl_c_during_the_install_removes_the_half_made_environment(fake_index: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*_args: Any, **_kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(releases, "_pip", interrupted)
    with pytest.raises(KeyboardInterrupt):
        releases.prepare(FAKE, find_links=str(fake_index))
    assert [p.name for p in releases.releases_dir().iterdir() if not p.name.endswith((".lock", ".log"))] == []


def test_remove_never_touches_a_directory_cutcheck_did_not_prepare(fake_index: Path) -> None:
    mine = releases.env_dir(FAKE)
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    assert "not prepared" in _error_line(invoke("flink", "env", "--remove", FAKE))
    assert "not a release cutcheck prepared" in _error_line(invoke("flink", "env", FAKE, "--find-links", str(fake_index)))
    assert (mine / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(("args", "fragment"), [
    (["9.9.9"], "not a release cutcheck knows"),
    (["2.1"], "not an apache-flink release number"),
    (["1.18.1"], "Python 3.8 to 3.10 only"),
    (["1.15.4"], "Python 3.6 to 3.8 only"),
    ([], "one of VERSION"),
    (["2.1.0", "--list"], "not VERSION and --list"),
])
def test_refusals_before_any_download(args: list[str], fragment: str, monkeypatch: pytest.MonkeyPatch,
                                      tmp_path: Path) -> None:
    monkeypatch.setenv("CUTCHECK_CACHE", str(tmp_path / "cache"))
    assert fragment in _error_line(invoke("flink", "env", *args))
    assert not (tmp_path / "cache" / "flink").exists() or not any((tmp_path / "cache" / "flink").iterdir())


def test_python_and_java_checks_name_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    line = versions.release_line("2.1.0")
    with pytest.raises(EnvironmentProblem, match=r"needs Python 3.11 to 3.12 here .* --python python3.12"):
        releases.check_python("2.1.0", line, (3, 13, 0), "/usr/bin/python3.13")
    releases.check_python("2.1.0", line, (3, 12, 1), "/usr/bin/python3.12")
    with pytest.raises(EnvironmentProblem, match=r"needs Python 3.11 here"):  # 1.20 has no 3.12 wheels
        releases.check_python("1.20.3", versions.release_line("1.20.3"), (3, 12, 1), "/usr/bin/python3.12")
    monkeypatch.setattr(releases, "java_major", lambda: (8, "/opt/jdk8/bin/java"))
    with pytest.raises(EnvironmentProblem, match=r"runs on Java 11, 17, 21, and /opt/jdk8/bin/java is Java 8"):
        releases.check_java("2.1.0", line)
    releases.check_java("1.20.3", versions.release_line("1.20.3"))  # 1.x still runs on Java 8
    monkeypatch.setattr(releases, "java_major", lambda: None)
    with pytest.raises(EnvironmentProblem, match="needs Java"):
        releases.check_java("2.1.0", line)


def test_cache_directory_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CUTCHECK_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert releases.env_dir("2.1.0") == tmp_path / "xdg" / "cutcheck" / "flink" / "2.1.0"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert releases.cache_root() == tmp_path / "home" / ".cache" / "cutcheck"
    monkeypatch.setenv("CUTCHECK_CACHE", str(tmp_path / "mine"))
    assert releases.cache_root() == tmp_path / "mine"


@pytest.mark.parametrize("command", ["run", "compare", "conform"])
def test_flink_option_needs_a_prepared_release(command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CUTCHECK_CACHE", str(tmp_path / "cache"))
    args = {"run": [str(EXAMPLES / "keyed-pipeline.json"), "--out", str(tmp_path / "r")],
            "compare": [str(EXAMPLES / "keyed-pipeline.json")], "conform": ["--out", str(tmp_path / "c")]}[command]
    line = _error_line(invoke("flink", command, *args, "--flink", "2.1.0"))
    assert "apache-flink 2.1.0 is not prepared" in line and "cutcheck flink env 2.1.0" in line
    assert "not a release" in _error_line(invoke("flink", command, *args, "--flink", "2.1.7"))
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()


def test_a_run_survives_the_trip_through_json() -> None:
    graph = JobGraph.from_json(EXAMPLES / "keyed-pipeline.json")
    rescaled = graph.with_parallelism({"count": 3})
    cp = FlinkCheckpoint("j0", 1, "COMPLETED", "UNALIGNED_CHECKPOINT", False, 1000, 1100, 100, 10, 20, 30, 40,
                         alignment_ms=5, unaligned_subtasks=2, subtasks=7, external_path="file:///x/chk-1")
    stats = JobStats("j0", "FAILED", 900, 2000, [cp], [{"timestamp": 1500, "exceptionName": "boom"}],
                     {"id": 1, "external_path": "file:///x/chk-1"}, {"v1": "count"})
    run = FlinkRun(graph, RunOptions(fail_after=1, rescale={"count": 3}, release="2.1.0"),
                   [JobRun(0, graph, "j0", 900, None, stats), JobRun(1, rescaled, "j1", 2100, "file:///x/chk-1", None)],
                   900, 3000, "/w", "/w/checkpoints", {"sink": "/w/sink"}, "count", "count", 1200, "count[0]", 1500,
                   savepoint="file:///w/savepoints/sp-1", events=[(900, "submit", "job j0")], flink_version="2.1.0")
    back = decode_run(json.loads(json.dumps(encode_run(run))))
    assert back.graph.to_json() == graph.to_json() and back.jobs[1].graph.to_json() == rescaled.to_json()
    assert dataclasses.replace(back, graph=graph, jobs=[]) == dataclasses.replace(run, jobs=[])
    assert back.jobs[0].stats == stats and back.jobs[1].stats is None
    assert back.events == [(900, "submit", "job j0")] and back.savepoint == "file:///w/savepoints/sp-1"


def test_unknown_versions_are_refused_in_one_sentence() -> None:
    with pytest.raises(CutcheckError, match="not a release cutcheck knows") as info:
        versions.release_line("2.4.0")
    assert "2.3.0" in str(info.value) and "\n" not in str(info.value)
    assert os.path.basename(str(releases.env_dir("2.3.0"))) == "2.3.0"


def test_a_conform_replay_names_the_release(tmp_path: Path) -> None:
    from cutcheck.flink_bridge.conform import Case

    graph = json.loads((EXAMPLES / "keyed-pipeline.json").read_text())
    case = Case(3, graph, RunOptions(fail_after=1, release="2.1.0"))
    assert case.replay(tmp_path / "g.json").endswith("--flink 2.1.0")
    assert "--flink" not in Case(3, graph, RunOptions(fail_after=1)).replay(tmp_path / "g.json")
