"""The network: buffers in bytes, result partitions with output pools, input gates with credits.

Flow control is credit-based as in Flink: an input channel owns ``exclusive`` buffers and its gate
lends ``floating`` ones; a subpartition sends a data buffer only when the receiving channel has a
free buffer (events need no credit). A result partition holds at most ``pool`` buffers (queued or
being filled); a task whose output pool is exhausted stops processing input. Backpressure and
in-flight data emerge from these rules; nothing is scripted.

Sequence numbers are per channel and count records, not buffers: a buffer knows the sequence
number of its first record. After a restore each channel starts again at 0 with its recovered
records first, so the CUT check covers recovered data like any other.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cutcheck.model.kinds import BarrierOption, CheckpointKind
from cutcheck.reference.core.seams import seam

if TYPE_CHECKING:
    from cutcheck.reference.core.doors import ChannelEvents
    from cutcheck.reference.runtime.records import Record


class Buf:
    """A data buffer: a list of records and the channel sequence number of the first one."""

    __slots__ = ("recs", "seq0", "origin")

    def __init__(self, recs: list[Record], seq0: int, origin: int = -1):
        self.recs = recs
        self.seq0 = seq0
        # For recovered data after a rescale: the old producer subtask (its virtual channel);
        # -1 for live data, whose producer is the channel's.
        self.origin = origin

    def __repr__(self) -> str:
        return f"Buf({len(self.recs)}@{self.seq0})"


@dataclass(slots=True)
class Barrier:
    """A checkpoint barrier. ``priority`` barriers are unaligned: they overtake data."""

    cp: int
    kind: CheckpointKind
    options: BarrierOption
    trigger_step: int
    priority: bool = False
    cut: int = 0  # sender's emitted-record count on this channel when it took its snapshot

    def __post_init__(self) -> None:
        # Callers may pass the bare strings (the coordinator still does); the members are equal to them.
        self.kind = CheckpointKind(self.kind)
        self.options = BarrierOption(self.options)


@dataclass(slots=True)
class EndOfPartition:
    """The producer finished; no more data on this channel."""


END_OF_PARTITION = EndOfPartition()


@dataclass(slots=True)
class EndOfChannelState:
    """Follows a subpartition's recovered output after a restore and blocks it until the consumer's
    gate has seen this event on all of its channels (Flink's RECOVERY_COMPLETION, facts §3.8), so no
    new data overtakes recovered data of another channel of the same gate."""


END_OF_CHANNEL_STATE = EndOfChannelState()

@dataclass(frozen=True, slots=True)
class CancelMarker:
    """Flink's ``CancelCheckpointMarker``: a task that will not take checkpoint ``cp`` (it declined it,
    or was told of its abort before it got to it) says so to its consumers, in order behind its data,
    so that they stop aligning on a barrier that will not come (facts §4.10)."""

    cp: int


QueueItem = Buf | Barrier | CancelMarker | EndOfPartition | EndOfChannelState  # what a channel carries


@dataclass(slots=True)
class OutputSubpartition:
    """The sender end of one channel."""

    index: int
    queue: deque[QueueItem] = field(default_factory=deque)  # priority events first
    current: list[Record] | None = None  # buffer being filled
    emitted: int = 0  # records finished into buffers (sequence numbers handed out)
    transmitted: int = 0  # records handed to the receiver
    blocked: bool = False  # after an aligned barrier, until the consumer resumes (Flink: "blocks upstream")
    buffer_size: int = 0  # bytes per new buffer; debloating lowers it
    consumer: int = 0  # consumer subtask index
    recovered_end: int = 0  # sequence numbers below this were recovered output state
    channel: Any = None  # the receiving InputChannel
    partition: Any = None  # the ResultPartition this belongs to
    task: Any = None  # the producing Task
    events: ChannelEvents | None = None  # this channel's protocol events, when the run records them


@dataclass(slots=True)
class ResultPartition:
    """One producer subtask's output for one edge."""

    edge: int
    subpartitions: list[OutputSubpartition]
    pool: int  # buffers this partition may hold, queued or being filled
    selector: Any  # model.partitioning selector (None for broadcast)
    broadcast: bool = False
    in_use: int = 0  # buffers held: queued data buffers plus non-empty current buffers
    record_bytes: int = 64
    need: int = 1  # free buffers one record may need: every subpartition's for broadcast, else one
    unaligned_capable: bool = True  # barriers on its edge may overtake data (checkpointing.barriers, facts §3.7)
    # Channel by key, for key-only selectors (hash, custom): the channel is a pure function of the
    # key and a job has few keys, so the murmur hash runs once per key instead of once per record.
    key_routes: dict[int, int] | None = None

    def free(self) -> int:
        return self.pool - self.in_use


