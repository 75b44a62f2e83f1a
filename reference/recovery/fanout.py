"""Expected copies of records that cross a broadcast edge whose consumer was rescaled.

A broadcast edge copies each record to every consumer subtask, so how many copies the committed
output must hold depends on the consumer's parallelism *when the record crossed the edge*. The
static expectation (``reference.runtime.records.routes``) uses the graph's parallelism; once a restore
changes a broadcast consumer's parallelism, this module answers the oracle's expected copies.

Broadcast edges are always aligned (facts §3.7), so a checkpoint splits a producer's broadcast
output cleanly: what it emitted before its snapshot reached every old consumer subtask before
theirs, and what it emits after the restore goes to the new ones. Per broadcast edge we keep the
copies settled by earlier parallelisms and the producer's emissions when its consumer last
changed; what a checkpoint had emitted is counted from its source offsets and its channel state,
never from what the engine did afterwards, so a lost or duplicated record still shows.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from cutcheck.model.execution import SubtaskId
from cutcheck.model.kinds import VertexKind
from cutcheck.reference.runtime.records import RID, filter_keeps

if TYPE_CHECKING:
    from cutcheck.reference.recovery.doors import RecoveryRun
    from cutcheck.reference.storage.memory import CompletedCheckpoint

Counts = list[int]  # per rid (dense over all sources): copies


class BroadcastFanout:
    def __init__(self, engine: RecoveryRun):
        self.graph = engine.graph
        self.expect = engine.expect
        self.total = engine.expect.total_records
        self.broadcast_edges = [e for e in self.graph.edges if e.partitioner == "broadcast"]
        self.parallelism = dict(engine.parallelism)
        self.settled: dict[int, Counts] = {}  # copies that crossed the edge at earlier parallelisms
        self.base: dict[int, Counts] = {}  # the producer's emissions when the consumer last changed
        self._expected: Counts | None = None

    # ------------------------------------------------------------------ epochs
    def on_rescale(self, done: CompletedCheckpoint, new_parallelism: dict[str, int]) -> None:
        """Settle the copies made before ``done`` at the old parallelism of each rescaled consumer."""
        changed = [e for e in self.broadcast_edges if done.parallelism[e.target] != new_parallelism[e.target]]
        self.parallelism = dict(new_parallelism)
        self._expected = None
        if not changed:
            return
        emitted = self._emitted(done.parallelism, self._sources_at(done), self._inflight(done))
        for e in changed:
            self.settled[e.key] = self._crossed(e.key, e.source, emitted, done.parallelism[e.target])
            self.base[e.key] = list(emitted[e.source])

    def restarted(self, parallelism: dict[str, int]) -> None:
        """A restart from scratch (no completed checkpoint): nothing was committed, nothing settles."""
        self.parallelism = dict(parallelism)
        self._expected = None

    def active(self) -> bool:
        """Whether the static expectation no longer holds (some broadcast consumer changed)."""
        return bool(self.settled) or any(
            self.parallelism[e.target] != self.graph.vertex(e.target).parallelism for e in self.broadcast_edges
        )

    # ------------------------------------------------------------------ counting
    def _sources_at(self, done: CompletedCheckpoint) -> dict[str, Counts]:
        """1 for every record a source emitted before its snapshot in ``done``."""
        out: dict[str, Counts] = {}
        for name, layout in self.expect.layouts.items():
            counts = [0] * self.total
            for i in range(done.parallelism[name]):
                for split, next_offset in done.tasks[SubtaskId(name, i)].operator.get("splits", []):
                    for offset in range(min(next_offset, layout.split_size(split))):
                        counts[layout.rid_base + offset * layout.splits + split] = 1
            out[name] = counts
        return out

    def _sources_at_end(self) -> dict[str, Counts]:
        out: dict[str, Counts] = {}
        for name, layout in self.expect.layouts.items():
            counts = [0] * self.total
            counts[layout.rid_base: layout.rid_base + layout.records] = [1] * layout.records
            out[name] = counts
        return out

    @staticmethod
    def _inflight(done: CompletedCheckpoint) -> dict[int, Counter[int]]:
        """Copies of each rid in the checkpoint's channel state, per edge."""
        out: dict[int, Counter[int]] = {}
        for snap in done.tasks.values():
            for states in (snap.input_state, snap.output_state):
                for (edge, _, _), bufs in states.items():
                    c = out.setdefault(edge, Counter())
                    for b in bufs:
                        c.update(rec[RID] for rec in b.recs)
        return out

    def _crossed(self, edge: int, producer: str, emitted: dict[str, Counts], consumer_parallelism: int) -> Counts:
        if edge not in self.settled:
            return [n * consumer_parallelism for n in emitted[producer]]
        return [s + (n - b) * consumer_parallelism
                for s, n, b in zip(self.settled[edge], emitted[producer], self.base[edge], strict=True)]

    def _emitted(self, parallelism: dict[str, int], sources: dict[str, Counts],
                 inflight: dict[int, Counter[int]]) -> dict[str, Counts]:
        """Per vertex, the copies of each rid it emitted (for a sink: processed) up to the cut."""
        out: dict[str, Counts] = {}
        for vid in self.graph.topological_order():
            v = self.graph.vertex(vid)
            if v.kind is VertexKind.SOURCE:
                out[vid] = sources[vid]
                continue
            arrived = [0] * self.total
            for e in self.graph.in_edges(vid):
                if e.partitioner == "broadcast":
                    crossed = self._crossed(e.key, e.source, out, parallelism[vid])
                else:
                    crossed = out[e.source]
                arrived = [a + c for a, c in zip(arrived, crossed, strict=True)]
                for rid, n in inflight.get(e.key, {}).items():
                    arrived[rid] -= n
            if v.kind is VertexKind.FILTER:
                arrived = [a if filter_keeps(rid, v.drop_every) else 0 for rid, a in enumerate(arrived)]
            out[vid] = arrived
        return out

    # ------------------------------------------------------------------ the oracle's question
    def expected(self) -> Counts:
        """Copies of each rid all sinks together must commit by the end of the job."""
        if self._expected is None:
            emitted = self._emitted(self.parallelism, self._sources_at_end(), {})
            total = [0] * self.total
            for v in self.graph.vertices:
                if v.kind is VertexKind.SINK:
                    total = [t + n for t, n in zip(total, emitted[v.id], strict=True)]
            self._expected = total
        return self._expected

    def expected_copies(self, source: str) -> tuple[int, bytes]:
        """As ``Oracle.expected_copies``: (period, copies per rid), here one period per source."""
        layout = self.expect.layouts[source]
        table = bytes(min(255, n) for n in self.expected()[layout.rid_base: layout.rid_base + layout.records])
        return max(1, layout.records), table


def after_restore(engine: RecoveryRun, done: CompletedCheckpoint | None) -> None:
    """Keep the oracle's expected copies right after a restore (or restart) at other parallelisms."""
    if not any(e.partitioner == "broadcast" for e in engine.graph.edges):
        return
    fanout = engine.broadcast_fanout
    if done is None:
        fanout.restarted(engine.parallelism)
    else:
        fanout.on_rescale(done, engine.parallelism)
    if fanout.active():
        engine.oracle.copies_override = fanout.expected_copies
