"""Partitioners, channel selection, pointwise wiring and Flink's ``SubtaskStateMapper`` (facts §2).

Three things a job edge's partitioner decides, each written once here:

* how a record picks its output channel (:func:`make_selector`), as Flink's ``StreamPartitioner``s
  do, but deterministic: where Flink draws from an unseeded random source we derive it from a seed;
* how the edge is wired (``POINTWISE`` or ``ALL_TO_ALL``, :func:`pointwise_wiring`) and whether it
  may carry unaligned barriers (:func:`supports_unaligned`);
* how its channel state is redistributed on rescale (:func:`subtask_state_mapper`,
  :func:`assign_channel_state`).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import ClassVar, Literal

from cutcheck.model.errors import InvalidArgument, RestoreRefused
from cutcheck.model.keygroups import (
    UPPER_BOUND_MAX_PARALLELISM,
    _java_hash_u32,  # package-private: the hash selector skips the signed round trip per record
    key_group_range,
    murmur_hash,
    operator_index,
)

UNSUPPORTED_MESSAGE = (
    "Cannot rescale the given pointwise partitioner. Did you change the partitioner to forward or rescale? "
    "It may also help to add an explicit shuffle()"
)


# ------------------------------------------------------------------------------ SubtaskStateMapper
def _check_rescale_args(new_index: int, old_parallelism: int, new_parallelism: int) -> None:
    for what, value in (("old parallelism", old_parallelism), ("new parallelism", new_parallelism)):
        if type(value) is not int or not 0 < value <= UPPER_BOUND_MAX_PARALLELISM:
            raise InvalidArgument(f"{what} {value!r} is outside 1..{UPPER_BOUND_MAX_PARALLELISM}.")
    if type(new_index) is not int or not 0 <= new_index < new_parallelism:
        raise InvalidArgument(f"new subtask index {new_index!r} is outside 0..{new_parallelism - 1}.")


class SubtaskStateMapper(Enum):
    """Which old subtasks' channel state a new subtask reads after a rescale (facts §2.4).

    ``.name`` is Flink's constant name; ``ambiguous`` mappers (RANGE, FULL) hand one old subtask's
    state to several new subtasks, so the receiver must filter records it does not own.
    """

    ARBITRARY = "ARBITRARY"
    ROUND_ROBIN = "ROUND_ROBIN"
    FIRST = "FIRST"
    FULL = "FULL"
    RANGE = "RANGE"
    UNSUPPORTED = "UNSUPPORTED"

    @property
    def ambiguous(self) -> bool:
        return self is SubtaskStateMapper.FULL or self is SubtaskStateMapper.RANGE

    def old_subtasks(self, new_index: int, old_parallelism: int, new_parallelism: int) -> tuple[int, ...]:
        """Flink's ``getOldSubtasks``; ascending old indexes. UNSUPPORTED raises ``RestoreRefused``.

        This is the mapper alone: the "parallelism unchanged means 1:1" rule lives in
        :func:`assign_channel_state`, as it does in Flink's ``TaskStateAssignment``.
        """
        _check_rescale_args(new_index, old_parallelism, new_parallelism)
        if self is SubtaskStateMapper.ARBITRARY or self is SubtaskStateMapper.ROUND_ROBIN:
            # Flink: ARBITRARY is "currently" ROUND_ROBIN. New n gets old n, n+newN, n+2*newN, ...
            return tuple(range(new_index, old_parallelism, new_parallelism))
        if self is SubtaskStateMapper.FIRST:
            return tuple(range(old_parallelism)) if new_index == 0 else ()
        if self is SubtaskStateMapper.FULL:
            return tuple(range(old_parallelism))
        if self is SubtaskStateMapper.RANGE:
            # Flink uses the upper bound 32768 as max parallelism ("the actual value cancels out").
            # It is exact when the job's max parallelism is a power of two, or whenever
            # old*new <= 32768; otherwise it can miss an old subtask (see the tests).
            r = key_group_range(UPPER_BOUND_MAX_PARALLELISM, new_parallelism, new_index)
            start = operator_index(r.start, UPPER_BOUND_MAX_PARALLELISM, old_parallelism)
            end = operator_index(r.end, UPPER_BOUND_MAX_PARALLELISM, old_parallelism)
            return tuple(range(start, end + 1))
        raise RestoreRefused(UNSUPPORTED_MESSAGE)

    def new_to_old(self, old_parallelism: int, new_parallelism: int) -> dict[int, tuple[int, ...]]:
        """Flink's ``getNewToOldSubtasksMapping``: ``old_subtasks`` for every new index."""
        return {i: self.old_subtasks(i, old_parallelism, new_parallelism) for i in range(new_parallelism)}


