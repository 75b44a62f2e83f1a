"""A subtask at run time: its input gates, result partitions, operator and barrier handler.

The methods the barrier handler calls (``take_snapshot``, ``block``, ``prioritise_queued_barriers``
…) are the effects of the protocol rules; the engine calls ``process``, ``handle_priority``,
``produce`` and ``flush`` as scheduled actions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cutcheck.model.errors import InvariantViolation
from cutcheck.model.execution import SubtaskId
from cutcheck.model.kinds import BarrierOption, VertexKind
from cutcheck.reference.core.seams import seam
from cutcheck.reference.runtime.barrier_control import TaskBarrierControl
from cutcheck.reference.runtime.network import (
    END_OF_PARTITION,
    Barrier,
    Buf,
    CancelMarker,
    EndOfChannelState,
    InputChannel,
    InputGate,
    OutputSubpartition,
    ResultPartition,
    end_of_channel_state_consumed,
)
from cutcheck.reference.runtime.operator_kinds import make_operator
from cutcheck.reference.runtime.records import KEY, Record

if TYPE_CHECKING:
    from cutcheck.reference.runtime.doors import BarrierHandler, TaskRun

ChannelKey = tuple[int, int, int]  # (edge, producer index, consumer index)


@seam
def recovered_buffer_polled(task: Task, ch: InputChannel, buf: Buf) -> None:
    """Polling a recovered buffer while its channel persists for an unaligned checkpoint adds nothing to
    that checkpoint: the snapshot captured what was left of the recovered data when it was taken
    (``capture_input``); only buffers arriving over the network are persisted as they come."""


@seam
def cancel_marker_broadcast(task: Task, cp: int) -> bool:
    """A task that will not take checkpoint ``cp`` sends a cancel marker on every output
    (``operatorChain.broadcastEvent(new CancelCheckpointMarker(cp))``), so that no consumer waits for its
    barrier (facts §4.10)."""
    return True


@dataclass(slots=True)
class TaskSnapshot:
    """What a subtask acknowledges for one checkpoint."""

    cp: int
    sid: SubtaskId
    operator: dict[str, Any]
    unaligned: bool = False
    processed: dict[ChannelKey, int] = field(default_factory=dict)  # input side: records processed at the snapshot
    input_state: dict[ChannelKey, list[Buf]] = field(default_factory=dict)
    emitted: dict[ChannelKey, int] = field(default_factory=dict)  # output side: the cut, in records
    output_state: dict[ChannelKey, list[Buf]] = field(default_factory=dict)
    input_done: bool = False
    outputs_pending: int = 0  # timeoutable barriers still queued in our output (sender side may still convert)
    acked: bool = False


class Task:
    def __init__(self, engine: TaskRun, sid: SubtaskId, parallelism: int, max_parallelism: int):
        self.engine = engine
        self.sid = sid
        self.vertex = engine.graph.vertex(sid.vertex)
        self.is_source = self.vertex.kind is VertexKind.SOURCE
        self.is_sink = self.vertex.kind is VertexKind.SINK
        self.parallelism = parallelism
        self.max_parallelism = max_parallelism
        self.gates: list[InputGate] = []
        self.channels: list[InputChannel] = []
        self.partitions: list[ResultPartition] = []
        self.handler: BarrierHandler = engine.checkpoints.new_barrier_handler()  # checkpointing.barriers, through the run
        self.finished = False  # no more input (or, for a source, no more records); EndOfPartition sent
        self.last_cp = 0
        # Checkpoints the coordinator aborted before this task got to them (Flink's abortedCheckpointIds
        # of SubtaskCheckpointCoordinatorImpl): when the task later comes to take one, it sends a cancel
        # marker instead of barriers (checkpointing.snapshots).
        self.aborted: set[int] = set()
        self.snapshots: dict[int, TaskSnapshot] = {}
        self.lineage = -1
        self.out_blocked = False
        self.pending_priority = 0
        self.direct_triggers: list[Barrier] = []  # checkpoints this task starts itself (sources, drained tasks)
        self.first_barrier: dict[int, int] = {}  # checkpoint -> step its first barrier reached this task
        # checkpoint -> records this task had processed when its first barrier arrived (what it processes
        # from then until its snapshot is the data it met during alignment, Flink's "processed data")
        self.processed_at_first_barrier: dict[int, int] = {}
        self.op = make_operator(self)
        self.control = TaskBarrierControl(self)  # what the barrier handler sees of this task

    def __repr__(self) -> str:
        return f"Task({self.sid})"

    # ------------------------------------------------------------------ output
    def output_available(self) -> bool:
        """Every result partition has the free buffers one more record may need (recomputed here;
        ``out_blocked`` caches it within one action, where buffers are only ever taken)."""
        for p in self.partitions:
            if p.pool - p.in_use < p.need:
                self.out_blocked = True
                return False
        self.out_blocked = False
        return True

    def emit(self, rec: Record) -> None:
        """Write one record to every result partition (the general case: several partitions or a
        broadcast one; a task with one plain partition emits through ``bind_emit``'s closure)."""
        for p in self.partitions:
            if p.broadcast:
                for sp in p.subpartitions:
                    self._append(p, sp, rec)
                continue
            routes = p.key_routes
            if routes is None:
                i = p.selector.select(rec[KEY])
            else:
                i = routes.get(rec[KEY])
                if i is None:
                    i = routes[rec[KEY]] = p.selector.select(rec[KEY])
            self._append(p, p.subpartitions[i], rec)

    def bind_emit(self) -> None:
        """Called whenever a result partition is added: with exactly one non-broadcast partition
        (most tasks), ``emit`` becomes a closure over that partition, the same steps as ``Task.emit``
        without the loop and attribute lookups (it runs once per record per hop)."""
        parts = self.partitions
        if len(parts) != 1 or parts[0].broadcast:
            self.__dict__.pop("emit", None)
            return
        p, task = parts[0], self
        sps, routes, select, rb, finish = p.subpartitions, p.key_routes, p.selector.select, p.record_bytes, self.finish_buffer

        def emit(rec: Record) -> None:
            if routes is None:
                sp = sps[select(rec[KEY])]
            else:
                key = rec[KEY]
                i = routes.get(key)
                if i is None:
                    i = routes[key] = select(key)
                sp = sps[i]
            cur = sp.current
            if cur is None:
                cur = sp.current = []
                p.in_use += 1
                if p.pool - p.in_use < p.need:
                    task.out_blocked = True
            cur.append(rec)
            if (len(cur) + 1) * rb > sp.buffer_size:
                finish(sp)

        self.emit = emit  # type: ignore[method-assign]

    def _append(self, p: ResultPartition, sp: OutputSubpartition, rec: Record) -> None:
        cur = sp.current
        if cur is None:
            cur = sp.current = []
            p.in_use += 1
            if p.pool - p.in_use < p.need:
                self.out_blocked = True
        cur.append(rec)
        # Full when another record would not fit: a buffer holds at most max(record size, announced
        # size) bytes (BufferWritingResultPartition trims to the debloated size; records never split).
        if (len(cur) + 1) * p.record_bytes > sp.buffer_size:
            self.finish_buffer(sp)

    def finish_buffer(self, sp: OutputSubpartition) -> None:
        cur = sp.current
        if not cur:
            return
        sp.queue.append(Buf(cur, sp.emitted))
        if sp.events is not None:
            sp.events.publish(("emit", len(cur)))
        sp.emitted += len(cur)
        sp.current = None

    def flush(self) -> None:
        for p in self.partitions:
            for sp in p.subpartitions:
                self.finish_buffer(sp)

    def has_unflushed(self) -> bool:
        # A non-empty current buffer holds one of its partition's buffers, hence the in_use test first.
        return any(p.in_use and any_current(p.subpartitions) for p in self.partitions)

    # ------------------------------------------------------------------ input
    def readable(self, ch: InputChannel) -> bool:
        if ch.blocked or self.pending_priority:
            return False
        if ch.recovered:
            return True
        return bool(ch.queue) and not ch.gate.recovering()

    def process(self, ch: InputChannel, limit: int | None = None) -> None:
        """Process from one channel: recovered data first, then the head of the live queue
        (at most ``limit`` records of the head buffer when given)."""
        live = not ch.recovered
        q = ch.queue if live else ch.recovered
        head = q[0]
        if isinstance(head, Buf):
            self._process_buffer(ch, q, head, live, limit)
        elif isinstance(head, Barrier):
            q.popleft()
            if ch.sender is not None and ch.sender.events is not None:
                ch.sender.events.publish(("barrier_processed", head.cp))
            ch.barrier_arrived, ch.barrier_cut = head.cp, head.cut
            self.note_first_barrier(ch, head)
            self.handler = self.handler.barrier_received(self.control, ch, head)
            self.check_alignment_progress()
        elif isinstance(head, CancelMarker):
            while q and isinstance(marker := q[0], CancelMarker):  # a run of them in one action, as they cross
                q.popleft()
                self.handler = self.handler.cancel_received(self.control, ch, marker.cp)
                self.check_alignment_progress()
        elif isinstance(head, EndOfChannelState):
            q.popleft()
            ch.recovery_pending = False
            self.engine.rules[end_of_channel_state_consumed](ch)
        else:
            q.popleft()
            self._channel_ended(ch)

    def process_budget(self, ch: InputChannel, budget: int | None) -> None:
        """One processing action on ``ch``: its head, or with a per-record cost (``budget`` records per
        action) up to ``budget`` records across buffers, stopping at an event or a full output, so
        small buffers do not slow a consumer."""
        if budget is None:
            self.process(ch)
            return
        first = True
        while budget > 0:
            q = ch.recovered or ch.queue
            if not first and (not q or not isinstance(q[0], Buf) or not self.readable(ch)):
                return
            is_buf = isinstance(q[0], Buf)
            before = ch.processed
            self.process(ch, budget)
            done = ch.processed - before
            if not is_buf or done == 0:
                return  # an event is one action of its own
            budget -= done
            first = False

    def _process_buffer(self, ch: InputChannel, q: Any, buf: Buf, live: bool, limit: int | None = None) -> None:
        recs, i = buf.recs, ch.head_pos
        n = len(recs)
        stop = n if limit is None else min(n, i + limit)
        self.lineage = buf.origin if buf.origin >= 0 else ch.producer
        start = i
        self.output_available()
        if not self.out_blocked:
            i = self.op.apply_many(recs, i, stop, ch)
        ch.processed += i - start
        if ch.sender is not None and ch.sender.events is not None and i > start:
            ch.sender.events.publish(("process", i - start))
        if i >= n:
            q.popleft()
            ch.head_pos = 0
            if live:
                ch.gate.release_buffer(ch)
            elif ch.persisting is not None:
                self.engine.rules[recovered_buffer_polled](self, ch, buf)
        else:
            ch.head_pos = i

    def _channel_ended(self, ch: InputChannel) -> None:
        ch.ended = True
        ch.persisting = None
        self.handler = self.handler.end_of_partition(self.control, ch)
        self.check_alignment_progress()
        if all(c.ended for c in self.channels):
            self.finish()

    def finish(self) -> None:
        """End of input: flush, let the operator finish (sinks pre-commit), send EndOfPartition.

        A pending checkpoint this task has not taken is not taken here: it comes as a barrier, a
        direct trigger queued when the last producer finished, or not at all (then it hangs until it
        expires, which the run's TRIGGER check judges), as in Flink, which has no such fallback."""
        self.op.end_of_input()
        self.flush()
        for p in self.partitions:
            for sp in p.subpartitions:
                sp.queue.append(END_OF_PARTITION)
        self.finished = True

    def notify_aborted(self, cp: int) -> None:
        """The coordinator aborted ``cp`` (``notifyCheckpointAborted``): its snapshot here, if taken, is
        dropped with its asynchronous part, and if this task has not come to it yet, it remembers the
        abort. The notification never reaches the barrier handler: an alignment of ``cp`` goes on until
        its barriers, a cancel marker or a newer barrier end it (facts §4.10)."""
        self.snapshots.pop(cp, None)
        if cp > self.last_cp:
            self.aborted.add(cp)

    def cancel_downstream(self, cp: int) -> None:
        """Broadcast a cancel marker of ``cp`` on every output, in order behind the data. A task that
        finished sends none: its end of partition, queued or sent, stands in for anything of ``cp``."""
        if self.finished:
            return
        if not self.engine.rules[cancel_marker_broadcast](self, cp):
            return
        for p in self.partitions:
            for sp in p.subpartitions:
                self.finish_buffer(sp)
                sp.queue.append(CancelMarker(cp))

    def terminated(self) -> bool:
        """Finished and fully drained: nothing left in our output queues."""
        return self.finished and all(not sp.queue and not sp.current for p in self.partitions for sp in p.subpartitions)

    def note_first_barrier(self, ch: InputChannel, b: Barrier) -> None:
        first = b.cp not in self.first_barrier
        if first:
            self.first_barrier[b.cp] = self.engine.step
            self.processed_at_first_barrier[b.cp] = sum(c.processed for c in self.channels)
        self.engine.checkpoints.barrier_taken(self, ch, b, first)

    def handle_priority(self) -> None:
        for ch in self.channels:
            if ch.priority:
                b = ch.priority.popleft()
                self.pending_priority -= 1
                if ch.ended:
                    return
                self.note_first_barrier(ch, b)
                self.handler = self.handler.barrier_received(self.control, ch, b)
                self.check_alignment_progress()
                return

    # ------------------------------------------------------------------ effects used by the barrier handler
    def timed_out(self, b: Barrier) -> bool:
        t = self.engine.scenario.checkpoint.timeout
        return b.options == BarrierOption.TIMEOUTABLE and t is not None and self.engine.step - b.trigger_step > t

    def queued_barrier(self, cp: int) -> Barrier | None:
        for ch in self.channels:
            for item in ch.queue:
                if isinstance(item, Barrier) and item.cp == cp:
                    return item
        return None

    def check_alignment_progress(self) -> None:
        """LIVENESS, found when it happens rather than when the step budget runs out: a task that
        collects a checkpoint's barriers never waits only on channels that have ended, which can
        deliver no barrier any more (their end of partition stands in for it, FLIP-147); an aligned
        task there would hold its other channels blocked until the checkpoint expired."""
        received: set[int] | None = getattr(self.handler, "received", None)
        if received is None:
            return
        waiting = [ch for ch in self.channels if ch.index_in_task not in received]
        if waiting and all(ch.ended for ch in waiting):
            raise InvariantViolation(
                "LIVENESS", f"{self.sid} collects the barriers of checkpoint {getattr(self.handler, 'cp', '?')} but waits only on "
                            f"channels that have ended ({', '.join(str(ch.index_in_task) for ch in waiting)})")

    def channel_key(self, ch: InputChannel) -> ChannelKey:
        return (ch.edge, ch.producer, self.sid.index)


def any_current(subpartitions: list[OutputSubpartition]) -> bool:
    """Whether a subpartition has a buffer being filled. A loop, not any() over a generator: the
    engine asks this of every task at every step."""
    for sp in subpartitions:  # noqa: SIM110
        if sp.current:
            return True
    return False
