"""What the rescale tests share: running a scenario that may be refused, Flink's refusal rule, and
reading the restore report's moves."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from model.errors import RestoreRefused
from reference import Scenario
from reference.engine import Engine
from reference.operators import InvariantViolation
from reference.storage import CompletedCheckpoint, InMemoryStorage

POINTWISE_OR_BROADCAST = ("forward", "rescale", "broadcast")
REFUSED_WITH_STATE = (*POINTWISE_OR_BROADCAST, "custom")  # Flink cannot rescale their in-flight data


@dataclass(slots=True)
class Run:
    """A run driven here rather than through ``simulate``, so that every restore can be inspected."""

    engine: Engine
    violations: list[str]
    restores: list[tuple[CompletedCheckpoint, dict[str, int]]]  # checkpoint, parallelism restored at
    refused: tuple[CompletedCheckpoint, dict[str, int], str] | None = None

    @property
    def verdict(self) -> Any:
        return self.engine.oracle.verdict()


def run(s: dict[str, Any]) -> Run:
    engine = Engine(Scenario.from_json(s), storage=InMemoryStorage())
    result = Run(engine, [], [])

    def on_event(kind: str, info: dict[str, Any]) -> None:
        if kind == "restore":  # fired once the new runtime holds the restored state
            done = engine.storage.latest()
            assert done is not None
            result.restores.append((done, dict(engine.parallelism)))

    engine.listeners.append(on_event)
    try:
        engine.run()
    except InvariantViolation as exc:
        result.violations.append(str(exc))
    except RestoreRefused as exc:
        done = engine.storage.latest()
        assert done is not None
        result.refused = (done, dict(engine.parallelism), str(exc))  # _build set the new parallelism first
    return result


def flink_refuses(graph: Any, done: CompletedCheckpoint, new: dict[str, int]) -> bool:
    """Independent statement of Flink's rule: in-flight data on a pointwise, broadcast or custom edge
    whose producer or consumer changes parallelism cannot be redistributed."""
    held: Counter[int] = Counter()
    for snap in done.tasks.values():
        for states in (snap.input_state, snap.output_state):
            for (edge, _, _), bufs in states.items():
                held[edge] += sum(len(b.recs) for b in bufs)
    return any(held[e.key] and e.partitioner in REFUSED_WITH_STATE
               and (done.parallelism[e.source] != new[e.source] or done.parallelism[e.target] != new[e.target])
               for e in graph.edges)


def parse_moves(moves: list[str]) -> list[tuple[int, int, int, int, int]]:
    """"old u→c ⇒ new nu→d: n" -> (u, c, nu, d, n)."""
    out = []
    for m in moves:
        found = re.fullmatch(r"old (\d+)→(\d+) ⇒ new (\d+)→(\d+): (\d+)", m)
        assert found, m
        out.append(tuple(int(x) for x in found.groups()))
    return out  # type: ignore[return-value]


def moved_records(reports: list[dict[str, Any]]) -> int:
    return sum(e["input_records"] + e["output_records"] for r in reports if r.get("rescaled") for e in r["edges"].values())


# ------------------------------------------------------------------------ the engine-level property