ARBITRARY = SubtaskStateMapper.ARBITRARY
ROUND_ROBIN = SubtaskStateMapper.ROUND_ROBIN
FIRST = SubtaskStateMapper.FIRST
FULL = SubtaskStateMapper.FULL
RANGE = SubtaskStateMapper.RANGE
UNSUPPORTED = SubtaskStateMapper.UNSUPPORTED


def assign_channel_state(
    mapper: SubtaskStateMapper, old_parallelism: int, new_parallelism: int
) -> dict[int, tuple[int, ...]]:
    """New subtask -> old subtasks whose channel state it restores, for one gate or partition.

    Facts §2.5 "No rescale": when the parallelism is unchanged, state is assigned 1:1 whatever the
    mapper, so even UNSUPPORTED (pointwise, broadcast) edges restore, and FIRST/FULL do not fan
    out. Only a real change of parallelism consults the mapper.
    """
    if old_parallelism == new_parallelism:
        _check_rescale_args(0, old_parallelism, new_parallelism)
        return {i: (i,) for i in range(new_parallelism)}
    return mapper.new_to_old(old_parallelism, new_parallelism)


def ambiguous_old_subtasks(
    mapper: SubtaskStateMapper, old_parallelism: int, new_parallelism: int
) -> tuple[int, ...]:
    """Old subtasks whose state goes to more than one new subtask, so records must be filtered.

    As Flink's ``InflightDataRescalingDescriptor``: empty for non-ambiguous mappers and for an
    unchanged parallelism; otherwise the old indexes that appear in several new subtasks' lists.
    """
    if not mapper.ambiguous or old_parallelism == new_parallelism:
        return ()
    counts = Counter(o for olds in mapper.new_to_old(old_parallelism, new_parallelism).values() for o in olds)
    return tuple(sorted(o for o, c in counts.items() if c > 1))


def invert_mapping(
    new_to_old: Mapping[int, tuple[int, ...]], old_parallelism: int
) -> dict[int, tuple[int, ...]]:
    """Old subtask -> new subtasks (the output side re-emits an old subpartition into each of them)."""
    rows = _invert(tuple(new_to_old[i] for i in range(len(new_to_old))), old_parallelism)
    return dict(enumerate(rows))


def _invert(rows: tuple[tuple[int, ...], ...], n: int) -> tuple[tuple[int, ...], ...]:
    """Row i lists the j it relates to; return, for each j in 0..n-1, the ascending i that list it."""
    out: list[list[int]] = [[] for _ in range(n)]
    for i, row in enumerate(rows):
        for j in row:
            out[j].append(i)
    return tuple(tuple(x) for x in out)


# ------------------------------------------------------------------------------------ partitioners
@dataclass(frozen=True, slots=True)
class PartitionerInfo:
    """Static facts about one partitioner (facts §2.1, §2.2, §3.7)."""

    name: str  # cutcheck's name, as in job-graph JSON; Flink's toString() is name.upper()
    pointwise: bool
    broadcast: bool
    upstream_mapper: SubtaskStateMapper  # output (result subpartition) state
    downstream_mapper: SubtaskStateMapper  # input channel state
    supports_unaligned: bool

    @property
    def connection_pattern(self) -> Literal["POINTWISE", "ALL_TO_ALL"]:
        return "POINTWISE" if self.pointwise else "ALL_TO_ALL"


# Custom: we follow Flink master, whose CustomPartitionerWrapper disables unaligned checkpoints on
# its edge; Flink 1.19 instead refuses to start a UC job with a custom partitioner unless forced.
PARTITIONERS: Mapping[str, PartitionerInfo] = MappingProxyType(
    {
        "forward": PartitionerInfo("forward", True, False, UNSUPPORTED, UNSUPPORTED, False),
        "rescale": PartitionerInfo("rescale", True, False, UNSUPPORTED, UNSUPPORTED, False),
        "rebalance": PartitionerInfo("rebalance", False, False, ARBITRARY, ROUND_ROBIN, True),
        "shuffle": PartitionerInfo("shuffle", False, False, ARBITRARY, ROUND_ROBIN, True),
        "broadcast": PartitionerInfo("broadcast", False, True, UNSUPPORTED, UNSUPPORTED, False),
        "global": PartitionerInfo("global", False, False, ARBITRARY, FIRST, True),
        "hash": PartitionerInfo("hash", False, False, ARBITRARY, RANGE, True),
        "custom": PartitionerInfo("custom", False, False, ARBITRARY, FULL, False),
    }
)


