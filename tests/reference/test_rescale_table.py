"""Flink's UnalignedCheckpointRescaleITCase as a table: its topologies, each restored at another
parallelism from an unaligned checkpoint taken under backpressure.

Every row must hold EXACTLY_ONCE, ORDER and OWNERSHIP, or be refused exactly where Flink 1.19
refuses (``rescale_helpers.flink_refuses``): a vertex whose gates or partitions are remapped has all
of them remapped, and a pointwise or broadcast edge among them refuses the restore; a custom edge
refuses where it holds in-flight data. ``pointwise_with_state`` restores checkpoints that hold in-flight data on its rescale
edge (as a checkpoint of a job whose edge was not pointwise would), so it must be refused.

As in Flink's test, the 20 <-> 21 pairs run on the pipeline only; its chained head (source, filter,
map) is one vertex here, and the 2p stage is left out: the engine's step costs grow with the
number of channels, which grows with the square of the parallelism. Run with ``-s`` to see the
table (printed after the last row this process ran; all rows when run without xdist).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cutcheck.model.errors import RestoreRefused
from cutcheck.model.execution import SubtaskId
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.runtime.network import Buf
from cutcheck.reference.storage.memory import CompletedCheckpoint, InMemoryStorage
from tests.reference.helpers import scenario
from tests.reference.rescale_helpers import flink_refuses as refuses_per_vertex

RECORDS = 60  # per source: in-flight data at every parallelism, few enough to stay quick
SMALL_PAIRS = [(1, 2), (2, 3), (3, 7), (7, 3), (3, 3)]
Graph = dict[str, Any]


class _Builder:
    def __init__(self, name: str) -> None:
        self.graph: Graph = {"name": name, "max_parallelism": 128, "vertices": [], "edges": []}

    def v(self, vid: str, kind: str, p: int, **extra: Any) -> _Builder:
        self.graph["vertices"].append({"id": vid, "kind": kind, "parallelism": max(1, p), **extra})
        return self

    def e(self, src: str, dst: str, partitioner: str, gate: int = 0) -> _Builder:
        self.graph["edges"].append({"from": src, "to": dst, "partitioner": partitioner, "gate": gate})
        return self

    def source_pipeline(self, i: int, p: int) -> str:
        """Flink's createSourcePipeline head: source -> global -> map(p) -> rebalance -> map(p+1)."""
        self.v(f"source{i}", "source", p, records=RECORDS, keys=24, splits=4, seed=i)
        self.v(f"global{i}", "map", p).e(f"source{i}", f"global{i}", "global")
        self.v(f"rebalance{i}", "map", p + 1).e(f"global{i}", f"rebalance{i}", "rebalance")
        return f"rebalance{i}"

    def failing_sink(self, src: str, p: int) -> Graph:
        """Flink's addFailingSink: shuffle -> failing-map(p) -> shuffle -> sink(1)."""
        self.v("failing-map", "map", p).e(src, "failing-map", "shuffle")
        self.v("sink", "sink", 1).e("failing-map", "sink", "shuffle")
        return self.graph


def pipeline(p: int) -> Graph:
    b = _Builder("pipeline")
    b.v("source", "source", p, records=RECORDS, keys=24, splits=4)
    b.v("rebalance", "map", p + 1).e("source", "rebalance", "rebalance")
    b.v("downscale", "map", p).e("rebalance", "downscale", "shuffle")
    b.v("keyby", "keyed_count", p).e("downscale", "keyby", "hash")
    b.v("rescale", "map", p + 1).e("keyby", "rescale", "rescale")
    b.v("sink", "sink", 1).e("rescale", "sink", "rebalance")
    return b.graph


def union(p: int) -> Graph:
    b = _Builder("union")
    heads = [b.source_pipeline(i, p) for i in range(2)]
    b.v("union", "union", p).e(heads[0], "union", "rebalance").e(heads[1], "union", "shuffle")
    return b.failing_sink("union", p)


