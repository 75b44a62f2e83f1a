"""A Flink session cluster in processes of its own (a JobManager JVM and a TaskManager JVM), for the one
fault the in-gateway MiniCluster cannot take: a TaskManager JVM killed (SIGKILL) in the middle of a
checkpoint. Killing the MiniCluster would kill the PyFlink gateway, hence the driver, with it.

The JVMs run Flink's own entry points from the installed PyFlink (``StandaloneSessionClusterEntrypoint``
and ``TaskManagerRunner`` with ``--configDir``), with the classpath of ``pyflink/lib`` plus the
flink-python jar (Python functions run in the TaskManager, thread mode). Ports are chosen free here,
so other clusters on the machine do not collide. Heartbeats are short (1 s, 5 s timeout) so that the
JobManager notices the killed TaskManager within seconds; a replacement TaskManager is started right
after the kill, and Flink's restart strategy restores the job on it from the latest completed checkpoint.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cutcheck.flink_bridge.env import CLUSTER_DEFAULTS, Cluster, machine_lock
from cutcheck.model.errors import EnvironmentProblem

START_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(slots=True)
class Processes:
    """The cluster's JVMs; ``kill_taskmanager`` is the fault, ``start_taskmanager`` its replacement."""

    conf_dir: str
    classpath: str
    log_dir: str
    jobmanager: subprocess.Popen | None = None
    taskmanagers: list[subprocess.Popen] = field(default_factory=list)

    def _java(self, main: str, name: str) -> subprocess.Popen:
        log = os.path.join(self.log_dir, f"{name}.log")
        cmd = ["java", "-Xmx512m", f"-Dlog.file={log}",
               f"-Dlog4j.configurationFile=file:{os.path.join(self.conf_dir, 'log4j.properties')}",
               "-cp", self.classpath, main, "--configDir", self.conf_dir]
        with open(os.path.join(self.log_dir, f"{name}.out"), "ab") as out:
            return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def start_jobmanager(self) -> None:
        self.jobmanager = self._java("org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint", "jobmanager")

    def start_taskmanager(self) -> None:
        self.taskmanagers.append(self._java("org.apache.flink.runtime.taskexecutor.TaskManagerRunner",
                                            f"taskmanager-{len(self.taskmanagers)}"))

    def kill_taskmanager(self) -> int:
        """SIGKILL the running TaskManager JVM (no shutdown hooks, no goodbye to the JobManager); its pid."""
        tm = next(p for p in reversed(self.taskmanagers) if p.poll() is None)
        os.kill(tm.pid, signal.SIGKILL)
        tm.wait(timeout=30)
        return tm.pid

    def stop(self) -> None:
        for p in [*self.taskmanagers, self.jobmanager]:
            if p is not None and p.poll() is None:
                p.terminate()
        for p in [*self.taskmanagers, self.jobmanager]:
            if p is not None:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)


def _classpath() -> str:
    import pyflink

    home = os.path.dirname(os.path.abspath(pyflink.__file__))
    jars = sorted(glob.glob(os.path.join(home, "lib", "*.jar"))) + sorted(glob.glob(os.path.join(home, "opt", "flink-python*.jar")))
    return os.pathsep.join(jars)


def _write_conf(conf_dir: str, conf: dict[str, str]) -> None:
    import pyflink

    lines = "".join(f"{k}: {v}\n" for k, v in sorted(conf.items()))
    for name in ("config.yaml", "flink-conf.yaml"):  # 2.x reads the first, 1.19 the second
        with open(os.path.join(conf_dir, name), "w") as fh:
            fh.write(lines)
    src = os.path.join(os.path.dirname(os.path.abspath(pyflink.__file__)), "conf", "log4j.properties")
    with open(src) as fh, open(os.path.join(conf_dir, "log4j.properties"), "w") as out:
        out.write(fh.read())


