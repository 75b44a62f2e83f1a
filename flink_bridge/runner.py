"""``cutcheck flink run``: a job graph on a real Flink MiniCluster, with a failure and a rescale.

The run, in order:

1. Submit the job (attempt 0) with the chosen checkpointing.
2. With ``fail_after=N``: once Flink reports checkpoint N completed, the driver creates the
   ``armed`` marker; the failing vertex's function throws on its next record, once (see
   flink_bridge.functions). Flink's restart strategy then restores the job in place from the
   latest completed checkpoint, a real failover.
3. With ``rescale``: the failure is not restarted in place (restart strategy ``none``); the job
   fails, its checkpoints are retained (externalized), and the driver submits the job again at the
   new parallelisms with ``execution.state-recovery.path`` set to the latest retained checkpoint.
   That is the engine's "rescale on the restore after failure k" on a real cluster.
   With ``savepoint`` (canonical or native) instead: once checkpoint ``stop_after`` completed, the driver
   stops the job with a savepoint of that format (REST ``/jobs/<id>/stop``) and submits it again from
   that savepoint, rescaled when ``rescale`` says so. Every restore uses ``claim_mode``; ``fail_after`` then
   fails the restored job after N checkpoints of its own (restarted in place).
4. The bounded sources end, Flink's final checkpoint commits the last sink files, the job finishes.
5. Or the run's deadline (``timeout_s``, counted from the cluster's start) comes first: the job is cancelled, its
   checkpoints retained. A judged run (``judge_deadline``) then returns with ``liveness``, the verdict of
   flink_bridge.liveness (stalled, or still progressing); any other run raises a CutcheckError.

What the job is (the translation, chaining, the checkpointing keys of the release PyFlink imports,
flink_bridge.features) is decided here; a custom partitioner under unaligned checkpoints is not
refused: the job sets ``execution.checkpointing.unaligned.forced`` (Flink refuses it otherwise), and
what the release then does with the custom edge is the release's (features.Features.custom_edge_aligned).

Everything happens in ``<out>/`` itself, never renamed afterwards (Flink's ``_metadata`` names shared
files by absolute path): Flink's checkpoints and sink files under ``flink/``, then the recovery logs
(flink_bridge.runlog); see reference.logs.RunLogWriter's ``in_place``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cutcheck.flink_bridge import env as flink_env
from cutcheck.flink_bridge import settings
from cutcheck.flink_bridge.features import Features, Key, installed
from cutcheck.flink_bridge.liveness import Liveness, Timeline
from cutcheck.flink_bridge.process_cluster import process_cluster
from cutcheck.flink_bridge.rest import JobStats, Rest
from cutcheck.flink_bridge.translate import ProbeSpec, build, check_supported, sink_dirs
from cutcheck.flink_bridge.watch import DEADLINE, watch
from cutcheck.flink_bridge.watch import now_ms as _now
from cutcheck.model.errors import CutcheckError, GraphError
from cutcheck.model.graph import JobGraph

MODES = ("unaligned", "aligned", "aligned_timeout")
CLAIM_MODES = ("claim", "no_claim")
SAVEPOINT_FORMATS = ("canonical", "native")


@dataclass(slots=True)
class RunOptions:
    mode: str = "unaligned"
    interval_ms: int = 200
    alignment_timeout_ms: int = 20  # aligned_timeout: start aligned, go unaligned after this
    fail_after: int | None = None  # inject one failure once checkpoint N completed (with savepoint: N of the restored job's own)
    fail_vertex: str | None = None  # default: the slow vertex
    restart: bool = True  # restart in place after the failure (ignored with rescale)
    rescale: dict[str, int] = field(default_factory=dict)
    restore_max_parallelism: dict[str, int] = field(default_factory=dict)  # set on the resubmission (as rescale is)
    records: int | None = None  # records per source (overrides the graph)
    slow: str | None = None  # default: the last keyed_count, else the first sink
    delay_ms: float = 2.0  # per record at the slow vertex: backpressure, hence in-flight data
    retained: int = 3
    incremental: bool = False  # RocksDB incremental checkpoints (files in shared/)
    inline_threshold: str | None = None  # execution.checkpointing.data-inline-threshold; default 0 with incremental
    checkpoint_dir: str | None = None  # default: <run dir>/flink/checkpoints
    job_id: str | None = None  # 32 hex digits: pin the first job's id (and so its checkpoint directory)
    restore: str | None = None  # start the first job from this retained checkpoint (chk-N directory or URI)
    claim_mode: str = "no_claim"  # every restore: claim (Flink owns the snapshot) or no_claim
    savepoint: str | None = None  # canonical | native: stop with a savepoint after checkpoint stop_after, restore from it
    stop_after: int | None = None
    chaining: bool = True  # False: every vertex starts an operator chain of its own
    force_unaligned: bool | None = None  # execution.checkpointing.unaligned.forced; None: when a custom edge needs it
    kill_after: int | None = None  # SIGKILL the TaskManager JVM mid-checkpoint once checkpoint N completed
    timeout_s: float = 900.0  # the run's deadline (wall clock, from the cluster's start)
    judge_deadline: bool = False  # at the deadline: judge stall or progress (FlinkRun.liveness); else raise
    checkpoint_timeout_ms: int | None = None  # execution.checkpointing.timeout; None: Flink's (10 min)
    tolerable_failed: int | None = None  # execution.checkpointing.tolerable-failed-checkpoints; None: Flink's (0)
    conf: dict[str, str] = field(default_factory=dict)  # further keys for the job and the cluster (flink_bridge.settings)
    release: str | None = None  # run in this prepared apache-flink release (flink_bridge.launch); None: in-process


@dataclass(slots=True)
class JobRun:
    """One submission: the graph it ran and what Flink reported about it."""

    index: int
    graph: JobGraph
    job_id: str
    submitted_ms: int
    restored_from: str | None = None
    stats: JobStats | None = None


@dataclass(slots=True)
class FlinkRun:
    graph: JobGraph
    options: RunOptions
    jobs: list[JobRun]
    started_ms: int
    ended_ms: int
    work: str  # the flink/ directory (checkpoints, sink files, markers) inside the run directory
    checkpoint_dir: str
    sinks: dict[str, str]
    slow: str = ""
    fail_vertex: str | None = None
    armed_ms: int | None = None
    fired: str | None = None  # "vertex[i] epoch" from the fired marker
    fired_ms: int | None = None
    savepoint: str | None = None  # where the stop-with-savepoint wrote its savepoint
    events: list[tuple[int, str, str]] = field(default_factory=list)  # (epoch ms, kind, detail)
    flink_version: str = ""  # the PyFlink release that ran the job
    liveness: Liveness | None = None  # a judged run cancelled at its deadline: stalled or still progressing


def prepare(graph: JobGraph | str | Path, opts: RunOptions) -> tuple[JobGraph, JobGraph]:
    """Validate everything that can be checked without Flink: (graph to start, graph after the rescale)."""
    if not isinstance(graph, JobGraph):
        graph = JobGraph.from_json(graph)
    if opts.mode not in MODES:
        raise CutcheckError(f"--mode {opts.mode!r} is not one of {', '.join(MODES)}.")
    if opts.records is not None:
        data = graph.to_json()
        for v in data["vertices"]:
            if v["kind"] == "source":
                v["records"] = opts.records
        graph = JobGraph.from_json(data)
    check_supported(graph)
    if opts.claim_mode not in CLAIM_MODES:
        raise CutcheckError(f"--claim-mode {opts.claim_mode!r} is not one of {', '.join(CLAIM_MODES)}.")
    if opts.savepoint is not None:
        if opts.savepoint not in SAVEPOINT_FORMATS:
            raise CutcheckError(f"--savepoint {opts.savepoint!r} is not one of {', '.join(SAVEPOINT_FORMATS)}.")
        if opts.stop_after is None or opts.stop_after < 1:
            raise CutcheckError("--savepoint needs --stop-after-checkpoint N (at least 1): the job stops once checkpoint N completed.")
    if opts.kill_after is not None and (opts.kill_after < 1 or opts.fail_after is not None or opts.savepoint or opts.rescale):
        raise CutcheckError("--kill-after-checkpoint N (at least 1) is a fault of its own, restarted in place: "
                            "give it without --fail-after-checkpoint, --savepoint or --rescale.")
    if resubmits(opts) and opts.fail_after is None and opts.savepoint is None:
        raise CutcheckError("--rescale needs --fail-after-checkpoint N (or --savepoint): the rescaled restore is the one after that.")
    if opts.fail_after is not None and opts.fail_after < 1:
        raise CutcheckError("--fail-after-checkpoint must be at least 1 (checkpoint ids start at 1).")
    target = graph.with_parallelism(opts.rescale) if opts.rescale else graph
    if opts.restore_max_parallelism:
        target = JobGraph.from_json({**target.to_json(), "vertices": [{**v, "max_parallelism": opts.restore_max_parallelism.get(
            v["id"], target.max_parallelism(v["id"]))} for v in target.to_json()["vertices"]]})
    for e in graph.edges:
        if e.partitioner == "broadcast" and target.vertex(e.target).parallelism != graph.vertex(e.target).parallelism:
            raise GraphError(f"{e.describe()}: rescaling '{e.target}' changes how many copies its broadcast input makes "
                             "mid-run, which the exactly-once check cannot attribute; rescale another vertex.")
    for name in (opts.slow, opts.fail_vertex):
        if name is not None and name not in {v.id for v in graph.vertices}:
            raise GraphError(f"vertex '{name}': no such vertex; vertices are {', '.join(v.id for v in graph.vertices)}.")
    _check_limits(opts)
    if opts.job_id is not None and (len(opts.job_id) != 32 or any(c not in "0123456789abcdef" for c in opts.job_id)):
        raise CutcheckError(f"--job-id {opts.job_id!r}: a Flink job id is 32 lowercase hex digits.")
    return graph, target


def _check_limits(opts: RunOptions) -> None:
    """The deadline, checkpoint timeout, tolerable failures and further configuration: in range, not the bridge's own."""
    if not opts.timeout_s > 0:
        raise CutcheckError(f"--deadline-s {opts.timeout_s:g} must be positive: it is how long the run may take.")
    if opts.checkpoint_timeout_ms is not None and opts.checkpoint_timeout_ms < 10:
        raise CutcheckError(f"--checkpoint-timeout-ms {opts.checkpoint_timeout_ms} is below Flink's least (10 ms); give more.")
    if opts.tolerable_failed is not None and opts.tolerable_failed < 0:
        raise CutcheckError(f"--tolerable-failed-checkpoints {opts.tolerable_failed} is negative; give 0 or more.")
    if opts.alignment_timeout_ms < 0:
        raise CutcheckError(f"--alignment-timeout-ms {opts.alignment_timeout_ms} is negative; give 0 or more.")
    settings.check_conf(opts.conf, process_cluster=opts.kill_after is not None)


