"""Running a job in a prepared apache-flink release, from a process that never imports PyFlink.

``run_in_release(version, graph, options, work)`` is ``runner.run`` in the release's environment: it
starts (or reuses) a worker process there (flink_bridge.worker), sends it the graph and the options, relays
its progress, and turns its answer back into a FlinkRun. A CutcheckError inside the worker is raised here
as the same class with the same sentence. Workers are kept per release for the life of this process,
so a campaign of many runs starts each release's JVM once; they are closed at exit.

Ctrl-C stops the worker (SIGINT: its MiniCluster closes), waits for it, then kills its process group
(the worker and the JVM it started), and raises KeyboardInterrupt.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cutcheck.flink_bridge import env as flink_env
from cutcheck.flink_bridge.releases import require_prepared
from cutcheck.flink_bridge.runner import FlinkRun, RunOptions, prepare
from cutcheck.flink_bridge.worker import decode_run, encode_options
from cutcheck.model import errors
from cutcheck.model.graph import JobGraph

STOP_GRACE_S = 30.0
# Variables of a PyFlink already running in this process, which would point the worker's PyFlink at it.
_FOREIGN = ("FLINK_HOME", "FLINK_CONF_DIR", "FLINK_LIB_DIR", "FLINK_OPT_DIR", "FLINK_PLUGINS_DIR", "PYTHONHOME",
            "PYTHONSTARTUP", "PYFLINK_GATEWAY_PORT", "_PYFLINK_GATEWAY_PORT")


@dataclass(slots=True)
class Worker:
    """One worker process in one release's environment."""

    python: str
    label: str  # "apache-flink 2.1.0"
    expect: str | None = None  # the PyFlink version the environment must import
    proc: subprocess.Popen[str] | None = None
    log: str = ""
    flink: str = ""  # the version the worker reports
    started_s: float = 0.0  # how long the worker took to be ready (Python, cutcheck and PyFlink imports)
    served: int = 0  # requests answered (runs and calls)
    _lines: Any = field(default=None, repr=False)

    def start(self) -> None:
        log_dir = os.environ.get("FLINK_LOG_DIR") or os.path.join(tempfile.gettempdir(), "cutcheck-flink-logs")
        os.makedirs(log_dir, exist_ok=True)
        fd, self.log = tempfile.mkstemp(prefix="cutcheck-worker-", suffix=".log", dir=log_dir)
        child_env = {k: v for k, v in os.environ.items() if k not in _FOREIGN}
        child_env.update({"PYTHONPATH": flink_env.package_root(), "PYTHONUNBUFFERED": "1", "FLINK_LOG_DIR": log_dir})
        t0 = time.monotonic()
        with os.fdopen(fd, "w") as err:
            self.proc = subprocess.Popen([self.python, "-m", "cutcheck.flink_bridge.worker", "--serve"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                         env=child_env, start_new_session=True)
        self._lines = iter(self.proc.stdout)  # type: ignore[arg-type]
        try:
            ready = self._next()
        except errors.EnvironmentProblem:
            self.stop()
            raise errors.EnvironmentProblem(f"the {self.label} worker did not start ({_tail(self.log)}); "
                                            f"its log is {self.log}.") from None
        if "ready" not in ready:
            self.stop()
            raise errors.EnvironmentProblem(f"the {self.label} worker did not start ({_first(ready)}); see {self.log}.")
        self.flink = str(ready["ready"]["flink"])
        self.started_s = time.monotonic() - t0
        if self.expect and self.flink != self.expect:
            self.stop()
            raise errors.EnvironmentProblem(f"the environment of {self.label} imports PyFlink {self.flink}; remove it "
                                            f"(cutcheck flink env --remove {self.expect}) and prepare it again.")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _next(self) -> dict[str, Any]:
        line = next(self._lines, "")
        if not line:
            code = self.proc.wait() if self.proc else None
            raise errors.EnvironmentProblem(f"the {self.label} worker exited (code {code}) during a run: "
                                            f"{_tail(self.log)}; its log is {self.log}.")
        return json.loads(line)

    def run(self, graph: JobGraph, opts: RunOptions, work: str | Path,
            progress: Callable[[str], None] | None = None) -> FlinkRun:
        request = {"graph": graph.to_json(), "options": encode_options(opts), "work": os.path.abspath(work)}
        return decode_run(self._exchange(request, progress))

    def call(self, target: str, payload: Any) -> Any:
        """``cutcheck.module:function`` applied to ``payload`` in the worker; its JSON answer."""
        return self._exchange({"call": target, "payload": payload}, None)

    def _exchange(self, request: dict[str, Any], progress: Callable[[str], None] | None) -> Any:
        """Send one request, relay its progress, return its result; its error raised here as the same class."""
        if not self.alive():
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            while True:
                answer = self._next()
                if "progress" in answer:
                    if progress:
                        progress(str(answer["progress"]))
                    continue
                break
        except BrokenPipeError:
            self.stop()
            raise errors.EnvironmentProblem(f"the {self.label} worker is gone: {_tail(self.log)}; its log is {self.log}.") from None
        except BaseException:  # Ctrl-C, or the caller's progress callback failed: the run's answer would be left unread
            self.stop(interrupt=True)
            raise
        self.served += 1
        if "result" in answer:
            return answer["result"]
        if "error" in answer:
            cls = getattr(errors, str(answer["error"]["type"]), errors.CutcheckError)
            if not (isinstance(cls, type) and issubclass(cls, errors.CutcheckError)):
                cls = errors.CutcheckError
            raise cls(answer["error"]["message"])
        raise errors.EnvironmentProblem(f"the {self.label} worker failed: {_first(answer)}; its log is {self.log}.")

    def stop(self, interrupt: bool = False) -> None:
        """End the worker: close its input (it exits), or SIGINT it; kill its group if it lingers."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if interrupt:
                proc.send_signal(signal.SIGINT)
            if proc.stdin:
                proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_GRACE_S)
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: the worker and the JVM it started
        code = proc.wait()
        if proc.stdout:
            proc.stdout.close()
        if code == 0 and not interrupt:  # a clean exit: its log holds nothing anyone needs
            with contextlib.suppress(OSError):
                os.unlink(self.log)


def _first(answer: dict[str, Any]) -> str:
    text = str(answer.get("crash") or answer)
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else text)[:300]


def _tail(log: str) -> str:
    try:
        lines = [ln.strip() for ln in Path(log).read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    return (lines[-1] if lines else "nothing in its log")[:300]


_WORKERS: dict[str, list[Worker]] = {}  # per release, idle or busy
_BUSY: set[int] = set()  # id() of the workers serving a request now
_POOL_LOCK = threading.Lock()


@contextlib.contextmanager
def worker_for(version: str | None) -> Iterator[Worker]:
    """An idle worker of a prepared release (``None``: this interpreter, with the PyFlink it has), for one request.

    Workers outlive the request and serve the next one of their release, so a campaign starts each
    release's JVM once; threads asking at once get a worker each (each its own JVM; the machine lock
    still decides how many clusters run at a time)."""
    key = version or ""
    if version is None:
        python, label = sys.executable, "installed PyFlink"
    else:
        python, label = str(require_prepared(version).interpreter), f"apache-flink {version}"
    with _POOL_LOCK:
        pool = _WORKERS.setdefault(key, [])
        worker = next((w for w in pool if id(w) not in _BUSY), None)
        if worker is None:
            worker = Worker(python, label, version)
            pool.append(worker)
        _BUSY.add(id(worker))
    try:
        yield worker
    finally:
        with _POOL_LOCK:
            _BUSY.discard(id(worker))


def workers(version: str | None) -> list[Worker]:
    """The workers of a release this process has started (for figures: start times, requests served)."""
    with _POOL_LOCK:
        return list(_WORKERS.get(version or "", []))


@atexit.register
def close_all() -> None:
    with _POOL_LOCK:
        every = [w for pool in _WORKERS.values() for w in pool]
        _WORKERS.clear()
    for worker in every:
        worker.stop()


def run_in_release(version: str | None, graph: JobGraph | str | Path, options: RunOptions, work: str | Path,
                   progress: Callable[[str], None] | None = None) -> FlinkRun:
    """Run ``graph`` with ``options`` on apache-flink ``version`` (prepared with ``cutcheck flink env``), Flink's
    state (checkpoints, sink files) under ``work``; return what happened, as runner.run does in-process.

    ``version=None`` runs in a worker of this interpreter (the PyFlink the flink extra installed). Bad input
    fails here, before any worker starts. The worker stays up for the next run of the same release."""
    graph, _ = prepare(graph, options)
    with worker_for(version) as worker:
        run = worker.run(graph, replace(options, release=None), work, progress)
    run.options = options
    return run


def call_in_release(version: str | None, target: str, payload: Any) -> Any:
    """``cutcheck.module:function(payload)`` run in apache-flink ``version``'s worker (``None``: this interpreter's
    worker); JSON in, JSON out. A CutcheckError it raises is raised here as the same class."""
    with worker_for(version) as worker:
        return worker.call(target, payload)
