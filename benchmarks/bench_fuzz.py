"""Fuzzing speed, the cost of trace validation, the mutation check's time-to-kill and the coverage of
verify's fuzz stage, one JSON line per figure.

    python benchmarks/bench_fuzz.py [--seeds 60] [--budget 60] [--starts 0,5000,10000] [--profile ci] [--skip-coverage]

Seconds per scenario of a seed campaign on the unmutated engine with and without trace validation
(and their ratio); for every mutant of the catalogue and each of several first seeds, the seconds,
the scenarios and the focus of the cycle (``verdicts.FEATURE_CYCLE``) until the engine's checks kill
it, without per-mutant hints (target: each within 60 s), and the mutation score; then the coverage cells the profile's fuzz stage reaches and the reachable ones it misses, by name.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cutcheck.commands.fuzz import FUZZ_PROFILES  # noqa: E402
from cutcheck.reference.core.coverage import cell_name  # noqa: E402
from cutcheck.reference.faults.catalogue import MUTANTS  # noqa: E402
from cutcheck.reference.fuzzing.campaigns import hypothesis_campaign, kill  # noqa: E402
from cutcheck.reference.fuzzing.verdicts import focus_of_seed, verdict_of_seed  # noqa: E402


def emit(**figure: object) -> None:
    print(json.dumps(figure), flush=True)


def trace_cost(seeds: int) -> None:
    per: dict[bool, float] = {}
    for trace in (False, True):
        t = time.perf_counter()
        bad = sum(not verdict_of_seed(s, (), None, trace=trace)["ok"] for s in range(seeds))
        per[trace] = (time.perf_counter() - t) / seeds
        emit(figure="seconds_per_scenario", traced=trace, value=round(per[trace], 4), scenarios=seeds, findings=bad)
    emit(figure="trace_validation_cost_ratio", value=round(per[True] / per[False], 3),
         meaning="seconds per scenario traced and validated / untraced")


def time_to_kill(budget: float, starts: list[int]) -> None:
    """Each mutant hunted from several first seeds, so a kill is not the luck of one seed."""
    killed = runs = 0
    for m in MUTANTS:
        for first in starts:
            k = kill(m, seconds=budget, max_seeds=10**6, first_seed=first)
            killed += k.killed
            runs += 1
            emit(figure="time_to_kill_seconds", mutant=m, first_seed=first, value=round(k.seconds, 2),
                 killed=k.killed, scenarios=k.examples, violation=k.violation, seed=k.seed,
                 focus=focus_of_seed(k.seed) if k.seed is not None else None, engine_finding=k.engine_finding,
                 target=f"<= {budget:g} s")
    emit(figure="mutation_score", value=killed / runs, killed=killed, hunts=runs, mutants=len(MUTANTS),
         first_seeds=starts)


def profile_coverage(profile: str) -> None:
    r = hypothesis_campaign(examples=FUZZ_PROFILES[profile]["examples"])
    cov = r.coverage
    emit(figure="coverage_cells_reached", profile=profile, value=len(cov.reached()), reachable=cov.reachable(),
         scenarios=r.examples, seconds=round(r.seconds, 1), finding=r.failure.invariant if r.failure else None)
    emit(figure="coverage_cells_missed", profile=profile, value=len(cov.missed()),
         missed=[cell_name(c) for c in cov.missed()])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=60)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds allowed per mutant")
    ap.add_argument("--starts", default="0,5000,10000", help="first seeds of each mutant's hunts, comma-separated")
    ap.add_argument("--profile", default="ci", choices=sorted(FUZZ_PROFILES))
    ap.add_argument("--skip-coverage", action="store_true")
    args = ap.parse_args()
    trace_cost(args.seeds)
    time_to_kill(args.budget, [int(x) for x in args.starts.split(",")])
    if not args.skip_coverage:
        profile_coverage(args.profile)


if __name__ == "__main__":
    main()
