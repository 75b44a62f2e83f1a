"""The closed sets of names a scenario, a job graph and the engine use, as ``StrEnum``s.

A leaf module: it imports nothing of cutcheck, so the model, the engine and the commands can all
use it. Every member *is* its string (``CheckpointMode.UNALIGNED == "unaligned"``, the same hash,
``str()``, ``format()`` and JSON), so logs and run files stay byte-identical while the code gets
one definition per set and a type per field. Protocol code that still compares with the bare
strings keeps working; new code should name the members.
"""

from __future__ import annotations

from enum import StrEnum, unique

__all__ = [
    "BarrierOption",
    "CheckpointKind",
    "CheckpointMode",
    "Delivery",
    "Exchange",
    "FailoverStrategy",
    "Partitioner",
    "RestoreMode",
    "SchedulePolicy",
    "VertexKind",
    "values",
]


def values(enum: type[StrEnum]) -> tuple[str, ...]:
    """The members' strings in declaration order (for "one of a, b, c" sentences and choices)."""
    return tuple(member.value for member in enum)


@unique
class CheckpointMode(StrEnum):
    """Scenario ``checkpoint.mode`` (docs/scenarios.md §3; facts: CheckpointingMode and unaligned options)."""

    ALIGNED = "aligned"
    UNALIGNED = "unaligned"
    ALIGNED_TIMEOUT = "aligned_timeout"  # aligned, switching to unaligned after checkpoint.timeout steps
    AT_LEAST_ONCE = "at_least_once"  # CheckpointingMode.AT_LEAST_ONCE: no alignment blocking


@unique
class BarrierOption(StrEnum):
    """How a barrier is to be handled on its way (Flink's CheckpointOptions.AlignmentType)."""

    ALIGNED = "aligned"
    UNALIGNED = "unaligned"
    TIMEOUTABLE = "timeoutable"  # aligned until the alignment timeout, then unaligned
    FORCED_ALIGNED = "forced_aligned"  # unaligned requested but this channel cannot (e.g. pointwise rescale)
    AT_LEAST_ONCE = "at_least_once"


@unique
class CheckpointKind(StrEnum):
    """What a barrier triggers: a periodic checkpoint or a user's savepoint (SnapshotType)."""

    CHECKPOINT = "checkpoint"
    SAVEPOINT = "savepoint"


@unique
class RestoreMode(StrEnum):
    """``execution.savepoint-restore-mode``: who owns the restored checkpoint's files (facts §5)."""

    CLAIM = "claim"
    NO_CLAIM = "no_claim"


@unique
class VertexKind(StrEnum):
    """The operators a job graph may use (DESIGN's vertex kinds)."""

    SOURCE = "source"
    MAP = "map"
    FILTER = "filter"
    KEYED_COUNT = "keyed_count"
    UNION = "union"
    CO_MAP = "co_map"
    BROADCAST_STATE = "broadcast_state"
    SINK = "sink"


@unique
class Partitioner(StrEnum):
    """Flink's StreamPartitioners, by the names job graphs use."""

    FORWARD = "forward"
    RESCALE = "rescale"
    REBALANCE = "rebalance"
    SHUFFLE = "shuffle"
    BROADCAST = "broadcast"
    GLOBAL = "global"
    HASH = "hash"  # keyBy: KeyGroupStreamPartitioner
    CUSTOM = "custom"


@unique
class Exchange(StrEnum):
    """How an edge moves data: streaming through network buffers, or written whole first (batch)."""

    PIPELINED = "pipelined"
    BLOCKING = "blocking"


@unique
class Delivery(StrEnum):
    """A sink's guarantee: two-phase commit, or plain writes."""

    EXACTLY_ONCE = "exactly_once"
    AT_LEAST_ONCE = "at_least_once"


@unique
class FailoverStrategy(StrEnum):
    """``jobmanager.execution.failover-strategy``."""

    REGION = "region"
    FULL = "full"


@unique
class SchedulePolicy(StrEnum):
    """How the scheduler weighs enabled actions (docs/scenarios.md, ``schedule.policy``)."""

    UNIFORM = "uniform"
    BACKPRESSURE = "backpressure"
