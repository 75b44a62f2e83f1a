"""Log fingerprints of a fixed set of runs, to show that a change of layout changed no behaviour.

Every example graph × checkpoint mode × failure pattern, the example scenarios, the regression
scenarios and a few runs with on-disk storage are frozen here as whole scenario JSON (never as seeds
of a generator that may change). ``python tests/fingerprints/make.py`` rewrites ``fingerprints.json``;
``tests/test_fingerprints.py`` runs every scenario again and compares the hashes.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
FILE = HERE / "fingerprints.json"
MODES = ("aligned", "unaligned", "aligned_timeout", "at_least_once")


def _failures(graph: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    first, last = graph["vertices"][0]["id"], graph["vertices"][-1]["id"]
    return {"none": [], "at-step": [{"at_step": 120, "target": f"{first}[0]"}],
            "after-checkpoint": [{"after_checkpoint": 2, "target": f"{last}[0]"}]}


def scenarios() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((ROOT / "examples").glob("*.json")):
        graph = json.loads(path.read_text())
        batch = any(e.get("exchange") == "blocking" for e in graph.get("edges", []))
        for mode in MODES[:1] if batch else MODES:
            for name, failures in _failures(graph).items():
                if batch and name == "after-checkpoint":
                    continue  # a batch job takes no checkpoint
                out[f"{path.stem}/{mode}/{name}"] = {
                    "graph": graph, "seed": 7, "checkpoint": {"mode": mode, "interval": 40, **({"timeout": 6} if mode == "aligned_timeout" else {})},
                    "schedule": {"policy": "backpressure", "slow": graph["vertices"][-1]["id"], "slowdown": 5},
                    "failures": failures, "max_steps": 200_000}
    for path in sorted((ROOT / "examples" / "scenarios").glob("*.json")):
        raw = json.loads(path.read_text())
        raw["graph"] = json.loads((path.parent / raw["graph"]).read_text())
        out[f"scenario/{path.stem}"] = raw
    for path in sorted((ROOT / "tests" / "reference" / "regressions").glob("*.json")):
        out[f"regression/{path.stem}"] = json.loads(path.read_text())
    keyed = json.loads((ROOT / "examples" / "keyed-pipeline.json").read_text())
    for incremental in (False, True):
        out[f"storage/keyed-pipeline/incremental={incremental}"] = {
            "graph": keyed, "seed": 3, "checkpoint": {"mode": "unaligned", "interval": 40, "retained": 2},
            "storage": {"incremental": incremental},
            "failures": [{"after_checkpoint": 2, "target": "count[0]"}], "max_steps": 200_000}
    return out


def fingerprint(raw: dict[str, Any]) -> str:
    from cutcheck.reference import simulate

    with tempfile.TemporaryDirectory() as tmp:
        # A resubmit restores the first job's on-disk checkpoint, so it needs a checkpoint directory.
        result = simulate(raw, Path(tmp) / "run", checkpoint_dir=Path(tmp) / "ck" if raw.get("resubmit") else None)
        h = hashlib.sha256()
        h.update(json.dumps(result.summary(), sort_keys=True, default=str).encode())
        for dataset in sorted(p for p in result.run_dir.iterdir() if p.is_dir() and p.name != "checkpoints-data"):
            for part in sorted(dataset.glob("*.parquet")):
                h.update(f"{dataset.name}/{part.name}".encode())
                h.update(json.dumps(pq.read_table(part).to_pylist(), sort_keys=True, default=str).encode())
        return h.hexdigest()


def main() -> None:
    table = {name: {"scenario": raw, "sha256": fingerprint(raw)} for name, raw in scenarios().items()}
    FILE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"{len(table)} fingerprints written to {FILE}", file=sys.stderr)


if __name__ == "__main__":
    main()