def partitioner_info(partitioner: str) -> PartitionerInfo:
    try:
        return PARTITIONERS[partitioner]
    except (KeyError, TypeError):
        raise InvalidArgument(
            f"unknown partitioner {partitioner!r}; use one of {', '.join(PARTITIONERS)}."
        ) from None


def is_pointwise(partitioner: str) -> bool:
    return partitioner_info(partitioner).pointwise


def is_broadcast(partitioner: str) -> bool:
    return partitioner_info(partitioner).broadcast


def connection_pattern(partitioner: str) -> Literal["POINTWISE", "ALL_TO_ALL"]:
    return partitioner_info(partitioner).connection_pattern


def supports_unaligned(partitioner: str) -> bool:
    """False where Flink never lets barriers overtake data: pointwise, broadcast and custom edges."""
    return partitioner_info(partitioner).supports_unaligned


def subtask_state_mapper(partitioner: str, side: Literal["upstream", "downstream"]) -> SubtaskStateMapper:
    """The mapper for an edge's ``upstream`` (output state) or ``downstream`` (input state) side."""
    info = partitioner_info(partitioner)
    if side == "upstream":
        return info.upstream_mapper
    if side == "downstream":
        return info.downstream_mapper
    raise InvalidArgument(f"side must be 'upstream' (output state) or 'downstream' (input state), not {side!r}.")


# --------------------------------------------------------------------------------- POINTWISE wiring
@dataclass(frozen=True, slots=True)
class PointwiseWiring:
    """``consumers_of[u]``: downstream subtasks upstream ``u`` feeds, in subpartition order;
    ``producers_of[d]``: upstream subtasks downstream ``d`` reads. Each is the other's inverse."""

    consumers_of: tuple[tuple[int, ...], ...]
    producers_of: tuple[tuple[int, ...], ...]


