"""A Flink run as a cutcheck run directory (DESIGN "Recovery logs"), so that ``cutcheck validate`` reads it unchanged.

* ``input/``: derived from the graph's deterministic sources (reference.runtime.records.SourceLayout), with
  the copies each rid must make, exactly as the engine writes it; Flink's NumberSequenceSource
  emits j and the source map computes record j, so rids, keys, splits and offsets agree.
* ``output/``: the committed sink part files only. Flink's FileSink writes ``.part-*.inprogress.*``
  (in progress, or pending until its checkpoint completes) and renames on commit, so a hidden
  name is never committed output. ``txn`` is the part file, ``commit_seq`` orders part files by
  modification time (a file is closed when its checkpoint's barrier passes, so this is commit
  order per sink subtask), ``checkpoint_id`` and ``attempt`` are unknown (null), and ``lane`` is
  null: NumberSequenceSource reads ranges of rids, not whole splits, so per-split order is no
  promise of this translation and the order check is skipped.
* ``checkpoints/``: Flink's REST statistics, in the engine's meanings: steps are milliseconds since
  the run started, ``alignment_steps`` the slowest subtask's alignment, ``state_bytes`` the channel
  state (in-flight data persisted; the engine's input plus output state), ``inflight_bytes`` the
  in-flight data the checkpoint met (processed during alignment plus persisted). Record counts of
  channel state are not reported by Flink (null); the full state size goes to run.json.
* ``events/``: submissions, the armed and fired failure, restores, rescales, checkpoint outcomes.

The logs are written into the same run directory as the Flink state, in place
(reference.logs.RunLogWriter with ``in_place``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from cutcheck.flink_bridge.rest import FlinkCheckpoint
from cutcheck.flink_bridge.runner import FlinkRun
from cutcheck.flink_bridge.settings import described
from cutcheck.model.graph import JobGraph
from cutcheck.reference.checks.oracle import ExactlyOnce, Oracle
from cutcheck.reference.logs import RunLogWriter
from cutcheck.reference.runtime.records import Expectations

VERSION = "0.1.0"


def committed_files(sink_dir: str) -> list[str]:
    """Committed part files: FileSink's in-progress and pending files are hidden (.part-*.inprogress.*)."""
    if not os.path.isdir(sink_dir):
        return []
    names = [n for n in os.listdir(sink_dir) if not n.startswith((".", "_")) and ".inprogress" not in n]
    paths = [os.path.join(sink_dir, n) for n in names]
    return sorted(paths, key=lambda p: (os.stat(p).st_mtime_ns, os.path.basename(p)))


def output_rows(run: FlinkRun) -> Iterator[tuple[str, str, int, list[tuple[int, ...]]]]:
    """(sink subtask, txn, commit_seq, records) per committed part file, records in the engine's tuple layout."""
    seq = 0
    for sink, directory in sorted(run.sinks.items()):
        for path in committed_files(directory):
            by_subtask: dict[int, list[tuple[int, ...]]] = {}
            with open(path) as fh:
                for line in fh:
                    if not line.strip():
                        continue
                    rid, key, value, count, split, offset, subtask = (int(x) for x in line.split(","))
                    by_subtask.setdefault(subtask, []).append((rid, key, value, split, offset, count, 0))
            for subtask, recs in sorted(by_subtask.items()):
                yield f"{sink}[{subtask}]", os.path.basename(path), seq, recs
            seq += 1


def failure_times(run: FlinkRun) -> list[int]:
    times = {int(e["timestamp"]) for j in run.jobs if j.stats for e in j.stats.exceptions if "timestamp" in e}
    if run.fired_ms is not None and not times:
        times.add(run.fired_ms)
    return sorted(times)


def _attempt(failures: list[int], when: int) -> int:
    return sum(1 for t in failures if t < when)


def checkpoint_row(cp: FlinkCheckpoint, attempt: int, start: int) -> dict[str, Any]:
    end = cp.ack_ms if cp.ack_ms is not None else cp.trigger_ms + cp.duration_ms
    return {"id": cp.id, "attempt": attempt, "kind": "savepoint" if cp.is_savepoint else "checkpoint",
            "status": "completed" if cp.status == "COMPLETED" else "aborted",
            "trigger_step": cp.trigger_ms - start, "end_step": end - start, "alignment_steps": cp.alignment_ms,
            "input_state_records": None, "output_state_records": None, "state_bytes": cp.persisted_bytes,
            "inflight_bytes": cp.inflight_bytes, "buffer_size": None}


def all_checkpoints(run: FlinkRun) -> list[tuple[int, FlinkCheckpoint]]:
    failures = failure_times(run)
    return [(_attempt(failures, cp.trigger_ms), cp) for j in run.jobs if j.stats for cp in j.stats.checkpoints]


def events(run: FlinkRun) -> list[tuple[int, str, str]]:
    evs = list(run.events)
    for j in run.jobs:
        if j.stats is None:
            continue
        for e in j.stats.exceptions:
            task = e.get("taskName") or "job"
            evs.append((int(e.get("timestamp", 0)), "exception", f"{task}: {e.get('exceptionName', '')}"))
        r = j.stats.restored
        if r:
            evs.append((int(r.get("restore_timestamp", j.submitted_ms)), "restore",
                        f"checkpoint {r.get('id')}" + (f" from {r.get('external_path')}" if j.index > 0 else "")))
        if j.index > 0:
            before = run.jobs[j.index - 1].graph
            moved = [f"{v.id} {before.vertex(v.id).parallelism} -> {v.parallelism}" for v in j.graph.vertices
                     if before.vertex(v.id).parallelism != v.parallelism]
            if moved:
                evs.append((j.submitted_ms, "rescale", ", ".join(moved)))
        for cp in j.stats.checkpoints:
            kind = "complete" if cp.status == "COMPLETED" else "abort"
            evs.append((cp.ack_ms or cp.trigger_ms + cp.duration_ms, kind, f"checkpoint {cp.id} ({cp.checkpoint_type.lower()})"
                        + (f": {cp.failure[:200]}" if cp.failure else "")))
    return sorted(evs, key=lambda e: (e[0], e[1]))


