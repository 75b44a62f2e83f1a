"""Run every proof of the registry; print one JSON line per proof (seconds, status, label, bound) and a total.

    python benchmarks/bench_proofs.py            # all proofs
    python benchmarks/bench_proofs.py NAME ...   # some

Target: all together under 60 s on a 2-core machine. Exit status 1 if any result is not as expected.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cutcheck import proofs  # noqa: E402


def main(argv: list[str]) -> int:
    start = time.perf_counter()
    results = proofs.run(argv or None)
    for r in results:
        print(json.dumps({"figure": "proof", "name": r.name, "status": r.status, "expected": r.expected,
                          "label": r.label, "assumptions": list(r.assumptions), "bound": r.bound,
                          "seconds": round(r.seconds, 3)}))
    total = time.perf_counter() - start
    bad = [r.name for r in results if not r.as_expected]
    print(json.dumps({"figure": "proofs_total", "proofs": len(results), "seconds": round(total, 3),
                      "target_seconds": 60, "within_target": total < 60, "not_as_expected": bad,
                      "python": platform.python_version(), "cpus": _cpus()}))
    return 1 if bad else 0


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
