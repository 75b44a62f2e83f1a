"""Region failover for streaming jobs (facts §9; ``RestartPipelinedRegionFailoverStrategy``).

``jobmanager.execution.failover-strategy`` is ``region`` by default: a failed task restarts its
pipelined region (``model.regions.failover_set``; in a streaming job every exchange is pipelined, so
that is the region alone), the rest of the job keeps running. The scenario's top-level
``failover_strategy: "full"`` restarts everything (``reference.recovery.recovery.global_failover``), and so
does every failover that restarts all subtasks anyway, one that rescales (a rescale is a new
submission of the whole job), one whose latest checkpoint predates a rescale, and one that fails
the job (``CheckpointFailureManager``).

As ``SchedulerBase.restoreState`` does for any failover: every pending checkpoint is aborted
(``JOB_FAILOVER_REGION``, which never counts as a failed checkpoint), and the restarted subtasks,
only they, restore the latest completed checkpoint (``restoreLatestCheckpointedStateToSubtasks``):
operator state, channel state of their channels (no channel leaves a pipelined region), and their
sinks' committables, re-committed; their writers abort what they had staged. Subtasks outside the
region keep their state, channels, open transactions and pending committables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cutcheck.model.execution import SubtaskId
from cutcheck.model.regions import failover_set, pipelined_regions
from cutcheck.reference.core.seams import seam
from cutcheck.reference.recovery.recovery import global_failover, restore_state
from cutcheck.reference.shuffle.service import ShuffleService

if TYPE_CHECKING:
    from cutcheck.reference.core.doors import RecoveryRun

STRATEGIES = ("region", "full")


def strategy(engine: RecoveryRun) -> str:
    return str(engine.scenario.extra.get("failover_strategy", "region"))


def failover(engine: RecoveryRun, target: str, failure_index: int | None) -> None:
    """Restart the failed task's region, or the whole job where Flink would."""

    restart = _region_to_restart(engine, target, failure_index)
    if restart is None:
        global_failover(engine, target, failure_index)
    else:
        region_failover(engine, target, restart)


@seam
def restarts_whole_region() -> bool:
    """A failed task restarts its whole pipelined region (and the regions consuming from it), never
    the task alone (facts §6.4)."""
    return True


@seam
def releases_partition_of_reset_producer() -> bool:
    """A restarted producer's old partition is released at once: the producer writes a new one under
    a new id, and nothing will ever read or release the old one otherwise (facts §10)."""
    return True


def _region_to_restart(engine: RecoveryRun, target: str, failure_index: int | None) -> frozenset[SubtaskId] | None:
    if strategy(engine) == "full" or target.startswith("job: ") or not engine.rules[restarts_whole_region]():
        return None
    if any(r.on_failure == failure_index for r in engine.scenario.rescales):
        return None
    latest = engine.storage.latest()
    if latest is not None and latest.parallelism != engine.parallelism:
        return None  # the latest checkpoint predates a rescale: its state must be redistributed job-wide
    if target.startswith("worker:"):

        service = ShuffleService(engine, engine.scenario.workers or max(engine.exec_graph.parallelism.values()))
        failed = [sid for sid in engine.tasks if service.worker_of(sid) == int(target[7:])]
    else:
        failed = [sid for sid in (SubtaskId.parse(target),) if sid in engine.tasks]
    if not failed:
        return None  # nothing runs there at the current parallelism: as before, everything restarts
    regions = pipelined_regions(engine.exec_graph)
    restart = frozenset().union(*(failover_set(engine.exec_graph, sid, regions=regions) for sid in failed))
    return restart if restart and restart != frozenset(engine.tasks) else None


def region_failover(engine: RecoveryRun, target: str, restart: frozenset[SubtaskId]) -> None:

    names = ", ".join(str(s) for s in sorted(restart, key=str))
    engine.event("failure", target)
    engine.restarts += 1
    engine.coordinator.abort_all("region failover", "JOB_FAILOVER_REGION")
    engine.notifications = [(t, cp) for t, cp in engine.notifications if t.sid not in restart]
    latest = engine.storage.latest()
    keep: set[str] = set()
    if latest is not None:
        for sid in restart:
            if engine.graph.vertex(sid.vertex).kind == "sink":
                keep |= {e[1] for e in latest.tasks[sid].operator.get("pending", [])}
    prefixes = tuple(f"{sid}-a" for sid in restart if engine.graph.vertex(sid.vertex).kind == "sink")
    engine.store.abort_all_except(keep | {t for t in engine.store.staged if not t.startswith(prefixes)})
    engine.attempt += 1
    if engine.tracing:
        _trace_restore(engine, restart, None if latest is None else latest.cp)
    workers = engine.scenario.workers or max(engine.exec_graph.parallelism.values())
    dep = ShuffleService(engine, workers).deploy(restart)
    position = {sid: i for i, sid in enumerate(engine.exec_graph.subtasks)}
    engine.tasks = dict(sorted({**engine.tasks, **dep.tasks}.items(), key=lambda kv: position[kv[0]]))
    engine.subpartitions = [sp for t in engine.tasks.values() for p in t.partitions for sp in p.subpartitions
                            if sp.channel is not None]
    if latest is None:
        engine.event("restart", f"no completed checkpoint: region {names} from the beginning")
    else:
        report = restore_state(engine, latest, only=restart)
        report["region"] = sorted(str(s) for s in restart)
        engine.restore_reports.append(report)
        engine.event("restore", f"checkpoint {latest.cp}, region {names}")
    engine.next_trigger = engine.step + engine.scenario.checkpoint.interval


def _trace_restore(engine: RecoveryRun, restart: frozenset[SubtaskId], cp: int | None) -> None:
    """The region's channels restore (as ``reference.checks.tracing.on_restore`` does for all); a region
    that starts from scratch has no restore event in the protocol, so its channels stop recording."""
    for (edge, _, consumer), trace in engine.traces.items():
        if SubtaskId(engine.graph.edge(edge).target, consumer) not in restart or trace.closed:
            continue
        if cp is None:
            trace.close()
        else:
            trace.append(("restore", cp))
            trace.base = trace.completed.get(cp, 0)
