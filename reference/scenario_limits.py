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


def check_channels(graph: JobGraph, parallelism: Mapping[str, int], where: str, field_name: str) -> None:
    total = channel_count(graph, parallelism)
    if total > MAX_CHANNELS:
        raise ScenarioError(f"{where}: the {field_name} gives the job {total} channels, above the engine's budget of "
                            f"{MAX_CHANNELS} channels (model.execution.MAX_CHANNELS); lower the parallelism.")
