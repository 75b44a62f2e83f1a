"""Large job graphs: `graph show/regions/inflight` per job edge, and the engine's channel budget.

Prints one JSON line per figure:

* ``graph_<command>`` on a P x P all-to-all job (default 5000 x 5000: 25 million channels): wall
  time and peak RSS of ``python cli.py graph <command>`` in a child process;
* ``<command>_per_channel_over_per_job_edge``: the per-channel computation (ExecutionGraph, then
  ``pipelined_regions`` / ``worst_case_inflight_bytes`` / ``channels_of_edge``) against the per-job-edge
  one, in this process, on the largest all-to-all job within ``MAX_CHANNELS``; the ratio is the figure;
* ``engine_setup_*``: what ExecutionGraph plus the engine's runtime (``make_engine``) cost per channel,
  and the time of one engine step, each in a fresh child process, so that ``MAX_CHANNELS`` is a
  measured budget.

    python benchmarks/bench_graph.py                  # 5000 x 5000, engine at 50 000 and 200 000 channels
    python benchmarks/bench_graph.py --side 2000 --engine 10000,100000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cutcheck.model.execution import MAX_CHANNELS, ExecutionGraph, channel_counts, edge_channels  # noqa: E402
from cutcheck.model.graph import JobGraph  # noqa: E402
from cutcheck.model.inflight import job_worst_case_inflight_bytes, worst_case_inflight_bytes  # noqa: E402
from cutcheck.model.regions import job_pipelined_regions, pipelined_regions  # noqa: E402


def all_to_all(side: int) -> dict[str, Any]:
    return {"name": f"all-to-all-{side}", "max_parallelism": 32768,
            "vertices": [{"id": "src", "kind": "source", "parallelism": side, "records": 2 * side},
                         {"id": "sink", "kind": "sink", "parallelism": side}],
            "edges": [{"from": "src", "to": "sink", "partitioner": "rebalance"}]}


def child(args: list[str], timeout: float) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MB and exit code of a child process (killed after ``timeout``)."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, proc.returncode


def best_of(fn: Callable[[], Any], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def cli_figures(side: int, timeout: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "job.json"
        path.write_text(json.dumps(all_to_all(side)))
        for command in ("show", "regions", "inflight"):
            seconds, rss, code = child([sys.executable, "-m", "cutcheck", "graph", command, str(path)], timeout)
            print(json.dumps({"figure": f"graph_{command}", "job": f"{side}x{side} all-to-all",
                              "channels": side * side, "seconds": round(seconds, 2), "peak_rss_mb": round(rss),
                              "exit": code, "timed_out": seconds >= timeout}))


def ratio_figures() -> None:
    side = int(MAX_CHANNELS**0.5)
    job = JobGraph.from_json(all_to_all(side))
    p = {v.id: v.parallelism for v in job.vertices}
    pairs: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        "show": (lambda: [len(ExecutionGraph(job).channels_of_edge(e.key)) for e in job.edges],
                 lambda: [edge_channels(e, p[e.source], p[e.target]) for e in job.edges]),
        "regions": (lambda: pipelined_regions(ExecutionGraph(job)), lambda: job_pipelined_regions(job)),
        "inflight": (lambda: worst_case_inflight_bytes(ExecutionGraph(job)),
                     lambda: job_worst_case_inflight_bytes(channel_counts(job))),
    }
    for command, (per_channel, per_edge) in pairs.items():
        slow, fast = best_of(per_channel, 1), best_of(per_edge)
        print(json.dumps({"figure": f"{command}_per_channel_over_per_job_edge", "value": round(slow / fast, 1),
                          "per_channel_ms": round(slow * 1000, 1), "per_job_edge_ms": round(fast * 1000, 3),
                          "job": f"{side}x{side} all-to-all", "channels": side * side}))


_ENGINE = """
import json, sys, time
sys.path.insert(0, {root!r})
from cutcheck.reference import Scenario
from cutcheck.reference.batch import make_engine
def rss():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) * 1024
scenario = Scenario.from_json({{"graph": {path!r}, "max_steps": 10**9}})
before, start = rss(), time.perf_counter()
engine = make_engine(scenario)
setup, grown = time.perf_counter() - start, rss() - before
start = time.perf_counter()
for _ in range(20):
    engine.tick()
print(json.dumps({{"setup_s": setup, "bytes": grown, "step_s": (time.perf_counter() - start) / 20}}))
"""


def engine_figures(sizes: list[int]) -> None:
    for channels in sizes:
        side = int(channels**0.5)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "job.json"
            path.write_text(json.dumps(all_to_all(side)))
            code = _ENGINE.format(root=str(ROOT), path=str(path))
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True)
        m = json.loads(proc.stdout.strip().splitlines()[-1])
        n = side * side
        common = {"job": f"{side}x{side} all-to-all", "channels": n, "budget": MAX_CHANNELS}
        print(json.dumps({"figure": "engine_setup_bytes_per_channel", "value": round(m["bytes"] / n),
                          "setup_mb": round(m["bytes"] / 2**20), **common}))
        print(json.dumps({"figure": "engine_setup_us_per_channel", "value": round(m["setup_s"] * 1e6 / n, 1),
                          "setup_s": round(m["setup_s"], 2), **common}))
        print(json.dumps({"figure": "engine_step_ms", "value": round(m["step_s"] * 1000, 2), **common}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--side", type=int, default=5000, help="parallelism of both vertices of the all-to-all job")
    ap.add_argument("--timeout", type=float, default=150.0, help="seconds before a CLI child is killed")
    ap.add_argument("--engine", default=f"50000,{MAX_CHANNELS}", help="channel counts to set the engine up at")
    args = ap.parse_args()
    cli_figures(args.side, args.timeout)
    ratio_figures()
    engine_figures([int(x) for x in args.engine.split(",") if x])


if __name__ == "__main__":
    main()
