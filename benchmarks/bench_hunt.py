"""Benchmark: `cutcheck flink hunt`'s logic against the engine with planted faults (no Flink needed),
and optionally a short real hunt on the installed Flink.

Prints ONE JSON LINE PER FIGURE:

  hunt_engine_graphs_per_minute (the unfaulted engine as the runner: nothing should be found, findings: 0),
  hunt_cases_to_find (per fault: cases drawn until the first finding, its classes, the shrunk size and
    rate; "found": false when the budget ran out),
  hunt_flink_graphs_per_minute and hunt_flink_phase_seconds (with --flink-minutes M > 0: a real hunt),
  load_average (1-minute, at start: the machine is shared).

    python benchmarks/bench_hunt.py [--seed 0] [--cases 60] [--flink-minutes 0]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cutcheck.flink_bridge.hunt import EngineCaseRunner, Hunt  # noqa: E402
from cutcheck.reference.core.refusal_rule import RefusalRule  # noqa: E402

FAULTS = ("skip-stateless-reassignment", "no-rescale-filter", "rescale-filter-wrong-channel-count",
          "channel-state-by-vertex-pair", "pointwise-edge-unaligned", "sink-committables-lost-on-rescale",
          "state-filed-under-stale-key-group")


def first_finding(runner: EngineCaseRunner, seed: int, cases: int) -> dict[str, object]:
    seen: list[str] = []
    t0 = time.monotonic()
    report = Hunt(runner, seed=seed, minutes=60, max_cases=cases, reruns=3, progress=seen.append).run()
    at = next((i + 1 for i, line in enumerate(m for m in seen if m.startswith("case ")) if "FINDING" in line), None)
    f = report.findings[0] if report.findings else None
    return {"found": f is not None, "cases_to_first": at, "findings": len(report.findings),
            "classes": f.kinds if f else None, "shrunk_vertices": len(f.shrunk.graph["vertices"]) if f and f.shrunk else None,
            "rate": f"{f.reproduced}/{f.reruns}" if f else None, "cases": report.cases,
            "seconds": round(time.monotonic() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--flink-minutes", type=float, default=0.0)
    args = ap.parse_args()
    print(json.dumps({"figure": "load_average", "value": round(os.getloadavg()[0], 2)}), flush=True)
    clean = Hunt(EngineCaseRunner(), seed=args.seed, minutes=60, max_cases=args.cases).run()
    print(json.dumps({"figure": "hunt_engine_graphs_per_minute", "value": clean.graphs_per_minute,
                      "cases": clean.cases, "findings": len(clean.findings), "seed": args.seed,
                      "time": {k: round(v, 2) for k, v in clean.phases.items()}}), flush=True)
    stand_ins = [(f, EngineCaseRunner(fault=f)) for f in FAULTS]
    stand_ins.append(("per-vertex refusal rule (FLINK-38267's class)", EngineCaseRunner(rule=RefusalRule.PER_VERTEX)))
    for name, runner in stand_ins:
        print(json.dumps({"figure": "hunt_cases_to_find", "fault": name, "seed": args.seed,
                          **first_finding(runner, args.seed, args.cases)}), flush=True)
    if args.flink_minutes > 0:
        from cutcheck.flink_bridge.hunt import FlinkCaseRunner

        report = Hunt(FlinkCaseRunner(None), seed=args.seed, minutes=args.flink_minutes).run()
        print(json.dumps({"figure": "hunt_flink_graphs_per_minute", "value": report.graphs_per_minute,
                          "cases": report.cases, "conclusive": report.conclusive, "findings": len(report.findings),
                          "runner": report.runner}))
        print(json.dumps({"figure": "hunt_flink_phase_seconds", "value": {k: round(v, 1) for k, v in report.phases.items()},
                          "runner": report.runner}))


if __name__ == "__main__":
    main()
