"""Engine throughput against a minimal deque pipeline, and peak memory of a long run.

Prints one JSON line per figure. The baseline moves the same records over the same hops
(source -> map -> keyed count -> sink, same partitioners) with plain deques in the same process,
so the ratio compares like with like on this machine.

    python benchmarks/bench_engine.py                 # 1M records (best of 3 each), RSS of a 1M run
    python benchmarks/bench_engine.py --rss-records 10000000   # the 10M-record RSS figure
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cutcheck.model.keygroups import assign_to_key_group, operator_index  # noqa: E402
from cutcheck.reference import Scenario, simulate  # noqa: E402
from cutcheck.reference.runtime.records import map_value, source_layouts  # noqa: E402

PAR = {"src": 2, "map": 4, "count": 3, "sink": 2}
HOPS_PER_RECORD = 3


def graph(records: int) -> dict:
    return {"name": "bench", "max_parallelism": 128,
            "vertices": [{"id": "src", "kind": "source", "parallelism": PAR["src"], "records": records, "keys": 1000, "splits": 8},
                         {"id": "map", "kind": "map", "parallelism": PAR["map"]},
                         {"id": "count", "kind": "keyed_count", "parallelism": PAR["count"]},
                         {"id": "sink", "kind": "sink", "parallelism": PAR["sink"]}],
            "edges": [{"from": "src", "to": "map", "partitioner": "rebalance"},
                      {"from": "map", "to": "count", "partitioner": "hash"},
                      {"from": "count", "to": "sink", "partitioner": "rebalance"}]}


def scenario(records: int) -> Scenario:
    return Scenario.from_json({"graph": graph(records), "seed": 1,
                               "checkpoint": {"mode": "unaligned", "interval": 10_000},
                               "network": {"buffer_bytes": 4096, "record_bytes": 64}, "max_steps": 10**12})


def deque_pipeline(records: int) -> int:
    """The same records over the same hops with deques: the floor any engine is measured against."""
    from cutcheck.model.graph import JobGraph

    layout = source_layouts(JobGraph.from_json(graph(records)))["src"]
    maps = [deque() for _ in range(PAR["map"])]
    counts = [deque() for _ in range(PAR["count"])]
    sinks = [deque() for _ in range(PAR["sink"])]
    state: list[dict[int, int]] = [{} for _ in range(PAR["count"])]
    route: dict[int, int] = {}
    rr = rr2 = 0
    committed = 0
    for rec in layout.all_records():
        rr = (rr + 1) % PAR["map"]
        maps[rr].append(rec)
        q = maps[rr]
        r = q.popleft()
        r = (r[0], r[1], map_value(r[2]), r[3], r[4], r[5], r[6])
        key = r[1]
        ch = route.get(key)
        if ch is None:
            ch = route[key] = operator_index(assign_to_key_group(key, 128), 128, PAR["count"])
        counts[ch].append(r)
        r = counts[ch].popleft()
        st = state[ch]
        c = st.get(key, 0) + 1
        st[key] = c
        rr2 = (rr2 + 1) % PAR["sink"]
        sinks[rr2].append((r[0], r[1], r[2], r[3], r[4], c, 0))
        sinks[rr2].popleft()
        committed += 1
    return committed


def rss_run(records: int) -> int:
    """Peak RSS in bytes of a fresh process running the engine on ``records`` records."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r});"
            "from benchmarks.bench_engine import scenario; from reference import simulate;"
            f"r = simulate(scenario({records})); assert r.ok, r.violations")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    subprocess.run([sys.executable, "-c", code], check=True)
    return max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rss-records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each side, alternating; the fastest of each is compared (as timeit does)")
    args = ap.parse_args()
    hops = args.records * HOPS_PER_RECORD

    base_times: list[float] = []
    eng_times: list[float] = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        deque_pipeline(args.records)
        base_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        result = simulate(scenario(args.records))
        eng_times.append(time.perf_counter() - t)
        assert result.ok, result.violations
    base, eng = min(base_times), min(eng_times)
    figures = [
        {"figure": "baseline_record_hops_per_second", "records": args.records, "value": hops / base},
        {"figure": "engine_record_hops_per_second", "records": args.records, "value": hops / eng},
        {"figure": "engine_to_baseline_ratio", "records": args.records, "value": base / eng, "target": ">= 0.2",
         "repeat": args.repeat, "ratio_of_slowest_runs": max(base_times) / max(eng_times)},
        {"figure": "engine_seconds", "records": args.records, "value": eng, "runs": [round(x, 3) for x in eng_times],
         "checkpoints": sum(1 for c in result.checkpoints if c["status"] == "completed"), "steps": result.steps},
    ]
    for f in figures:
        print(json.dumps(f))
    print(json.dumps({"figure": "peak_rss_bytes", "records": args.rss_records, "value": rss_run(args.rss_records),
                      "target": "< 1.5 GB for 10M records"}))


if __name__ == "__main__":
    main()
