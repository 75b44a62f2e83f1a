"""What a run did, as typed events on one bus: the only door through which anything watches a run.

The engine and its rooms publish; checks (invariants, the storage and retention watches), the trace
recorder, coverage, pictures and benchmarks subscribe. Protocol code (checkpointing, runtime,
recovery, shuffle) never calls a check: it says what happened, and a check that disagrees raises
from its subscriber, as TLA+ keeps invariants apart from actions and TigerBeetle's simulator keeps
its state checker outside the replicas.

Every event is a frozen record of facts, never a handle to mutate the run. Subscribers run in the
order they subscribed, synchronously, at the moment of publication, so a violation stops the run
at the step where it happened. Publishing an event nobody subscribed to costs one dictionary lookup;
hot paths ask :meth:`EventBus.wants` first so that they build no record nobody reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from cutcheck.model.errors import RestoreRefused
    from cutcheck.model.execution import SubtaskId
    from cutcheck.reference.storage.memory import CompletedCheckpoint

ChannelKey = tuple[int, int, int]  # (edge, producer index, consumer index)


# ------------------------------------------------------------------------------ the loop
@dataclass(frozen=True, slots=True)
class Logged:
    """A line of the run's event log (``events.jsonl``), as the engine writes it."""

    step: int
    attempt: int
    kind: str
    detail: str


@dataclass(frozen=True, slots=True)
class StepTaken:
    """The scheduler performed one chosen action; ``step`` is the step it was taken at."""

    step: int
    attempt: int


# ------------------------------------------------------------------------------ checkpoints
@dataclass(frozen=True, slots=True)
class CheckpointTriggered:
    cp: int
    kind: str
    options: str
    step: int


@dataclass(frozen=True, slots=True)
class BarrierReceived:
    """A task took a barrier from one of its channels (in order, or as a priority event)."""

    sid: SubtaskId
    key: ChannelKey
    cp: int
    priority: bool
    step: int


@dataclass(frozen=True, slots=True)
class AlignmentStarted:
    """The first barrier of ``cp`` reached the task."""

    sid: SubtaskId
    cp: int
    step: int


@dataclass(frozen=True, slots=True)
class SnapshotTaken:
    """A task took its snapshot of ``cp``: alignment ended there after ``alignment_steps`` steps,
    during which it processed ``aligned_records`` records."""

    sid: SubtaskId
    cp: int
    unaligned: bool
    direct: bool
    alignment_steps: int
    aligned_records: int
    step: int


@dataclass(frozen=True, slots=True)
class CancelSent:
    """Subtask ``sid`` will not take checkpoint ``cp`` (it declined it, or came to it after its abort) and
    tells its consumers: a cancel marker on every output (for CANCEL, which checks that it is on its way)."""

    sid: SubtaskId
    cp: int
    step: int


@dataclass(frozen=True, slots=True)
class SnapshotCancelled:
    """A task came to the snapshot of ``cp`` after the coordinator had aborted it: it took none and sent
    cancel markers downstream instead of barriers."""

    sid: SubtaskId
    cp: int
    step: int


@dataclass(frozen=True, slots=True)
class CheckpointCompleting:
    """Every acknowledgement is in; the checkpoint is about to be stored. The cut is checked here,
    before the storage takes it (a checkpoint that breaks CUT must never be restorable)."""

    done: CompletedCheckpoint


@dataclass(frozen=True, slots=True)
class CheckpointCompleted:
    """Stored; ``subsumed`` are the ids the store dropped for it."""

    done: CompletedCheckpoint
    subsumed: tuple[int, ...]
    step: int


@dataclass(frozen=True, slots=True)
class CheckpointAborted:
    """A pending checkpoint that ended without completing: declined, subsumed, failed over or expired."""

    cp: int
    kind: str
    reason: str  # why, in words (the checkpoint statistics' reason)
    cause: str  # Flink's CheckpointFailureReason, e.g. CHECKPOINT_EXPIRED
    step: int

    @property
    def expired(self) -> bool:
        return self.cause == "CHECKPOINT_EXPIRED"


# ------------------------------------------------------------------------------ failures
@dataclass(frozen=True, slots=True)
class AcknowledgementArrived:
    """A task's acknowledgement of checkpoint ``cp``, sent at ``sent_step`` when its snapshot's
    asynchronous part ended, reached the coordinator (``checkpoint.ack_delay`` > 0 only); ``outcome``
    is ``accepted``, ``late`` (the checkpoint is no longer pending: aborted, expired or subsumed) or
    ``wrong_attempt`` (a failover replaced the sending task), as ``PendingCheckpoint.acknowledgeTask``."""

    cp: int
    sid: SubtaskId
    sent_step: int
    step: int
    outcome: str


