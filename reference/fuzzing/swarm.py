"""Swarm testing for the scenario generator: the features a scenario can use, the mask each example
draws first, and which features a finished scenario actually uses.

Swarm testing (Groce et al., ISSTA 2012): instead of drawing every feature of every example with the
same small probabilities, each example first switches each feature on or off (about half of them
on), and features that are off take their plain default. Rare combinations (unaligned savepoints
with on-disk storage and a rescale refused by Flink, say) then come up often, and a feature that
masks a bug when present (frequent failures hiding a slow-path expiry) is absent from half the runs.

The mask is drawn through the same ``Draw`` as everything else, as ``integer(0, 1)`` per feature,
so Hypothesis shrinks it towards "everything off": a shrunk counterexample names only the features
it needs.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Draw(Protocol):
    def integer(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi]; drivers that shrink prefer lo."""
        ...


class SeedDraw:
    """The seed driver: a campaign task needs nothing but an integer to rebuild its scenario."""

    __slots__ = ("_rng",)

    def __init__(self, seed: int):
        self._rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self._rng.randint(lo, hi)


def choice(d: Draw, options: Sequence[T]) -> T:
    return options[d.integer(0, len(options) - 1)]


def chance(d: Draw, one_in: int) -> bool:
    """True about once in ``one_in`` draws; shrinks to False."""
    return d.integer(0, one_in - 1) == one_in - 1


class Feature(Enum):
    """What a generated scenario may exercise. Members marked *reported* are not switched by the
    mask (the mode is drawn from the caller's ``modes``); ``features_of`` names them all."""

    # graph: vertex kinds beyond source, map and sink
    FILTER = "filter"
    KEYED_COUNT = "keyed_count"
    UNION = "union"
    CO_MAP = "co_map"
    BROADCAST_STATE = "broadcast_state"
    # graph: partitioners beyond rebalance (hash comes with the keyed kinds: reported)
    FORWARD = "forward"
    RESCALE_EDGE = "rescale_partitioner"
    BROADCAST = "broadcast"
    GLOBAL = "global"
    CUSTOM = "custom"
    SHUFFLE = "shuffle"
    HASH = "hash"  # reported
    MULTI_EDGE = "multi_edge"  # two edges between one pair of vertices
    MAX_PARALLELISM = "max_parallelism"  # small, odd or just-above-parallelism key-group counts
    EMPTY_SOURCE = "empty_source"  # a source with no records
    AT_LEAST_ONCE_SINK = "at_least_once_sink"
    BLOCKING = "blocking"  # blocking exchanges: a batch job
    # checkpointing
    UNALIGNED = "unaligned"  # reported: mode unaligned
    ALIGNED_TIMEOUT = "aligned_timeout"  # reported: mode aligned_timeout
    CONCURRENT = "concurrent_checkpoints"  # max_concurrent > 1 (aligned only)
    EXPIRY = "checkpoint_expiry"  # a checkpoint timeout near the barrier transit time
    FINITE_TOLERANCE = "tolerable_failed"  # with expiry: a few failed checkpoints tolerated, the next fails the job
    RETAINED = "retained"  # more than one retained checkpoint
    SAVEPOINT = "savepoint"
    STORAGE = "storage"  # on-disk checkpoints
    INCREMENTAL = "incremental"
    INLINE_ZERO = "inline_threshold_0"
    CLAIM = "claim_mode"
    RESUBMIT = "resubmit"  # a second job restores the first one's checkpoint or savepoint
    # network and schedule
    BACKPRESSURE = "backpressure"  # a slow vertex
    RECORDS_PER_ACTION = "records_per_action"
    DEBLOAT = "debloat"
    OUTPUT_POOL = "output_pool"
    ACK_DELAY = "ack_delay"  # drawn last (LATE): acknowledgements reach the coordinator out of order
    # failures and recovery
    FAILURE = "failure"
    NONZERO_SUBTASK = "failure_not_subtask_0"  # reported
    AFTER_CHECKPOINT = "failure_after_checkpoint"  # reported
    WORKER_FAILURE = "worker_failure"
    FAILURE_IN_RECOVERY = "failure_during_recovery"
    FULL_FAILOVER = "full_failover"
    RESCALE = "rescale"
    RESCALE_SEVERAL = "rescale_several_vertices"  # reported
    REFUSABLE_RESCALE = "refusable_rescale"  # rescales touching edges whose in-flight data Flink cannot map


