"""Prepared apache-flink releases: one isolated virtualenv per release in the user's cache directory.

``cutcheck flink env VERSION`` makes ``<cache>/flink/<VERSION>/`` once: a virtualenv with
``apache-flink==VERSION`` and what cutcheck's worker imports besides (networkx), from the package
index (or ``--find-links DIR`` alone). Before anything is downloaded it checks that the release runs
here (flink_bridge.versions: the Python versions the release publishes wheels for, the Java versions it
supports). The environment is built in a temporary sibling and renamed into place; any failure or
Ctrl-C removes the sibling. A ``cutcheck-release.json`` inside marks it as cutcheck's: ``--remove``
deletes nothing else.

The cache is ``$CUTCHECK_CACHE`` if set, else ``$XDG_CACHE_HOME/cutcheck``, else ``~/.cache/cutcheck``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cutcheck.flink_bridge.versions import CUTCHECK_PYTHON, ReleaseLine, release_line, runnable_pythons
from cutcheck.model.errors import CutcheckError, EnvironmentProblem

MARKER = "cutcheck-release.json"
WORKER_REQUIREMENTS = ("networkx>=3.2",)  # what cutcheck's worker imports that apache-flink does not bring
PIP_TIMEOUT_S = 1800


def cache_root() -> Path:
    if os.environ.get("CUTCHECK_CACHE"):
        return Path(os.environ["CUTCHECK_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "cutcheck"


def releases_dir() -> Path:
    return cache_root() / "flink"


def env_dir(version: str) -> Path:
    return releases_dir() / version


def interpreter(env: Path) -> Path:
    return env / "bin" / "python"


@dataclass(frozen=True, slots=True)
class Prepared:
    """A release environment on disk, as its marker describes it."""

    version: str
    path: Path
    python: str  # "3.11.7"
    created: str
    size_bytes: int

    @property
    def interpreter(self) -> Path:
        return interpreter(self.path)


def python_version(python: str) -> tuple[tuple[int, int, int], str]:
    """(version, absolute path) of an interpreter named on PATH or by path; EnvironmentProblem if it does not run."""
    found = shutil.which(python) or (python if os.path.isfile(python) else None)
    if found is None:
        raise EnvironmentProblem(f"--python {python}: no such interpreter on PATH; give a path to a python executable.")
    try:
        proc = subprocess.run([found, "-c", "import sys; print(*sys.version_info[:3])"], capture_output=True,
                              text=True, timeout=60)
        major, minor, micro = (int(x) for x in proc.stdout.split())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        raise EnvironmentProblem(f"--python {python}: {found} does not run as a Python interpreter.") from None
    return (major, minor, micro), os.path.abspath(found)


def java_major() -> tuple[int, str] | None:
    """(major, path) of the java Flink would start (JAVA_HOME first, then PATH); None when there is none."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if java is None or not os.access(java, os.X_OK):
        return None
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', proc.stderr + proc.stdout)
    if m is None:
        return None
    major = int(m[1])
    return (int(m[2]) if major == 1 and m[2] else major), java


def check_java(version: str, line: ReleaseLine) -> None:
    javas = ", ".join(str(j) for j in line.java)
    found = java_major()
    if found is None:
        raise EnvironmentProblem(f"apache-flink {version} needs Java ({javas}) and none runs here; install a JDK "
                                 "and put java on PATH or set JAVA_HOME.")
    major, path = found
    if major not in line.java:
        raise EnvironmentProblem(f"apache-flink {version} runs on Java {javas}, and {path} is Java {major}; install "
                                 f"one of those and point JAVA_HOME at it ({line.java_source}).")


def check_python(version: str, line: ReleaseLine, py: tuple[int, int, int], path: str) -> None:
    both = runnable_pythons(line)
    have = f"{py[0]}.{py[1]}"
    if both is None:
        raise EnvironmentProblem(
            f"apache-flink {version} publishes wheels for Python {line.python_range()} only and cutcheck's worker needs "
            f"Python {CUTCHECK_PYTHON[0]}.{CUTCHECK_PYTHON[1]} or newer, so it cannot run under cutcheck; "
            "releases from 1.19 on can.")
    if not both[0] <= py[:2] <= both[1]:
        lo, hi = (f"{a}.{b}" for a, b in both)
        span = lo if lo == hi else f"{lo} to {hi}"
        raise EnvironmentProblem(f"apache-flink {version} needs Python {span} here (its wheels: {line.python_range()}; "
                                 f"cutcheck: {CUTCHECK_PYTHON[0]}.{CUTCHECK_PYTHON[1]}+), and {path} is Python {have}; "
                                 f"pass --python with such an interpreter (e.g. --python python{hi}).")


def check_runnable(version: str, python: str | None = None) -> tuple[ReleaseLine, tuple[int, int, int], str]:
    """Everything that can be checked before a download: the release exists, its Python and Java run here."""
    line = release_line(version)
    py, path = python_version(python) if python else (tuple(sys.version_info[:3]), sys.executable)
    check_python(version, line, py, path)  # type: ignore[arg-type]
    check_java(version, line)
    return line, py, path  # type: ignore[return-value]


def read_marker(path: Path) -> dict[str, str] | None:
    try:
        data = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("written_by") == "cutcheck" else None


def _size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def prepared(version: str) -> Prepared | None:
    path = env_dir(version)
    marker = read_marker(path)
    if marker is None or marker.get("version") != version or not interpreter(path).exists():
        return None
    return Prepared(version, path, str(marker.get("python", "?")), str(marker.get("created", "?")), _size(path))


