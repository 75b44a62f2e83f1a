"""What the rescale tests share: running a scenario that may be refused, Flink's refusal rule, and
reading the restore report's moves."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from cutcheck.model.errors import InvariantViolation, RestoreRefused
from cutcheck.reference import Scenario
from cutcheck.reference.engine import Engine
from cutcheck.reference.events.stream import Logged
from cutcheck.reference.storage.memory import CompletedCheckpoint, InMemoryStorage

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

    def on_event(e: Logged) -> None:
        if e.kind == "restore":  # fired once the new runtime holds the restored state
            done = engine.storage.latest()
            assert done is not None
            result.restores.append((done, dict(engine.parallelism)))

    engine.bus.subscribe(Logged, on_event)
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
    """Independent statement of Flink 1.19's rule (``StateAssignmentOperation``, ``TaskStateAssignment``):
    the mapping of an edge is computed, and throws for a pointwise or broadcast edge (UNSUPPORTED),
    whenever its consumer's gates or its producer's partitions are remapped as a whole, whether or
    not that edge holds in-flight data; a custom edge is refused where it holds in-flight data and
    an end changes parallelism (Flink 1.19 admits no unaligned checkpoint there).

    A vertex's gates are remapped as a whole when it changes parallelism and in-flight data sits on
    any of its input edges or on any output edge of any of its producers; or when it gets a restore
    at all (state of its own, or in-flight data on a neighbour's far side) and one of its producers
    had its partitions remapped that way. Symmetrically for partitions."""
    held: Counter[int] = Counter()  # edge -> records, either side
    in_held: set[int] = set()  # edges with consumer-side (input) state
    out_held: set[int] = set()  # edges with producer-side (output) state
    stateful: set[str] = set()
    for sid, snap in done.tasks.items():
        for side, states in ((in_held, snap.input_state), (out_held, snap.output_state)):
            for (edge, _, _), bufs in states.items():
                n = sum(len(b.recs) for b in bufs)
                held[edge] += n
                if n:
                    side.add(edge)
                    stateful.add(sid.vertex)
        if snap.operator:
            stateful.add(sid.vertex)
    changed = {v for v in done.parallelism if done.parallelism[v] != new[v]}
    if any(held[e.key] and e.partitioner == "custom" and {e.source, e.target} & changed for e in graph.edges):
        return True
    ins = {v.id: [e for e in graph.edges if e.target == v.id] for v in graph.vertices}
    outs = {v.id: [e for e in graph.edges if e.source == v.id] for v in graph.vertices}
    far_in = {v: any(f.key in out_held for e in ins[v] for f in outs[e.source]) for v in ins}
    far_out = {v: any(f.key in in_held for e in outs[v] for f in ins[e.target]) for v in outs}
    first_in = {v for v in changed if far_in[v] or any(e.key in in_held for e in ins[v])}  # repartitioned gates
    first_out = {v for v in changed if far_out[v] or any(e.key in out_held for e in outs[v])}  # and partitions
    restored = {v for v in ins if v in stateful or far_in[v] or far_out[v]}
    # The rescaling descriptors of a restored vertex span all its gates once a producer's partitions
    # were remapped, and all its partitions once a consumer's gates were.
    whole_in = first_in | {e.target for e in graph.edges if e.source in first_out and e.target in restored}
    whole_out = first_out | {e.source for e in graph.edges if e.target in first_in and e.source in restored}
    return any(e.partitioner in POINTWISE_OR_BROADCAST and (e.target in whole_in or e.source in whole_out)
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