def cluster_config(opts: RunOptions) -> dict[str, str]:
    """What the run adds to the cluster's configuration: retention (the JobManager's setting, not the job's), the
    metrics' refresh a judged run samples, and --conf (a cluster-only key takes effect only here)."""
    extra = {installed().key(Key.RETAINED): str(opts.retained), **opts.conf}
    if opts.judge_deadline:
        extra[settings.FETCHER_INTERVAL] = "1000"
    return extra


def _start(stack: contextlib.ExitStack, launch: Callable[..., Any], slots: int, opts: RunOptions) -> Any:
    """The cluster, entered on ``stack``; one Flink refuses to start with the --conf values is the user's mistake."""
    try:
        return stack.enter_context(launch(slots, cluster_config(opts)))
    except CutcheckError:
        raise
    except Exception as exc:  # Py4JJavaError: e.g. a memory size Flink cannot parse
        if not opts.conf:
            raise
        lines = [ln.strip() for ln in str(exc).splitlines() if "Exception:" in ln or "Error:" in ln]
        raise CutcheckError(f"the Flink cluster did not start with the --conf settings "
                            f"({(lines[-1] if lines else type(exc).__name__)[:300]}); check their values.") from None


def resubmits(opts: RunOptions) -> bool:  # the restore after the failure is a new job graph (rescaled, or max parallelism)
    return bool(opts.rescale or opts.restore_max_parallelism)


