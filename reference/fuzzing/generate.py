"""Random scenarios (job graph, checkpointing, network, schedule, failures, rescales) from one generator.

The generator draws through a ``Draw`` (``integer(lo, hi)``), so the same code serves two drivers:
Hypothesis (``reference.fuzzing.campaigns.scenarios()``, whose draws shrink towards small graphs, few failures
and short schedules) and a seed (``scenario_from_seed``, for campaigns distributed as Spark tasks,
where each task only needs an integer). Every graph it makes is valid by construction.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from cutcheck.model.execution import ExecutionGraph
from cutcheck.model.graph import JobGraph

T = TypeVar("T")

MODES = ("aligned", "unaligned", "aligned_timeout")
GENERATED_CHECKPOINT_TIMEOUT = 5_000  # steps; see scenario_dict
UNLIMITED_TOLERABLE_FAILURES = 2**31 - 1  # Flink's CheckpointFailureManager.UNLIMITED_TOLERABLE_FAILURE_NUMBER
SINGLE_GATE_FAMILIES = (("forward", "rescale", "broadcast"), ("rebalance", "shuffle"), ("global",), ("custom",))
ANY_INPUT = ("rebalance", "forward", "hash", "shuffle", "rescale", "global", "custom", "broadcast")
MIDDLE_KINDS = ("map", "keyed_count", "filter", "union", "co_map", "broadcast_state")


class Draw(Protocol):
    def integer(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi]; drivers that shrink prefer lo."""
        ...


class SeedDraw:
    __slots__ = ("_rng",)

    def __init__(self, seed: int):
        self._rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self._rng.randint(lo, hi)


def choice(d: Draw, options: Sequence[T]) -> T:
    return options[d.integer(0, len(options) - 1)]


