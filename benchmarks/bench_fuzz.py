"""Fuzzing speed and the mutation check's time-to-kill, one JSON line per figure.

    python benchmarks/bench_fuzz.py [--seeds 60] [--budget 60]

Scenarios per second of a seed campaign on the unmutated engine, then, for every mutant of
DESIGN, the seconds and scenarios until the engine's checks kill it (target: each within 60 s on
the quick profile) and the mutation score.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cutcheck.reference.faults.catalogue import MUTANTS  # noqa: E402
from cutcheck.reference.fuzzing.campaigns import kill, seed_campaign  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=60)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds allowed per mutant")
    args = ap.parse_args()
    t = time.perf_counter()
    result = seed_campaign(range(args.seeds))
    seconds = time.perf_counter() - t
    print(json.dumps({"figure": "scenarios_per_second", "scenarios": result.examples, "value": result.examples / seconds,
                      "violations": sum(not v["ok"] for v in result.verdicts)}))
    killed = 0
    for m in MUTANTS:
        k = kill(m, seconds=args.budget)
        killed += k.killed
        print(json.dumps({"figure": "time_to_kill_seconds", "mutant": m, "value": k.seconds, "killed": k.killed,
                          "scenarios": k.examples, "violation": k.violation, "seed": k.seed,
                          "target": f"<= {args.budget:g} s"}))
    print(json.dumps({"figure": "mutation_score", "value": killed / len(MUTANTS), "killed": killed, "mutants": len(MUTANTS)}))


if __name__ == "__main__":
    main()