@dataclass(slots=True)
class InputChannel:
    """The receiver end of one channel."""

    gate: InputGate
    task: Any  # the consuming Task
    index: int  # within the gate
    edge: int
    producer: int  # producer subtask index
    queue: deque[QueueItem] = field(default_factory=deque)
    head_pos: int = 0  # records of the head buffer already processed (deserializer progress)
    nbuf: int = 0  # data buffers held (credit accounting)
    processed: int = 0  # records processed (sequence number of the next record)
    priority: deque[Barrier] = field(default_factory=deque)  # priority barriers not yet handled
    blocked: bool = False  # aligned: barrier taken, waiting for alignment
    ended: bool = False
    sender: OutputSubpartition | None = None
    # unaligned checkpoint in progress on this channel: records arriving before its barrier are persisted
    persisting: int | None = None
    barrier_arrived: int = -1  # id of the last barrier that reached this channel
    barrier_cut: int = 0  # its cut: records with a lower sequence number are pre-barrier
    index_in_task: int = 0  # position among all input channels of the task
    recovered: deque[Buf] = field(default_factory=deque)  # recovered input state, consumed before live data
    recovery_pending: bool = False  # waiting for the sender's EndOfChannelState
    eop_arrived: bool = False  # the producer's EndOfPartition is queued here (not necessarily processed)


@dataclass(slots=True)
class InputGate:
    index: int
    channels: list[InputChannel] = field(default_factory=list)
    exclusive: int = 2
    floating: int = 8
    floating_in_use: int = 0
    recovery_done: bool = False
    debloat: Any = None  # reference.runtime.debloat.GateDebloat when buffer debloating is on (one per gate, as in Flink)

    def can_receive(self, ch: InputChannel) -> bool:
        return ch.nbuf < self.exclusive or self.floating_in_use < self.floating

    def take_buffer(self, ch: InputChannel) -> None:
        if ch.nbuf >= self.exclusive:
            self.floating_in_use += 1
        ch.nbuf += 1

    def release_buffer(self, ch: InputChannel) -> None:
        ch.nbuf -= 1
        if ch.nbuf >= self.exclusive:
            self.floating_in_use -= 1

    def capacity(self) -> int:
        return len(self.channels) * self.exclusive + self.floating

    def upstream_recovered(self) -> None:
        """UpstreamRecoveryTracker: once every channel saw EndOfChannelState, resume all senders."""
        if not any(ch.recovery_pending for ch in self.channels):
            for ch in self.channels:
                if ch.sender is not None:
                    ch.sender.blocked = False

    def recovering(self) -> bool:
        """Flink requests partitions only after the gate's recovered input state is consumed (facts §3.8)."""
        if self.recovery_done:
            return False
        if any(ch.recovered for ch in self.channels):
            return True
        self.recovery_done = True  # recovered data is only installed into fresh gates, so this is final
        return False


@seam
def end_of_channel_state_consumed(ch: InputChannel) -> None:
    """``ch`` consumed the end of its recovered state; its sender stays blocked until every channel of the
    gate has, then all resume together (Flink's UpstreamRecoveryTracker; FLINK-19856 added the event so that
    no new data overtakes recovered data of another channel of the same gate, facts §5)."""
    ch.gate.upstream_recovered()


def inflight_records(subpartitions: list[OutputSubpartition]) -> int:
    """Records in flight: queued or being filled at the senders, and queued at the receivers."""
    total = 0
    for sp in subpartitions:
        total += sum(len(x.recs) for x in sp.queue if isinstance(x, Buf)) + len(sp.current or ())
        total += sum(len(x.recs) for x in sp.channel.queue if isinstance(x, Buf))
    return total
