"""Batch execution: pipelined-region scheduling and region failover (facts §6.3–§6.4).

A job with a blocking exchange runs as Flink's batch runtime does:

* **No checkpoints.** Recovery recomputes instead of restoring: a restarted region starts from
  scratch and re-reads its blocking inputs, which the blocking shuffle kept in its directory.
* **Region scheduling** (``PipelinedRegionSchedulingStrategy``): regions (model.regions) start in
  topological order, each when every blocking partition it consumes from another region is
  complete; all subtasks of a region are deployed together.
* **Region failover** (``RestartPipelinedRegionFailoverStrategy``): the failed task's region, the
  producer regions of inputs that are no longer available, and every consumer region, transitively
  (``model.regions.failover_regions``); regions still in CREATED state are left alone. A pipelined
  partition is never available; a blocking one is while it is complete and not released. With
  ``failover_strategy: "full"`` every deployed region restarts and every partition is re-produced.
* **Workers.** Subtask i of every vertex runs on worker ``i mod workers`` (default: the largest
  parallelism). ``worker:K`` fails the running tasks there, and loses the pipelined partitions the
  worker held; blocking partitions live outside workers and survive.
* **Exactly-once sinks** stage into a transaction and pre-commit it at end of input; the
  transactions are committed when the whole job has finished (checkpoint id ``Long.MAX_VALUE``,
  Flink 1.19's end-of-input committables). A restarted sink subtask aborts what it staged before,
  so a sink region restarted after it finished cannot commit its output twice.
* Partitions are released by the master once all their consumer regions finished, and at job end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cutcheck.model.errors import InvariantViolation, ScenarioError
from cutcheck.model.execution import ExecutionGraph, SubtaskId
from cutcheck.model.regions import failover_regions, pipelined_regions
from cutcheck.reference.batch_config import BatchConfig  # noqa: F401 (the engine's section, read here too)
from cutcheck.reference.engine import Engine
from cutcheck.reference.recovery.region_failover import (
    releases_partition_of_reset_producer,
    restarts_whole_region,
)
from cutcheck.reference.runtime.network import Buf, OutputSubpartition
from cutcheck.reference.runtime.sinks import SinkOperator
from cutcheck.reference.runtime.sources import SourceOperator
from cutcheck.reference.runtime.tasks import Task
from cutcheck.reference.shuffle.partitions import BlockingReader, BlockingWriter, ResultPartitionID
from cutcheck.reference.shuffle.service import ShuffleService

END_OF_INPUT_CHECKPOINT = 2**63 - 1  # Flink 1.19 binds end-of-input committables to Long.MAX_VALUE


def is_batch(scenario: Any) -> bool:
    """A job with a blocking exchange runs in batch mode; one without is a streaming job."""
    return any(e.exchange == "blocking" for e in scenario.graph.edges)


def make_engine(scenario: Any, **kwargs: Any) -> Engine:
    return BatchEngine(scenario, **kwargs) if is_batch(scenario) else Engine(scenario, **kwargs)


@dataclass(slots=True)
class Failover:
    step: int
    target: str
    failed: list[str]
    collected: list[list[str]]  # the regions §6.4 names, CREATED ones included
    restarted: list[list[str]]  # those that were deployed and so restarted
    records_recomputed: int


class BatchEngine(Engine):
    """The reference engine running a batch job region by region."""

    def __init__(self, scenario: Any, **kwargs: Any):
        self.config = BatchConfig.from_json(scenario.extra.get("batch"))
        self.failovers: list[Failover] = []
        self.job_committed = False
        super().__init__(scenario, **kwargs)
        self._validate()

    def _validate(self) -> None:
        for i, f in enumerate(self.scenario.failures):
            w = f"failures[{i}]"
            if f.at_step is None:
                raise ScenarioError(f"{w}: 'after_checkpoint' needs checkpoints, and a batch job (it has blocking "
                                    "exchanges) takes none; give 'at_step' instead.")
            if f.target.startswith("worker:"):
                if int(f.target[7:]) >= self.shuffle.workers:
                    raise ScenarioError(f"{w}: {f.target} names no worker; the job runs on workers 0..{self.shuffle.workers - 1}.")
            elif SubtaskId.parse(f.target) not in self.region_index:
                raise ScenarioError(f"{w}: {f.target} is not a subtask of the job; name VERTEX[INDEX] within its parallelism.")
        if self.scenario.rescales:
            raise ScenarioError("rescales apply to restores from checkpoints; a batch job takes none, remove 'rescales'.")
        if "failover_strategy" in self.scenario.extra:
            raise ScenarioError("'failover_strategy' applies to streaming jobs; a batch job (it has blocking exchanges) "
                                "reads batch.failover_strategy, so move it there.")

    # ------------------------------------------------------------------ set-up: nothing runs yet
    def _build(self, restored: Any, new_parallelism: dict[str, int] | None = None) -> None:
        eg = self.exec_graph = ExecutionGraph(self.graph, self.parallelism)
        self.edge_unaligned = {e.key: eg.edge_supports_unaligned(e.key) for e in self.graph.edges}
        self.tasks: dict[SubtaskId, Task] = {}
        self.subpartitions: list[OutputSubpartition] = []
        self.writers: list[BlockingWriter] = []
        self.readers: list[BlockingReader] = []
        self.regions = pipelined_regions(eg)
        self.region_index = {sid: i for i, r in enumerate(self.regions) for sid in r}
        self.region_state = ["created"] * len(self.regions)
        blocking = {e.key for e in self.graph.edges if e.exchange == "blocking"}
        # Blocking partitions each region reads from other regions, and the regions reading each one.
        self.region_inputs: list[set[tuple[SubtaskId, int]]] = [set() for _ in self.regions]
        self.consumers: dict[tuple[SubtaskId, int], set[int]] = {}
        for c in eg.channels:
            if c.edge in blocking:
                self.consumers.setdefault((c.producer, c.edge), set()).add(self.region_index[c.consumer])
                if self.region_index[c.producer] != self.region_index[c.consumer]:
                    self.region_inputs[self.region_index[c.consumer]].add((c.producer, c.edge))
        workers = self.scenario.workers or max(eg.parallelism.values())
        self.shuffle = ShuffleService(self, workers, self.config.shuffle_dir)

    def run(self) -> None:
        try:
            super().run()
        finally:
            self.shuffle.close()

    # ------------------------------------------------------------------ the loop
    def _fire_timers(self) -> None:
        for i, f in enumerate(self.scenario.failures):
            if i not in self.fired_failures and f.at_step is not None and self.step >= f.at_step:
                self.fired_failures.add(i)
                self.fail(f.target, failure_index=i)
                break  # one failure per step, as in the streaming engine
        self._schedule()

    def _next_timer(self) -> int | None:
        due = [f.at_step for i, f in enumerate(self.scenario.failures)
               if i not in self.fired_failures and f.at_step is not None and f.at_step > self.step]
        return min(due) if due else None

    def enabled_actions(self) -> list[Any]:
        acts = super().enabled_actions()
        fast = self.scenario.schedule.slowdown
        for w in self.writers:
            for sp in w.partition.subpartitions:
                if sp.queue:
                    acts.append((fast, self._do_persist, (w, sp)))
        for r in self.readers:
            if r.can_read():
                acts.append((fast, self._do_read, r))
        return acts

    def _do_persist(self, arg: tuple[BlockingWriter, OutputSubpartition]) -> None:
        arg[0].persist(arg[1])

    def _do_read(self, reader: BlockingReader) -> None:
        reader.read()

    def _available(self, partition: tuple[SubtaskId, int]) -> bool:
        d = self.shuffle.descriptors.get(partition)
        return d is not None and d.exchange == "blocking" and self.shuffle.blocking.is_available(d.partition_id)

    def _schedule(self) -> None:
        """Mark finished regions, release what no one needs any more, deploy what became schedulable."""
        for r, state in enumerate(self.region_state):
            if state == "running" and all(self.tasks[s].terminated() for s in self.regions[r]):
                self.region_state[r] = "finished"
                self.event("region_finished", _names(self.regions[r]))
                self._release_consumed()
        ready = [r for r, state in enumerate(self.region_state)
                 if state == "created" and all(self._available(p) for p in self.region_inputs[r])]
        if ready:
            self._deploy(frozenset().union(*(self.regions[r] for r in ready)))
            for r in ready:
                self.region_state[r] = "running"
                self.event("deploy", _names(self.regions[r]))

    def _deploy(self, subtasks: frozenset[SubtaskId]) -> None:
        dep = self.shuffle.deploy(subtasks, self.tasks)
        self.tasks.update(dep.tasks)
        self.tasks = dict(sorted(self.tasks.items(), key=lambda kv: self._position[kv[0]]))
        self.subpartitions = [sp for t in self.tasks.values() for p in t.partitions for sp in p.subpartitions
                              if sp.channel is not None]
        self.writers += dep.writers
        self.readers = [r for r in self.readers if not r.done] + dep.readers

    @property
    def _position(self) -> dict[SubtaskId, int]:
        return {sid: i for i, sid in enumerate(self.exec_graph.subtasks)}

    def _release_consumed(self) -> None:
        """RegionPartitionGroupReleaseStrategy: a partition goes once all its consumer regions finished."""
        for key, regions in self.consumers.items():
            d = self.shuffle.descriptors.get(key)
            if d is not None and all(self.region_state[r] == "finished" for r in regions):
                state = self.shuffle.blocking.partitions.get(d.partition_id)
                if state is not None and state.finished and not state.released:
                    self.shuffle.blocking.release_partition_externally(d)
                    self.event("partition_released", f"{key[0]} edge {key[1]}")

    def _job_done(self) -> bool:
        if not all(s == "finished" for s in self.region_state):
            return False
        if not self.job_committed:
            self.job_committed = True
            self._commit_at_job_end()
            for d in list(self.shuffle.descriptors.values()):
                self.shuffle.master(d.exchange).release_partition_externally(d)
            leaked = sorted(str(pid) for pid, st in self.shuffle.blocking.partitions.items() if not st.released)
            if leaked:  # the master releases every partition by job end; a forgotten one stays on disk
                raise InvariantViolation("REF", f"when the job ended: blocking partition {leaked[0]} "
                                                f"({len(leaked)} in all) was never released")
        return True

    def _commit_at_job_end(self) -> None:
        """The committers commit every sink subtask's end-of-input transaction, once, at job end."""
        for t in self.tasks.values():
            if isinstance(t.op, SinkOperator) and t.op.exactly_once:  # a sink vertex's task runs a SinkOperator
                for _, txn in t.op.pending:
                    attempt = int(txn.rpartition("-t")[0].rpartition("-a")[2])
                    self.store.commit(txn, str(t.sid), END_OF_INPUT_CHECKPOINT, attempt)
                t.op.pending = []
        self.event("commit", "end of job: sink transactions committed")

    def inflight_bytes(self) -> int:
        """Network buffers of pipelined and blocking exchanges; what is persisted is storage."""
        n = 0
        for w in self.writers:
            for sp in w.partition.subpartitions:
                n += sum(len(x.recs) for x in sp.queue if isinstance(x, Buf)) + len(sp.current or ())
        for r in self.readers:
            n += sum(len(x.recs) for x in r.channel.queue if isinstance(x, Buf))
        return super().inflight_bytes() + n * self.scenario.network.record_bytes

    # ------------------------------------------------------------------ failover
    def fail(self, target: str, failure_index: int | None = None) -> None:
        self.event("failure", target)
        running = {sid for sid in self.tasks if self.region_state[self.region_index[sid]] == "running"}
        if target.startswith("worker:"):
            worker = int(target[7:])
            failed = sorted(sid for sid in running if self.shuffle.worker_of(sid) == worker)
            # The worker's pipelined partitions are gone with it; its blocking ones are files elsewhere.
            env = self.shuffle.environment("pipelined", worker)
            env.release_partitions_locally(env.partitions_occupying_local_resources())
        else:
            sid = SubtaskId.parse(target)
            failed = [sid] if sid in running else []
        if not failed:
            self.event("failure_ignored", f"{target}: no running task there")
            return
        available = {key for key in self.shuffle.descriptors if self._available(key)}
        if self.config.failover_strategy == "full":
            collected = set(range(len(self.regions)))
        else:
            collected = set()
            for sid in failed:
                regions = failover_regions(self.exec_graph, sid, available, self.regions)
                collected |= {self.region_index[next(iter(r))] for r in regions}
        restart = sorted(r for r in collected if self.region_state[r] != "created")
        if not self.rules[restarts_whole_region]():
            self._restart_tasks_only(target, failed, sorted(collected))
            return
        doomed = [sid for r in restart for sid in sorted(self.regions[r])]
        recomputed = sum(_work(self.tasks[sid]) for sid in doomed if sid in self.tasks)
        self.attempt += 1
        self.restarts += 1
        self._undeploy(doomed)
        for r in restart:
            self.region_state[r] = "created"
        fo = Failover(self.step, target, [str(s) for s in failed], [_sorted_names(self.regions[r]) for r in sorted(collected)],
                      [_sorted_names(self.regions[r]) for r in restart], recomputed)
        self.failovers.append(fo)
        self.event("region_failover", f"{len(restart)} region(s) restarted: "
                                      + "; ".join(_names(self.regions[r]) for r in restart)
                                      + f"; {recomputed} records recomputed")

    def _undeploy(self, doomed: list[SubtaskId]) -> None:
        gone = set(doomed)
        for sid in doomed:
            task = self.tasks.pop(sid, None)
            if task is None:
                continue
            if task.vertex.kind == "sink":
                # The restarted writer aborts whatever it staged before (nothing was committed yet).
                prefix = f"{sid}-a"
                for txn in [t for t in self.store.staged if t.startswith(prefix)]:
                    del self.store.staged[txn]
            worker = self.shuffle.worker_of(sid)
            for p in task.partitions:
                d = self.shuffle.descriptors[(sid, p.edge)]
                self.shuffle.environment(d.exchange, worker).release_partitions_locally([d.partition_id])
                if self.rules[releases_partition_of_reset_producer]():
                    self.shuffle.master(d.exchange).release_partition_externally(d)  # re-produced under a new id
        self.writers = [w for w in self.writers if w.partition.subpartitions[0].task.sid not in gone]
        self.readers = [r for r in self.readers if r.channel.task.sid not in gone]
        self.subpartitions = [sp for sp in self.subpartitions if sp.task.sid not in gone]

    def _restart_tasks_only(self, target: str, failed: list[SubtaskId], collected: list[int]) -> None:
        """The test-only fault: only the failed tasks restart; their running peers carry on."""
        recomputed = sum(_work(self.tasks[sid]) for sid in failed)
        self.attempt += 1
        self.restarts += 1
        self._undeploy(failed)
        self._deploy(frozenset(failed))
        self.failovers.append(Failover(self.step, target, [str(s) for s in failed],
                                       [_sorted_names(self.regions[r]) for r in collected],
                                       [[str(s)] for s in failed], recomputed))
        self.event("region_failover", f"restart-failed-task-only: {', '.join(map(str, failed))}")

    # ------------------------------------------------------------------ report
    def batch_summary(self) -> dict[str, Any]:
        bm = self.shuffle._blocking
        return {
            "execution": "batch",
            "regions": len(self.regions),
            "workers": self.shuffle.workers,
            "failover_strategy": self.config.failover_strategy,
            "failovers": [{"step": f.step, "target": f.target, "failed": f.failed, "regions_named": f.collected,
                           "regions_restarted": f.restarted, "records_recomputed": f.records_recomputed}
                          for f in self.failovers],
            "regions_restarted": sum(len(f.restarted) for f in self.failovers),
            "records_recomputed": sum(f.records_recomputed for f in self.failovers),
            "partitions_persisted": len(bm.partitions) if bm else 0,
            "bytes_persisted": sum(s.bytes_written for s in bm.partitions.values()) if bm else 0,
        }


def _work(task: Task) -> int:
    """Records a task consumed (or, for a source, produced) in its lost attempt."""
    if isinstance(task.op, SourceOperator):  # a source vertex's task runs a SourceOperator
        return sum(off for _, off in task.op.splits)
    return sum(ch.processed for ch in task.channels)


def _sorted_names(region: frozenset[SubtaskId]) -> list[str]:
    return [str(s) for s in sorted(region)]


def _names(region: frozenset[SubtaskId]) -> str:
    return "{" + ", ".join(_sorted_names(region)) + "}"


__all__ = ["END_OF_INPUT_CHECKPOINT", "BatchConfig", "BatchEngine", "Failover", "ResultPartitionID", "is_batch",
           "make_engine"]
