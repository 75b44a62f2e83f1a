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
from cutcheck.model.execution import ExecutionGraph, SubtaskId
from cutcheck.model.graph import JobGraph
from cutcheck.model.kinds import VertexKind
from cutcheck.reference.checkpointing.arrival import can_transmit, deliver_head, transmit_budget
from cutcheck.reference.checkpointing.barriers import edge_carries_unaligned_barriers
from cutcheck.reference.checkpointing.controller import CheckpointController, notify_complete
from cutcheck.reference.checkpointing.coordinator import Coordinator
from cutcheck.reference.checks.oracle import Oracle
from cutcheck.reference.checks.run_checks import RunChecks
from cutcheck.reference.checks.tracing import ChannelTrace, TraceRecorder
from cutcheck.reference.core.coverage import Coverage
from cutcheck.reference.core.deadline import current_wall
from cutcheck.reference.events.coverage import count_coverage
from cutcheck.reference.events.stream import (
    ChannelKey,
    ChannelPublisher,
    CheckpointCompleted,
    EventBus,
    FailureHappened,
    Logged,
    RestoreTried,
    StepTaken,
    StoragePublisher,
    TasksDeployed,
    publishing_commits,
)
from cutcheck.reference.faults.catalogue import Mutants
from cutcheck.reference.recovery.fanout import BroadcastFanout
from cutcheck.reference.recovery.recovery import restore_state
from cutcheck.reference.recovery.region_failover import failover
from cutcheck.reference.run_storage import start_from
from cutcheck.reference.runtime.debloat import Debloating
from cutcheck.reference.runtime.network import (
    Barrier,
    Buf,
    InputChannel,
    OutputSubpartition,
    QueueItem,
    inflight_records,
)
from cutcheck.reference.runtime.records import Expectations, order_checked_edges
from cutcheck.reference.runtime.scheduler import Chooser, chooser_for, pick
from cutcheck.reference.runtime.sinks import TransactionStore
from cutcheck.reference.runtime.tasks import Task, any_current
from cutcheck.reference.scenario import Scenario
from cutcheck.reference.shuffle.wiring import build_runtime, redeploy_region
from cutcheck.reference.storage.memory import CheckpointStorage, CompletedCheckpoint, InMemoryStorage