def slow_vertex(graph: JobGraph, opts: RunOptions) -> str:
    if opts.slow is not None:
        return opts.slow
    counts = [vid for vid in graph.topological_order() if graph.vertex(vid).kind == "keyed_count"]
    if counts:
        return counts[-1]
    return next(vid for vid in graph.topological_order() if graph.vertex(vid).kind == "sink")


def needs_forced(graph: JobGraph, opts: RunOptions) -> bool:
    """Whether the job sets execution.checkpointing.unaligned.forced: asked for, or a custom edge under
    unaligned checkpoints (every release 1.19-2.3 refuses that job otherwise; flink_bridge.features)."""
    if opts.force_unaligned is not None:
        return opts.force_unaligned
    return opts.mode != "aligned" and any(e.partitioner == "custom" for e in graph.edges)


def job_config(cluster: flink_env.Cluster, opts: RunOptions, checkpoint_dir: str, restart: bool,
               restore: str | None, job_id: str | None, graph: JobGraph | None = None,
               release: Features | None = None) -> dict[str, str]:
    feat = release or installed()
    k = feat.key
    conf = {
        "execution.target": "remote",
        "rest.address": "127.0.0.1",
        "rest.port": str(cluster.port),
        "execution.runtime-mode": "STREAMING",
        "python.execution-mode": "thread",  # functions run in the TaskManager's JVM (pemja): no worker processes
        "python.executable": sys.executable,
        "python.pythonpath": flink_env.python_path(),
        "python.operator-chaining.enabled": "false",  # keeps one operator (and one uid) per function
        "execution.checkpointing.interval": f"{opts.interval_ms}ms",
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "execution.checkpointing.max-concurrent-checkpoints": "1",
        k(Key.UNALIGNED): "false" if opts.mode == "aligned" else "true",
        k(Key.ALIGNED_TIMEOUT): f"{opts.alignment_timeout_ms}ms" if opts.mode == "aligned_timeout" else "0ms",
        "execution.checkpointing.unaligned.forced": "true" if graph is not None and needs_forced(graph, opts) else "false",
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        k(Key.RETAINED): str(opts.retained),
        k(Key.CHECKPOINT_DIR): Path(checkpoint_dir).absolute().as_uri(),
        k(Key.SAVEPOINT_DIR): Path(checkpoint_dir).absolute().parent.joinpath("savepoints").as_uri(),
        "state.backend.type": "rocksdb" if opts.incremental else "hashmap",
        k(Key.INCREMENTAL): "true" if opts.incremental else "false",
        "restart-strategy.type": "fixed-delay" if restart else "none",
        "restart-strategy.fixed-delay.attempts": "3",
        "restart-strategy.fixed-delay.delay": "200ms",
    }
    threshold = opts.inline_threshold if opts.inline_threshold is not None else ("0b" if opts.incremental else None)
    if threshold is not None:
        # Small state is inlined into _metadata by default (20 KiB); a few thousand records make
        # only small files, so with incremental checkpoints we inline nothing and shared/ fills.
        conf[k(Key.INLINE_THRESHOLD)] = threshold
    if restore is not None:
        conf[k(Key.RESTORE_PATH)] = restore
        conf[k(Key.CLAIM_MODE)] = opts.claim_mode.upper()
    if job_id is not None:
        conf["$internal.pipeline.job-id"] = job_id
    if opts.checkpoint_timeout_ms is not None:
        conf[settings.CHECKPOINT_TIMEOUT] = f"{opts.checkpoint_timeout_ms}ms"
    if opts.tolerable_failed is not None:
        conf[settings.TOLERABLE_FAILED] = str(opts.tolerable_failed)
    conf.update(opts.conf)  # refused where the bridge sets a key (prepare): only its defaults are overridden
    return conf


