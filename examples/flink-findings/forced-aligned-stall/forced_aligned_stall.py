#!/usr/bin/env python3
"""Does a job with unaligned checkpoints stall for ever on a FORCED_ALIGNED barrier?

A standalone PyFlink reproducer (it needs only apache-flink and Java 11/17; see README.md beside it).
It starts a local MiniCluster, runs this job with parallelism 1 everywhere:

    s1 --rescale--> a (map)            a --rebalance--> b (co-map)      s2 --rebalance--> b
    b  --rescale--> c (slow map, sink) a --rescale-->   c

and watches it through Flink's REST API: the records the slow vertex c has read, the checkpoint
counts, the job's state. It prints one line per sample and a verdict:

    STALL     c's input count did not move for --stall-seconds while the job was RUNNING: exit 1
    FINISHED  the bounded sources ended and the job finished: exit 0
    UNDECIDED neither within --max-seconds: exit 3

Bad arguments exit 2; Ctrl-C cancels the job, closes the cluster and exits 130.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERTICES = ("s1", "s2", "a", "b", "c")
TERMINAL = ("FINISHED", "FAILED", "CANCELED", "SUSPENDED")


@dataclass(slots=True)
class Sample:
    at_s: float
    state: str
    read: dict[str, int]  # vertex -> records read (REST read-records; sources: written)
    completed: int
    failed: int
    in_progress: int
    restarts: int


@dataclass(slots=True)
class Outcome:
    verdict: str
    samples: list[Sample] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)  # Rest.checkpoints when the watch ended
    load: dict[str, dict[str, float]] = field(default_factory=dict)  # Rest.load when the watch ended (not finished)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("unaligned", "aligned", "aligned_timeout"), default="unaligned",
                   help="unaligned (the finding), aligned (the control run), or aligned_timeout: start aligned "
                        "and go unaligned after --alignment-timeout-ms")
    p.add_argument("--alignment-timeout-ms", type=int, default=2000,
                   help="execution.checkpointing.aligned-checkpoint-timeout with --mode aligned_timeout")
    p.add_argument("--unaligned-forced", action="store_true",
                   help="also set execution.checkpointing.unaligned.forced (it does not avoid the stall)")
    p.add_argument("--into-c", choices=("rescale", "rebalance"), default="rescale",
                   help="partitioner of both edges into c (rebalance: no pointwise edge, c checkpoints unaligned)")
    p.add_argument("--records", type=int, default=20_000, help="records per source (bounded sources)")
    p.add_argument("--delay-ms", type=float, default=1.0, help="sleep per record in c, to build backpressure")
    p.add_argument("--interval-ms", type=int, default=1000, help="checkpoint interval")
    p.add_argument("--checkpoint-timeout-ms", type=int, default=20_000,
                   help="execution.checkpointing.timeout (Flink's default is 10 min)")
    p.add_argument("--tolerable-failed", type=int, default=2_147_483_647,
                   help="execution.checkpointing.tolerable-failed-checkpoints (Flink's default is 0: "
                        "every expired checkpoint fails the job over)")
    p.add_argument("--restarts", type=int, default=0,
                   help="fixed-delay restart attempts after a failover (0: the job fails on its first failover)")
    p.add_argument("--default-network", action="store_true",
                   help="keep Flink's default network buffers (32 KiB, 2 exclusive, 8 floating) instead of small ones")
    p.add_argument("--channel-state-file-subtasks", type=int, default=1,
                   help="execution.checkpointing.unaligned.max-subtasks-per-channel-state-file (Flink's default is 5; "
                        "with 1 a subtask's acknowledgement does not wait for the others sharing its file, so the "
                        "REST acknowledgement counts show which vertices took the snapshot)")
    p.add_argument("--log-barriers", action="store_true",
                   help="log at DEBUG what each task's barrier handler received, and print those lines at the end")
    p.add_argument("--stall-seconds", type=float, default=45.0,
                   help="c's input count unchanged this long while RUNNING is a stall")
    p.add_argument("--max-seconds", type=float, default=240.0, help="give up (UNDECIDED) after this long")
    p.add_argument("--json", type=Path, help="also write the samples and verdict as JSON to this new file")
    args = p.parse_args(argv)
    for name in ("records", "interval_ms", "checkpoint_timeout_ms", "channel_state_file_subtasks", "alignment_timeout_ms"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.delay_ms < 0 or args.stall_seconds <= 0 or args.max_seconds <= 0 or args.restarts < 0:
        p.error("--delay-ms and --restarts must be at least 0, --stall-seconds and --max-seconds above 0")
    if args.json is not None and args.json.exists():
        p.error(f"--json {args.json}: the file exists; name a new one (it is never overwritten)")
    return args


def cluster_config(args: argparse.Namespace) -> dict[str, str]:
    conf = {
        "rest.bind-address": "127.0.0.1",
        "rest.bind-port": "0",  # any free port
        "rest.address": "127.0.0.1",
        "metrics.fetcher.update-interval": "500",  # fresh read-records in the REST answers
        "web.checkpoints.history": "1000",
    }
    if not args.default_network:
        # Small buffers: a few thousand records fill every queue, so the run is short.
        conf |= {"taskmanager.memory.segment-size": "4kb",
                 "taskmanager.network.memory.buffers-per-channel": "2",
                 "taskmanager.network.memory.floating-buffers-per-gate": "4"}
    return conf


def job_config(args: argparse.Namespace, port: int, checkpoint_dir: str) -> dict[str, str]:
    return {
        "execution.target": "remote",
        "rest.address": "127.0.0.1",
        "rest.port": str(port),
        "execution.runtime-mode": "STREAMING",
        "parallelism.default": "1",
        "python.execution-mode": "thread",  # Python functions run inside the TaskManager's JVM
        "python.executable": sys.executable,
        # The embedded interpreter is the base Python's: give it this environment's site-packages.
        "python.pythonpath": os.pathsep.join(dict.fromkeys(p for p in sys.path if p and os.path.isdir(p))),
        "execution.checkpointing.interval": f"{args.interval_ms}ms",
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "execution.checkpointing.unaligned.enabled": "false" if args.mode == "aligned" else "true",
        # 0: unaligned from the start
        "execution.checkpointing.aligned-checkpoint-timeout":
            f"{args.alignment_timeout_ms if args.mode == 'aligned_timeout' else 0}ms",
        "execution.checkpointing.timeout": f"{args.checkpoint_timeout_ms}ms",
        "execution.checkpointing.tolerable-failed-checkpoints": str(args.tolerable_failed),
        "execution.checkpointing.unaligned.forced": "true" if args.unaligned_forced else "false",
        "execution.checkpointing.unaligned.max-subtasks-per-channel-state-file": str(args.channel_state_file_subtasks),
        "execution.checkpointing.dir": Path(checkpoint_dir).as_uri(),
        "restart-strategy.type": "fixed-delay" if args.restarts else "none",
        "restart-strategy.fixed-delay.attempts": str(max(args.restarts, 1)),
        "restart-strategy.fixed-delay.delay": "1s",
    }


def build(env: Any, records: int, delay_s: float, into_c: str = "rescale") -> None:
    """The triangle. Every operator is named after its vertex, so REST's vertex names start with it."""
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.base import Sink
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.datastream.functions import CoMapFunction, MapFunction
    from pyflink.java_gateway import get_gateway

    class Identity(MapFunction):
        def map(self, value: int) -> int:
            return value

    class Both(CoMapFunction):
        def map1(self, value: int) -> int:
            return value

        def map2(self, value: int) -> int:
            return value

    class Slow(MapFunction):
        def __init__(self, seconds: float) -> None:
            self.seconds = seconds

        def map(self, value: int) -> int:
            time.sleep(self.seconds)
            return value

    long_ = Types.LONG()
    s1 = env.from_source(NumberSequenceSource(0, records - 1), WatermarkStrategy.no_watermarks(), "s1").name("s1")
    s2 = env.from_source(NumberSequenceSource(0, records - 1), WatermarkStrategy.no_watermarks(), "s2").name("s2")
    a = s1.rescale().map(Identity(), output_type=long_).name("a")
    b = a.rebalance().connect(s2.rebalance()).map(Both(), output_type=long_).name("b")
    c = getattr(b, into_c)().union(getattr(a, into_c)()).map(Slow(delay_s), output_type=long_).name("c")
    discard = get_gateway().jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink()
    c.sink_to(Sink(discard)).name("c-discard")


