"""The run as the run-time room sees it: ``TaskRun``, typed with this room's own classes.

A task, its operator, the network and the shuffle service reach the run only through ``TaskRun``;
what they ask of the checkpointing room (the coordinator's pending checkpoints, the controller's
snapshot step) is stated here as the few methods they call, since that room sits above this one.
The run context every room shares is ``core.doors.RunContext``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from cutcheck.model.execution import SubtaskId
from cutcheck.reference.core.doors import ChannelEvents, Publisher, RunContext

if TYPE_CHECKING:
    from cutcheck.model.kinds import BarrierOption
    from cutcheck.reference.runtime.barrier_control import TaskBarrierControl
    from cutcheck.reference.runtime.debloat import Debloating
    from cutcheck.reference.runtime.network import Barrier, InputChannel, OutputSubpartition
    from cutcheck.reference.runtime.records import SourceLayout
    from cutcheck.reference.runtime.sinks import TransactionStore
    from cutcheck.reference.runtime.tasks import Task, TaskSnapshot


class BarrierHandler(Protocol):
    """A state of a task's barrier handler (checkpointing.barriers): each event returns the next state."""

    def barrier_received(self, task: TaskBarrierControl, ch: InputChannel, b: Barrier) -> BarrierHandler: ...

    def alignment_timeout(self, task: TaskBarrierControl, cp: int) -> BarrierHandler: ...

    def end_of_partition(self, task: TaskBarrierControl, ch: InputChannel) -> BarrierHandler: ...

    def cancel_received(self, task: TaskBarrierControl, ch: InputChannel, cp: int) -> BarrierHandler: ...

    def collecting(self) -> set[int]: ...

    def may_block(self) -> set[int]: ...


class PendingView(Protocol):
    """A pending checkpoint, as a task that must still snapshot it reads it."""

    @property
    def kind(self) -> str: ...
    @property
    def options(self) -> BarrierOption: ...
    @property
    def trigger_step(self) -> int: ...


class CoordinatorView(Protocol):
    """The checkpoint coordinator as tasks and their snapshot step see it."""

    @property
    def pending(self) -> Mapping[int, PendingView]: ...

    def options(self, cp: int) -> BarrierOption: ...

    def timed_out(self, cp: int) -> bool: ...

    def note_alignment(self, cp: int, steps: int, records: int) -> None: ...

    def decline(self, cp: int, sid: SubtaskId, reason: str, cause: str) -> None: ...

    def latest_completed_id(self) -> int: ...


class CheckpointControl(Protocol):
    """The run's checkpoint controller (checkpointing.controller) as a task calls it."""

    def new_barrier_handler(self) -> BarrierHandler: ...

    def snapshot_task(self, task: Task, b: Barrier, *, unaligned: bool, received: set[int],
                      first: InputChannel | None, direct: bool = False) -> TaskSnapshot | None: ...

    def maybe_acknowledge(self, t: Task, snap: TaskSnapshot) -> None: ...

    def handler_dispatched(self, sid: SubtaskId, state: str, event: str, channel: int = -1) -> None: ...

    def cancel_sent(self, task: Task, cp: int) -> None: ...

    def barrier_taken(self, task: Task, ch: InputChannel, b: Barrier, first: bool) -> None: ...


class TaskRun(RunContext, Protocol):
    """The run-time and checkpointing rooms: tasks, channels, the coordinator and the controller, the
    transaction store of the sinks, and where a channel publishes its protocol events."""

    tasks: dict[SubtaskId, Task]
    subpartitions: list[OutputSubpartition]
    store: TransactionStore
    vertex_index: dict[str, int]
    layouts: dict[str, SourceLayout]
    order_edges: dict[str, frozenset[int]]
    edge_unaligned: dict[int, bool]

    @property
    def coordinator(self) -> CoordinatorView: ...
    @property
    def checkpoints(self) -> CheckpointControl: ...
    @property
    def bus(self) -> Publisher: ...
    @property
    def debloat(self) -> Debloating | None: ...

    def channel_events(self, key: tuple[int, int, int], gate: int) -> ChannelEvents | None: ...
