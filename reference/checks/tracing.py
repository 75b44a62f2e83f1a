"""Channel traces: the engine's protocol events per channel, and their validation against the model.

When a run is traced, every physical channel gets a ``ChannelTrace``: the events of
``model.trace``'s vocabulary in the order the engine performs them, each with the scheduler step
(for the space-time picture). ``validate_run`` replays every trace through ``model.trace``'s
checker, like TLA+ trace validation: the engine may only do what the proved protocol allows, and
at every completed checkpoint the channel state it persisted must be what the protocol derives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cutcheck.model.execution import SubtaskId
from cutcheck.model.kinds import CheckpointMode
from cutcheck.model.trace import ChannelChecker
from cutcheck.reference.core.deadline import current_wall
from cutcheck.reference.events.stream import (
    ChannelClosed,
    ChannelStep,
    CheckpointAborted,
    CheckpointCompleted,
    EventBus,
    Recovering,
)
from cutcheck.reference.storage.memory import latest_index

if TYPE_CHECKING:
    from cutcheck.reference.core.coverage import Coverage
    from cutcheck.reference.core.doors import TraceRun

ChannelKey = tuple[int, int, int]  # (edge, producer index, consumer index)


class ChannelTrace(list[tuple[Any, ...]]):
    """A list of protocol events (what the checker reads) plus, in parallel, the step of each."""

    def __init__(self, engine: TraceRun, key: ChannelKey, mode: str, gate: int):
        super().__init__()
        self.engine = engine
        self.key = key
        self.mode = mode
        self.gate = gate
        self.steps: list[int] = []
        self.started: set[int] = set()  # checkpoints with a snapshot event on this channel
        self.base = 0  # protocol record number of this attempt's sequence number 0 (see on_restore)
        self.completed: dict[int, int] = {}  # checkpoint -> consumer's snapshot point, in protocol numbers
        # Closed at end of partition: the protocol models a live channel, so recording stops there,
        # and a later attempt does not reopen it (its history would be incomplete).
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def append(self, event: tuple[Any, ...]) -> None:
        if self.closed:
            return
        super().append(event)
        self.steps.append(self.engine.step)
        if event[0] in ("snapshot_up", "snapshot_down"):
            self.started.add(event[1])


def channel_mode(engine: TraceRun, edge: int) -> str:
    """The protocol mode a channel runs: forced aligned where Flink never goes unaligned (facts §3.7)."""
    mode: str = engine.scenario.checkpoint.mode
    if mode in (CheckpointMode.UNALIGNED, CheckpointMode.ALIGNED_TIMEOUT) and not engine.edge_unaligned.get(edge, True):
        return CheckpointMode.ALIGNED
    return mode


class TraceRecorder:
    """Records the channel traces of a run from its event bus: the channels' protocol events
    (``ChannelStep``) and what completions, aborts and restores mean for each channel.

    ``books`` holds one book of traces per stretch of the run the protocol can follow: a restart from
    scratch opens a new book; a rescale stops recording (rescaled channels start with in-flight data
    of other channels, virtual channels, which a channel trace cannot account for).
    """

    def __init__(self, engine: TraceRun, bus: EventBus):
        self.engine = engine
        self.traces: dict[ChannelKey, ChannelTrace] = {}
        self.archive: list[dict[ChannelKey, ChannelTrace]] = []
        self.suspended = False
        bus.subscribe(ChannelStep, self.on_step)
        bus.subscribe(ChannelClosed, self.on_closed)
        bus.subscribe(CheckpointCompleted, self.on_complete)
        bus.subscribe(CheckpointAborted, self.on_abort)
        bus.subscribe(Recovering, self.on_recovering)

    def books(self) -> list[dict[ChannelKey, ChannelTrace]]:
        return [*self.archive, self.traces]

    def open(self, key: ChannelKey, gate: int) -> bool:
        """A channel is deployed: whether its events are to be recorded (its trace is then open)."""
        if self.suspended:
            return False
        trace = self.traces.get(key)
        if trace is not None and trace.closed:
            return False  # no more recording for this channel: see ChannelTrace.closed
        if trace is None:
            self.traces[key] = ChannelTrace(self.engine, key, channel_mode(self.engine, key[0]), gate)
        return True

    # ------------------------------------------------------------------ subscribers
    def on_step(self, e: ChannelStep) -> None:
        self.traces[e.key].append(e.event)

    def on_closed(self, e: ChannelClosed) -> None:
        self.traces[e.key].close()

    def on_complete(self, e: CheckpointCompleted) -> None:
        """("complete", cp, observation): what the engine persisted for this channel, in protocol numbers."""
        done = e.done
        graph = self.engine.graph
        entries = self.engine.storage.retained()
        i = latest_index(entries)
        if i is None or entries[i][0] != done.cp:
            # A savepoint that completed after a newer checkpoint (acks crossed) is kept but never the
            # restore point (storage.memory.latest_index); the protocol's CheckpointCompletes makes a
            # slot the restore point, so for the channels the savepoint ends as an abort does.
            self.on_abort(CheckpointAborted(done.cp, done.kind, "completed after a newer checkpoint", "", e.step))
            return
        for key, trace in self.traces.items():
            if done.cp not in trace.started:
                continue
            edge, producer, consumer = key
            down = done.tasks.get(SubtaskId(graph.edge(edge).target, consumer))
            up = done.tasks.get(SubtaskId(graph.edge(edge).source, producer))
            if down is None or up is None or key not in down.processed or key not in up.emitted:
                continue
            obs = {
                "processed": trace.base + down.processed[key],
                "input_state": sum(len(b.recs) for b in down.input_state.get(key, [])),
                "output_state": sum(len(b.recs) for b in up.output_state.get(key, [])),
                "sent": trace.base + up.emitted[key],
            }
            trace.append(("complete", done.cp, obs))
            trace.completed[done.cp] = trace.base + down.processed[key]

    def on_abort(self, e: CheckpointAborted) -> None:
        for trace in self.traces.values():
            if e.cp in trace.started:
                trace.append(("abort", e.cp))

    def on_recovering(self, e: Recovering) -> None:
        if e.region is not None:
            self._restore_region(e.region, e.cp)
        elif e.cp is None or e.rescaled:
            self.archive.append(self.traces)
            self.traces = {}
            # A restart from scratch starts with empty channels, so recording simply begins again.
            self.suspended = self.suspended or (e.rescaled and e.cp is not None)
        else:
            self._restore(e.cp)

    def _restore(self, cp: int) -> None:
        """After a restore each channel numbers its records from 0 again, starting with the restored
        input state; in the protocol, numbering goes on from the consumer's snapshot point."""
        for trace in self.traces.values():
            if not trace.closed:
                trace.append(("restore", cp))
                trace.base = trace.completed.get(cp, 0)

    def _restore_region(self, region: frozenset[SubtaskId], cp: int | None) -> None:
        """The region's channels restore (as ``_restore`` does for all); a region that starts from
        scratch has no restore event in the protocol, so its channels stop recording."""
        graph = self.engine.graph
        for (edge, _, consumer), trace in self.traces.items():
            if SubtaskId(graph.edge(edge).target, consumer) not in region or trace.closed:
                continue
            if cp is None:
                trace.close()
            else:
                trace.append(("restore", cp))
                trace.base = trace.completed.get(cp, 0)