REPORTED = frozenset({Feature.HASH, Feature.UNALIGNED, Feature.ALIGNED_TIMEOUT, Feature.NONZERO_SUBTASK,
                      Feature.AFTER_CHECKPOINT, Feature.RESCALE_SEVERAL})
# Drawn after the rest of a scenario (and only where it matters), never by the mask: a mask draw per
# new feature would change every seed's scenario. Forced on (``on``), it is drawn in any streaming job.
LATE = frozenset({Feature.ACK_DELAY})
MASKABLE = tuple(f for f in Feature if f not in REPORTED and f not in LATE)
# One in four rather than one in two: a batch job takes no checkpoints, so every checkpointing
# feature of its mask is wasted.
ONE_IN = {Feature.BLOCKING: 4}


def draw_mask(d: Draw, on: Iterable[Feature] = (), off: Iterable[Feature] = ()) -> frozenset[Feature]:
    """Each maskable feature on with probability 1/2 (see ONE_IN), then ``on`` forced on and ``off``
    forced off. Every feature is drawn even when forced, so forcing one keeps the rest of a seed."""
    drawn = {f for f in MASKABLE if chance(d, ONE_IN.get(f, 2))}
    return frozenset((drawn | set(on)) - set(off))


_UNSUPPORTED_MAPPING = ("forward", "rescale", "broadcast", "custom")
UNLIMITED_TOLERABLE_FAILURES = 2**31 - 1  # Flink's CheckpointFailureManager.UNLIMITED_TOLERABLE_FAILURE_NUMBER
DEFAULT_MAX_PARALLELISM = 128  # what every generated job without the MAX_PARALLELISM feature says