def _wait_for_slots(rest_url: str, slots: int, deadline: float, procs: Processes) -> None:
    import json

    while time.monotonic() < deadline:
        if procs.jobmanager is not None and procs.jobmanager.poll() is not None:
            raise EnvironmentProblem(f"the Flink JobManager process exited ({procs.jobmanager.returncode}); see {procs.log_dir}.")
        try:
            with urllib.request.urlopen(f"{rest_url}/overview", timeout=5) as resp:
                if int(json.loads(resp.read()).get("slots-available", 0)) >= slots:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise EnvironmentProblem(f"the Flink cluster processes did not offer {slots} slots within {START_TIMEOUT_S:.0f} s; see {procs.log_dir}.")


@contextlib.contextmanager
def process_cluster(slots: int, extra: dict[str, str] | None = None) -> Iterator[Cluster]:
    """A session cluster in two JVMs of its own; ``Cluster.mini`` is the Processes handle."""
    from cutcheck.flink_bridge.env import gateway

    gateway()  # the driver's side still needs PyFlink and Java; one clear sentence if not
    rest_port, rpc_port = _free_port(), _free_port()
    conf = {**CLUSTER_DEFAULTS, **(extra or {}),
            "rest.port": str(rest_port), "rest.bind-port": str(rest_port), "jobmanager.rpc.address": "127.0.0.1",
            "jobmanager.rpc.port": str(rpc_port), "jobmanager.bind-host": "127.0.0.1", "taskmanager.host": "127.0.0.1",
            "taskmanager.bind-host": "127.0.0.1", "taskmanager.numberOfTaskSlots": str(slots),
            # TaskManagerRunner needs the resources Flink's start scripts would compute (BashJavaUtils)
            "taskmanager.cpu.cores": str(slots), "taskmanager.memory.framework.heap.size": "128m",
            "taskmanager.memory.task.heap.size": "256m", "taskmanager.memory.managed.size": "128m",
            "taskmanager.memory.framework.off-heap.size": "128m", "taskmanager.memory.task.off-heap.size": "0m",
            "taskmanager.memory.network.min": "64m", "taskmanager.memory.network.max": "64m",
            "taskmanager.memory.jvm-metaspace.size": "256m", "taskmanager.memory.jvm-overhead.min": "192m",
            "taskmanager.memory.jvm-overhead.max": "192m", "jobmanager.memory.process.size": "768m",
            "heartbeat.interval": "1000", "heartbeat.timeout": "5000", "blob.server.port": "0"}
    work = tempfile.mkdtemp(prefix="cutcheck-flink-cluster-")
    log_dir = os.path.join(os.environ.get("FLINK_LOG_DIR", work), f"cluster-{rest_port}")
    os.makedirs(log_dir, exist_ok=True)
    _write_conf(work, conf)
    procs = Processes(work, _classpath(), log_dir)
    with machine_lock():
        try:
            procs.start_jobmanager()
            procs.start_taskmanager()
            _wait_for_slots(f"http://127.0.0.1:{rest_port}", slots, time.monotonic() + START_TIMEOUT_S, procs)
            yield Cluster(procs, rest_port)
        finally:
            procs.stop()
            shutil.rmtree(work, ignore_errors=True)  # the configuration directory; the logs stay in log_dir


def in_progress(rest_url: str, job_id: str) -> Any:
    """The id of a checkpoint in progress for the job, or None (REST checkpoint statistics)."""
    import json

    with urllib.request.urlopen(f"{rest_url}/jobs/{job_id}/checkpoints", timeout=10) as resp:
        stats = json.loads(resp.read())
    running = [c for c in stats.get("history", []) if c.get("status") == "IN_PROGRESS"]
    return int(running[0]["id"]) if running else None


def kill_mid_checkpoint(rest: Any, job_id: str, after: int, cluster: Cluster) -> str | None:
    """Once checkpoint ``after`` completed and a later one is in progress: SIGKILL the TaskManager and start
    another; what was killed, or None while the moment has not come."""
    latest, _ = rest.latest_completed(job_id)
    running = in_progress(rest.base, job_id) if latest >= after else None
    if running is None:
        return None
    pid = cluster.mini.kill_taskmanager()
    cluster.mini.start_taskmanager()
    return f"TaskManager JVM {pid} during checkpoint {running}"
