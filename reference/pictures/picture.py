"""Space-time diagrams of a traced run (``cutcheck trace``): lanes per subtask, time to the right.

``build_picture`` reads a run directory (``trace.jsonl``, ``events/``, ``run.json``), replays every
channel's events through ``model.trace.ChannelChecker`` to know exactly which records each buffer
carried and which of them a completed checkpoint persisted as channel state, and returns a plain
data model (:class:`Picture`). ``reference.pictures.draw.draw_picture`` renders it with matplotlib (Agg)
and writes the PNG atomically. Nothing here prints: notes for the user travel in ``Picture.notes``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cutcheck.model.errors import CutcheckError
from cutcheck.model.graph import JobGraph
from cutcheck.model.jsontext import parse_json, read_json
from cutcheck.model.protocol import INQ, PROTOCOL_MUTANTS
from cutcheck.model.trace import ChannelChecker, Runs

WINDOW_STEPS = 420  # beyond this many steps (or MAX_BUFFERS arrows) a person cannot follow a barrier
MAX_BUFFERS = 400
MAX_CHANNELS = 48
# tab10 without orange (persisted data), red (failures) and grey (data): one colour per checkpoint.
PALETTE = ("#1f77b4", "#2ca02c", "#9467bd", "#e377c2", "#17becf", "#8c564b", "#bcbd22")
PERSISTED, DATA, FAILURE = "#ff7f0e", "#9a9a9a", "#d62728"

Channel = tuple[int, int, int, int]  # (book, edge, producer index, consumer index)


@dataclass(slots=True)
class Lane:
    vertex: str
    index: int
    y: float

    @property
    def label(self) -> str:
        return f"{self.vertex}[{self.index}]"


@dataclass(slots=True)
class DataArrow:
    """One buffer: transmitted at ``start`` on ``src``, its last record processed at ``end`` on ``dst``."""

    channel: Channel
    src: str
    dst: str
    start: int
    records: int
    end: int | None = None  # None: never fully processed (dropped at a failure, or the trace ended)
    first: int | None = None  # step its first part was processed (differs from end: processed in parts)
    persisted: dict[int, int] = field(default_factory=dict)  # checkpoint -> its records in that channel state
    restored_from: int | None = None  # its records (some) came from this checkpoint's channel state
    kind: str = "transmitted"  # or "restored_input": read from the checkpoint by the consumer at a restore
    lost_at: int | None = None  # step a failure dropped it (still queued at the consumer)


@dataclass(slots=True)
class BarrierArrow:
    """One checkpoint's barrier on one channel: a polyline of (step, lane label), producer first."""

    cp: int
    channel: Channel
    points: list[tuple[int, str]]
    unaligned: bool
    arrived: bool = False
    aborted: bool = False
    switched: int | None = None  # step of an alignment timeout: from there on it is a priority barrier


@dataclass(slots=True)
class Marker:
    cp: int
    lane: str
    step: int  # the subtask's snapshot for checkpoint cp (its first snapshot event)


@dataclass(slots=True)
class VLine:
    step: int
    kind: str  # failure, restore, restart, violation
    label: str


@dataclass(slots=True)
class Span:
    cp: int
    start: int
    end: int
    status: str  # completed, aborted, pending


@dataclass(slots=True)
class Picture:
    title: str
    lanes: list[Lane]
    start: int
    end: int
    data: list[DataArrow] = field(default_factory=list)
    barriers: list[BarrierArrow] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    lines: list[VLine] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    highlight: int | None = None
    notes: list[str] = field(default_factory=list)


def colour(cp: int) -> str:
    return PALETTE[(cp - 1) % len(PALETTE)]


# ------------------------------------------------------------------------------------ reading