def features_of(scenario: Mapping[str, Any]) -> set[Feature]:
    """The features a generated scenario (its JSON dict, graph inline) actually uses."""
    graph = scenario["graph"]
    out: set[Feature] = set()
    kinds = {v["kind"] for v in graph["vertices"]}
    for f in (Feature.FILTER, Feature.KEYED_COUNT, Feature.UNION, Feature.CO_MAP, Feature.BROADCAST_STATE):
        if f.value in kinds:
            out.add(f)
    # The broadcast input of a broadcast_state vertex comes with that kind (gate 1), not with BROADCAST.
    with_state = {v["id"] for v in graph["vertices"] if v["kind"] == "broadcast_state"}
    parts = {e.get("partitioner", "rebalance") for e in graph["edges"]
             if not (e["to"] in with_state and e.get("gate", 0) == 1 and e.get("partitioner") == "broadcast")}
    for f, name in ((Feature.FORWARD, "forward"), (Feature.RESCALE_EDGE, "rescale"), (Feature.BROADCAST, "broadcast"),
                    (Feature.GLOBAL, "global"), (Feature.CUSTOM, "custom"), (Feature.SHUFFLE, "shuffle"),
                    (Feature.HASH, "hash")):
        if name in parts:
            out.add(f)
    pairs = [(e["from"], e["to"]) for e in graph["edges"]]
    if len(set(pairs)) < len(pairs):
        out.add(Feature.MULTI_EDGE)
    if graph.get("max_parallelism") != DEFAULT_MAX_PARALLELISM or any("max_parallelism" in v for v in graph["vertices"]):
        out.add(Feature.MAX_PARALLELISM)
    if any(v["kind"] == "source" and v.get("records", 0) == 0 for v in graph["vertices"]):
        out.add(Feature.EMPTY_SOURCE)
    if any(v.get("delivery") == "at_least_once" for v in graph["vertices"]):
        out.add(Feature.AT_LEAST_ONCE_SINK)
    batch = any(e.get("exchange") == "blocking" for e in graph["edges"])
    if batch:
        out.add(Feature.BLOCKING)
    ck = scenario.get("checkpoint") or {}
    if not batch:
        mode = ck.get("mode", "aligned")
        out |= {f for f in (Feature.UNALIGNED, Feature.ALIGNED_TIMEOUT) if f.value == mode}
        if ck.get("max_concurrent", 1) > 1:
            out.add(Feature.CONCURRENT)
        if ck.get("checkpoint_timeout", 1_000_000) < 5_000:
            out.add(Feature.EXPIRY)
            if ck.get("tolerable_failed", 0) < UNLIMITED_TOLERABLE_FAILURES:
                out.add(Feature.FINITE_TOLERANCE)
        if ck.get("retained", 1) > 1:
            out.add(Feature.RETAINED)
        if scenario.get("savepoints"):
            out.add(Feature.SAVEPOINT)
        storage = scenario.get("storage")
        if storage is not None:
            out.add(Feature.STORAGE)
            if storage.get("incremental", ck.get("incremental", False)):
                out.add(Feature.INCREMENTAL)
            if storage.get("inline_threshold") == 0:
                out.add(Feature.INLINE_ZERO)
            if storage.get("restore_mode") == "claim":
                out.add(Feature.CLAIM)
        if scenario.get("resubmit") is not None:
            out.add(Feature.RESUBMIT)
        if ck.get("ack_delay"):
            out.add(Feature.ACK_DELAY)
    sched = scenario.get("schedule") or {}
    if sched.get("policy") == "backpressure" and sched.get("slow"):
        out.add(Feature.BACKPRESSURE)
    if sched.get("records_per_action"):
        out.add(Feature.RECORDS_PER_ACTION)
    if (scenario.get("debloat") or {}).get("enabled"):
        out.add(Feature.DEBLOAT)
    if (scenario.get("network") or {}).get("output_pool"):
        out.add(Feature.OUTPUT_POOL)
    failures = scenario.get("failures") or []
    if failures:
        out.add(Feature.FAILURE)
    for f in failures:
        target = f["target"]
        if target.startswith("worker:"):
            out.add(Feature.WORKER_FAILURE)
        elif not target.endswith("[0]"):
            out.add(Feature.NONZERO_SUBTASK)
        if "after_checkpoint" in f:
            out.add(Feature.AFTER_CHECKPOINT)
    if len(failures) >= 2 and _close(failures[0], failures[1]):
        out.add(Feature.FAILURE_IN_RECOVERY)
    strategy = scenario.get("failover_strategy") or (scenario.get("batch") or {}).get("failover_strategy")
    if strategy == "full":
        out.add(Feature.FULL_FAILOVER)
    rescales = [r for r in scenario.get("rescales") or [] if r["parallelism"]]
    if rescales:
        out.add(Feature.RESCALE)
    if any(len(r["parallelism"]) > 1 for r in rescales):
        out.add(Feature.RESCALE_SEVERAL)
    moved = {v for r in rescales for v in r["parallelism"]}
    if any(e["partitioner"] in _UNSUPPORTED_MAPPING and (e["from"] in moved or e["to"] in moved) for e in graph["edges"]):
        out.add(Feature.REFUSABLE_RESCALE)
    return out


RECOVERY_GAP = 40  # steps: a second failure this soon after the first lands while the job recovers


def _close(first: Mapping[str, Any], second: Mapping[str, Any]) -> bool:
    if "at_step" in first and "at_step" in second:
        steps_apart: int = second["at_step"] - first["at_step"]
        return 0 < steps_apart <= RECOVERY_GAP
    if "after_checkpoint" in first and "after_checkpoint" in second:
        if first["after_checkpoint"] != second["after_checkpoint"]:
            return False
        delay_apart: int = second.get("delay", 0) - first.get("delay", 0)
        return 0 < delay_apart <= RECOVERY_GAP
    return False