def environment(conf: dict[str, str]) -> Any:
    """A PyFlink StreamExecutionEnvironment with exactly this configuration."""
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment

    gw = flink_env.gateway()
    config = Configuration()
    for k, v in conf.items():
        config.set_string(k, v)
    # The Java constructor honours execution.target; getExecutionEnvironment() would force a local one.
    j_env = gw.jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment(config._j_configuration)
    return StreamExecutionEnvironment(j_env)


def _submit(graph: JobGraph, conf: dict[str, str], sinks: dict[str, str], probes: ProbeSpec, name: str,
            chaining: bool = True) -> str:
    env = environment(conf)
    build(env, graph, sinks, probes, chaining)
    try:
        client = env.execute_async(name)
    except Exception as exc:  # Py4JJavaError: Flink refused the job graph (bad config, a missing restore path)
        lines = [ln.strip() for ln in str(exc).splitlines() if "Exception:" in ln or "Error:" in ln]
        raise CutcheckError(f"Flink did not accept job {name!r}: {(lines[-1] if lines else type(exc).__name__)[:300]}.") from None
    return str(client.get_job_id())


def run(graph: JobGraph | str | Path, work: str | Path, opts: RunOptions,
        progress: Callable[[str], None] | None = None) -> FlinkRun:
    """Run the job(s) with Flink state under ``work`` (the caller's flink/ directory); return what happened."""
    graph, target = prepare(graph, opts)
    say = progress or (lambda _msg: None)
    work = os.path.abspath(work)
    checkpoint_dir = os.path.abspath(opts.checkpoint_dir or os.path.join(work, "checkpoints"))
    control = os.path.join(work, "control")
    os.makedirs(control, exist_ok=True)
    os.makedirs(checkpoint_dir, exist_ok=True)
    sinks = sink_dirs(graph, work)
    slow = slow_vertex(graph, opts)
    fail_vertex = opts.fail_vertex or slow
    probes = ProbeSpec({slow: opts.delay_ms / 1000.0}, fail_vertex if opts.fail_after else None,
                       os.path.join(control, "armed"), os.path.join(control, "fired"))
    slots = max(max(v.parallelism for v in graph.vertices), max(v.parallelism for v in target.vertices))
    say("starting a Flink cluster" + (" in JVMs of its own" if opts.kill_after is not None else " (MiniCluster)"))
    # A killed JVM needs the cluster in processes of its own (flink_bridge.process_cluster).
    launch = process_cluster if opts.kill_after is not None else flink_env.mini_cluster
    with contextlib.ExitStack() as stack:
        cluster = _start(stack, launch, slots, opts)
        rest = Rest(cluster.rest_url)
        started = _now()
        clock = time.monotonic()  # the deadline and a judged run's samples count from here: the cluster is up
        timeline = Timeline(sinks, clock, time.monotonic) if opts.judge_deadline else None
        result = FlinkRun(graph, opts, [], started, started, work, checkpoint_dir, sinks, slow,
                          fail_vertex if opts.fail_after else None, flink_version=installed().name)
        deadline = clock + opts.timeout_s
        # With a savepoint the rescale happens on the resubmission, so a later failure restarts in place.
        in_place = opts.restart and (not resubmits(opts) or opts.savepoint is not None)
        current = graph
        restore = _uri(opts.restore) if opts.restore else None
        while True:
            index = len(result.jobs)
            conf = job_config(cluster, opts, checkpoint_dir, in_place, restore,
                              opts.job_id if index == 0 else None, current)
            job_id = _submit(current, conf, sinks, probes, f"cutcheck {graph.name} #{index}", opts.chaining)
            job = JobRun(index, current, job_id, _now(), restore)
            result.jobs.append(job)
            result.events.append((job.submitted_ms, "submit", f"job {job_id} at parallelism "
                                  + ", ".join(f"{v.id}={v.parallelism}" for v in current.vertices)
                                  + (f", restoring {restore}" if restore else "")))
            say(f"job {index} ({job_id}) running")
            state = watch(rest, job_id, opts, probes, result, deadline, say, cluster, timeline)
            job.stats = rest.collect(job_id)
            if state == DEADLINE:
                break  # cancelled and judged (result.liveness): the run ends here, whatever it was waiting for
            result.events.append((job.stats.end_ms or _now(), state.lower(), f"job {job_id}"))
            if state == "FINISHED" and result.savepoint and index == 0:
                restore, current = _uri(result.savepoint), target
                continue
            if state == "FINISHED":
                break
            if state == "FAILED" and result.fired and not in_place and resubmits(opts) and index == 0:
                latest = latest_retained(checkpoint_dir, job_id)
                if latest is None:
                    raise CutcheckError(f"job {job_id} failed before any checkpoint was retained; nothing to restore from.")
                restore, current = Path(latest).as_uri(), target
                continue
            if state == "FAILED" and result.fired and not in_place and not resubmits(opts):
                break  # the caller asked for a failed job with retained checkpoints (no restart)
            detail = "; ".join(str(e.get("exceptionName", "")) + ": " + str(e.get("stacktrace", "")).splitlines()[0][:200]
                               for e in job.stats.exceptions[-1:])
            raise CutcheckError(f"Flink job {job_id} ended {state}{(' (' + detail + ')') if detail else ''}; "
                                f"see the logs in {os.environ.get('FLINK_LOG_DIR', 'FLINK_LOG_DIR')}.")
        result.ended_ms = _now()
    if result.liveness is not None:
        return result
    if opts.savepoint is not None and result.savepoint is None:
        raise CutcheckError(f"the job finished before checkpoint {opts.stop_after} completed, so no savepoint was taken; "
                            "give more --records or a smaller --stop-after-checkpoint.")
    if (opts.fail_after is not None or opts.kill_after is not None) and result.fired is None:
        raise CutcheckError(f"the job finished before the failure after checkpoint {opts.fail_after or opts.kill_after} could fire; "
                            "give more --records or a smaller --fail-after-checkpoint.")
    return result


def latest_retained(checkpoint_dir: str, job_id: str) -> str | None:
    """The newest chk-N of the job with a _metadata: what Flink retained (REST statistics may lag behind)."""
    base = os.path.join(checkpoint_dir, job_id)
    best: tuple[int, str] | None = None
    for name in os.listdir(base) if os.path.isdir(base) else []:
        done = name.startswith("chk-") and name[4:].isdigit() and os.path.exists(os.path.join(base, name, "_metadata"))
        if done and (best is None or int(name[4:]) > best[0]):
            best = (int(name[4:]), os.path.join(base, name))
    return best[1] if best else None


def _uri(location: str) -> str:
    """A local path as a file: URI; a location with a scheme (file:, s3:, ...) as it is."""
    return location if ":" in location.split("/", 1)[0] else Path(location).absolute().as_uri()


def describe(result: FlinkRun) -> dict[str, Any]:
    return {"jobs": [{"index": j.index, "job_id": j.job_id, "restored_from": j.restored_from,
                      "state": j.stats.state if j.stats else None,
                      "parallelism": {v.id: v.parallelism for v in j.graph.vertices}} for j in result.jobs]}