def verdict(graph: JobGraph, run: FlinkRun) -> tuple[ExactlyOnce, int]:
    """The engine's own EXACTLY_ONCE oracle over the committed output; returns (verdict, output rows)."""
    oracle = Oracle(Expectations.of(graph), graph, None)
    rows = 0
    for sink_subtask, txn, seq, recs in output_rows(run):
        oracle.on_commit(recs, txn, sink_subtask, -1, 0, seq)
        rows += len(recs)
    return oracle.verdict(), rows


def summary(run: FlinkRun) -> dict[str, Any]:
    eo, rows = verdict(run.graph, run)
    cps = [cp for _, cp in all_checkpoints(run)]
    done = [cp for cp in cps if cp.status == "COMPLETED"]
    restores = [{"job": j.job_id, "checkpoint": (j.stats.restored or {}).get("id"), "rescaled": j.index > 0,
                 "parallelism": {v.id: v.parallelism for v in j.graph.vertices}}
                for j in run.jobs if j.stats and j.stats.restored]
    return {
        "mode": run.options.mode,
        # False when the job was left failed (no restart): the output is a prefix, not a verdict
        "complete": bool(run.jobs and run.jobs[-1].stats and run.jobs[-1].stats.state == "FINISHED"),
        "seconds": round((run.ended_ms - run.started_ms) / 1000, 3),
        "checkpoints_completed": len(done),
        "checkpoints_aborted": len(cps) - len(done),
        "unaligned_checkpoints": sum(1 for cp in done if cp.unaligned),
        "alignment_ms": sum(cp.alignment_ms or 0 for cp in done),
        "inflight_bytes": sum(cp.inflight_bytes for cp in done),
        "persisted_bytes": sum(cp.persisted_bytes for cp in done),
        "full_state_bytes": sum(cp.state_bytes for cp in done),
        "restarts": len(failure_times(run)),
        "output_rows": rows,
        "exactly_once": eo.to_json(),
        "restores": restores,
        "failure": {"vertex_subtask": run.fired, "after_checkpoint": run.options.fail_after or run.options.kill_after}
        if run.fired else None,
        "settings": described(run.options),  # the deadline, checkpoint timeout, tolerance and --conf of the run
        "liveness": run.liveness.to_json() if run.liveness is not None else None,  # cancelled at its deadline
    }


def write(writer: RunLogWriter, run: FlinkRun) -> dict[str, Any]:
    """Fill the writer's datasets from a finished run and finalize it; return run.json's summary."""
    start = run.started_ms
    expect = Expectations.of(run.graph)
    oracle = Oracle(expect, run.graph, None)
    writer.write_input(expect, oracle.expected_copies)
    out = writer.data["output"]
    for sink_subtask, txn, seq, recs in output_rows(run):
        sink = sink_subtask.rpartition("[")[0]
        counter, _lane = oracle.labels[sink]
        for r in recs:
            out.add({"rid": r[0], "key": r[1], "value": r[2], "count": r[5] if counter else None, "split": r[3],
                     "offset": r[4], "sink_subtask": sink_subtask, "txn": txn, "checkpoint_id": None, "attempt": None,
                     "commit_seq": seq, "counter": counter, "lane": None})
    for attempt, cp in all_checkpoints(run):
        writer.data["checkpoints"].add(checkpoint_row(cp, attempt, start))
    failures = failure_times(run)
    for when, kind, detail in events(run):
        writer.event(max(when - start, 0), _attempt(failures, when), kind, detail)
    summ = summary(run)
    rebase(run, os.path.abspath(writer.tmp), os.path.abspath(writer.out))  # run.json and the caller: final paths
    writer.finalize(run_json(run, summ))
    return summ


def rebase(run: FlinkRun, tmp: str, final: str) -> None:
    """Point the run's paths from the temporary run directory to the one it is renamed to."""

    def moved(path: str) -> str:
        return final + path[len(tmp):] if path == tmp or path.startswith(tmp + os.sep) else path

    run.work, run.checkpoint_dir = moved(run.work), moved(run.checkpoint_dir)
    run.sinks = {k: moved(v) for k, v in run.sinks.items()}


def run_json(run: FlinkRun, summ: dict[str, Any]) -> dict[str, Any]:
    from cutcheck.flink_bridge.runner import describe

    flink_version = run.flink_version or "unknown"  # the run's own release (it may have run in a worker)
    o = run.options
    scenario = {
        "graph": run.graph.to_json(),
        "checkpoint": {"mode": o.mode, "interval_ms": o.interval_ms,
                       "timeout_ms": o.alignment_timeout_ms if o.mode == "aligned_timeout" else None,
                       "max_concurrent": 1, "retained": o.retained, "incremental": o.incremental},
        "failures": [{"after_checkpoint": o.fail_after, "target": run.fired or run.fail_vertex}] if o.fail_after else [],
        "rescales": [{"on_failure": 0, "parallelism": dict(o.rescale)}] if o.rescale else [],
        "slow": {"vertex": run.slow, "delay_ms": o.delay_ms},
    }
    return {"version": VERSION, "engine": "flink", "step_unit": "ms", "seed": None, "scenario": scenario,
            "summary": summ, "flink": {"version": flink_version, "checkpoint_dir": run.checkpoint_dir,
                                       "started_ms": run.started_ms, **describe(run)}}