def _read_run(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    if not (run_dir / "run.json").is_file():
        raise CutcheckError(f"{run_dir}: not a run directory (no run.json); pass the --out directory of `cutcheck simulate`.")
    trace = run_dir / "trace.jsonl"
    if not trace.is_file():
        raise CutcheckError(f"{run_dir} has no trace.jsonl; re-run `cutcheck simulate SCENARIO --out {run_dir} --trace`.")
    run = read_json(run_dir / "run.json", CutcheckError, "run.json", fix=f"re-run simulate with --out {run_dir}")
    rows = []
    for number, line in enumerate(trace.read_text().splitlines(), 1):
        rows.append(parse_json(line, f"{trace}: line {number}", CutcheckError, fix="re-run simulate with --trace"))
    events: list[dict[str, Any]] = []
    if (run_dir / "events").is_dir():
        import pyarrow.parquet as pq

        events = pq.read_table(run_dir / "events").to_pylist()
    return run, rows, events


def _cp_of(detail: str) -> int | None:
    words = detail.replace(",", " ").split()
    return int(words[1]) if len(words) > 1 and words[0] == "checkpoint" and words[1].isdigit() else None


# ---------------------------------------------------------------------------------- replaying


class _Replay:
    """One channel's events through the protocol checker, with buffers tracked as record runs."""

    def __init__(self, key: Channel, mode: str, mutant: str | None, src: str, dst: str) -> None:
        self.key, self.src, self.dst = key, src, dst
        self.checker = ChannelChecker(mode, mutant)
        self.inq: deque[list[Any]] = deque()  # [arrow, records not yet processed], in channel order
        self.segment = 0  # bumped at each restore: record numbers are unique within a segment only
        self.restored_cp: int | None = None
        self.carried: list[tuple[DataArrow, int, frozenset[int]]] = []
        self.persisted: list[tuple[int, int, frozenset[int]]] = []  # (segment, checkpoint, records)
        self.barriers: dict[int, BarrierArrow] = {}
        self.snapshots: list[tuple[str, int, int]] = []  # (lane, checkpoint, step)
        self.arrows: list[DataArrow] = []
        self.rejected: str | None = None

    def feed(self, step: int, event: tuple[Any, ...]) -> None:
        if self.rejected:
            return
        before = self.checker.state
        word = event[0]
        if word == "restore":
            for arrow, _ in self.inq:  # still queued at the consumer: the failure dropped it
                arrow.lost_at = step
            self.inq.clear()
            for b in self.barriers.values():
                if not (b.arrived or b.aborted):  # the failover abandoned its checkpoint
                    b.points.append((step, b.points[-1][1]))
                    b.aborted = True
        if not self.checker.feed(event):
            self.rejected = self.checker.verdict().reason
            return
        state = self.checker.state
        if word == "transmit":
            arrow = DataArrow(self.key, self.src, self.dst, step, event[1])
            recovered = min(before.rec_out, event[1])
            if recovered and self.restored_cp is not None:
                arrow.restored_from = self.restored_cp
                arrow.persisted[self.restored_cp] = recovered
            self._queue(arrow, before.out.take(event[1]))
        elif word == "process":
            self._process(step, event[1])
        elif word == "snapshot_up":
            self.barriers[event[1]] = BarrierArrow(event[1], self.key, [(step, self.src)], event[2] == "unaligned")
            self.snapshots.append((self.src, event[1], step))
        elif word == "snapshot_down":
            self.snapshots.append((self.dst, event[1], step))
        elif word in ("transmit_barrier", "priority_arrival", "barrier_processed", "timeout_switch"):
            self._barrier(step, word, event[1], before)
        elif word == "complete":
            last = state.last
            self.persisted.append((self.segment, event[1], frozenset(last.istate) | frozenset(last.ostate)))
        elif word == "abort" and event[1] in self.barriers:
            b = self.barriers[event[1]]
            b.aborted = True
            if not b.arrived:
                b.points.append((step, b.points[-1][1]))
        elif word == "restore":
            self.segment += 1
            self.restored_cp = event[1]
            if len(state.inq):
                arrow = DataArrow(self.key, self.dst, self.dst, step, len(state.inq), kind="restored_input",
                                  restored_from=event[1], persisted={event[1]: len(state.inq)})
                self._queue(arrow, state.inq)

    def _queue(self, arrow: DataArrow, records: Runs) -> None:
        self.arrows.append(arrow)
        self.inq.append([arrow, records])
        self.carried.append((arrow, self.segment, frozenset(records)))

    def _process(self, step: int, n: int) -> None:
        while n > 0 and self.inq:
            arrow, left = self.inq[0]
            k = min(n, len(left))
            arrow.first = step if arrow.first is None else arrow.first
            self.inq[0][1] = left.drop(k)
            n -= k
            if not len(self.inq[0][1]):
                arrow.end = step
                self.inq.popleft()

    def _barrier(self, step: int, word: str, cp: int, before: Any) -> None:
        b = self.barriers.get(cp)
        if b is None or b.arrived or b.aborted:
            return  # the barrier of an aborted checkpoint: the protocol ignores it, so do we
        if word == "transmit_barrier":
            b.points.append((step, self.src))
            return
        if word == "timeout_switch":
            b.unaligned, b.switched = True, step
            slot = next((s for s in before.slots if s.cp == cp), None)
            if slot is None or slot.loc != INQ:
                b.points.append((step, self.src))  # waited in the output queue; re-sent with priority
                return
        b.points.append((step, self.dst))
        b.arrived = True

    def finish(self) -> None:
        """Mark the buffers whose records a completed checkpoint persisted (output state may travel
        after the checkpoint completed, so this waits for the whole trace)."""
        for segment, cp, records in self.persisted:
            for arrow, seg, carried in self.carried:
                if seg == segment and (n := len(carried & records)):
                    arrow.persisted[cp] = max(arrow.persisted.get(cp, 0), n)


def _replay(run: dict[str, Any], rows: list[dict[str, Any]], max_channels: int) -> tuple[list[_Replay], list[str]]:
    scen = run.get("scenario", {})
    graph = scen.get("graph", {})
    edges = graph.get("edges", []) if isinstance(graph, dict) else []
    mode = scen.get("checkpoint", {}).get("mode", "aligned")
    mutant = next((m for m in scen.get("mutants", []) if m in PROTOCOL_MUTANTS), None)
    channels: dict[Channel, _Replay] = {}
    for number, r in enumerate(rows, 1):
        try:
            key, step, event = (r["book"], r["edge"], r["producer"], r["consumer"]), r["step"], tuple(r["event"])
            e = edges[r["edge"]]
        except (KeyError, IndexError, TypeError):
            raise CutcheckError(f"trace.jsonl line {number} is not a channel event of this run's graph; "
                                "re-run simulate with --trace.") from None
        if key not in channels:
            channels[key] = _Replay(key, mode, mutant, f"{e['from']}[{key[2]}]", f"{e['to']}[{key[3]}]")
        channels[key].feed(step, event)
    distinct = {k[1:] for k in channels}
    if len(distinct) > max_channels:
        raise CutcheckError(f"the run has {len(distinct)} channels, more than --max-channels {max_channels} can show "
                            "readably; trace a smaller scenario or raise --max-channels.")
    notes = []
    for ch in channels.values():
        ch.finish()
        if ch.rejected:
            notes.append(f"channel {ch.src}->{ch.dst} (edge {ch.key[1]}): the protocol rejected an event "
                         f"({ch.rejected}); drawn up to there.")
    return list(channels.values()), notes


# ------------------------------------------------------------------------------------ building


def _lanes(run: dict[str, Any], channels: list[_Replay]) -> list[Lane]:
    graph = run.get("scenario", {}).get("graph", {})

    job = JobGraph.from_json(graph)
    seen: dict[str, int] = {v.id: v.parallelism for v in job.vertices}
    for ch in channels:  # after a rescale or in a savepoint restore the parallelism may differ
        for label in (ch.src, ch.dst):
            vid, _, index = label[:-1].rpartition("[")
            seen[vid] = max(seen[vid], int(index) + 1)
    lanes, y = [], 0.0
    for vid in job.topological_order():
        for i in range(seen[vid]):
            lanes.append(Lane(vid, i, y))
            y -= 1.0
        y -= 0.6  # a gap between vertices groups their lanes
    return lanes


def _context(events: list[dict[str, Any]]) -> tuple[list[VLine], list[Span]]:
    lines: list[VLine] = []
    spans: dict[int, Span] = {}
    for e in events:
        kind, step, detail = e["kind"], e["step"], e["detail"] or ""
        cp = _cp_of(detail)
        if kind == "trigger" and cp is not None:
            spans[cp] = Span(cp, step, step, "pending")
        elif kind in ("complete", "abort") and cp in spans:
            spans[cp].end, spans[cp].status = step, "completed" if kind == "complete" else "aborted"
        elif kind == "failure":
            lines.append(VLine(step, kind, f"failure {detail}"))
        elif kind == "restore":
            rescaled = ", rescaled: tracing stops" if "parallelism" in detail else ""
            lines.append(VLine(step, kind, f"restore cp {cp}{rescaled}"))
        elif kind == "restart":
            lines.append(VLine(step, kind, "restart from scratch"))
        elif kind == "violation":
            lines.append(VLine(step, kind, detail.split(":")[0] + " violated"))
    return lines, list(spans.values())


def build_picture(run_dir: str | Path, start: int | None = None, end: int | None = None,
                  checkpoint: int | None = None, max_channels: int = MAX_CHANNELS) -> Picture:
    """The data model of a run's space-time diagram, cut to the window [start, end]."""
    run_dir = Path(run_dir)
    run, rows, events = _read_run(run_dir)
    channels, notes = _replay(run, rows, max_channels)
    lines, spans = _context(events)
    data = [a for ch in channels for a in ch.arrows]
    failures = sorted(v.step for v in lines if v.kind in ("failure", "restart"))
    for a in data:  # still queued when the job failed (a restart from scratch ends the trace book)
        if a.end is None and a.lost_at is None:
            a.lost_at = next((f for f in failures if f >= a.start), None)
    barriers = [b for ch in channels for b in ch.barriers.values()]
    first: dict[tuple[str, int], int] = {}
    for ch in channels:
        for lane, cp, step in ch.snapshots:
            first[lane, cp] = min(step, first.get((lane, cp), step))
    markers = [Marker(cp, lane, step) for (lane, cp), step in first.items()]
    last = max([r["step"] for r in rows] + [e["step"] for e in events] + [0])
    cps = sorted({b.cp for b in barriers} | {s.cp for s in spans})
    if checkpoint is not None and checkpoint not in cps:
        raise CutcheckError(f"checkpoint {checkpoint} is not in this run; its checkpoints are "
                            f"{', '.join(map(str, cps)) or 'none'}.")
    if start is not None and end is not None and end <= start:
        raise CutcheckError(f"--to {end} must be after --from {start}.")
    lo = 0 if start is None else start
    if end is not None:
        hi = end
    elif checkpoint is not None and start is None:
        # Zoom on the checkpoint: from its trigger to its last barrier, with a little margin.
        steps = [p[0] for b in barriers if b.cp == checkpoint for p in b.points]
        steps += [x for s in spans if s.cp == checkpoint for x in (s.start, s.end)]
        lo = max(0, min(steps) - 8)
        # ... and on to where its persisted buffers were processed, within a readable width.
        steps += [a.end or a.lost_at or 0 for a in data if checkpoint in a.persisted]
        hi = min(max(steps) + 8, lo + WINDOW_STEPS)
    else:
        hi = min(last, lo + WINDOW_STEPS)
        starts = sorted(a.start for a in data if a.start >= lo)
        if len([s for s in starts if s <= hi]) > MAX_BUFFERS:
            hi = starts[MAX_BUFFERS - 1]
        if hi < last:
            notes.append(f"the run is too large to draw readably ({len(data)} buffers over {last} steps): drew the "
                         f"first window, steps {lo}-{hi}; use --from/--to (or --checkpoint N) for the rest.")
        hi = max(hi, lo + 1)

    def inside(a: int, b: int | None) -> bool:
        return a <= hi and (b if b is not None else last) >= lo

    graph = run.get("scenario", {}).get("graph", {})
    mode = run.get("scenario", {}).get("checkpoint", {}).get("mode", "")
    title = f"{graph.get('name', run_dir.name)}: {mode} checkpoints, steps {lo}-{hi} of {last}"
    if checkpoint is not None:
        title += f"; checkpoint {checkpoint} highlighted"
    return Picture(title, _lanes(run, channels), lo, hi, [a for a in data if inside(a.start, a.end or a.lost_at)],
                   [b for b in barriers if inside(b.points[0][0], b.points[-1][0])],
                   [m for m in markers if lo <= m.step <= hi], [v for v in lines if lo <= v.step <= hi],
                   [s for s in spans if inside(s.start, s.end)], highlight=checkpoint, notes=notes)
