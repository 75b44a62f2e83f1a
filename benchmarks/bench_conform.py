"""Benchmark: `cutcheck flink conform`, generated graphs on the engine and on a real Flink MiniCluster.

Runs ``--graphs`` generated graphs from ``--seed`` (flink_bridge.conform, as the CLI does) and prints ONE
JSON LINE PER FIGURE:

  conform_graphs_per_minute (the whole run: Flink, its MiniCluster start per graph, the engine's calibration),
  conform_seconds_per_graph (one line per graph, with its verdicts and completed checkpoints on each side),
  conform_agreement (graphs whose verdicts and refusals agree, over graphs run),
  calibration_engine_runs (engine runs the calibration made, per graph: mean and max),
  load_average (1-minute, at start: the machine is shared).

    python benchmarks/bench_conform.py [--graphs 3] [--seed 0] [--records N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cutcheck.flink_bridge import require_flink  # noqa: E402
from cutcheck.flink_bridge.conform import conform  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--records", type=int, default=None, help="per source (default: per graph)")
    args = ap.parse_args()
    require_flink()
    print(json.dumps({"figure": "load_average", "value": round(os.getloadavg()[0], 2)}), flush=True)
    with tempfile.TemporaryDirectory(prefix="cutcheck-bench-conform-") as tmp:
        report = conform(args.graphs, args.seed, Path(tmp), records=args.records)
    for r in report.rows:
        j = r.to_json()
        print(json.dumps({"figure": "conform_seconds_per_graph", "seed": r.case.seed, "value": j["seconds"],
                          "graph": j["summary"], "options": j["options"], "engine": j["engine_verdict"],
                          "flink": j["flink_verdict"], "checkpoints_engine_flink": j["checkpoints"],
                          "agree": j["agree"]}), flush=True)
    runs = [len(r.comparison.calibration) for r in report.rows if r.comparison is not None]
    common = {"graphs": len(report.rows), "seed": args.seed, "records": args.records}
    print(json.dumps({"figure": "conform_graphs_per_minute", "value": report.graphs_per_minute,
                      "seconds": round(report.seconds, 1), **common}))
    print(json.dumps({"figure": "conform_agreement", "value": round(report.agreed / len(report.rows), 3),
                      "agreed": report.agreed, **common}))
    if runs:
        print(json.dumps({"figure": "calibration_engine_runs", "value": round(sum(runs) / len(runs), 1),
                          "max": max(runs), **common}))


if __name__ == "__main__":
    main()
