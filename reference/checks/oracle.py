"""EXACTLY_ONCE: the committed output against the input, checked as commits happen (never held whole).

Per rid the oracle counts committed rows in a byte array (rids are dense) and compares with the
copies the graph promises (reference.runtime.records.Expectations); per (keyed vertex, sink, key) it checks
that counts run 1..n without gap or repeat, where the route makes that a promise; ``count_gaps`` is
the number of such groups that do not (the Spark validation counts the same).

A run that stopped before the end (a violation ended it) is judged as a prefix: a record not yet
committed is ``pending``, not lost, and a key whose counts have a hole is not a gap (the rest may
still be on its way); duplicates, phantoms, repeated counts and count 0 are faults in any prefix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cutcheck.model.graph import JobGraph
from cutcheck.model.kinds import VertexKind
from cutcheck.reference.runtime.records import Expectations, Record, filter_keeps


@dataclass(slots=True)
class ExactlyOnce:
    ok: bool
    lost: int = 0
    duplicated: int = 0
    phantom: int = 0
    count_gaps: int = 0
    samples: dict[str, list[int]] = field(default_factory=dict)
    pending: int = 0  # a prefix only: records not committed yet (never "lost": the run did not end)
    prefix: bool = False  # judged as the prefix of a run that stopped early

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "lost": self.lost, "duplicated": self.duplicated, "phantom": self.phantom,
                "count_gaps": self.count_gaps, "pending": self.pending, "prefix": self.prefix,
                "samples": self.samples}


class Oracle:
    def __init__(self, expect: Expectations, graph: JobGraph, logs: Any):
        self.expect = expect
        self.graph = graph
        self.logs = logs
        self.counts = bytearray(expect.total_records)
        self.phantoms: list[int] = []
        # per count group (keyed_count/sink label), per key: which counts were committed (a flag per count)
        self.count_seen: dict[str, dict[int, bytearray]] = {}
        self.count_repeated: set[tuple[str, int]] = set()  # groups where some count was committed twice
        self.rows = 0
        self.labels: dict[str, tuple[str | None, str | None]] = {}
        # Set by reference.recovery.fanout once a restore changed a broadcast consumer's parallelism: the copies
        # a broadcast makes then depend on when each record crossed the edge, not on the graph alone.
        self.copies_override: Callable[[str], tuple[int, bytes]] | None = None
        for v in graph.vertices:
            if v.kind is VertexKind.SINK:
                counter = expect.count_groups.get(v.id)
                self.labels[v.id] = (f"{counter}/{v.id}" if counter else None, v.id if v.id in expect.ordered_sinks else None)

    def on_commit(self, rows: list[Record], txn: str, sink_subtask: str, checkpoint: int, attempt: int, seq: int) -> None:
        sink = sink_subtask.rpartition("[")[0]
        counter, lane = self.labels[sink]
        counts, n = self.counts, len(self.counts)
        # One pass over the rows for both tallies: commits are large and their rows cold in memory,
        # so touching each row once is what this costs. (Fields by unpacking, in the order of
        # reference.runtime.records: rid, key, value, split, offset, count, counter.)
        group = None if counter is None else self.count_seen.setdefault(counter, {})
        for rid, key, _value, _split, _offset, c, _counter in rows:
            if 0 <= rid < n:
                k = counts[rid]
                if k < 255:
                    counts[rid] = k + 1
            else:
                self.phantoms.append(rid)
            if group is None:
                continue
            seen = group.get(key)
            if seen is None:
                seen = group[key] = bytearray()
            have = len(seen)
            if c >= have:
                if c > have:
                    seen.extend(bytes(c - have))
                seen.append(1)  # the usual case: a key's next count
            else:
                if seen[c]:
                    self.count_repeated.add((counter, key))  # type: ignore[arg-type]
                seen[c] = 1
        self.rows += len(rows)
        if self.logs is not None:
            self.logs.output(rows, sink_subtask, txn, checkpoint, attempt, seq, counter, lane)

    def expected_copies(self, source: str) -> tuple[int, bytes]:
        """The copies of a source's rids are periodic in rid (filters test rid % drop_every)."""
        if self.copies_override is not None:
            return self.copies_override(source)
        period = 1
        for (src, _), rs in self.expect.routes.items():
            if src == source:
                for r in rs:
                    for d in r.filters:
                        period = period * d // _gcd(period, d)
        layout = self.expect.layouts[source]
        table = bytes(min(255, self.expect.copies(source, layout.rid_base + i)) for i in range(period))
        return period, table

    def verdict(self, sample: int = 10, *, prefix: bool = False) -> ExactlyOnce:
        """The committed output against the input; ``prefix``: the run stopped early (see above)."""
        lost = dup = 0
        samples: dict[str, list[int]] = {"lost": [], "duplicated": [], "phantom": self.phantoms[:sample]}
        for name, layout in self.expect.layouts.items():
            period, table = self.expected_copies(name)
            expected = (table * (layout.records // period + 1))[: layout.records]
            actual = bytes(self.counts[layout.rid_base: layout.rid_base + layout.records])
            if expected == actual:
                continue
            for j in range(layout.records):
                e, a = expected[j], actual[j]
                if a < e:
                    lost += e - a
                    if len(samples["lost"]) < sample:
                        samples["lost"].append(layout.rid_base + j)
                elif a > e:
                    dup += a - e
                    if len(samples["duplicated"]) < sample:
                        samples["duplicated"].append(layout.rid_base + j)
        # count_gaps: (counter, key) groups whose committed counts are not exactly 1..n, each once
        # (DESIGN "EXACTLY_ONCE"; the Spark job counts the same groups): a hole, a repeat or a 0.
        gaps = 0
        for counter, group in self.count_seen.items():
            for key, seen in group.items():
                hole = not prefix and seen.find(0, 1) != -1
                if seen[0] or hole or (counter, key) in self.count_repeated:
                    gaps += 1
        if prefix:  # not delivered yet is not lost: the run did not end
            pending, lost = lost, 0
            samples["pending"], samples["lost"] = samples["lost"], []
        else:
            pending = 0
        ok = lost == 0 and dup == 0 and not self.phantoms and gaps == 0
        return ExactlyOnce(ok, lost, dup, len(self.phantoms), gaps, samples, pending, prefix)


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


__all__ = ["ExactlyOnce", "Oracle", "filter_keeps"]