@dataclass(frozen=True, slots=True)
class FailureHappened:
    """A failure is about to be recovered from (published before anything changes): what failed,
    whether a checkpoint is there to restore and whether recovered data was still being replayed."""

    target: str
    from_checkpoint: bool
    during_recovery: bool
    step: int


@dataclass(frozen=True, slots=True)
class Recovering:
    """A failover is about to restore checkpoint ``cp`` (``None``: restart from scratch) into ``region``
    (every subtask when ``None``); ``rescaled`` when the parallelism changes. Published after the
    pending checkpoints were aborted and before any task is rebuilt."""

    cp: int | None
    region: frozenset[SubtaskId] | None
    rescaled: bool
    step: int


# ------------------------------------------------------------------------------ records and channels
@dataclass(frozen=True, slots=True)
class RecordsCommitted:
    """Sink subtask ``sink`` committed transaction ``txn`` of ``checkpoint`` holding ``records``."""

    txn: str
    sink: str
    checkpoint: int
    records: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class ChannelStep:
    """A protocol event on one physical channel (``model.trace``'s vocabulary), for trace recording."""

    key: ChannelKey
    event: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class ChannelClosed:
    """The channel's end of partition crossed it: the channel protocol ends there."""

    key: ChannelKey


@dataclass(frozen=True, slots=True)
class HandlerDispatched:
    """The barrier handler of subtask ``sid``, in ``state``, is about to handle ``event`` (for coverage,
    and for BLOCKED and CANCEL, which look at the task as the handler finds it)."""

    state: str
    event: str
    sid: SubtaskId
    channel: int = -1  # the input channel (index in the task) the event came on; -1 for none


@dataclass(frozen=True, slots=True)
class TasksDeployed:
    """The run's tasks and channels were (re)built at ``parallelism``."""

    parallelism: dict[str, int]


@dataclass(frozen=True, slots=True)
class RestoreTried:
    """The engine restored ``done`` into its tasks, or refused to (``refusal``), at its current parallelism."""

    done: CompletedCheckpoint
    refusal: RestoreRefused | None


@dataclass(frozen=True, slots=True)
class StorageTransition:
    """An on-disk storage transition (``core.coverage.STORAGE_TRANSITIONS``)."""

    name: str


@dataclass(frozen=True, slots=True)
class StorageClosed:
    """The job ended: the storage released what no retained checkpoint uses."""


E = TypeVar("E")


@dataclass(slots=True)
class EventBus:
    """Subscribers per event type, called in subscription order."""

    _subscribers: dict[type[Any], list[Callable[[Any], None]]] = field(default_factory=dict)

    def subscribe(self, kind: type[E], subscriber: Callable[[E], None]) -> None:
        self._subscribers.setdefault(kind, []).append(subscriber)

    def unsubscribe(self, kind: type[E], subscriber: Callable[[E], None]) -> None:
        self._subscribers.get(kind, []).remove(subscriber)

    def wants(self, kind: type[Any]) -> bool:
        """Whether anyone listens to ``kind`` (so a hot path can skip building the event)."""
        return bool(self._subscribers.get(kind))

    def publish(self, event: object) -> None:
        for subscriber in self._subscribers.get(type(event), ()):
            subscriber(event)


class ChannelPublisher:
    """One channel's protocol events, published on the run's bus (``core.doors.ChannelEvents``)."""

    __slots__ = ("bus", "key")

    def __init__(self, bus: EventBus, key: ChannelKey):
        self.bus = bus
        self.key = key

    def publish(self, event: tuple[Any, ...]) -> None:
        self.bus.publish(ChannelStep(self.key, event))

    def close(self) -> None:
        self.bus.publish(ChannelClosed(self.key))


class StoragePublisher:
    """A storage's reports, published on the run's bus (``storage.memory.StorageObserver``)."""

    __slots__ = ("bus",)

    def __init__(self, bus: EventBus):
        self.bus = bus

    def transition(self, name: str) -> None:
        self.bus.publish(StorageTransition(name))

    def closed(self) -> None:
        self.bus.publish(StorageClosed())


def publishing_commits(bus: EventBus, on_commit: Callable[[list[Any], str, str, int, int, int], None]
                       ) -> Callable[[list[Any], str, str, int, int, int], None]:
    """The sinks' commit callback (``runtime.sinks.TransactionStore``), also publishing ``RecordsCommitted``."""

    def committed(rows: list[Any], txn: str, sink: str, checkpoint: int, attempt: int, seq: int) -> None:
        on_commit(rows, txn, sink, checkpoint, attempt, seq)
        if bus.wants(RecordsCommitted):
            bus.publish(RecordsCommitted(txn, sink, checkpoint, tuple(rows)))

    return committed
