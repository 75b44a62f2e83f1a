"""Scenario builders shared by the engine's tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
EXAMPLE_GRAPHS = sorted(p.name for p in EXAMPLES.glob("*.json"))


def scenario(graph: str | dict[str, Any], *, mode: str = "unaligned", seed: int = 1, interval: int = 40,
             failures: list[dict[str, Any]] | None = None, mutants: list[str] | None = None,
             slow: str | None = None, timeout: int | None = None, buffer_bytes: int = 512,
             floating: int = 2, max_steps: int = 400_000, **extra: Any) -> dict[str, Any]:
    g: Any = str(EXAMPLES / graph) if isinstance(graph, str) else graph
    ck: dict[str, Any] = {"mode": mode, "interval": interval}
    if mode == "aligned_timeout":
        ck["timeout"] = timeout if timeout is not None else max(1, interval // 4)
    sched: dict[str, Any] = {"policy": "backpressure", "slow": slow, "slowdown": 20} if slow else {"policy": "uniform"}
    return {"graph": g, "seed": seed, "checkpoint": ck,
            "network": {"buffer_bytes": buffer_bytes, "record_bytes": 64, "exclusive": 2, "floating": floating},
            "schedule": sched, "failures": failures or [], "mutants": mutants or [], "max_steps": max_steps, **extra}


def small_graph(records: int = 300) -> dict[str, Any]:
    return {"name": "small", "max_parallelism": 128,
            "vertices": [{"id": "src", "kind": "source", "parallelism": 2, "records": records, "keys": 8, "splits": 4},
                         {"id": "map", "kind": "map", "parallelism": 2},
                         {"id": "count", "kind": "keyed_count", "parallelism": 2},
                         {"id": "sink", "kind": "sink", "parallelism": 1}],
            "edges": [{"from": "src", "to": "map", "partitioner": "rebalance"},
                      {"from": "map", "to": "count", "partitioner": "hash"},
                      {"from": "count", "to": "sink", "partitioner": "rebalance"}]}


def all_reached_but(*missing: tuple[str, str, str]) -> Any:
    """An abstract coverage with every reachable cell reached once but ``missing`` (and the crowded
    failover transition, else the crowd shape is wanted alone): what ``shapes.wanted`` sees late in a
    campaign."""
    from cutcheck.reference.fuzzing.abstract_cells import ABSTRACT_UNIVERSE
    from cutcheck.reference.fuzzing.abstract_coverage import AbstractCoverage
    from cutcheck.reference.fuzzing.timed import TIMED_FOR

    reached = AbstractCoverage()
    reached.hits[TIMED_FOR["crowded"]] += 1
    for cell, why in ABSTRACT_UNIVERSE.items():
        if why is None and cell not in missing:
            reached.hits[cell] += 1
    return reached