class Rest:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path: str) -> dict[str, Any]:
        with urllib.request.urlopen(self.base + path, timeout=10) as resp:
            return dict(json.load(resp))

    def cancel(self, job_id: str) -> None:
        try:
            req = urllib.request.Request(f"{self.base}/jobs/{job_id}?mode=cancel", method="PATCH")
            urllib.request.urlopen(req, timeout=10).close()
        except OSError:
            pass  # already ended

    def sample(self, job_id: str, started: float) -> Sample:
        job = self.get(f"/jobs/{job_id}")
        read: dict[str, int] = {}
        for v in job.get("vertices", []):
            name = str(v.get("name", ""))
            vid = next((x for x in VERTICES if name == x or name.startswith(x + " ") or name.startswith("Source: " + x)), None)
            if vid is None:
                continue
            m = v.get("metrics", {})
            read[vid] = int(m.get("write-records" if vid in ("s1", "s2") else "read-records", 0))
        counts = self.get(f"/jobs/{job_id}/checkpoints").get("counts", {})
        restarts = len(self.get(f"/jobs/{job_id}/exceptions").get("exceptionHistory", {}).get("entries", []))
        return Sample(round(time.monotonic() - started, 1), str(job.get("state")), read,
                      int(counts.get("completed", 0)), int(counts.get("failed", 0)),
                      int(counts.get("in_progress", 0)), restarts)

    def checkpoints(self, job_id: str) -> list[dict[str, Any]]:
        """Every checkpoint in the history, oldest first; a checkpoint still in progress also says, per
        vertex, how many subtasks acknowledged it (which vertices never took their snapshot)."""
        names = {v["id"]: v["name"] for v in self.get(f"/jobs/{job_id}").get("vertices", [])}
        found = []
        for cp in sorted(self.get(f"/jobs/{job_id}/checkpoints").get("history", []), key=lambda c: c["id"]):
            row = {"id": cp["id"], "status": cp.get("status"), "type": cp.get("checkpoint_type"),
                   "failure": cp.get("failure_message")}
            if cp.get("status") == "IN_PROGRESS":
                detail = self.get(f"/jobs/{job_id}/checkpoints/details/{cp['id']}")
                row["acknowledged"] = {names.get(k, k): f"{t.get('num_acknowledged_subtasks')}/{t.get('num_subtasks')}"
                                       for k, t in detail.get("tasks", {}).items()}
            found.append(row)
        return found

    def gates(self, job_id: str) -> dict[str, list[str]]:
        """Per vertex with inputs, its producers in input-gate order (the log's gateIdx)."""
        nodes = self.get(f"/jobs/{job_id}/plan").get("plan", {}).get("nodes", [])
        names = {v["id"]: v["name"] for v in self.get(f"/jobs/{job_id}").get("vertices", [])}
        return {names[n["id"]]: [f"{names.get(i['id'], i['id'])} ({i.get('ship_strategy')})"
                                 for i in sorted(n.get("inputs", []), key=lambda i: i.get("num", 0))]
                for n in nodes if n.get("inputs")}

    def load(self, job_id: str) -> dict[str, dict[str, float]]:
        """Per vertex, ms per second its subtasks spent back-pressured, idle (waiting for input) and busy."""
        keys = ("backPressuredTimeMsPerSecond", "idleTimeMsPerSecond", "busyTimeMsPerSecond")
        found = {}
        for v in self.get(f"/jobs/{job_id}").get("vertices", []):
            query = urllib.parse.urlencode({"get": ",".join(keys), "agg": "avg"})
            rows = self.get_list(f"/jobs/{job_id}/vertices/{v['id']}/subtasks/metrics?{query}")
            found[str(v["name"])] = {str(r["id"]).removesuffix("TimeMsPerSecond"): round(float(r.get("avg", 0)))
                                     for r in rows}
        return found

    def get_list(self, path: str) -> list[dict[str, Any]]:
        with urllib.request.urlopen(self.base + path, timeout=10) as resp:
            return list(json.load(resp))


