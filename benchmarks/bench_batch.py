"""Records recomputed after a failure in the batch example: region failover versus a full restart.

Prints one JSON line per figure. examples/batch.json runs region by region (blocking exchanges);
one task fails in the middle of each stage (found from a run without failures), once with
``failover_strategy: region`` (facts §6.4) and once with ``full`` (every deployed region restarts
and every blocking partition is re-produced). "Recomputed" counts the records that the lost
attempts of the restarted tasks had consumed (or, for sources, produced).

    python benchmarks/bench_batch.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cutcheck.reference import Scenario, simulate  # noqa: E402
from cutcheck.reference.batch import make_engine  # noqa: E402
from cutcheck.reference.events.stream import Logged  # noqa: E402

FAILURES = [("clean[0]", "{clean[0], src[0]}"), ("count[1]", "{count[1]}"), ("map[1]", "{map[1], sink[1]}"),
            ("worker:0", "{map[0], sink[0]}")]


def base(strategy: str, failures: list[dict[str, Any]]) -> Scenario:
    return Scenario.from_json({
        "graph": str(ROOT / "examples" / "batch.json"), "seed": 3,
        "network": {"buffer_bytes": 512, "record_bytes": 64, "exclusive": 2, "floating": 2},
        "failures": failures, "batch": {"failover_strategy": strategy}, "workers": 2})


def windows() -> dict[str, tuple[int, int]]:
    engine = make_engine(base("region", []))
    seen: dict[str, list[int]] = {}
    engine.bus.subscribe(Logged, lambda e: seen.setdefault(e.detail, []).append(e.step)
                         if e.kind in ("deploy", "region_finished") else None)
    engine.run()
    return {region: (steps[0], steps[1]) for region, steps in seen.items()}


def main() -> None:
    w = windows()
    totals = {"region": 0, "full": 0}
    for target, region in FAILURES:
        at = sum(w[region]) // 2
        for strategy in ("region", "full"):
            r = simulate(base(strategy, [{"at_step": at, "target": target}]))
            if not r.ok:
                raise SystemExit(f"{target} at {at} ({strategy}) violated: {r.violations}")
            b = r.summary()["batch"]
            totals[strategy] += b["records_recomputed"]
            print(json.dumps({"figure": "records_recomputed", "job": "batch.json", "failure": target, "at_step": at,
                              "strategy": strategy, "value": b["records_recomputed"],
                              "regions_restarted": b["regions_restarted"], "run_steps": r.steps}))
    print(json.dumps({"figure": "records_recomputed_total", "job": "batch.json", "failures": len(FAILURES), **totals,
                      "ratio_region_over_full": round(totals["region"] / totals["full"], 3)}))


if __name__ == "__main__":
    main()
