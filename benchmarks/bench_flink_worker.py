"""Benchmark: what running a job through the release worker (``--flink VERSION``) costs over running it
in-process (no ``--flink``), on the installed release, in one process, alternating the two ways.

Each way runs the same small job ``--runs`` times; the first run of either way also starts the JVM (the
worker's first run, the worker process too). Prints ONE JSON LINE PER FIGURE:

  worker_ready_seconds (the worker process until PyFlink imported: Python, cutcheck, PyFlink),
  run_seconds (per run and way: ``inprocess`` or ``worker``, ``warm`` after the first),
  worker_overhead_ratio (mean warm worker run / mean warm in-process run),
  load_average (1-minute, at start: the machine is shared).

    python benchmarks/bench_flink_worker.py [--runs 3] [--records 400]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cutcheck.flink_bridge import launch, require_flink, runner  # noqa: E402
from cutcheck.flink_bridge.runner import RunOptions  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=400)
    args = ap.parse_args()
    require_flink()
    print(json.dumps({"figure": "load_average", "value": round(os.getloadavg()[0], 2)}), flush=True)
    graph = ROOT / "examples" / "keyed-pipeline.json"
    opts = RunOptions(fail_after=1, records=args.records)
    times: dict[str, list[float]] = {"inprocess": [], "worker": []}
    with tempfile.TemporaryDirectory(prefix="cutcheck-bench-worker-") as tmp:
        for i in range(args.runs):
            for way in ("worker", "inprocess"):
                work = Path(tmp) / f"{way}-{i}"
                t0 = time.monotonic()
                if way == "worker":
                    launch.run_in_release(None, graph, opts, work)
                else:
                    runner.run(graph, work, opts)
                times[way].append(time.monotonic() - t0)
                print(json.dumps({"figure": "run_seconds", "way": way, "run": i, "warm": i > 0,
                                  "value": round(times[way][-1], 2), "records": args.records}), flush=True)
    print(json.dumps({"figure": "worker_ready_seconds", "value": round(launch.workers(None)[0].started_s, 2)}))
    warm = {k: v[1:] for k, v in times.items()}
    if all(warm.values()):
        mean = {k: sum(v) / len(v) for k, v in warm.items()}
        print(json.dumps({"figure": "worker_overhead_ratio", "value": round(mean["worker"] / mean["inprocess"], 3),
                          "worker_s": round(mean["worker"], 2), "inprocess_s": round(mean["inprocess"], 2),
                          "first_worker_s": round(times["worker"][0], 2),
                          "first_inprocess_s": round(times["inprocess"][0], 2), "runs": args.runs}))
    launch.close_all()


if __name__ == "__main__":
    main()