class Engine:
    """One run. Everything that watches it subscribes to ``bus``; only the engine writes its attributes."""

    def __init__(self, scenario: Scenario, *, chooser: Chooser | None = None, storage: CheckpointStorage | None = None,
                 trace: bool = False, log_sink: Any = None, max_steps: int | None = None,
                 restore: CompletedCheckpoint | None = None):
        self.scenario = scenario
        self.bus = EventBus()  # reference.events.stream: checks, traces, coverage and tests subscribe
        self.coverage = Coverage()  # what this run exercised (reference.core.coverage); never logged
        count_coverage(self.bus, self.coverage)
        self.graph: JobGraph = scenario.graph
        self.mutants = Mutants.of(list(scenario.mutants))
        self.rules = self.mutants.rules()  # the rules at every seam, a switched-on fault's where it replaces one
        self.chooser = chooser if chooser is not None else chooser_for(scenario.schedule, scenario.seed)
        self.max_steps = max_steps if max_steps is not None else scenario.max_steps
        self.step = 0
        self.attempt = 0
        self.vertex_index = {v.id: i for i, v in enumerate(self.graph.vertices)}
        self.expect = Expectations.of(self.graph, {v for r in scenario.rescales for v in r.parallelism})
        self.layouts = self.expect.layouts
        self.order_edges = order_checked_edges(self.graph)
        self.logs = log_sink
        self.oracle = Oracle(self.expect, self.graph, self.logs)
        self.store = TransactionStore(publishing_commits(self.bus, self.oracle.on_commit))
        self.storage = storage or InMemoryStorage(self.rules)
        self.checkpoints = CheckpointController(self)
        self.job_failover: str | None = None  # asked for by the coordinator, done at the next timer
        self.coordinator = Coordinator(self, self.storage, self.checkpoints, self._request_job_failover)
        bind = getattr(self.storage, "bind", None)
        if bind is not None:  # the on-disk storage asks the coordinator which kind a pending checkpoint is
            pending = self.coordinator.pending
            bind(self.rules, lambda cp: pending[cp].kind if cp in pending else "checkpoint", StoragePublisher(self.bus))
        self.checks = RunChecks(self, self.bus)
        self.tracing = trace
        self.recorder = TraceRecorder(self, self.bus) if trace else None
        self.notifications: list[tuple[Task, int]] = []
        self.next_trigger = scenario.checkpoint.interval
        self.fired_failures: set[int] = set()
        self.failure_due: dict[int, int] = {}
        self.restarts = 0
        self.checkpoint_failovers: list[int] = []  # steps at which the failure manager failed the job
        self.restore_reports: list[dict[str, Any]] = []
        self.finished = False
        self.parallelism: dict[str, int] = {v.id: v.parallelism for v in self.graph.vertices}
        self.bus.subscribe(CheckpointCompleted, self._schedule_failures_after)
        self.broadcast_fanout = BroadcastFanout(self)  # expected copies once a rescale changes a broadcast consumer
        self.debloat = Debloating.of(self)  # None unless the scenario's "debloat" section enables it
        if restore is not None:  # a checkpoint of an earlier run (simulate --restore)
            start_from(self, restore)
            self.attempt = restore.attempt + 1
        self._build(restore)

    # ------------------------------------------------------------------ set-up
    def _build(self, restored: CompletedCheckpoint | None, new_parallelism: dict[str, int] | None = None) -> None:
        if new_parallelism:
            self.parallelism.update(new_parallelism)
        self.exec_graph = ExecutionGraph(self.graph, self.parallelism)
        self.edge_unaligned = {e.key: self.rules[edge_carries_unaligned_barriers](self.graph, e.key) for e in self.graph.edges}
        self.tasks, self.subpartitions = build_runtime(self)
        self.bus.publish(TasksDeployed(dict(self.parallelism)))
        if restored is not None:
            try:
                report = restore_state(self, restored)
            except RestoreRefused as refusal:
                self.bus.publish(RestoreTried(restored, refusal))  # a check may find Flink accepts it
                raise
            self.bus.publish(RestoreTried(restored, None))
            self.restore_reports.append(report)

    def event(self, kind: str, detail: str = "") -> None:
        if self.logs is not None:
            self.logs.event(self.step, self.attempt, kind, detail)
        self.bus.publish(Logged(self.step, self.attempt, kind, detail))

    def channel_events(self, key: ChannelKey, gate: int) -> ChannelPublisher | None:
        """Where a newly connected channel publishes its protocol events: the bus, if they are recorded."""
        if self.recorder is None or not self.recorder.open(key, gate):
            return None
        return ChannelPublisher(self.bus, key)

    @property
    def traces(self) -> dict[ChannelKey, ChannelTrace]:
        """The current book of channel traces (empty unless the run is traced)."""
        return self.recorder.traces if self.recorder is not None else {}

    @property
    def trace_archive(self) -> list[dict[ChannelKey, ChannelTrace]]:
        """Earlier books of channel traces (one closes at each restart from scratch or rescale)."""
        return self.recorder.archive if self.recorder is not None else []

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        while not self.finished:
            if self.step >= self.max_steps:
                self.checks.on_stuck(self.coordinator.pending.items())  # TRIGGER names a hang LIVENESS cannot
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
                self.checks.on_stuck(self.coordinator.pending.items())
                raise InvariantViolation("LIVENESS", f"deadlock at step {self.step}: no action is enabled")
            self.step = max(self.step + 1, nxt)
            return True
        _, fn, arg = actions[pick(self.chooser, self, actions)]  # the one step hook (observers wrap the chooser)
        fn(arg)
        if self.bus.wants(StepTaken):
            self.bus.publish(StepTaken(self.step, self.attempt))
        self.step += 1
        return True

    def enabled_actions(self) -> list[tuple[int, Callable[[Any], None], Any]]:
        """Every enabled action with its weight, in a fixed order (tasks, then subpartitions, then
        notifications), so a seed picks the same action in every run.

        This scan runs once per step, so ``Task.readable``, ``Task.has_unflushed`` and ``can_transmit``
        are inlined here; they remain the definitions (tests hold the two equal)."""
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
                                      or self.checkpoints.snapshots_unaligned(t, t.direct_triggers[0])):
                append((fast, self._do_direct_checkpoint, t))
            if t.is_source:
                if not t.finished and t.output_available():
                    append((w, self._do_produce, t))
            else:
                avail = None
                head: QueueItem
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
                    if type(head) is Buf:
                        avail = t.output_available() if avail is None else avail
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
            if type(head) is Barrier and head.priority:
                # can_transmit: a sender held by its gate's recovery keeps back barriers of ended checkpoints
                held = sp.blocked and head.cp not in self.coordinator.pending
                if not (held and any(c.recovery_pending for c in g.channels)):
                    append((fast, transmit, sp))
            elif sp.blocked:
                continue
            elif type(head) is not Buf or ch.nbuf < g.exclusive or g.floating_in_use < g.floating:
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

    def _do_process(self, ch: InputChannel) -> None:
        ch.task.process_budget(ch, self.scenario.schedule.records_per_action)

    def _do_flush(self, t: Task) -> None:
        t.flush()

    def _do_direct_checkpoint(self, t: Task) -> None:
        self.checkpoints.direct_checkpoint(t)

    def _can_transmit(self, sp: OutputSubpartition) -> bool:
        return can_transmit(sp)

    def _transmit(self, sp: OutputSubpartition) -> None:
        transmit_budget(self, sp, self.scenario.schedule.records_per_action or 0)

    def _do_transmit(self, sp: OutputSubpartition) -> None:
        deliver_head(self, sp)

    def _do_notify(self, note: tuple[Task, int]) -> None:
        self.notifications.remove(note)
        notify_complete(note)

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
        self.checkpoints.deliver_acks()  # acknowledgements whose asynchronous part ends now (ack_delay)
        if self.job_failover is not None:  # CheckpointFailureManager failed the job: a global failover
            self.checkpoint_failovers.append(self.step)
            if (fm := c.failure_manager).job_failed_over(c.restart_point):
                raise InvariantViolation("LIVENESS", f"restart loop: failed checkpoints failed the job over "
                                         f"{fm.failovers_in_a_row} times in a row, back at one point ({self.job_failover})")
            self.fail("job: " + self.job_failover)
            return
        for _ in range(c.savepoints.take_due(self.step)):
            if all(map(Task.terminated, self.tasks.values())):
                self.event("savepoint_skipped", "the job has finished")
            else:
                self.trigger_checkpoint("savepoint")
        self.checkpoints.fire_alignment_timeouts()
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
        candidates += self.checkpoints.ack_timers()
        future = [c for c in candidates if c is not None and c > self.step]
        return min(future) if future else None

    def _sinks_pending(self) -> bool:
        return any(t.vertex.kind is VertexKind.SINK and t.op.pending for t in self.tasks.values())  # type: ignore[attr-defined]

    def _job_done(self) -> bool:
        return (all(t.terminated() for t in self.tasks.values()) and not self._sinks_pending()
                and not self.notifications and not self.coordinator.pending)

    # ------------------------------------------------------------------ checkpoints and failures
    def trigger_checkpoint(self, kind: str = "checkpoint") -> int:
        return self.checkpoints.trigger(kind)

    def inflight_bytes(self) -> int:
        return inflight_records(self.subpartitions) * self.scenario.network.record_bytes

    def _schedule_failures_after(self, e: CheckpointCompleted) -> None:
        for i, f in enumerate(self.scenario.failures):
            if f.after_checkpoint == e.done.cp and i not in self.fired_failures and i not in self.failure_due:
                self.failure_due[i] = self.step + f.delay

    # Recovery's doors: a failover asks the engine to start an attempt and rebuild (all or a region).
    def start_attempt(self, region: frozenset[SubtaskId] | None) -> None:
        """A new attempt restarts ``region`` (every subtask when None): completion notifications to
        restarted subtasks are dropped, and the next checkpoint is an interval away."""
        self.restarts += 1
        self.attempt += 1
        self.notifications = [] if region is None else [(t, cp) for t, cp in self.notifications if t.sid not in region]
        self.next_trigger = self.step + self.scenario.checkpoint.interval

    def rebuild(self, restored: CompletedCheckpoint | None, new_parallelism: dict[str, int] | None) -> None:
        self._build(restored, new_parallelism)

    def redeploy(self, region: frozenset[SubtaskId]) -> None:
        self.tasks, self.subpartitions = redeploy_region(self, region)

    def _request_job_failover(self, reason: str) -> None:
        """The coordinator's fail-job callback: the first reason stands until a global failover."""
        if self.job_failover is None:
            self.job_failover = reason

    def fail(self, target: str, failure_index: int | None = None) -> None:
        """Region failover (the default) or global failover, from the latest completed checkpoint."""
        during = any(ch.recovered for t in self.tasks.values() for ch in t.channels)
        self.bus.publish(FailureHappened(target, bool(self.storage.retained_ids()), during, self.step))
        if failover(self, target, failure_index):
            self.job_failover = None  # a global failover is the one the coordinator asked for

