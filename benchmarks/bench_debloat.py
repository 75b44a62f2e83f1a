"""Buffer debloating (FLIP-183) on backpressured runs: channel state per unaligned checkpoint and
alignment per aligned checkpoint, with debloating on versus off, on the same seeds.

Prints one JSON line per figure. The job is examples/keyed-pipeline.json with its keyed count slowed
(the backpressure policy); each action moves up to one full buffer of records
(``schedule.records_per_action``), so a smaller buffer costs no extra processing or network steps
per record. Debloating settings are in steps (one step stands for one ms); the target is short
relative to Flink's 1 s default because the whole job runs for a few thousand steps.

    python benchmarks/bench_debloat.py                  # seeds 1..8
    python benchmarks/bench_debloat.py --seeds 20 --target 150 --period 30
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cutcheck.reference import Scenario, simulate  # noqa: E402

BUFFER, RECORD = 512, 64


def scenario(mode: str, seed: int, debloat: dict[str, Any] | None) -> dict[str, Any]:
    s: dict[str, Any] = {
        "graph": str(ROOT / "examples" / "keyed-pipeline.json"), "seed": seed,
        "checkpoint": {"mode": mode, "interval": 100},
        "network": {"buffer_bytes": BUFFER, "record_bytes": RECORD, "exclusive": 2, "floating": 4},
        "schedule": {"policy": "backpressure", "slow": "count", "slowdown": 20, "records_per_action": BUFFER // RECORD},
        "max_steps": 400_000,
    }
    if debloat is not None:
        s["debloat"] = debloat
    return s


def measure(mode: str, seeds: range, debloat: dict[str, Any] | None) -> dict[str, float]:
    state = align = done = steps = 0
    for seed in seeds:
        r = simulate(Scenario.from_json(scenario(mode, seed, debloat)))
        if not r.ok:
            raise SystemExit(f"seed {seed} ({mode}, debloat {'on' if debloat else 'off'}) violated: {r.violations}")
        completed = [c for c in r.checkpoints if c["status"] == "completed"]
        state += sum(c["state_bytes"] for c in completed)
        align += sum(c["alignment_steps"] for c in completed)
        done += len(completed)
        steps += r.steps
    return {"state_bytes": state / max(1, done), "alignment_steps": align / max(1, done),
            "checkpoints": done, "steps": steps}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--target", type=int, default=150, help="debloat target, in steps")
    ap.add_argument("--period", type=int, default=30, help="debloat period, in steps")
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--min-buffer", type=int, default=128)
    args = ap.parse_args()
    seeds = range(1, args.seeds + 1)
    on = {"enabled": True, "target": args.target, "period": args.period, "samples": args.samples,
          "threshold": 25, "min_buffer": args.min_buffer}
    common = {"job": "keyed-pipeline.json", "slow": "count", "seeds": args.seeds, "debloat": on}
    figures = [("unaligned", "state_bytes", "persisted_channel_state_bytes_per_unaligned_checkpoint"),
               ("aligned", "alignment_steps", "alignment_steps_per_aligned_checkpoint")]
    for mode, key, name in figures:
        off_m, on_m = measure(mode, seeds, None), measure(mode, seeds, on)
        for label, m in (("off", off_m), ("on", on_m)):
            print(json.dumps({"figure": name, "debloating": label, "value": round(m[key], 1),
                              "checkpoints": m["checkpoints"], "run_steps": m["steps"], **common}))
        print(json.dumps({"figure": f"{name}_ratio_on_over_off",
                          "value": round(on_m[key] / off_m[key], 3) if off_m[key] else None, **common}))


if __name__ == "__main__":
    main()
