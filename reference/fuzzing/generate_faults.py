"""What happens to a generated job while it runs: failures, rescales on them, and savepoints.

Failures hit any subtask (or a whole worker), at a step or some steps after a checkpoint completed;
a second failure can be drawn to land while the job recovers from the first. Rescales move several
vertices up and down at once; with REFUSABLE_RESCALE they also move vertices on forward, rescale,
broadcast or custom edges, whose in-flight data Flink 1.19 cannot map, so the restore may be refused
(a correct outcome: ``reference.fuzzing.campaigns.run_scenario`` reports it as ``refused``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from cutcheck.model.graph import JobGraph
from cutcheck.reference.fuzzing.generate_graph import forward_groups, rescalable
from cutcheck.reference.fuzzing.swarm import RECOVERY_GAP, Draw, Feature, chance, choice


@dataclass(frozen=True, slots=True)
class RunShape:
    """What the failure draws need to know of the job: how long a clean run takes, about."""

    batch: bool
    horizon: int  # steps within which a clean run is expected to be busy
    max_parallelism: int  # the generator's bound on a rescaled parallelism
    after_checkpoint: bool = False  # every failure comes soon after an early checkpoint completed


def failures(d: Draw, graph: dict[str, Any], mask: Collection[Feature], shape: RunShape) -> tuple[list[dict[str, Any]], int | None]:
    """The scheduled failures and the worker count (None: the engine's default) they assume."""
    if Feature.FAILURE not in mask:
        return [], None
    par = {v["id"]: v["parallelism"] for v in graph["vertices"]}
    workers = d.integer(1, max(par.values())) if Feature.WORKER_FAILURE in mask else None
    out = [_failure(d, par, workers, shape)]
    if Feature.FAILURE_IN_RECOVERY in mask:
        # The second failure comes while the job restores from the first: replaying channel state,
        # re-committing, or (batch) rerunning regions.
        second = {"target": _target(d, par, workers)}
        gap = d.integer(1, RECOVERY_GAP)
        first = out[0]
        if "at_step" in first:
            second["at_step"] = first["at_step"] + gap
        else:
            second |= {"after_checkpoint": first["after_checkpoint"], "delay": first["delay"] + gap}
        out.append(second)
    elif chance(d, 3):
        out.append(_failure(d, par, workers, shape))
    return out, workers


def _failure(d: Draw, par: dict[str, int], workers: int | None, shape: RunShape) -> dict[str, Any]:
    target = _target(d, par, workers)
    if shape.batch or (not shape.after_checkpoint and d.integer(0, 1) == 0):
        return {"at_step": d.integer(1, shape.horizon), "target": target}
    return {"after_checkpoint": d.integer(1, 2 if shape.after_checkpoint else 4), "delay": d.integer(0, 20),
            "target": target}


def _target(d: Draw, par: dict[str, int], workers: int | None) -> str:
    if workers is not None and chance(d, 2):
        return f"worker:{d.integer(0, workers - 1)}"
    vid = choice(d, list(par))
    return f"{vid}[{d.integer(0, par[vid] - 1)}]"


def rescales(d: Draw, graph: dict[str, Any], failures: list[dict[str, Any]], mask: Collection[Feature],
             shape: RunShape, *, always: bool = False, first: str | None = None,
             grow: bool = False) -> list[dict[str, Any]]:
    """Rescales of several vertices up and down, one entry per failure at most.

    Vertices joined by forward edges move together (Flink keeps their parallelism equal). Without
    REFUSABLE_RESCALE only vertices that touch no unmappable edge move; ``always`` guarantees a
    rescale on some failure whenever such a vertex exists (for hunting rescale bugs); ``first``
    names a vertex whose group the first rescale moves, when it may move; with ``grow`` that group grows
    when it can (a source scaled up hands splits to new producer subtasks)."""
    if shape.batch or not failures or not (always or Feature.RESCALE in mask):
        return []
    job = JobGraph.from_json(graph)
    movable = set(rescalable(graph))
    groups = [sorted(g) for g in forward_groups(graph)
              if Feature.REFUSABLE_RESCALE in mask or g <= movable]
    if not groups:
        return []
    current = {v["id"]: v["parallelism"] for v in graph["vertices"]}
    out = []
    for i in range(len(failures)):
        if i > 0 and not chance(d, 2):
            break
        moves: dict[str, int] = {}
        # With REFUSABLE_RESCALE the first group moved touches an unmappable edge, when there is one.
        fixed = [g for g in groups if not set(g) <= movable] if Feature.REFUSABLE_RESCALE in mask else []
        if not fixed and i == 0 and first is not None:
            fixed = [g for g in groups if first in g]
        for k in range(d.integer(1, min(3, len(groups)))):
            group = choice(d, fixed if k == 0 and fixed else groups)
            limit = min(min(job.max_parallelism(v) for v in group), shape.max_parallelism)
            now = current[group[0]]
            # Growing may pass the shape's maximum by one: a source drawn at the maximum still grows.
            grown = min(min(job.max_parallelism(v) for v in group), shape.max_parallelism + 1)
            larger = list(range(now + 1, grown + 1)) if grow and i == 0 and k == 0 and fixed else []
            p = choice(d, larger or [q for q in range(1, limit + 1) if q != now] or [now])
            for v in group:
                moves[v] = current[v] = p
        out.append({"on_failure": i, "parallelism": moves})
    _fit_targets(failures, out, graph)
    return out


def _fit_targets(failures: list[dict[str, Any]], rescales: list[dict[str, Any]], graph: dict[str, Any]) -> None:
    """A failure after a rescale names a subtask of the rescaled job, so that it can fire."""
    current = {v["id"]: v["parallelism"] for v in graph["vertices"]}
    for i, f in enumerate(failures):
        vid, _, rest = f["target"].partition("[")
        if rest:
            f["target"] = f"{vid}[{int(rest[:-1]) % current[vid]}]"
        for r in rescales:
            if r["on_failure"] == i:
                current.update(r["parallelism"])


def savepoints(d: Draw, mask: Collection[Feature], shape: RunShape) -> list[dict[str, Any]]:
    """User savepoints mid-run: at a step, or some steps after a checkpoint completed."""
    if shape.batch or Feature.SAVEPOINT not in mask:
        return []
    out = []
    for _ in range(d.integer(1, 2)):
        if d.integer(0, 1) == 0:
            out.append({"at_step": d.integer(1, shape.horizon)})
        else:
            out.append({"after_checkpoint": d.integer(1, 4), "delay": d.integer(0, 20)})
    return out