def multi_input(p: int) -> Graph:
    b = _Builder("multi_input")
    heads = [b.source_pipeline(i, p) for i in range(2)]
    b.v("min", "co_map", p).e(heads[0], "min", "rebalance", 0).e(heads[1], "min", "shuffle", 1)
    return b.failing_sink("min", p)


def keyed_different_parallelism(p: int) -> Graph:
    b = _Builder("keyed_different_parallelism")
    heads = [b.source_pipeline(0, p // 2), b.source_pipeline(1, p // 3)]
    b.v("keyed", "keyed_count", p).e(heads[0], "keyed", "hash", 0).e(heads[1], "keyed", "hash", 1)
    return b.failing_sink("keyed", p)


def broadcast(p: int) -> Graph:
    b = _Builder("broadcast")
    head = b.source_pipeline(0, p)
    b.v("rules", "source", p, records=RECORDS // 4, keys=4, splits=2, seed=9)
    b.v("joined", "broadcast_state", 2 * p).e(head, "joined", "rebalance", 0).e("rules", "joined", "broadcast", 1)
    return b.failing_sink("joined", p)


def keyed_broadcast(p: int) -> Graph:
    b = _Builder("keyed_broadcast")
    head = b.source_pipeline(0, p)
    for i in range(1, 4):
        b.v(f"rules{i}", "source", 1, records=RECORDS // 6, keys=4, seed=10 + i)
    b.v("rules", "union", 1)
    for i in range(1, 4):
        b.e(f"rules{i}", "rules", "rebalance")
    b.v("joined", "broadcast_state", p + 2).e(head, "joined", "hash", 0).e("rules", "joined", "broadcast", 1)
    return b.failing_sink("joined", p)


def custom_partitioner(p: int) -> Graph:
    b = _Builder("custom_partitioner")
    head = b.source_pipeline(0, p)
    b.v("custom", "map", p).e(head, "custom", "custom")
    return b.failing_sink("custom", p)


def pointwise_with_state(p: int) -> Graph:
    b = _Builder("pointwise_with_state")
    head = b.source_pipeline(0, p)
    b.v("rescale", "map", p + 1).e(head, "rescale", "rescale")
    return b.failing_sink("rescale", p)


class RescaleEdgeWithState(InMemoryStorage):
    """Stores checkpoints with one in-flight record on the rescale edge into ``rescale[0]``."""

    def __init__(self, edge: int) -> None:
        super().__init__()
        self.edge = edge

    def complete(self, checkpoint: CompletedCheckpoint, retained: int) -> list[int]:
        snap = checkpoint.tasks[SubtaskId("rescale", 0)]
        producer = next(k[1] for k in snap.processed if k[0] == self.edge)
        snap.input_state.setdefault((self.edge, producer, 0), []).append(Buf([(0, 0, 0, 0, 0, 0, -1)], 0))
        return super().complete(checkpoint, retained)


TOPOLOGIES: dict[str, Callable[[int], Graph]] = {
    "pipeline": pipeline, "union": union, "multi_input": multi_input,
    "keyed_different_parallelism": keyed_different_parallelism, "broadcast": broadcast,
    "keyed_broadcast": keyed_broadcast, "custom_partitioner": custom_partitioner,
    "pointwise_with_state": pointwise_with_state,
}
ROWS = [(t, o, n) for t in TOPOLOGIES for o, n in SMALL_PAIRS if t != "pointwise_with_state" or o != n]
ROWS[5:5] = [("pipeline", 20, 21), ("pipeline", 21, 20)]
RESULTS: dict[tuple[str, int, int], list[str]] = {}


@pytest.fixture(scope="module", autouse=True)
def _table() -> Iterator[None]:
    """Print the rows this process ran once they all have (seen with ``-s``); the rows' outcomes are
    asserted by ``test_rescale_row`` itself, so printing is a report, not a test."""
    yield
    print_table()


def flink_refuses(graph: Any, done: CompletedCheckpoint, new: dict[str, int]) -> list[str]:
    """The pointwise, broadcast and custom edges that Flink refuses to remap, per vertex
    (``rescale_helpers.flink_refuses``); empty when Flink accepts the restore."""
    if not refuses_per_vertex(graph, done, new):
        return []
    return [f"#{e.key}" for e in graph.edges if e.partitioner in ("forward", "rescale", "broadcast", "custom")]


def row_scenario(topology: str, old: int, new: int) -> tuple[Scenario, dict[str, int]]:
    before, after = TOPOLOGIES[topology](old), TOPOLOGIES[topology](new)
    target = "keyby" if topology == "pipeline" else "failing-map"
    wide = old >= 20  # hundreds of channels per edge: one later checkpoint, once the pipeline is full
    s = scenario(before, mode="unaligned", seed=old * 31 + new, interval=1500 if wide else 60,
                 slow="keyby" if topology == "pipeline" else "sink", buffer_bytes=128,
                 failures=[{"after_checkpoint": 1 if wide else 2, "target": f"{target}[0]"}], max_steps=300_000)
    s["schedule"]["slowdown"] = 4 if wide else 8
    new_parallelism = {v["id"]: v["parallelism"] for v in after["vertices"]}
    s["rescales"] = [{"on_failure": 0, "parallelism": new_parallelism}]
    return Scenario.from_json(s), new_parallelism


@pytest.mark.parametrize(("topology", "old", "new"), ROWS, ids=[f"{t}-{o}to{n}" for t, o, n in ROWS])
def test_rescale_row(topology: str, old: int, new: int) -> None:
    sc, new_parallelism = row_scenario(topology, old, new)
    storage = (RescaleEdgeWithState(next(e.key for e in sc.graph.edges if e.target == "rescale"))
               if topology == "pointwise_with_state" else InMemoryStorage())
    t0 = time.perf_counter()
    try:
        result = simulate(sc, storage=storage)
    except RestoreRefused as exc:
        done = storage.latest()
        assert done is not None
        refusing = flink_refuses(sc.graph, done, new_parallelism)
        assert refusing, f"refused a restore Flink accepts: {exc}"
        RESULTS[(topology, old, new)] = [topology, f"{old}→{new}", "refused", str(done.cp), "", "", "",
                                         f"in-flight data on {', '.join(refusing)}", f"{time.perf_counter() - t0:.1f}"]
        return
    seconds = time.perf_counter() - t0
    assert topology != "pointwise_with_state", "a rescale of in-flight data on a rescale edge was accepted"
    assert result.violations == [], result.violations
    assert result.exactly_once.ok, result.exactly_once
    assert result.restarts == 1 and result.restores, "the failure did not fire"
    restore = result.restores[0]
    assert bool(restore["rescaled"]) == (old != new)
    edges = list(restore["edges"].values())
    moved = sum(e["input_records"] + e["output_records"] for e in edges)
    filtered = sum(e.get("filtered", 0) for e in edges)
    mappers = sorted({e["mapper"].split(" / ")[0] for e in edges if e.get("mapper", "1:1") != "1:1"})
    unordered = restore.get("order_unchecked_edges", [])
    note = "ORDER no longer checked on " + ", ".join(f"#{k}" for k in unordered) if unordered else ""
    RESULTS[(topology, old, new)] = [topology, f"{old}→{new}", "ok", str(restore["checkpoint"]), str(moved),
                                     str(filtered), ", ".join(mappers) or "1:1", note, f"{seconds:.1f}"]


def print_table() -> None:
    if not RESULTS:
        print("\n(no table rows ran in this process)")
        return
    header = ["topology", "old→new", "outcome", "restored cp", "in-flight records", "dropped by filter",
              "input mappers", "note", "seconds"]
    rows = [header] + [RESULTS[k] for k in sorted(RESULTS, key=ROWS.index)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    print()
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