def write_traces(path: Any, books: list[dict[ChannelKey, ChannelTrace]]) -> None:
    """One JSON line per event: which trace book (a new one after each rescale or restart from
    scratch), the channel (edge, producer, consumer), the scheduler step and the event itself."""
    import json

    with open(path, "w") as f:
        for book_index, book in enumerate(books):
            for (edge, producer, consumer), trace in sorted(book.items()):
                for step, event in zip(trace.steps, trace, strict=True):
                    f.write(json.dumps({"book": book_index, "edge": edge, "producer": producer, "consumer": consumer,
                                        "step": step, "event": list(event)}) + "\n")


@dataclass(slots=True)
class TraceFinding:
    key: ChannelKey
    index: int
    event: tuple[Any, ...]
    reason: str
    kind: str  # "protocol" (an event the rules do not allow), "observation" (wrong channel state), "cut"


def validate_run(traces: list[dict[ChannelKey, ChannelTrace]], mutant: str | None = None) -> list[TraceFinding]:
    """Replay every channel trace of a run through the protocol; return the rejections."""

    findings: list[TraceFinding] = []
    for book in traces:
        for key, trace in sorted(book.items()):
            checker = ChannelChecker(trace.mode, mutant, trace.gate)
            for event in trace:
                if not checker.feed(event):
                    break
            verdict = checker.verdict()
            for f in verdict.failures[:1]:
                findings.append(TraceFinding(key, f.index, tuple(f.event), f.reason, f.kind))
    return findings


def validate_traces(traces: list[dict[ChannelKey, ChannelTrace]], cov: Coverage | None = None,
                    mutant: str | None = None) -> list[TraceFinding]:
    """``checks.tracing.validate_run``, also counting the protocol rule each accepted event fired."""

    findings: list[TraceFinding] = []
    wall = current_wall()  # a time-bounded campaign's deadline (reference.core.deadline); or UNBOUNDED
    for book in traces:
        for key, trace in sorted(book.items()):
            checker = ChannelChecker(trace.mode, mutant, trace.gate)
            mode = checker.protocol.mode
            for event in trace:
                wall.check()
                if not checker.feed(event):
                    break
                if cov is not None:
                    cov.hits["rule", mode, checker.protocol.action(event[0]).name] += 1
            for f in checker.verdict().failures[:1]:
                findings.append(TraceFinding(key, f.index, tuple(f.event), f.reason, f.kind))
    return findings