BARRIER_LOGGERS = ("org.apache.flink.streaming.runtime.io.checkpointing.SingleCheckpointBarrierHandler",
                   "org.apache.flink.streaming.runtime.tasks.SubtaskCheckpointCoordinatorImpl")
BARRIER_LINES = ("Received barrier from channel", "synchronous part of checkpoint", "Received cancellation",
                 "Notification of checkpoint", "before completing current checkpoint", "cancel-barrier")


def log_files() -> dict[Path, int]:
    """The PyFlink JVM's log files and their sizes now (what is appended later is this run's)."""
    import pyflink

    folder = Path(os.environ.get("FLINK_LOG_DIR") or Path(pyflink.__file__).parent / "log")
    return {p: p.stat().st_size for p in folder.glob("*.log")} if folder.is_dir() else {}


def barrier_log(before: dict[Path, int], limit: int = 80) -> list[str]:
    """What the barrier handlers and checkpoint coordinators of the tasks logged since ``before``."""
    lines = []
    for path in sorted(log_files()):
        with path.open(errors="replace") as fh:
            fh.seek(before.get(path, 0))
            lines += [ln.rstrip() for ln in fh if any(m in ln for m in BARRIER_LINES)]
    return lines[:limit]


def watch(rest: Rest, job_id: str, args: argparse.Namespace, started: float) -> Outcome:
    out = Outcome("UNDECIDED")
    last_change, last_read = time.monotonic(), -1
    while time.monotonic() - started < args.max_seconds:
        s = rest.sample(job_id, started)
        out.samples.append(s)
        print(f"t={s.at_s:6.1f}s {s.state:9} c read {s.read.get('c', 0):8d}  "
              + " ".join(f"{k}={s.read.get(k, 0)}" for k in ("s1", "s2", "a", "b"))
              + f"  checkpoints completed={s.completed} failed={s.failed} in_progress={s.in_progress}"
              + (f" failovers={s.restarts}" if s.restarts else ""), flush=True)
        if s.state in TERMINAL:
            out.verdict = "FINISHED" if s.state == "FINISHED" else s.state
            break
        c_read = s.read.get("c", 0)
        if c_read != last_read or s.state != "RUNNING":
            last_change, last_read = time.monotonic(), c_read
        elif time.monotonic() - last_change >= args.stall_seconds:
            out.verdict = "STALL"
            break
        time.sleep(1.0)
    try:
        out.checkpoints = rest.checkpoints(job_id)
        if out.verdict != "FINISHED":
            out.load = rest.load(job_id)
    except (OSError, KeyError, ValueError) as exc:
        print(f"(checkpoint history or task load not read: {exc})")
    return out