def graph_dict(d: Draw, *, max_parallelism: int = 4, max_middle: int = 3, max_records: int = 200,
               blocking: bool = False) -> dict[str, Any]:
    """A valid, streaming-friendly job graph: every non-sink vertex feeds something."""
    vertices: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    par: dict[str, int] = {}
    kind_of: dict[str, str] = {}

    def add(vid: str, kind: str, p: int, **extra: Any) -> None:
        vertices.append({"id": vid, "kind": kind, "parallelism": p, **extra})
        par[vid], kind_of[vid] = p, kind

    def exchange() -> str:
        return "blocking" if blocking and d.integer(0, 3) == 0 else "pipelined"

    def partitioner(options: Sequence[str], src: str, dst_p: int) -> str:
        allowed = [p for p in options if p != "forward" or par[src] == dst_p]
        return choice(d, allowed)

    for i in range(d.integer(1, 2)):
        add(f"src{i}", "source", d.integer(1, max_parallelism), records=d.integer(max_records // 4, max_records),
            keys=d.integer(1, 16), splits=d.integer(1, 4), seed=d.integer(0, 99))

    def producers() -> list[str]:
        return [v for v in par if kind_of[v] != "sink"]

    def connect(vid: str, kind: str, inputs: list[str]) -> None:
        dst_p = par[vid]
        if kind == "keyed_count":
            for g, src in enumerate(inputs):
                edges.append({"from": src, "to": vid, "partitioner": "hash", "exchange": exchange(), "gate": g})
        elif kind == "broadcast_state":
            data = ("hash", "rebalance", "forward", "shuffle", "rescale", "global")
            edges.append({"from": inputs[0], "to": vid, "partitioner": partitioner(data, inputs[0], dst_p),
                          "exchange": exchange(), "gate": 0})
            edges.append({"from": inputs[1], "to": vid, "partitioner": "broadcast", "exchange": exchange(), "gate": 1})
        elif kind == "co_map":
            options = [p for p in ANY_INPUT if p != "hash"]
            for g, src in enumerate(inputs):
                edges.append({"from": src, "to": vid, "partitioner": partitioner(options, src, dst_p),
                              "exchange": exchange(), "gate": g})
        else:
            family = choice(d, SINGLE_GATE_FAMILIES)
            for src in inputs:
                edges.append({"from": src, "to": vid, "partitioner": partitioner(family, src, dst_p),
                              "exchange": exchange(), "gate": 0})

    n_inputs = {"map": 1, "filter": 1, "keyed_count": 2, "union": 3, "co_map": 3, "broadcast_state": 2}
    for i in range(d.integer(0, max_middle)):
        kind = choice(d, MIDDLE_KINDS)
        low = 2 if kind in ("co_map", "broadcast_state") else 1
        inputs = [choice(d, producers()) for _ in range(d.integer(low, max(low, n_inputs[kind])))]
        vid = f"{kind}{i}"
        p = par[inputs[0]] if d.integer(0, 1) == 0 else d.integer(1, max_parallelism)
        add(vid, kind, p, **({"drop_every": d.integer(2, 6)} if kind == "filter" else {}))
        connect(vid, kind, inputs)
    sink_inputs = [choice(d, producers()) for _ in range(d.integer(1, 2))]
    add("sink", "sink", d.integer(1, max_parallelism), delivery="exactly_once")
    connect("sink", "sink", sink_inputs)
    fed = {e["from"] for e in edges}
    for vid in [v for v in par if kind_of[v] != "sink" and v not in fed]:
        add(f"{vid}_out", "sink", par[vid], delivery="exactly_once")
        connect(f"{vid}_out", "sink", [vid])
    return {"name": "generated", "max_parallelism": 128, "vertices": vertices, "edges": edges}


def scenario_dict(d: Draw, *, mutants: Sequence[str] = (), modes: Sequence[str] = MODES,
                  max_parallelism: int = 4, rescale: bool | str = True, max_records: int = 200,
                  storage: bool = False) -> dict[str, Any]:
    """A scenario over a generated graph; failures hit while in-flight data is likely non-empty.

    ``rescale``: False never rescales, True sometimes does, "always" makes at least one failure and
    rescales on it whenever the graph has a vertex Flink would rescale (for hunting rescale bugs).
    """
    always = rescale == "always"
    graph = graph_dict(d, max_parallelism=max_parallelism, max_records=max_records)
    mode = choice(d, modes)
    interval = d.integer(5, 60)
    ck: dict[str, Any] = {"mode": mode, "interval": interval}
    if mode == "aligned_timeout":
        ck["timeout"] = d.integer(0, interval)
    if mode == "aligned":
        ck["max_concurrent"] = d.integer(1, 3)
    record_bytes = 64
    network = {"buffer_bytes": record_bytes * d.integer(1, 8), "record_bytes": record_bytes,
               "exclusive": d.integer(1, 3), "floating": d.integer(1, 4)}
    ids = [v["id"] for v in graph["vertices"]]
    schedule: dict[str, Any] = {"policy": "uniform"}
    if d.integer(0, 2) > 0:
        schedule = {"policy": "backpressure", "slow": choice(d, ids), "slowdown": d.integer(2, 40)}
    failures = []
    for _ in range(d.integer(1 if always else 0, 2)):
        target = choice(d, ids)
        if d.integer(0, 1) == 0:
            failures.append({"after_checkpoint": d.integer(1, 4), "delay": d.integer(0, 20), "target": f"{target}[0]"})
        else:
            failures.append({"at_step": d.integer(1, 600), "target": f"{target}[0]"})
    rescales = []
    if rescale and failures:
        movable = _rescalable(graph)
        if movable and (always or d.integer(0, 1)):
            vid = choice(d, movable)
            rescales.append({"on_failure": d.integer(0, len(failures) - 1), "parallelism": {vid: d.integer(1, max_parallelism)}})
    out = {"graph": graph, "seed": d.integer(0, 2**31 - 1), "checkpoint": ck, "network": network,
           "schedule": schedule, "failures": failures, "rescales": rescales, "mutants": list(mutants),
           "max_steps": 1_000 * max_records}  # 200 000 at the default size; bigger jobs need longer
    expiring = storage
    if not storage and d.integer(0, 3) == 3:
        # Now and then checkpoints that expire (drawn last, so every other draw of a seed is kept):
        # the barriers of an aborted checkpoint still travel, and must not disturb the next one.
        ck["checkpoint_timeout"] = _expiry(d, interval, graph)
        expiring = True
    # Every generated job has a checkpoint timeout, as every Flink job has (10 minutes by default),
    # far above what a checkpoint of these small jobs needs when it can complete at all. Some cannot:
    # where an unaligned stage feeds a forced-aligned join that also waits on the unaligned stage's
    # own (forced-aligned) producer, the join's alignment blocks the stage, the stage backpressures
    # the producer, and the producer cannot reach its barrier. Flink ends such a checkpoint only by
    # expiry, and so does the engine (a scenario's default timeout, 1,000,000 steps, outlasts the run);
    # with Flink's default tolerance of no failed checkpoint, that expiry fails the job over.
    ck.setdefault("checkpoint_timeout", GENERATED_CHECKPOINT_TIMEOUT)
    if storage:
        # On-disk incremental checkpoints, several retained, and checkpoints that expire or are
        # subsumed now and then, so shared files are reused across checkpoints and aborts happen.
        ck["incremental"] = True
        ck["retained"] = d.integer(1, 3)
        ck["checkpoint_timeout"] = _expiry(d, interval, graph)
        # Nothing inlined into _metadata, so keyed state lands in shared files that checkpoints reuse.
        out["storage"] = {"incremental": True, "inline_threshold": 0}  # the directory: whoever runs it
    if expiring:
        # Drawn expiries are there to abort checkpoints and leave their barriers travelling; under
        # the default tolerance each would fail the job over, and a job whose checkpoints take longer
        # than the timeout would restart forever (as in Flink). Such jobs tolerate failed checkpoints,
        # as a Flink user would configure them; the others keep Flink's default, 0.
        ck["tolerable_failed"] = UNLIMITED_TOLERABLE_FAILURES
    return out


def _expiry(d: Draw, interval: int, graph: dict[str, Any]) -> int:
    """A checkpoint timeout of 2-8 intervals, and at least 8 steps per channel of the job.

    One step is one action anywhere in the job, so a barrier needs on the order of a step per
    channel to cross the job. Checkpoints that expire faster than that leave the barriers of aborted
    checkpoints queued faster than they drain, and the job starves (a Flink job handles such an
    event in microseconds, far below any checkpoint timeout, so this would be the model's artefact).
    Four steps per channel was not enough: a 57-channel job with broadcast edges then expired 3 310
    checkpoints and took 253 000 steps (storage seed 1254 at parallelism 5); with eight, 30 600.
    """
    channels = len(ExecutionGraph(JobGraph.from_json(graph)).channels)
    return max(d.integer(2 * interval, 8 * interval), 8 * channels)


def _rescalable(graph: dict[str, Any]) -> list[str]:
    """Vertices whose rescale Flink accepts even with channel state: no pointwise or broadcast edge
    touches them, and no custom partitioner (facts §2.4, §3.7)."""
    fixed = set()
    for e in graph["edges"]:
        if e["partitioner"] in ("forward", "rescale", "broadcast", "custom"):
            fixed |= {e["from"], e["to"]}
    return [v["id"] for v in graph["vertices"] if v["id"] not in fixed]


def scenario_from_seed(seed: int, **kwargs: Any) -> dict[str, Any]:
    return scenario_dict(SeedDraw(seed), **kwargs)
