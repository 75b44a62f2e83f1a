"""Guided campaigns and interleaving exploration: how soon rare interleavings are reached and faults
found, one JSON line per figure.

    python benchmarks/bench_guided.py [--seconds 60] [--seeds 0,1,2,3,4] [--faults a,b] [--reach-seeds 200]
                                      [--coverage-seeds 0,1,2,3,4] [--coverage-only]

0. Observer: seconds of the first 60 seeds of the campaign cycle run plainly and watched by the
   abstract-state observer (every fuzz verdict is), and their ratio.
1. Reach: over the first ``--reach-seeds`` scenarios of the expiry-unaligned focus (``verdicts.FOCI``),
   with and without the interleaving knobs (``interleave``), how many reach the FLINK-21104 cells
   (``stale meets-persisting``, ``stale records-behind``) and the seconds per scenario (the baseline
   runs in the same process).
2. Coverage: for each of ``--coverage-seeds``, the abstract cells reached by verify's fuzz stage under
   the ci profile (the guided Hypothesis campaign, ``FUZZ_PROFILES["ci"]`` examples), of the reachable
   ones, with the seconds it took, the cells missed, the pair family's figure, and a finding if the
   campaign stopped at one.
3. Detection: for each fault and campaign seed, whether a guided campaign (``reference.fuzzing.guided``)
   finds it within ``--seconds``, after how long, and whether the same scenario passes without it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cutcheck.reference.fuzzing.abstract_coverage import AbstractObserver  # noqa: E402
from cutcheck.reference.fuzzing.guided import guided_campaign  # noqa: E402
from cutcheck.reference.fuzzing.verdicts import FOCI, run_scenario, scenario_of_seed  # noqa: E402
from cutcheck.reference.scenario import Scenario  # noqa: E402
from cutcheck.reference.simulate import simulate  # noqa: E402

CELLS = (("stale", "meets-persisting", ""), ("stale", "records-behind", ""))
STALE_NAMES = ("stale barrier at-sender", "stale barrier meets-persisting", "stale barrier records-behind")
FAULTS = ("obsolete-barrier-ends-persisting", "broadcast-edge-unaligned")


def emit(**figure: object) -> None:
    print(json.dumps(figure), flush=True)


def observer_overhead(n: int = 60) -> None:
    plain = watched = 0.0
    for seed in range(n):
        sdict = scenario_of_seed(seed)
        if "storage" in sdict:
            continue  # on-disk runs need a directory each: their cost is the disk's, not the observer's
        sc = Scenario.from_json(sdict)
        for observe in (False, True):
            start = time.monotonic()
            # A refused restore or a finding costs the same either way.
            with contextlib.suppress(Exception):
                simulate(sc, trace=True, watch=AbstractObserver().attach if observe else None)
            if observe:
                watched += time.monotonic() - start
            else:
                plain += time.monotonic() - start
    emit(figure="observer_overhead", seeds=n, plain_seconds=round(plain, 2), observed_seconds=round(watched, 2),
         ratio=round(watched / plain, 3))


def reach(n: int) -> None:
    base = dict(FOCI["expiry-unaligned"])
    per: dict[str, float] = {}
    for label, gen in (("expiry-unaligned", base), ("expiry-unaligned+interleave", {**base, "interleave": True})):
        start, reached = time.monotonic(), {c: 0 for c in CELLS}
        for seed in range(n):
            v = run_scenario(scenario_of_seed(seed, (), gen))
            for c in CELLS:
                reached[c] += v.abstract.hits[c] > 0
        per[label] = (time.monotonic() - start) / n
        for c in CELLS:
            emit(figure="reach", focus=label, cell=" ".join(c[:2]), scenarios=n, reached=reached[c],
                 seconds_per_scenario=round(per[label], 4))
    emit(figure="reach_cost_ratio", ratio=round(per["expiry-unaligned+interleave"] / per["expiry-unaligned"], 3))


def ci_coverage(seeds: list[int]) -> None:
    from cutcheck.commands.campaign import FUZZ_PROFILES
    from cutcheck.reference.fuzzing.abstract_coverage import ABSTRACT_UNIVERSE, cell_name
    from cutcheck.reference.fuzzing.campaigns import hypothesis_campaign

    pairs = [c for c, why in ABSTRACT_UNIVERSE.items() if c[0] == "pair" and why is None]
    for seed in seeds:
        start = time.monotonic()
        r = hypothesis_campaign(examples=FUZZ_PROFILES["ci"]["examples"], seed=seed)
        a = r.abstract
        emit(figure="ci_abstract_coverage", seed=seed, reached=len(a.reached()), reachable=a.reachable(),
             pairs_reached=sum(bool(a.hits[c]) for c in pairs), pairs_reachable=len(pairs),
             seconds=round(time.monotonic() - start, 1), scenarios=r.examples, guidance=r.guidance,
             missed=[cell_name(c) for c in a.missed()],
             finding=None if r.failure is None else r.failure.violations[0])


def detect(faults: list[str], seeds: list[int], seconds: float) -> None:
    for fault in faults:
        found = []
        for seed in seeds:
            r = guided_campaign(seconds=seconds, mutants=(fault,), seed=seed)
            clean = run_scenario(dict(r.failure.scenario, mutants=[])).ok if r.failure is not None else None
            ok = r.failure is not None and bool(clean)
            found.append(r.found_after if ok else None)
            emit(figure="guided_detection", fault=fault, seed=seed, found=ok, invariant=r.failure.invariant if r.failure
                 else "", clean_without_fault=clean, seconds=round(r.found_after or r.seconds, 1), scenarios=r.examples,
                 mutated=r.mutated, corpus=r.corpus,
                 first_reached={name: r.first_reached.get(name) for name in STALE_NAMES})
        times = sorted(t for t in found if t is not None)
        emit(figure="guided_detection_rate", fault=fault, found=len(times), seeds=len(seeds), budget=seconds,
             median_seconds=round(times[len(times) // 2], 1) if times else None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--reach-seeds", type=int, default=200)
    ap.add_argument("--coverage-seeds", default="0,1,2,3,4")
    ap.add_argument("--coverage-only", action="store_true")
    a = ap.parse_args()
    if a.coverage_seeds:
        ci_coverage([int(s) for s in a.coverage_seeds.split(",")])
    if a.coverage_only:
        return
    observer_overhead()
    if a.reach_seeds:
        reach(a.reach_seeds)
    detect(a.faults.split(","), [int(s) for s in a.seeds.split(",")], a.seconds)


if __name__ == "__main__":
    main()
