"""Drawing hunt cases, weighted by what the model knows is risky.

Each draw builds a pool of candidate cases (a generated graph, variants of it with one exchange
changed or one branch added, a checkpoint mode, a rescaled restore), scores each from the model's own
analysis of it, and picks one with probability proportional to its score. Nothing here names a Flink
bug: the features are the places where the model has to do real work to stay exactly-once.

* ``inflight_edges``: exchanges that, by the model, carry unaligned barriers
  (``model.execution.edge_supports_unaligned``) and sit on a path into the slow vertex, so that
  backpressure fills them and a checkpoint persists their in-flight data.
* ``remapped_sides``: vertex sides whose channel state a rescaled restore must remap, by the
  model's reading of Flink's assignment (``reference.recovery.rescale_refusal.remapped_sides``).
* ``unmappable_on_remapped_side``: such a side that also holds an exchange whose subtask mapper
  cannot rescale (UNSUPPORTED: pointwise, broadcast): the model's rule for that side depends on
  which exchanges hold data.
* ``ambiguous_remap``: an in-flight exchange rescaled through an ambiguous mapper (RANGE, FULL), where
  receivers must filter records they do not own.
* ``mixed_exchanges``: vertices whose inputs or outputs mix exchanges that carry unaligned barriers
  with exchanges that are kept aligned.
* ``custom``, ``multi_edges``, ``max_parallelism``, ``keyed_rescale``: custom partitioners, several
  exchanges between one pair of vertices, a max parallelism other than the default, a rescaled
  keyed vertex (key groups move).
* ``savepoint_rescale``: a restore from a savepoint that moves key groups: the one restore whose
  snapshot holds no channel state by the model (a savepoint is always aligned), so every keyed
  vertex's state must be cut by key-group ranges alone.
* ``claimed_shared``: a snapshot restored in claim mode whose files later checkpoints may share or
  subsume (RocksDB incremental, or a failure after the restore that restores a newer checkpoint):
  the model's ownership rule says the job then deletes the snapshot only once nothing retained
  names its files.
* ``shared_state``: keyed vertices under RocksDB incremental checkpoints (files shared between
  checkpoints, each retained checkpoint must still find them).
* ``max_parallelism_change``: a keyed vertex whose max parallelism the restore changes: its key
  groups are numbered anew, so by Flink's documented rule the restore must be refused.
* ``exposed_exchanges``: forward or rescale exchanges into a single-input vertex of equal parallelism
  with chaining off. The model has every edge as an exchange; Flink chains such an edge away unless
  chaining is off, so only then does a mixed or remapped side the model sees exist in Flink too.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable
from typing import Any

from cutcheck.flink_bridge.hunt.case import HuntCase
from cutcheck.flink_bridge.runner import SAVEPOINT_FORMATS
from cutcheck.model.errors import CutcheckError
from cutcheck.model.execution import edge_channels, edge_supports_unaligned
from cutcheck.model.graph import JobGraph
from cutcheck.model.partitioning import UNSUPPORTED, ambiguous_old_subtasks, subtask_state_mapper
from cutcheck.reference.fuzzing.generate_graph import graph_dict
from cutcheck.reference.fuzzing.swarm import DEFAULT_MAX_PARALLELISM, SeedDraw
from cutcheck.reference.recovery.rescale_refusal import ChannelStateMap, remapped_sides

# Why each weight: a remapped side does strictly more than holding in-flight data (the data moves),
# and a remapped side that also holds an exchange the model cannot rescale is where the model's own
# rule has to look at every exchange, so it weighs most. The rest are single places of extra work.
WEIGHTS: dict[str, float] = {"inflight_edges": 1.0, "remapped_sides": 2.0, "unmappable_on_remapped_side": 4.0,
                             "ambiguous_remap": 2.0, "mixed_exchanges": 1.5, "custom": 1.5, "multi_edges": 1.5,
                             "max_parallelism": 1.0, "keyed_rescale": 1.0, "savepoint_rescale": 1.5,
                             "claimed_shared": 2.0, "shared_state": 0.5, "exposed_exchanges": 1.0,
                             "max_parallelism_change": 1.0}
# How often a candidate gets each dimension (the pool's scores then pick among them).
P_SAVEPOINT, P_CLAIM, P_FAIL_RESTORED, P_INCREMENTAL, P_CHAINING_OFF, P_MAX_PARALLELISM = 0.35, 0.5, 0.6, 0.35, 0.35, 0.15
POOL = 16  # candidates scored per draw
MAX_PARALLELISM = 3
BRANCH_PARTITIONERS = ("forward", "rescale", "rebalance", "hash")
MODES_DRAWN = ("unaligned", "unaligned", "aligned_timeout", "aligned")  # unaligned twice: in-flight data is the point

Sized = Callable[[JobGraph, str], int]  # records per source for (graph, slow vertex): the runner's budget


def slow_of(graph: JobGraph) -> str:
    counts = [vid for vid in graph.topological_order() if graph.vertex(vid).kind == "keyed_count"]
    return counts[-1] if counts else next(vid for vid in graph.topological_order() if graph.vertex(vid).kind == "sink")


def inflight_edges(graph: JobGraph, mode: str, slow: str) -> set[int]:
    """Exchanges the model expects to hold persisted in-flight data: they carry unaligned barriers and
    lead into the slow vertex (backpressure fills every channel on the way)."""
    if mode == "aligned":
        return set()
    feeding: set[str] = {slow}
    for vid in reversed(graph.topological_order()):
        if any(e.target in feeding for e in graph.out_edges(vid)):
            feeding.add(vid)
    return {e.key for e in graph.edges if e.target in feeding and edge_supports_unaligned(graph, e.key)}


def features(case: HuntCase) -> dict[str, float]:
    graph = case.job_graph()
    old = {v.id: v.parallelism for v in graph.vertices}
    new = {**old, **case.rescale}
    held = inflight_edges(graph, case.mode, slow_of(graph))
    state = ChannelStateMap(frozenset(held), frozenset(held), frozenset(old))
    sides = remapped_sides(graph, state, old, new) if case.rescale else {}

    def side_edges(vid: str, side: str) -> list[Any]:
        return graph.in_edges(vid) if side == "inputs" else graph.out_edges(vid)

    def unmappable(e: Any) -> bool:
        return UNSUPPORTED in (subtask_state_mapper(e.partitioner, "upstream"), subtask_state_mapper(e.partitioner, "downstream"))

    moved = [e for e in graph.edges if e.key in held and (old[e.source], old[e.target]) != (new[e.source], new[e.target])]
    ambiguous = [e for e in moved if ambiguous_old_subtasks(subtask_state_mapper(e.partitioner, "downstream"),
                                                            old[e.target], new[e.target])]
    mixed = 0
    for v in graph.vertices:
        for edges in (graph.in_edges(v.id), graph.out_edges(v.id)):
            kinds = {edge_supports_unaligned(graph, e.key) for e in edges}
            mixed += len(kinds) == 2 or (len(edges) > 1 and any(unmappable(e) for e in edges)
                                          and not all(unmappable(e) for e in edges))
    pairs = [(e.source, e.target) for e in graph.edges]
    keyed = sum(v.kind == "keyed_count" for v in graph.vertices)
    keyed_moved = sum(graph.vertex(v).kind == "keyed_count" and new[v] != old[v] for v in case.rescale)
    chainable = [e for e in graph.edges if e.partitioner in ("forward", "rescale")
                 and old[e.source] == old[e.target] and len(graph.in_edges(e.target)) == 1]
    channels = sum(edge_channels(e, old[e.source], old[e.target]) for e in graph.edges if e.key in held)
    return {
        "inflight_edges": round(math.log2(1 + channels), 3),
        "remapped_sides": float(len(sides)),
        "unmappable_on_remapped_side": float(sum(any(unmappable(e) for e in side_edges(v, s)) for v, s in sides)),
        "ambiguous_remap": float(len(ambiguous)),
        "mixed_exchanges": float(mixed),
        "custom": float(sum(e.partitioner == "custom" for e in graph.edges)),
        "multi_edges": float(len(pairs) - len(set(pairs))),
        "max_parallelism": float(case.graph.get("max_parallelism") != DEFAULT_MAX_PARALLELISM
                                 or any("max_parallelism" in v for v in case.graph["vertices"])),
        "keyed_rescale": float(sum(graph.vertex(v).kind == "keyed_count" for v in case.rescale)),
        "savepoint_rescale": float(keyed_moved if case.savepoint else 0),
        "claimed_shared": float(case.claim_mode == "claim" and (case.incremental or bool(case.fail_restored))
                                 and (case.savepoint is not None or bool(case.rescale))),
        "shared_state": float(keyed if case.incremental else 0),
        "exposed_exchanges": float(0 if case.chaining else len(chainable)),
        "max_parallelism_change": float(sum(graph.vertex(v).kind == "keyed_count" and m != graph.max_parallelism(v)
                                            for v, m in case.max_parallelism_after.items())),
    }


def score(feats: dict[str, float]) -> float:
    return 1.0 + sum(WEIGHTS[k] * v for k, v in feats.items())


def _forward_group(graph: dict[str, Any], vid: str) -> set[str]:
    """``vid`` and every vertex joined to it by forward edges (they must share a parallelism)."""
    group, todo = {vid}, [vid]
    while todo:
        v = todo.pop()
        for e in graph["edges"]:
            if e["partitioner"] == "forward" and v in (e["from"], e["to"]):
                for w in (e["from"], e["to"]):
                    if w not in group:
                        group.add(w)
                        todo.append(w)
    return group


def _variants(rng: random.Random, base: dict[str, Any]) -> list[dict[str, Any]]:
    """The graph, one exchange changed, and one branch added (a map and a sink fed by another exchange)."""
    out = [base]
    g = copy.deepcopy(base)
    e = rng.choice(g["edges"])
    e["partitioner"] = rng.choice(BRANCH_PARTITIONERS)
    out.append(g)
    g = copy.deepcopy(base)
    producers = [v for v in g["vertices"] if v["kind"] != "sink"]
    if producers:
        v = rng.choice(producers)
        part = rng.choice(BRANCH_PARTITIONERS)
        g["vertices"] += [{"id": "branch", "kind": "map", "parallelism": v["parallelism"]},
                          {"id": "branch_out", "kind": "sink", "parallelism": rng.randint(1, MAX_PARALLELISM)}]
        g["edges"] += [{"from": v["id"], "to": "branch", "partitioner": part},
                       {"from": "branch", "to": "branch_out", "partitioner": "rebalance"}]
        out.append(g)
    return out


def candidate(rng: random.Random, graph: dict[str, Any], seed: int, sized: Sized,
              accepts: Callable[[HuntCase], bool]) -> HuntCase | None:
    """A case over ``graph`` with a drawn mode and rescale, or None when the graph or the runner refuses it."""
    try:
        job = JobGraph.from_json(graph)
    except CutcheckError:
        return None
    mode = rng.choice(MODES_DRAWN)
    rescale: dict[str, int] = {}
    if rng.random() < 0.8:
        vid = rng.choice([v.id for v in job.vertices])
        now = job.vertex(vid).parallelism
        p = rng.choice([q for q in range(1, MAX_PARALLELISM + 1) if q != now])
        rescale = {w: p for w in sorted(_forward_group(graph, vid))}
    data = copy.deepcopy(graph)
    records = sized(job, slow_of(job))
    for v in data["vertices"]:
        if v["kind"] == "source":
            v["records"] = records
    case = HuntCase(data, mode, 1 if mode != "unaligned" else rng.randint(1, 2), rescale, seed=seed)
    dims = random.Random(rng.random())  # its own stream: the graphs, modes and rescales drawn stay as they were
    if dims.random() < P_SAVEPOINT:
        case.savepoint = dims.choice(SAVEPOINT_FORMATS)
        case.fail_after = 1  # stop early: the restored job needs the records for checkpoints of its own
        case.fail_restored = 1 if dims.random() < P_FAIL_RESTORED else None
    if (case.savepoint or case.rescale) and dims.random() < P_CLAIM:
        case.claim_mode = "claim"
    if case.fail_restored:  # the restored job must outlive a checkpoint of its own before its end: twice the records
        for v in case.graph["vertices"]:
            if v["kind"] == "source":
                v["records"] = 2 * records
    case.incremental = dims.random() < P_INCREMENTAL
    case.chaining = dims.random() >= P_CHAINING_OFF
    keyed = [v.id for v in job.vertices if v.kind == "keyed_count"]
    if keyed and (case.rescale or case.savepoint) and dims.random() < P_MAX_PARALLELISM:
        vid = dims.choice(keyed)
        now = job.max_parallelism(vid)
        case.max_parallelism_after = {vid: dims.choice([m for m in (now // 2, now * 2) if m >= MAX_PARALLELISM])}
    try:
        case.job_graph().with_parallelism(rescale) if rescale else None
    except CutcheckError:
        return None
    return case if accepts(case) else None


def draw(seed: int, sized: Sized, accepts: Callable[[HuntCase], bool], pool: int = POOL) -> HuntCase | None:
    """The case of draw ``seed``: a pool of candidates scored by ``features``, one picked by weight."""
    rng = random.Random(seed)
    found: list[HuntCase] = []
    for attempt in range(pool * 4):
        if len(found) >= pool:
            break
        base = graph_dict(SeedDraw(rng.randrange(2**31)), max_parallelism=MAX_PARALLELISM, max_records=10)
        base["name"] = f"hunt-{seed}-{attempt}"
        for g in _variants(rng, base):
            case = candidate(rng, g, seed, sized, accepts)
            if case is not None:
                case.risk_features = features(case)
                case.risk = score(case.risk_features)
                found.append(case)
    if not found:
        return None
    return rng.choices(found, weights=[c.risk for c in found])[0]