def run(args: argparse.Namespace) -> int:
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    conf = jvm.org.apache.flink.configuration.Configuration()
    for k, v in cluster_config(args).items():
        conf.setString(k, v)
    cfg = (jvm.org.apache.flink.runtime.minicluster.MiniClusterConfiguration.Builder()
           .setConfiguration(conf).setNumTaskManagers(1).setNumSlotsPerTaskManager(1).build())
    mini = jvm.org.apache.flink.runtime.minicluster.MiniCluster(cfg)
    mini.start()
    rest, job_id = Rest(int(mini.getRestAddress().get().getPort())), None
    logged = log_files()
    if args.log_barriers:
        for name in BARRIER_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, jvm.org.apache.logging.log4j.Level.DEBUG)
    checkpoints = tempfile.mkdtemp(prefix="forced-aligned-stall-")
    try:
        config = Configuration()
        for k, v in job_config(args, int(mini.getRestAddress().get().getPort()), checkpoints).items():
            config.set_string(k, v)
        # The Java constructor keeps execution.target (remote: our cluster); get_execution_environment would not.
        env = StreamExecutionEnvironment(jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment(
            config._j_configuration))
        build(env, args.records, args.delay_ms / 1000.0, args.into_c)
        started = time.monotonic()
        job_id = str(env.execute_async(f"forced-aligned-stall ({args.mode})").get_job_id())
        print(f"job {job_id}: mode={args.mode}"
              + (f" alignment-timeout={args.alignment_timeout_ms}ms" if args.mode == "aligned_timeout" else "")
              + f" into-c={args.into_c} records={args.records}/source delay={args.delay_ms}ms "
              f"interval={args.interval_ms}ms checkpoint-timeout={args.checkpoint_timeout_ms}ms "
              f"tolerable-failed={args.tolerable_failed} restarts={args.restarts} "
              f"network={'default' if args.default_network else '4kb x (2 exclusive + 4 floating)'}", flush=True)
        out = watch(rest, job_id, args, started)
        for vertex, producers in rest.gates(job_id).items():
            print(f"inputs of {vertex}: " + ", ".join(f"gateIdx={i} from {p}" for i, p in enumerate(producers)))
        done = [row["id"] for row in out.checkpoints if row["status"] == "COMPLETED"]
        if done:
            print(f"checkpoints completed: {len(done)} (ids {done[0]}..{done[-1]})")
        for row in out.checkpoints:
            if row["status"] != "COMPLETED":
                print("checkpoint", json.dumps(row))
        for name, ms in out.load.items():
            print(f"task {name}: ms/s " + ", ".join(f"{k} {v:.0f}" for k, v in ms.items()))
        if args.log_barriers:
            print("barrier handling, as the tasks logged it:")
            for line in barrier_log(logged):
                print("  " + line)
        last = out.samples[-1] if out.samples else None
        summary = {"verdict": out.verdict, "mode": args.mode, "records_per_source": args.records,
                   "c_read": last.read.get("c", 0) if last else 0, "c_expected": 3 * args.records,
                   "checkpoints_completed": last.completed if last else 0,
                   "checkpoints_failed": last.failed if last else 0, "seconds": last.at_s if last else 0}
        print(out.verdict + ": " + json.dumps(summary), flush=True)
        if args.json is not None:
            tmp = args.json.with_name(args.json.name + ".tmp")
            try:
                tmp.write_text(json.dumps({**summary, "checkpoints": out.checkpoints, "load": out.load,
                                           "samples": [vars_of(s) for s in out.samples]}, indent=1))
                os.replace(tmp, args.json)
            finally:
                tmp.unlink(missing_ok=True)
        return {"STALL": 1, "FINISHED": 0}.get(out.verdict, 3)
    finally:
        if job_id is not None:
            rest.cancel(job_id)
        mini.close()
        shutil.rmtree(checkpoints, ignore_errors=True)  # this run's own temporary directory


def vars_of(s: Sample) -> dict[str, Any]:
    return {"t": s.at_s, "state": s.state, "read": s.read, "completed": s.completed, "failed": s.failed,
            "in_progress": s.in_progress, "failovers": s.restarts}


def main(argv: list[str]) -> int:
    args = parse(argv)
    try:
        import pyflink  # noqa: F401
    except ImportError:
        print("forced_aligned_stall.py: apache-flink is not installed; pip install apache-flink==2.3.0", file=sys.stderr)
        return 2
    try:
        return run(args)
    except KeyboardInterrupt:
        print("forced_aligned_stall.py: interrupted; the job was cancelled", file=sys.stderr)
        return 130
    except (OSError, urllib.error.URLError) as exc:
        print(f"forced_aligned_stall.py: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
