"""Builds the run-time objects (tasks, gates, partitions, channels) from the execution graph.

The objects are made by the shuffle service (reference.shuffle.service, FLIP-31): for a streaming job, its
pipelined environment creates partition writers (result partitions with their pools) and input
gates (with credits) and connects them in memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cutcheck.model.execution import SubtaskId
from cutcheck.reference.runtime.network import OutputSubpartition
from cutcheck.reference.runtime.tasks import Task
from cutcheck.reference.shuffle.service import ShuffleService

if TYPE_CHECKING:
    from cutcheck.reference.runtime.doors import TaskRun


def build_runtime(engine: TaskRun) -> tuple[dict[SubtaskId, Task], list[OutputSubpartition]]:
    """Deploy every subtask at once through the shuffle service (reference.shuffle.service): a streaming
    job's exchanges are all pipelined, so this is the in-memory, credit-based environment."""

    workers = engine.scenario.workers or max(engine.exec_graph.parallelism.values())
    dep = ShuffleService(engine, workers).deploy(engine.exec_graph.subtasks)
    return dep.tasks, dep.subpartitions


def redeploy_region(engine: TaskRun, region: frozenset[SubtaskId]
                    ) -> tuple[dict[SubtaskId, Task], list[OutputSubpartition]]:
    """Deploy the subtasks of a restarted region anew beside the running ones (region failover): the
    run's tasks in execution-graph order, and every connected subpartition."""
    workers = engine.scenario.workers or max(engine.exec_graph.parallelism.values())
    dep = ShuffleService(engine, workers).deploy(region)
    position = {sid: i for i, sid in enumerate(engine.exec_graph.subtasks)}
    tasks = dict(sorted({**engine.tasks, **dep.tasks}.items(), key=lambda kv: position[kv[0]]))
    subpartitions = [sp for t in tasks.values() for p in t.partitions for sp in p.subpartitions if sp.channel is not None]
    return tasks, subpartitions
