"""What a scenario may ask of the engine: failures that can fire, and a job within the budgets.

Checked before a run starts (reference.scenario), so a scenario the engine cannot honour ends in one
sentence naming the field instead of a run that never fires its failure or runs out of memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from cutcheck.model.errors import ScenarioError
from cutcheck.model.execution import MAX_CHANNELS, channel_count
from cutcheck.model.graph import JobGraph

if TYPE_CHECKING:
    from cutcheck.reference.scenario import Failure, Rescale

MAX_RECORDS = 100_000_000  # source records over all sources
MAX_SPLITS = 1_000_000
# Subtasks of the job (every vertex's parallelism, summed). The engine schedules every subtask each
# step: measured on 2 cores, a source and a sink of 10 records run in 4 s at 500 subtasks, 43 s at 2 000
# and 92 s at 4 000; beyond this a run is minutes before its first checkpoint.
MAX_SUBTASKS = 4_096
# Source-to-sink routes: every route carries its own copy of each record and the engine enumerates
# them one by one, so a ladder of diamonds (2^k routes) is exponential in the graph's size.
MAX_ROUTES = 10_000


def check_targets(graph: JobGraph, failures: tuple[Failure, ...], rescales: tuple[Rescale, ...],
                   workers: int | None, max_steps: int, restored: bool, where: str) -> None:
    """Every failure can fire: its subtask or worker exists at some parallelism of the run, and its
    time lies within ``max_steps`` (the engine triggers at most one checkpoint per step)."""
    widest = {v.id: v.parallelism for v in graph.vertices}
    for r in rescales:
        for vid, p in r.parallelism.items():
            widest[vid] = max(widest.get(vid, 0), p)
    n_workers = workers or max(widest.values())
    for i, f in enumerate(failures):
        w = f"{where}: failures[{i}]"
        if f.target.startswith("worker:"):
            k = int(f.target[7:])
            if k >= n_workers:
                raise ScenarioError(f"{w}.target {f.target} names no worker; the job runs on workers 0..{n_workers - 1}.")
        else:
            vid, _, rest = f.target.partition("[")
            if int(rest[:-1]) >= widest[vid]:
                raise ScenarioError(f"{w}.target {f.target} is not a subtask of the job: '{vid}' runs at parallelism "
                                    f"{widest[vid]} (subtasks {vid}[0]..{vid}[{widest[vid] - 1}]); name one of those.")
        if f.at_step is not None and f.at_step >= max_steps:
            raise ScenarioError(f"{w}.at_step {f.at_step} is not below max_steps {max_steps}, so the failure could "
                                "never fire; lower at_step or raise max_steps.")
        if f.after_checkpoint is not None and not restored and f.after_checkpoint > max_steps:
            raise ScenarioError(f"{w}.after_checkpoint {f.after_checkpoint} can never be reached: the run has at most "
                                f"max_steps {max_steps} steps and triggers at most one checkpoint per step; lower "
                                "after_checkpoint or raise max_steps.")


def check_budgets(graph: JobGraph, where: str) -> None:
    """Refuse, before the run, a job beyond what the engine can hold (the README's budgets)."""
    sources = [v for v in graph.vertices if v.kind == "source"]
    for name, limit in (("records", MAX_RECORDS), ("splits", MAX_SPLITS)):
        total = sum(getattr(v, name) for v in sources)
        if total > limit:
            v = max(sources, key=lambda v: getattr(v, name))
            raise ScenarioError(f"{where}: graph: vertex '{v.id}' has {name} {getattr(v, name)}, and the sources "
                                f"together {total}, above the engine's budget of {limit} {name}; lower '{name}'.")
    check_channels(graph, {}, f"{where}: graph", "parallelism")
    routes = route_count(graph)
    if routes > MAX_ROUTES:
        raise ScenarioError(f"{where}: graph: the job has {routes} routes from a source to a sink, above the engine's "
                            f"budget of {MAX_ROUTES} (reference.scenario_limits.MAX_ROUTES); fewer parallel branches "
                            "that join again.")


def route_count(graph: JobGraph) -> int:
    """Source-to-sink paths over job edges (two edges between the same vertices are two routes),
    counted in topological order without walking them."""
    sources_of: dict[str, list[str]] = {}
    for e in graph.edges:
        sources_of.setdefault(e.target, []).append(e.source)
    paths: dict[str, int] = {}
    total = 0
    for vid in graph.topological_order():
        v = graph.vertex(vid)
        n = 1 if v.kind == "source" else sum(paths[u] for u in sources_of.get(vid, ()))
        paths[vid] = n
        if v.kind == "sink":
            total += n
    return total


def check_channels(graph: JobGraph, parallelism: Mapping[str, int], where: str, field_name: str) -> None:
    """The channel and subtask budgets at ``parallelism`` (where it names a vertex; else the graph's)."""
    total = channel_count(graph, parallelism)
    if total > MAX_CHANNELS:
        raise ScenarioError(f"{where}: the {field_name} gives the job {total} channels, above the engine's budget of "
                            f"{MAX_CHANNELS} channels (model.execution.MAX_CHANNELS); lower the parallelism.")
    subtasks = sum(parallelism.get(v.id, v.parallelism) for v in graph.vertices)
    if subtasks > MAX_SUBTASKS:
        raise ScenarioError(f"{where}: the {field_name} gives the job {subtasks} subtasks, above the engine's budget "
                            f"of {MAX_SUBTASKS} subtasks (reference.scenario_limits.MAX_SUBTASKS); lower the "
                            "parallelism.")