def list_prepared() -> list[Prepared]:
    base = releases_dir()
    names = sorted(os.listdir(base)) if base.is_dir() else []
    found = [prepared(n) for n in names if not n.startswith(".")]
    return [p for p in found if p is not None]


def require_prepared(version: str) -> Prepared:
    """The prepared environment of ``version``; one sentence naming the command that prepares it otherwise."""
    line = release_line(version)
    env = prepared(version)
    if env is None:
        raise EnvironmentProblem(f"apache-flink {version} is not prepared in {releases_dir()}; run "
                                 f"cutcheck flink env {version} first (a few hundred MB, a minute or two).")
    check_java(version, line)
    return env


@contextlib.contextmanager
def _release_lock(version: str) -> Iterator[None]:
    """One preparation of a release at a time (two shells may ask at once)."""
    releases_dir().mkdir(parents=True, exist_ok=True)
    with open(releases_dir() / f".{version}.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pip(python: Path, args: list[str], log: Path, alone: bool) -> None:
    """pip in the new environment; ``alone``: with no pip configuration (its indexes and find-links), so that
    --find-links DIR is the only source."""
    env = {k: v for k, v in os.environ.items() if not (alone and k.startswith("PIP_"))}
    if alone:
        env["PIP_CONFIG_FILE"] = os.devnull
    with open(log, "a") as out:
        out.write(f"$ {python} -m pip {' '.join(args)}\n")
        out.flush()
        proc = subprocess.run([str(python), "-m", "pip", *args], stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=PIP_TIMEOUT_S, env=env)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in log.read_text().splitlines() if ln.startswith("ERROR")]
        why = lines[-1] if lines else f"pip exited {proc.returncode}"
        raise EnvironmentProblem(f"pip could not install the release ({why[:300]}); the full log is {log}.")


def _fix_shebangs(tmp: Path, final: Path) -> None:
    """The env's console scripts (pip, ...) name their interpreter by absolute path: point them at the final place."""
    old, new = f"#!{tmp}/".encode(), f"#!{final}/".encode()
    for script in (tmp / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            data = script.read_bytes()
            if data.startswith(old):
                script.write_bytes(new + data[len(old):])


def prepare(version: str, *, python: str | None = None, find_links: str | None = None,
            progress: Callable[[str], None] | None = None) -> tuple[Prepared, bool]:
    """Make ``version``'s environment unless it exists; return it and whether it was made now.

    ``find_links``: install from that directory alone (no index), as an offline machine must."""
    say = progress or (lambda _msg: None)
    line, py, base = check_runnable(version, python)
    with _release_lock(version):
        done = prepared(version)
        if done is not None:
            return done, False
        final = env_dir(version)
        if final.exists() or final.is_symlink():
            raise CutcheckError(f"{final} exists and is not a release cutcheck prepared; move it away and run "
                                "the command again.")
        tmp = releases_dir() / f".{version}.tmp-{os.getpid()}"
        log = releases_dir() / f"{version}.pip.log"
        log.unlink(missing_ok=True)
        try:
            started = time.monotonic()
            say(f"creating a virtualenv with {base} (Python {'.'.join(map(str, py))})")
            proc = subprocess.run([base, "-m", "venv", str(tmp)], capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                raise EnvironmentProblem(f"{base} -m venv failed ({(proc.stderr.strip().splitlines() or ['?'])[-1][:200]}); "
                                         "install the venv module (e.g. apt-get install python3-venv).")
            source = ["--no-index", "--find-links", find_links] if find_links else []
            say(f"installing apache-flink=={version} ({'from ' + find_links if find_links else 'from the package index'}; "
                f"a few hundred MB; log: {log})")
            _pip(interpreter(tmp), ["install", "--disable-pip-version-check", *source, f"apache-flink=={version}",
                                    *WORKER_REQUIREMENTS], log, alone=find_links is not None)
            check = subprocess.run([str(interpreter(tmp)), "-c", "from pyflink.version import __version__ as v; print(v)"],
                                   capture_output=True, text=True, timeout=300)
            if check.returncode != 0 or check.stdout.strip() != version:
                got = check.stdout.strip() or (check.stderr.strip().splitlines() or ["nothing"])[-1]
                raise EnvironmentProblem(f"the new environment imports PyFlink {got[:200]}, not {version}; "
                                         f"see {log}.")
            _fix_shebangs(tmp, final)
            marker = {"written_by": "cutcheck", "version": version, "python": ".".join(map(str, py)),
                      "base_python": base, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      "seconds": round(time.monotonic() - started, 1), "line": f"{line.line[0]}.{line.line[1]}"}
            (tmp / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    log.unlink(missing_ok=True)
    made = prepared(version)
    assert made is not None  # just renamed into place with its marker
    return made, True


def remove(version: str) -> Prepared:
    """Delete a prepared release (only a directory with cutcheck's marker); return what was removed."""
    release_line(version)
    with _release_lock(version):
        env = prepared(version)
        if env is None:
            raise CutcheckError(f"apache-flink {version} is not prepared in {releases_dir()}; nothing to remove "
                                "(cutcheck flink env --list shows what is).")
        doomed = releases_dir() / f".{version}.removing-{os.getpid()}"
        os.rename(env.path, doomed)  # gone at once for every reader; the deletion may take a while
        shutil.rmtree(doomed, ignore_errors=True)
    return env