def pointwise_wiring(upstream_parallelism: int, downstream_parallelism: int) -> PointwiseWiring:
    """Flink's ``computeVertexInputInfoForPointwise`` (facts §2.3)."""
    s, t = upstream_parallelism, downstream_parallelism
    for what, value in (("upstream parallelism", s), ("downstream parallelism", t)):
        if type(value) is not int or value < 1:
            raise InvalidArgument(f"{what} {value!r} must be a positive int.")
    if s >= t:
        # Downstream i reads upstream floor(i*S/T) .. floor((i+1)*S/T) - 1; each upstream feeds one.
        producers = tuple(tuple(range(i * s // t, (i + 1) * s // t)) for i in range(t))
        consumers = _invert(producers, s)
    else:
        # Upstream p feeds downstream ceil(p*T/S) .. ceil((p+1)*T/S) - 1; each downstream reads one.
        consumers = tuple(tuple(range(-(-p * t // s), -(-(p + 1) * t // s))) for p in range(s))
        producers = _invert(consumers, t)
    return PointwiseWiring(consumers_of=consumers, producers_of=producers)


# ------------------------------------------------------------------------------- channel selectors
class ChannelSelector:
    """Picks the output channel of each record; stateful (counters, PRNG) but deterministic."""

    __slots__ = ("num_channels",)
    partitioner: ClassVar[str]
    is_broadcast: ClassVar[bool] = False

    def __init__(self, num_channels: int) -> None:
        self.num_channels = num_channels

    def select(self, key: object = None) -> int:
        raise NotImplementedError

    def select_all(self) -> tuple[int, ...]:
        raise TypeError(f"{self.partitioner} selects one channel per record; only broadcast selects all.")


class _Forward(ChannelSelector):
    __slots__ = ()
    partitioner = "forward"

    def select(self, key: object = None) -> int:
        return 0


class _Global(ChannelSelector):
    __slots__ = ()
    partitioner = "global"

    def select(self, key: object = None) -> int:
        return 0  # downstream subtask 0 over an ALL_TO_ALL edge


class _Rebalance(ChannelSelector):
    __slots__ = ("start", "_next")
    partitioner = "rebalance"

    def __init__(self, num_channels: int, seed: int) -> None:
        super().__init__(num_channels)
        # Flink: ThreadLocalRandom.nextInt(n) in setup(); we derive the start from the seed instead.
        self.start = random.Random(seed).randrange(num_channels)
        self._next = self.start

    def select(self, key: object = None) -> int:
        self._next = (self._next + 1) % self.num_channels  # so the first record goes to start + 1
        return self._next


class _Rescale(ChannelSelector):
    __slots__ = ("_next",)
    partitioner = "rescale"

    def __init__(self, num_channels: int) -> None:
        super().__init__(num_channels)
        self._next = -1  # deterministic in Flink too: the first record goes to channel 0

    def select(self, key: object = None) -> int:
        self._next += 1
        if self._next >= self.num_channels:
            self._next = 0
        return self._next


class _Shuffle(ChannelSelector):
    __slots__ = ("_randrange",)
    partitioner = "shuffle"

    def __init__(self, num_channels: int, seed: int) -> None:
        super().__init__(num_channels)
        # Flink: one unseeded java.util.Random per partitioner instance; ours is seeded.
        self._randrange = random.Random(seed).randrange

    def select(self, key: object = None) -> int:
        return self._randrange(self.num_channels)


class _Broadcast(ChannelSelector):
    __slots__ = ("_all",)
    partitioner = "broadcast"
    is_broadcast = True

    def __init__(self, num_channels: int) -> None:
        super().__init__(num_channels)
        self._all = tuple(range(num_channels))

    def select(self, key: object = None) -> int:
        raise TypeError("Broadcast partitioner does not support select channels.")  # Flink's message

    def select_all(self) -> tuple[int, ...]:
        return self._all


class _Hash(ChannelSelector):
    __slots__ = ("max_parallelism",)
    partitioner = "hash"

    def __init__(self, num_channels: int, max_parallelism: int) -> None:
        super().__init__(num_channels)
        self.max_parallelism = max_parallelism

    def select(self, key: object = None) -> int:
        # assign_key_to_parallel_operator, inlined: maxP was checked once at construction.
        mp = self.max_parallelism
        return murmur_hash(_java_hash_u32(key)) % mp * self.num_channels // mp


class _Custom(ChannelSelector):
    __slots__ = ()
    partitioner = "custom"

    def select(self, key: object = None) -> int:
        # DESIGN: custom = key modulo parallelism. Python's % is floor-mod (Java's Math.floorMod),
        # so negative keys still land in [0, n), unlike Java's plain %.
        if type(key) is not int:
            raise TypeError(f"the custom partitioner takes int keys, got {type(key).__name__}.")
        return key % self.num_channels


def make_selector(
    partitioner: str, num_channels: int, *, seed: int = 0, max_parallelism: int | None = None
) -> ChannelSelector:
    """A fresh channel selector, as Flink's ``setup(numberOfChannels)`` makes.

    ``num_channels`` is the downstream parallelism on ALL_TO_ALL edges, and the number of
    downstream subtasks this upstream subtask feeds on POINTWISE ones (``len(consumers_of[u])``),
    so forward always has exactly one channel. ``seed`` drives rebalance's start and shuffle's
    PRNG. ``max_parallelism`` is required for hash: the CONSUMER vertex's max parallelism, which
    Flink's ``configure`` installs as the number of key groups (facts §1.5).
    """
    partitioner_info(partitioner)  # unknown names fail with the list of known ones
    if type(num_channels) is not int or num_channels < 1:
        raise InvalidArgument(f"{partitioner}: num_channels {num_channels!r} must be a positive int.")
    if partitioner == "forward":
        if num_channels != 1:
            raise InvalidArgument(
                f"forward: an upstream subtask feeds exactly one channel, got {num_channels}; "
                "pass the pointwise subset size, not the downstream parallelism."
            )
        return _Forward(1)
    if partitioner == "hash":
        if max_parallelism is None:
            raise InvalidArgument("hash: pass max_parallelism, the consumer vertex's number of key groups.")
        if not num_channels <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
            raise InvalidArgument(
                f"hash: max_parallelism {max_parallelism} must be within {num_channels}..{UPPER_BOUND_MAX_PARALLELISM} "
                f"(at least the {num_channels} channels)."
            )
        return _Hash(num_channels, max_parallelism)
    if partitioner in ("rebalance", "shuffle"):
        return (_Rebalance if partitioner == "rebalance" else _Shuffle)(num_channels, seed)
    simple: dict[str, type[_Rescale | _Broadcast | _Global | _Custom]] = {
        "rescale": _Rescale, "broadcast": _Broadcast, "global": _Global, "custom": _Custom,
    }  # fmt: skip
    return simple[partitioner](num_channels)
