"""The Flink environment: is the extra installed, the PyFlink gateway, and a MiniCluster we own.

We start the MiniCluster ourselves (through the Java gateway) instead of letting PyFlink's local
executor start one per job, for two reasons: the cluster outlives each job, so the REST statistics
of a finished (or failed) job can still be read, and a failed job can be resubmitted at other
parallelisms to the same cluster. Jobs reach it as a "remote" target through its REST port.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cutcheck.model.errors import EnvironmentProblem

INSTALL_HINT = "install the Flink extra with pip install 'cutcheck[flink]' (or pip install '.[flink]' in a checkout)"
LOCK_NAME = "cutcheck-flink.lock"

# TaskManager network settings: small buffers and few of them, so that a few thousand records
# build real backpressure (and in-flight data for unaligned checkpoints) instead of fitting in
# the default 32 KiB buffers at once.
CLUSTER_DEFAULTS: dict[str, str] = {
    "taskmanager.memory.segment-size": "4kb",
    "taskmanager.network.memory.buffers-per-channel": "2",
    "taskmanager.network.memory.floating-buffers-per-gate": "4",
    "web.checkpoints.history": "10000",
    "rest.bind-address": "127.0.0.1",
    "rest.bind-port": "0",  # any free port: other engineers' clusters share this machine
    "rest.address": "127.0.0.1",
    "jobstore.expiration-time": "3600",
    "rest.cache.checkpoint-statistics.timeout": "10ms",  # the driver arms the failure on fresh statistics
}


def flink_available() -> bool:
    try:
        import pyflink  # noqa: F401
    except ImportError:
        return False
    return True


def require_flink() -> None:
    """Raise EnvironmentProblem (exit 2) unless PyFlink and a Java runtime are usable."""
    if not flink_available():
        raise EnvironmentProblem(f"apache-flink (PyFlink) is not installed; {INSTALL_HINT}.")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise EnvironmentProblem("Flink needs Java (11 or 17) and none was found; install a JDK and put java on PATH or set JAVA_HOME.")


def gateway() -> Any:
    """The PyFlink Java gateway (one JVM per Python process, started on first use)."""
    require_flink()
    os.environ.setdefault("FLINK_LOG_DIR", os.path.join(tempfile.gettempdir(), "cutcheck-flink-logs"))
    os.makedirs(os.environ["FLINK_LOG_DIR"], exist_ok=True)
    from pyflink.java_gateway import get_gateway

    try:
        return get_gateway()
    except Exception as exc:  # the JVM did not start: Java missing or broken
        raise EnvironmentProblem(f"the PyFlink Java gateway did not start ({str(exc).splitlines()[0][:200]}); check java -version (Java 11 or 17).") from None


def package_root() -> str:
    """A directory holding only a ``cutcheck`` link to this package: what a release's interpreter (the worker,
    PyFlink's embedded one) puts on its path to import cutcheck and nothing else of this environment.

    The package's own parent will not do: for an installed cutcheck it is this environment's
    site-packages, whose PyFlink would shadow the release's. The link is replaced atomically, so a
    concurrent run never sees it missing.
    """
    package = Path(__file__).resolve().parents[1]
    root = os.path.join(tempfile.gettempdir(), f"cutcheck-pythonpath-{os.getuid()}-{zlib.crc32(str(package).encode()):08x}")
    link = Path(root) / "cutcheck"
    os.makedirs(root, exist_ok=True)
    if not (link.is_symlink() and link.resolve() == package):
        tmp = Path(root) / f".cutcheck-{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(package, target_is_directory=True)
        os.replace(tmp, link)
    return root


def python_path() -> str:
    """What the embedded (thread-mode) interpreter must import: the ``cutcheck`` package and this interpreter's
    site-packages.

    PyFlink's thread mode loads libpython of the base interpreter, whose sys.path lacks the venv and
    whose site-packages' ``.pth`` files are not run, so the package (an editable install is the checkout,
    whatever its folder is called) is reached through package_root's link.
    """
    paths = [package_root()] + [p for p in sys.path if p and os.path.isdir(p)]
    return os.pathsep.join(dict.fromkeys(paths))


CLUSTERS_VAR = "CUTCHECK_FLINK_CLUSTERS"  # how many of our clusters may run at once (flink hunt --clusters)


@contextlib.contextmanager
def machine_lock() -> Iterator[None]:
    """One Flink cluster of ours at a time on this machine (2 cores shared by several people), or up to
    ``$CUTCHECK_FLINK_CLUSTERS`` when the user allowed more (one lock file per slot)."""
    try:
        slots = max(1, int(os.environ.get(CLUSTERS_VAR, "1")))
    except ValueError:
        slots = 1
    paths = [os.path.join(tempfile.gettempdir(), LOCK_NAME if i == 0 else f"{LOCK_NAME}.{i}") for i in range(slots)]
    while True:
        for path in paths:
            with open(path, "a") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | (fcntl.LOCK_NB if slots > 1 else 0))
                except BlockingIOError:
                    continue  # that slot is taken: try the next
                try:
                    yield
                finally:
                    fcntl.flock(fh, fcntl.LOCK_UN)
                return
        time.sleep(0.2)


@dataclass(slots=True)
class Cluster:
    mini: Any  # org.apache.flink.runtime.minicluster.MiniCluster
    port: int

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


_HELD: dict[str, Any] = {}  # the cluster held_cluster keeps open: "cluster", "slots", "extra"


@contextlib.contextmanager
def held_cluster(slots: int, extra: dict[str, str] | None = None) -> Iterator[Cluster]:
    """Keep one MiniCluster (and the machine lock) across the runs inside: ``mini_cluster`` hands it out
    instead of starting one when it has the slots and configuration asked for (flink hunt, one case
    after another). A run that needs more must not start inside: this process holds the lock."""
    with mini_cluster(slots, extra) as cluster:
        _HELD.update(cluster=cluster, slots=slots, extra=dict(extra or {}))
        try:
            yield cluster
        finally:
            _HELD.clear()


def held_slots() -> int:
    """Slots of the cluster held open in this process (0: none)."""
    return int(_HELD.get("slots", 0))


@contextlib.contextmanager
def mini_cluster(slots: int, extra: dict[str, str] | None = None) -> Iterator[Cluster]:
    held = _HELD.get("cluster")
    if held is not None:
        if slots > _HELD["slots"] or dict(extra or {}) != _HELD["extra"]:
            raise EnvironmentProblem(f"a run needs {slots} slots and {extra} while this process holds a MiniCluster "
                                     f"with {_HELD['slots']} and {_HELD['extra']}; close it first.")
        yield held  # its jobs have ended; the next one gets the same JobManager and TaskManager
        return
    gw = gateway()
    jvm = gw.jvm
    conf = jvm.org.apache.flink.configuration.Configuration()
    for k, v in {**CLUSTER_DEFAULTS, **(extra or {})}.items():
        conf.setString(k, v)
    builder = jvm.org.apache.flink.runtime.minicluster.MiniClusterConfiguration.Builder()
    cfg = builder.setConfiguration(conf).setNumTaskManagers(1).setNumSlotsPerTaskManager(slots).build()
    with machine_lock():
        mini = jvm.org.apache.flink.runtime.minicluster.MiniCluster(cfg)
        mini.start()
        try:
            port = int(mini.getRestAddress().get().getPort())
            yield Cluster(mini, port)
        finally:
            mini.close()
