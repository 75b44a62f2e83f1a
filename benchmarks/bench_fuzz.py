"""Detection power as a rate, the cost of trace validation and the coverage of verify's fuzz stage,
one JSON line per figure.

    python benchmarks/bench_fuzz.py [--seeds 5] [--budget 60] [--faults F1,F2] [--campaigns hypothesis,seed]
                                    [--trace-seeds 60] [--skip-trace-cost] [--profile ci] [--skip-coverage]

Detection: every fault of the catalogue, the test-only ones included (marked ``test_only``), is hunted
by each campaign on its own at campaign seeds 0 .. SEEDS-1, each hunt within ``--budget`` seconds
(the campaign's wall, which no scenario overruns):

- ``hypothesis``: ``cutcheck fuzz --seed S --seconds B --mutant F`` (``hypothesis_campaign``, guided by
  its corpus and the least-reached feature pairs as ``fuzz`` runs it, without shrinking: the figure is
  the time until the first finding);
- ``seed``: the mutation check's hunt of ``verify --seed S`` (``kill``: scenario seeds from
  ``S x SEED_STRIDE`` on, through the feature cycle).

A hunt finds the fault only when its failing scenario passes with the fault switched off; a scenario
that fails either way is an engine finding, reported and not counted. Lines: ``time_to_find_seconds``
per hunt; ``detection_rate`` per fault and campaign (found on how many seeds, median seconds to find
over the seeds that found it); ``detection_summary`` per campaign and over both (faults found on at
least 4 of 5 seeds, the rest with their rates, the test-only faults' rates).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cutcheck.commands.fuzz import FUZZ_PROFILES, UNBOUNDED  # noqa: E402
from cutcheck.commands.verify import SEED_STRIDE  # noqa: E402
from cutcheck.reference.core.coverage import cell_name  # noqa: E402
from cutcheck.reference.faults.catalogue import CATALOGUE  # noqa: E402
from cutcheck.reference.fuzzing.campaigns import hypothesis_campaign, kill  # noqa: E402
from cutcheck.reference.fuzzing.verdicts import run_scenario, verdict_of_seed  # noqa: E402

CAMPAIGNS = ("hypothesis", "seed")
ENOUGH = 0.8  # of the campaign seeds: the bar is 4 of 5


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


def hunt(fault: str, campaign: str, seed: int, budget: float) -> dict[str, Any]:
    """One campaign's hunt for ``fault`` at campaign seed ``seed``: found, when, how."""
    if campaign == "seed":
        k = kill(fault, seconds=budget, max_seeds=SEED_STRIDE, first_seed=seed * SEED_STRIDE)
        return {"found": k.killed, "value": round(k.seconds, 2), "scenarios": k.examples, "violation": k.violation,
                "scenario_seed": k.seed, "engine_finding": k.engine_finding}
    r = hypothesis_campaign(examples=UNBOUNDED, seconds=budget, mutants=(fault,), seed=seed, shrink=False)
    row: dict[str, Any] = {"found": False, "value": round(r.seconds, 2), "scenarios": r.examples, "violation": "",
                           "engine_finding": None, "cut_by_wall": r.cut_by_wall}
    if r.failure is not None:
        clean = run_scenario(dict(r.failure.scenario, mutants=[]))
        if clean.ok:
            row.update(found=True, value=round(r.phases["search"], 2), violation=r.failure.invariant)
        else:
            row["engine_finding"] = clean.violations[0]
    return row


def detection(faults: list[str], campaigns: list[str], seeds: int, budget: float) -> None:
    rates: dict[str, dict[str, dict[str, Any]]] = {c: {} for c in campaigns}
    for fault in faults:
        test_only = CATALOGUE[fault].test_only
        for campaign in campaigns:
            times: list[float] = []
            for seed in range(seeds):
                row = hunt(fault, campaign, seed, budget)
                emit(figure="time_to_find_seconds", fault=fault, test_only=test_only, campaign=campaign,
                     campaign_seed=seed, budget=budget, **row)
                if row["found"]:
                    times.append(row["value"])
            rate = {"found_on": len(times), "seeds": seeds,
                    "median_seconds": round(statistics.median(times), 2) if times else None, "test_only": test_only}
            rates[campaign][fault] = rate
            emit(figure="detection_rate", fault=fault, campaign=campaign, value=round(len(times) / seeds, 3),
                 budget=budget, **rate)
    for campaign in campaigns:
        _summary(campaign, rates[campaign], seeds, budget)
    both = {f: {"found_on": min(rates[c][f]["found_on"] for c in campaigns), "test_only": CATALOGUE[f].test_only}
            for f in faults}
    _summary("both", both, seeds, budget)


def _summary(campaign: str, rates: dict[str, dict[str, Any]], seeds: int, budget: float) -> None:
    """How many faults this campaign (``both``: each campaign on its own) finds on at least 4 of 5 seeds."""
    enough = [f for f, r in rates.items() if r["found_on"] >= ENOUGH * seeds]
    emit(figure="detection_summary", campaign=campaign, value=len(enough), faults=len(rates), seeds=seeds,
         budget=budget, meaning=f"faults found within {budget:g} s on at least {ENOUGH:.0%} of the campaign seeds",
         below={f: f"{r['found_on']}/{seeds}" for f, r in rates.items() if f not in enough},
         test_only={f: f"{r['found_on']}/{seeds}" for f, r in rates.items() if r["test_only"]})


def profile_coverage(profile: str) -> None:
    r = hypothesis_campaign(examples=FUZZ_PROFILES[profile]["examples"])
    cov = r.coverage
    emit(figure="coverage_cells_reached", profile=profile, value=len(cov.reached()), reachable=cov.reachable(),
         scenarios=r.examples, seconds=round(r.seconds, 1), finding=r.failure.invariant if r.failure else None)
    emit(figure="coverage_cells_missed", profile=profile, value=len(cov.missed()),
         missed=[cell_name(c) for c in cov.missed()])


def _names(text: str, known: dict[str, Any], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise SystemExit(f"bench_fuzz: {what} {', '.join(unknown) or '(none)'} unknown; known: {', '.join(known)}.")
    return names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5, help="campaign seeds 0 .. SEEDS-1 per fault and campaign")
    ap.add_argument("--budget", type=float, default=60.0, help="seconds per hunt (the campaign's wall)")
    ap.add_argument("--faults", default="", help="comma-separated catalogue faults (default: all, test-only included)")
    ap.add_argument("--campaigns", default=",".join(CAMPAIGNS), help="hypothesis, seed or both")
    ap.add_argument("--trace-seeds", type=int, default=60, help="scenarios for the trace validation cost")
    ap.add_argument("--skip-trace-cost", action="store_true")
    ap.add_argument("--profile", default="ci", choices=sorted(FUZZ_PROFILES))
    ap.add_argument("--skip-coverage", action="store_true")
    args = ap.parse_args()
    if args.seeds < 1 or not args.budget > 0:
        raise SystemExit("bench_fuzz: --seeds must be at least 1 and --budget more than 0 seconds.")
    faults = _names(args.faults, CATALOGUE, "fault(s)") if args.faults else sorted(CATALOGUE)
    campaigns = _names(args.campaigns, dict.fromkeys(CAMPAIGNS), "campaign(s)")
    if not args.skip_trace_cost:
        trace_cost(args.trace_seeds)
    detection(faults, campaigns, args.seeds, args.budget)
    if not args.skip_coverage:
        profile_coverage(args.profile)


if __name__ == "__main__":
    main()
