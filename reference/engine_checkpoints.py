"""The loop's checkpoint side: what the coordinator, the barrier handlers and the tasks call on the run
(trigger, acknowledge, complete, abort, the run-time checks of a completed checkpoint). A mixin of
``Engine``, kept apart so that ``engine.py`` holds the loop and the timers.
"""

from __future__ import annotations

from typing import Any

from cutcheck.reference.checkpointing.barriers import HandlerState, WaitingForFirstBarrier
from cutcheck.reference.checkpointing.snapshots import snapshot_task
from cutcheck.reference.checks.invariants import (
    check_completed_checkpoint,
    check_cut_of_checkpoint,
)
from cutcheck.reference.checks.tracing import on_abort, on_complete
from cutcheck.reference.runtime.debloat import current_buffer_size
from cutcheck.reference.runtime.network import Barrier, Buf
from cutcheck.reference.runtime.tasks import Task
from cutcheck.reference.storage.memory import CompletedCheckpoint


class CheckpointEffects:
    """Checkpoint effects of the run; ``Engine`` supplies the state they read (see core.doors.TaskRun)."""

    def new_barrier_handler(self) -> HandlerState:
        """A task's barrier handler starts waiting for the first barrier (a door for the run-time room)."""
        return WaitingForFirstBarrier()

    def snapshot_task(self, task: Task, b: Barrier, *, unaligned: bool, received: set[int], first: Any,
                      direct: bool = False) -> Any:
        """The snapshot step a barrier handler or a finishing task triggers (checkpointing.snapshots)."""
        return snapshot_task(task, b, unaligned=unaligned, received=received, first=first, direct=direct)

    def maybe_acknowledge(self, t: Task, snap: Any) -> None:
        if snap.acked or not snap.input_done or snap.outputs_pending > 0:
            return
        snap.acked = True
        self.coordinator.acknowledge(snap)

    def timed_out(self, cp: int) -> bool:
        p = self.coordinator.pending.get(cp)
        t = self.scenario.checkpoint.timeout
        return p is not None and t is not None and p.options == "timeoutable" and self.step - p.trigger_step > t

    def trigger_checkpoint(self, kind: str = "checkpoint") -> int:
        cp = self.coordinator.trigger(kind)
        self.event("trigger", f"checkpoint {cp} ({kind}, {self.coordinator.options(cp)})")
        self.inflight_at_trigger[cp] = self.inflight_bytes()
        self.buffer_size_at_trigger[cp] = current_buffer_size(self)
        b = Barrier(cp, kind, self.coordinator.options(cp), self.step)
        for t in self.tasks.values():
            # Every producer has sent us its end of partition: Flink triggers such a task directly.
            upstream_done = bool(t.channels) and all(ch.eop_arrived or ch.ended for ch in t.channels)
            if t.terminated():
                snapshot_task(t, b, unaligned=False, received=set(), first=None, direct=True)
            elif t.vertex.kind == "source" or t.finished or upstream_done:
                t.direct_triggers.append(b)
        return cp

    def on_complete(self, done: CompletedCheckpoint, subsumed: list[int]) -> None:
        self.event("complete", f"checkpoint {done.cp}")
        self.retention_watch.on_complete(done)
        if self.storage_watch is not None:
            self.storage_watch.on_complete(done, subsumed)  # SAVEPOINT_KEPT
        if self.tracing:

            on_complete(self, done)
        for t in self.tasks.values():
            for cp in [c for c in t.snapshots if c <= done.cp]:
                del t.snapshots[cp]
            if done.kind != "savepoint":  # a savepoint notifies no task: sinks commit nothing on it
                self.notifications.append((t, done.cp))
        self.coordinator.savepoints.on_complete(done.cp, self.step)
        for i, f in enumerate(self.scenario.failures):
            if f.after_checkpoint == done.cp and i not in self.fired_failures and i not in self.failure_due:
                self.failure_due[i] = self.step + f.delay

    def on_abort(self, cp: int) -> None:
        self.event("abort", f"checkpoint {cp}")
        if self.tracing:

            on_abort(self, cp)
        for t in self.tasks.values():
            t.handler = t.handler.abort(t, cp)
            t.snapshots.pop(cp, None)
            t.direct_triggers = [b for b in t.direct_triggers if b.cp != cp]
            t.last_cp = max(t.last_cp, cp)

    def check_cut(self, done: CompletedCheckpoint) -> None:
        # ``cut_checks`` off lets a test show that trace validation alone catches a faulty engine.
        if self.cut_checks and self.scenario.checkpoint.mode != "at_least_once":
            check_cut_of_checkpoint(self, done)
        check_completed_checkpoint(self, done)  # ALIGNED_EDGE, BROADCAST_STATE: before it is stored, as CUT

    def inflight_bytes(self) -> int:
        rb = self.scenario.network.record_bytes
        total = 0
        for sp in self.subpartitions:
            total += sum(len(x.recs) for x in sp.queue if isinstance(x, Buf)) + len(sp.current or ())
            total += sum(len(x.recs) for x in sp.channel.queue if isinstance(x, Buf))
        return total * rb

