"""The cost of the run-time invariants BROADCAST_STATE, ALIGNED_EDGE, RESTORE_JUDGED, SAVEPOINT_KEPT and
NO_ORPHANS in a seed campaign: the share of the run time spent in their checks, one JSON line per campaign.

    python benchmarks/bench_invariants.py [--seeds 80] [--storage-seeds 40]

The checks are wrapped with a timer where the run's checks call them (the names in
reference.checks.run_checks, which subscribes them to the run's event bus, and the StorageWatch hooks),
so the figure is measured inside the same runs, free of the machine's noise between two separate runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cutcheck.reference.checks.run_checks as checks_module  # noqa: E402
from cutcheck.reference.checks.storage_invariants import StorageWatch  # noqa: E402
from cutcheck.reference.fuzzing.campaigns import run_scenario  # noqa: E402
from cutcheck.reference.fuzzing.generate import scenario_from_seed  # noqa: E402

SPENT = [0.0]


def timed(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[0] += time.perf_counter() - start

    return wrapper


def campaign(seeds: int, storage: bool) -> dict[str, Any]:
    SPENT[0] = 0.0
    start = time.perf_counter()
    for seed in range(seeds):
        run_scenario(scenario_from_seed(seed, storage=storage, rescale=True if storage else "always"))
    total = time.perf_counter() - start
    return {"figure": "invariant_checks_share", "storage": storage, "scenarios": seeds, "run_seconds": round(total, 2),
            "check_seconds": round(SPENT[0], 3), "value": SPENT[0] / total}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=80, help="in-memory scenarios, every one rescaled where it can be")
    ap.add_argument("--storage-seeds", type=int, default=40, help="on-disk scenarios")
    args = ap.parse_args()
    checks_module.check_completed_checkpoint = timed(checks_module.check_completed_checkpoint)  # type: ignore[assignment]
    checks_module.judge_restore = timed(checks_module.judge_restore)  # type: ignore[assignment]
    for hook in ("__init__", "on_complete", "at_close"):
        setattr(StorageWatch, hook, timed(getattr(StorageWatch, hook)))
    print(json.dumps(campaign(args.seeds, storage=False)))
    print(json.dumps(campaign(args.storage_seeds, storage=True)))


if __name__ == "__main__":
    main()
