"""The reference engine: a deterministic scheduler over tasks, channels, the coordinator and sinks.

Each step the engine lists the enabled actions (a task processes a buffer or handles a priority
event, a source produces, a subpartition transmits, an output flusher fires, a completion
notification is delivered), and one chooser picks one. Timers (checkpoint trigger, alignment
timeout, checkpoint expiry, scheduled failures) fire when their step comes, not by choice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cutcheck.model.errors import InvariantViolation, RestoreRefused
from cutcheck.model.execution import ExecutionGraph
from cutcheck.model.graph import JobGraph
from cutcheck.reference.checkpointing.arrival import deliver_head
from cutcheck.reference.checkpointing.barriers import edge_carries_unaligned_barriers, trigger_reaches_task
from cutcheck.reference.checkpointing.coordinator import Coordinator
from cutcheck.reference.checkpointing.snapshots import convert_timed_out_barrier, snapshot_task
from cutcheck.reference.checks.invariants import check_key_group_ranges, order_checked_edges
from cutcheck.reference.checks.oracle import Oracle
from cutcheck.reference.checks.restore_judgement import judge_restore
from cutcheck.reference.checks.storage_invariants import RetentionWatch, StorageWatch
from cutcheck.reference.core.coverage import Coverage, note_failure
from cutcheck.reference.core.deadline import current_wall
from cutcheck.reference.engine_checkpoints import CheckpointEffects
from cutcheck.reference.faults.catalogue import Mutants
from cutcheck.reference.recovery.recovery import restore_state
from cutcheck.reference.recovery.region_failover import failover
from cutcheck.reference.run_storage import start_from
from cutcheck.reference.runtime.debloat import Debloating
from cutcheck.reference.runtime.network import Barrier, Buf, OutputSubpartition
from cutcheck.reference.runtime.records import Expectations
from cutcheck.reference.runtime.scheduler import Chooser, ScriptedChooser, SeededChooser
from cutcheck.reference.runtime.sinks import TransactionStore
from cutcheck.reference.runtime.tasks import Task, any_current
from cutcheck.reference.scenario import Scenario
from cutcheck.reference.shuffle.wiring import build_runtime
from cutcheck.reference.storage.memory import CheckpointStorage, CompletedCheckpoint, InMemoryStorage


class Engine(CheckpointEffects):
    def __init__(self, scenario: Scenario, *, chooser: Chooser | None = None, storage: CheckpointStorage | None = None,
                 trace: bool = False, log_sink: Any = None, max_steps: int | None = None,
                 restore: CompletedCheckpoint | None = None):
        self.scenario = scenario
        self.coverage = Coverage()  # what this run exercised (reference.core.coverage); never logged
        self.graph: JobGraph = scenario.graph
        self.mutants = Mutants.of(list(scenario.mutants))
        self.rules = self.mutants.rules()  # the rules at every seam, a switched-on fault's where it replaces one
        if chooser is None:
            chooser = (ScriptedChooser(scenario.schedule.choices, scenario.seed) if scenario.schedule.choices
                       else SeededChooser(scenario.seed))
        self.chooser = chooser
        self.max_steps = max_steps if max_steps is not None else scenario.max_steps
        self.step = 0
        self.attempt = 0
        self.vertex_index = {v.id: i for i, v in enumerate(self.graph.vertices)}
        self.expect = Expectations.of(self.graph)
        self.layouts = self.expect.layouts
        self.order_edges = order_checked_edges(self.graph)
        self.logs = log_sink
        self.oracle = Oracle(self.expect, self.graph, self.logs)
        self.store = TransactionStore(self.oracle.on_commit)
        self.storage = storage or InMemoryStorage(self.rules)
        self.coordinator = Coordinator(self, self.storage)
        bind = getattr(self.storage, "bind", None)
        if bind is not None:
            bind(self)  # the on-disk storage asks the coordinator which kind a pending checkpoint is
        self.storage_watch = StorageWatch.attach(self.storage)  # SAVEPOINT_KEPT, NO_ORPHANS (on-disk only)
        self.retention_watch = RetentionWatch(self.storage, scenario.checkpoint.retained)  # RETAINED
        self.tracing = trace
        self.traces: dict[tuple[int, int, int], list] = {}
        self.trace_archive: list[dict[tuple[int, int, int], list]] = []
        self.trace_suspended = False  # after a rescale (see reference.recovery.recovery)
        self.cut_checks = True
        self.alignment_steps: dict[int, int] = {}
        self.inflight_at_trigger: dict[int, int] = {}
        self.aligned_processed: dict[int, int] = {}  # checkpoint -> records its tasks processed while aligning
        self.notifications: list[tuple[Task, int]] = []
        self.next_trigger = scenario.checkpoint.interval
        self.fired_failures: set[int] = set()
        self.failure_due: dict[int, int] = {}
        self.restarts = 0
        self.checkpoint_failovers: list[int] = []  # steps at which the failure manager failed the job
        self.restore_reports: list[dict[str, Any]] = []
        self.finished = False
        self.listeners: list[Callable[[str, dict[str, Any]], None]] = []
        self.parallelism: dict[str, int] = {v.id: v.parallelism for v in self.graph.vertices}
        self.buffer_size_at_trigger: dict[int, int] = {}
        self.debloat = Debloating.of(self)  # None unless the scenario's "debloat" section enables it
        if restore is not None:  # a checkpoint of an earlier run (simulate --restore)

            start_from(self, restore)
        self._build(restore)

    # ------------------------------------------------------------------ set-up
    def _build(self, restored: CompletedCheckpoint | None, new_parallelism: dict[str, int] | None = None) -> None:
        if new_parallelism:
            self.parallelism.update(new_parallelism)
        self.exec_graph = ExecutionGraph(self.graph, self.parallelism)
        self.edge_unaligned = {e.key: self.rules[edge_carries_unaligned_barriers](self.graph, e.key) for e in self.graph.edges}
        self.tasks, self.subpartitions = build_runtime(self)
        check_key_group_ranges(self)  # OWNERSHIP of the ranges themselves
        if restored is not None:

            try:
                report = restore_state(self, restored)
            except RestoreRefused as refusal:
                judge_restore(self, restored, refusal)  # RESTORE_JUDGED: Flink refuses it too
                raise
            judge_restore(self, restored, None)
            self.restore_reports.append(report)

    def event(self, kind: str, detail: str = "") -> None:
        if self.logs is not None:
            self.logs.event(self.step, self.attempt, kind, detail)
        for listener in self.listeners:
            listener(kind, {"step": self.step, "attempt": self.attempt, "detail": detail})

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        while not self.finished:
            if self.step >= self.max_steps:
                raise InvariantViolation("LIVENESS", f"the job did not finish within {self.max_steps} steps")
            current_wall().check()  # a time-bounded campaign's deadline (reference.core.deadline)
            self.tick()

    def tick(self) -> bool:
        """One step: fire due timers, then one chosen action. Returns False when the job is done."""
        self._fire_timers()
        if self.finished:
            return False
        if self.debloat is not None:
            self.debloat.on_step(self)
        actions = self.enabled_actions()
        if not actions:
            if self._job_done():
                self.finished = True
                self.event("finished")
                return False
            nxt = self._next_timer()
            if nxt is None:
                raise InvariantViolation("LIVENESS", f"deadlock at step {self.step}: no action is enabled")
            self.step = max(self.step + 1, nxt)
            return True
        weights = [a[0] for a in actions]
        _, fn, arg = actions[self.chooser.choose(weights)]
        fn(arg)
        self.step += 1
        return True

    def enabled_actions(self) -> list[tuple[int, Callable[[Any], None], Any]]:
        """Every enabled action with its weight, in a fixed order (tasks, then subpartitions, then
        notifications), so a seed picks the same action in every run.

        This scan runs once per step, so ``Task.readable``, ``Task.has_unflushed`` and
        ``_can_transmit`` are inlined here; they remain the definitions (tests hold the two equal).
        """
        sched = self.scenario.schedule
        # Every action weighs ``slowdown``; the slow vertex's record processing (and producing) weighs
        # 1 under the backpressure policy, while its event handling (barriers, end of partition,
        # recovery events) does not: a Flink operator is slow in its user function, and the mailbox
        # handles events between records (a slow barrier handler would also pile up the barriers of
        # expired checkpoints faster than it drains them). The output flusher weighs ``flush_weight``
        # (Flink flushes on a timer, rarely compared with record processing, so buffers usually
        # leave full).
        fast = sched.slowdown
        slow = 1 if sched.policy == "backpressure" else fast
        slow_vertex = sched.slow
        flush_weight = sched.flush_weight
        do_process = self._do_process
        acts: list[tuple[int, Callable[[Any], None], Any]] = []
        append = acts.append
        for t in self.tasks.values():
            if t.pending_priority:
                append((fast, self._do_priority, t))
                continue
            w = slow if t.sid.vertex == slow_vertex else fast
            if t.direct_triggers and (t.is_source or t.finished
                                      or self._snapshots_unaligned(t, t.direct_triggers[0])):
                append((fast, self._do_direct_checkpoint, t))
            if t.is_source:
                if not t.finished and t.output_available():
                    append((w, self._do_produce, t))
            else:
                avail = None
                for ch in t.channels:
                    if ch.blocked:
                        continue
                    if ch.recovered:
                        head = ch.recovered[0]
                    else:
                        q = ch.queue
                        if not q:
                            continue
                        g = ch.gate
                        if not g.recovery_done and g.recovering():
                            continue
                        head = q[0]
                    if head.__class__ is Buf:
                        if avail is None:
                            avail = t.output_available()
                        if not avail:
                            continue
                        append((w, do_process, ch))
                    else:
                        append((fast, do_process, ch))
            for p in t.partitions:  # Task.has_unflushed
                if p.in_use and any_current(p.subpartitions):
                    append((flush_weight, self._do_flush, t))
                    break
        transmit = self._transmit if sched.records_per_action else self._do_transmit
        for sp in self.subpartitions:
            q = sp.queue
            if not q:
                continue
            ch = sp.channel
            g = ch.gate
            if not g.recovery_done and g.recovering():
                continue
            head = q[0]
            cls = head.__class__
            if cls is Barrier and head.priority:
                append((fast, transmit, sp))
            elif sp.blocked:
                continue
            elif cls is not Buf or ch.nbuf < g.exclusive or g.floating_in_use < g.floating:
                append((fast, transmit, sp))
        for note in self.notifications:
            append((fast, self._do_notify, note))
        return acts

    # ------------------------------------------------------------------ actions
    def _do_priority(self, t: Task) -> None:
        t.handle_priority()

    def _do_produce(self, t: Task) -> None:
        src = t.op
        budget = max(1, self.scenario.network.buffer_bytes // self.scenario.network.record_bytes)
        src.produce(budget)  # type: ignore[attr-defined]
        if src.exhausted():  # type: ignore[attr-defined]
            t.finish()

    def _do_process(self, ch: Any) -> None:
        t = ch.task
        budget = self.scenario.schedule.records_per_action
        if budget is None:
            t.process(ch)
            return
        # A per-record cost: one action consumes up to ``budget`` records of this channel, across
        # buffers (stopping at an event or a full output), so small buffers do not slow a consumer.
        first = True
        while budget > 0:
            q = ch.recovered or ch.queue
            if not first and (not q or not isinstance(q[0], Buf) or not t.readable(ch)):
                return
            is_buf = isinstance(q[0], Buf)
            before = ch.processed
            t.process(ch, budget)
            done = ch.processed - before
            if not is_buf or done == 0:
                return  # an event is one action of its own
            budget -= done
            first = False

    def _do_flush(self, t: Task) -> None:
        t.flush()

    def _do_direct_checkpoint(self, t: Task) -> None:
        """A task whose predecessors all finished is triggered like a source (FLIP-147).

        Aligned, it snapshots once its remaining input is processed (it is finished); unaligned, at
        once, with all of its queued input as input state: its producers sent everything, so the
        cut of each input channel is at the end of that channel.
        """
        b = t.direct_triggers.pop(0)
        if b.cp not in self.coordinator.pending or b.cp <= t.last_cp:
            return  # aborted, or this task already took the snapshot (a barrier got here first)
        if not self.rules[trigger_reaches_task](t):
            return
        unaligned = t.vertex.kind != "source" and not t.finished and self._snapshots_unaligned(t, b)
        snapshot_task(t, b, unaligned=unaligned, received=set(), first=None, direct=True)

    def _snapshots_unaligned(self, t: Task, b: Barrier) -> bool:
        """Whether a directly triggered task may snapshot before its input is processed: only
        unaligned, and only if none of its inputs is forced aligned (no channel state on
        pointwise, broadcast or custom edges, facts §3.7)."""
        opts = self.coordinator.options(b.cp)
        unaligned = opts == "unaligned" or (opts == "timeoutable" and self.timed_out(b.cp))
        return unaligned and all(self.edge_unaligned[ch.edge] for ch in t.channels)

    def _can_transmit(self, sp: OutputSubpartition) -> bool:
        head = sp.queue[0]
        ch = sp.channel
        if ch.gate.recovering():
            return False
        if isinstance(head, Barrier) and head.priority:
            return True
        if sp.blocked:
            return False
        if isinstance(head, Buf):
            return ch.gate.can_receive(ch)
        return True

    def _transmit(self, sp: OutputSubpartition) -> None:
        """Per-record network cost (schedule.records_per_action): one action sends queued buffers,
        each with its credit, while their records fit in the budget (always at least one item)."""
        budget = self.scenario.schedule.records_per_action or 0
        while True:
            head = sp.queue[0]
            self._do_transmit(sp)
            if not isinstance(head, Buf):
                return  # an event is one action of its own
            budget -= len(head.recs)
            nxt = sp.queue[0] if sp.queue else None
            if not isinstance(nxt, Buf) or len(nxt.recs) > budget or not self._can_transmit(sp):
                return

    def _do_transmit(self, sp: OutputSubpartition) -> None:
        deliver_head(self, sp)

    def _do_notify(self, note: tuple[Task, int]) -> None:
        self.notifications.remove(note)
        t, cp = note
        if t.vertex.kind == "sink":
            t.op.notify_complete(cp)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ timers
    def _fire_timers(self) -> None:
        c = self.coordinator
        for i, f in enumerate(self.scenario.failures):
            if i in self.fired_failures:
                continue
            due = f.at_step if f.at_step is not None else self.failure_due.get(i)
            if due is not None and self.step >= due:
                self.fired_failures.add(i)
                self.fail(f.target, failure_index=i)
                return
        c.expire(self.step)
        if c.job_failure is not None:  # CheckpointFailureManager failed the job: a global failover
            self.checkpoint_failovers.append(self.step)
            if c.failure_manager.job_failed_over():
                raise InvariantViolation("LIVENESS", f"restart loop: failed checkpoints failed the job over "
                                         f"{c.failure_manager.failovers_in_a_row} times in a row ({c.job_failure})")
            self.fail("job: " + c.job_failure)
            return
        for _ in range(c.savepoints.take_due(self.step)):
            if all(map(Task.terminated, self.tasks.values())):
                self.event("savepoint_skipped", "the job has finished")
            else:
                self.trigger_checkpoint("savepoint")
        for cp, p in list(c.pending.items()):
            if p.options == "timeoutable" and not p.timeout_fired and self.timed_out(cp):
                p.timeout_fired = True
                self.event("alignment_timeout", f"checkpoint {cp}")
                for t in self.tasks.values():
                    convert_timed_out_barrier(t, cp)
                for t in self.tasks.values():
                    if cp in c.pending:
                        t.handler = t.handler.alignment_timeout(t, cp)
        if c.pending and self.step < self.next_trigger:
            return  # neither branch below can fire (the common step)
        all_done = all(map(Task.terminated, self.tasks.values()))
        if all_done and not c.pending and self._sinks_pending() and not self.notifications:
            # The final checkpoint that commits the end of input; while completion notifications are
            # still on their way the sinks are about to commit, and another checkpoint would only
            # add one more notification per task (a pile-up that grows with tasks x steps).
            self.trigger_checkpoint()
            self.next_trigger = self.step + self.scenario.checkpoint.interval
        elif self.step >= self.next_trigger and c.can_trigger() and not all_done:
            self.trigger_checkpoint()
            self.next_trigger = self.step + self.scenario.checkpoint.interval

    def _next_timer(self) -> int | None:
        candidates = [self.next_trigger] if self.coordinator.can_trigger() else []
        candidates += [d for i, d in self.failure_due.items() if i not in self.fired_failures]
        candidates += self.coordinator.savepoints.timers()
        candidates += [f.at_step for i, f in enumerate(self.scenario.failures) if f.at_step is not None and i not in self.fired_failures]
        if self.scenario.checkpoint.timeout is not None:
            candidates += [p.trigger_step + self.scenario.checkpoint.timeout + 1 for p in self.coordinator.pending.values() if not p.timeout_fired]
        candidates += [p.trigger_step + self.scenario.checkpoint.checkpoint_timeout + 1 for p in self.coordinator.pending.values()]
        future = [c for c in candidates if c is not None and c > self.step]
        return min(future) if future else None

    def _sinks_pending(self) -> bool:
        return any(t.vertex.kind == "sink" and t.op.pending for t in self.tasks.values())  # type: ignore[attr-defined]

    def _job_done(self) -> bool:
        return (all(t.terminated() for t in self.tasks.values()) and not self._sinks_pending()
                and not self.notifications and not self.coordinator.pending)

    # ------------------------------------------------------------------ failures
    def fail(self, target: str, failure_index: int | None = None) -> None:
        """Region failover (the default) or global failover, from the latest completed checkpoint."""

        note_failure(self, target)
        failover(self, target, failure_index)

