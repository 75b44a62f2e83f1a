"""The doors between the rooms: what each room may see of a run, as ``typing.Protocol``s.

The loop (``reference.engine.Engine`` and the batch engine) is the one object behind every door;
the rooms never import it. Each door lists what its room reads or calls, so a reader can tell from a
signature how much of the run a function may touch. The doors nest: every room sees the run context;
the run-time and checkpointing rooms also see the tasks and the coordinator; recovery, which rebuilds
the run, sees the most.

This module imports nothing of the engine (it is the leaf room), only the model: what a room reads of
the scenario is stated here as read-only ``ScenarioView`` protocols; run-time objects of other rooms
(tasks, the coordinator, the storage) still appear as ``Any`` where the rooms that hold their types
sit above this one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from cutcheck.model.execution import ExecutionGraph, SubtaskId
from cutcheck.model.graph import JobGraph
from cutcheck.model.inflight import NetworkConfig
from cutcheck.reference.core.seams import Rules


class CheckpointSection(Protocol):
    """The scenario's ``checkpoint`` section (reference.scenario.CheckpointConfig)."""

    @property
    def mode(self) -> str: ...
    @property
    def interval(self) -> int: ...
    @property
    def timeout(self) -> int | None: ...
    @property
    def max_concurrent(self) -> int: ...
    @property
    def retained(self) -> int: ...
    @property
    def incremental(self) -> bool: ...
    @property
    def checkpoint_timeout(self) -> int: ...
    @property
    def tolerable_failed(self) -> int: ...


class ScheduleSection(Protocol):
    @property
    def records_per_action(self) -> int | None: ...
    @property
    def slowdown(self) -> int: ...


class TimedEvent(Protocol):
    """A scheduled failure or savepoint: at a step, or ``delay`` steps after a checkpoint completed."""

    @property
    def at_step(self) -> int | None: ...
    @property
    def after_checkpoint(self) -> int | None: ...
    @property
    def delay(self) -> int: ...


class FailureEntry(TimedEvent, Protocol):
    @property
    def target(self) -> str: ...


class RescaleEntry(Protocol):
    @property
    def on_failure(self) -> int: ...
    @property
    def parallelism(self) -> dict[str, int]: ...


class ScenarioView(Protocol):
    """What the rooms read of a scenario (reference.scenario.Scenario)."""

    @property
    def seed(self) -> int: ...
    @property
    def workers(self) -> int | None: ...
    @property
    def checkpoint(self) -> CheckpointSection: ...
    @property
    def network(self) -> NetworkConfig: ...
    @property
    def schedule(self) -> ScheduleSection: ...
    @property
    def failures(self) -> Sequence[FailureEntry]: ...
    @property
    def rescales(self) -> Sequence[RescaleEntry]: ...
    @property
    def savepoints(self) -> Sequence[TimedEvent]: ...
    @property
    def extra(self) -> Mapping[str, object]: ...


class Publisher(Protocol):
    """The run's event bus as the rooms see it (reference.events.stream.EventBus): publish, and ask
    whether anyone listens before building an event on a hot path."""

    def publish(self, event: object) -> None: ...

    def wants(self, kind: type[Any]) -> bool: ...


class ChannelEvents(Protocol):
    """Where a channel's protocol events go when the run records them (the run's event bus)."""

    def publish(self, event: tuple[Any, ...]) -> None: ...

    def close(self) -> None: ...


class RunContext(Protocol):
    """Every room: the step and attempt, the scenario and its graphs, the rules in force, the event log."""

    step: int
    attempt: int
    graph: JobGraph
    exec_graph: ExecutionGraph
    parallelism: dict[str, int]
    rules: Rules

    @property
    def scenario(self) -> ScenarioView: ...

    def event(self, kind: str, detail: str = "") -> None: ...


class TraceRun(RunContext, Protocol):
    """The trace recorder (checks.tracing): which edges may carry unaligned barriers."""

    edge_unaligned: dict[int, bool]


class BarrierHandler(Protocol):
    """A state of a task's barrier handler (checkpointing.barriers): each event returns the next state."""

    def barrier_received(self, task: Any, ch: Any, b: Any) -> BarrierHandler: ...

    def alignment_timeout(self, task: Any, cp: int) -> BarrierHandler: ...

    def end_of_partition(self, task: Any, ch: Any) -> BarrierHandler: ...

    def abort(self, task: Any, cp: int) -> BarrierHandler: ...


class TaskRun(RunContext, Protocol):
    """The run-time and checkpointing rooms: tasks, channels, the coordinator, the acknowledger, the
    transaction store of the sinks, and the snapshot step a barrier handler triggers."""

    tasks: dict[SubtaskId, Any]
    subpartitions: list[Any]
    coordinator: Any  # checkpointing.coordinator.Coordinator
    checkpoints: Any  # checkpointing.controller.CheckpointController
    store: Any  # runtime.sinks.TransactionStore
    vertex_index: dict[str, int]
    layouts: Any
    order_edges: dict[str, frozenset[int]]
    debloat: Any
    edge_unaligned: dict[int, bool]

    @property
    def bus(self) -> Publisher: ...

    def channel_events(self, key: tuple[int, int, int], gate: int) -> ChannelEvents | None: ...


class CoordinatorRun(RunContext, Protocol):
    """The checkpoint coordinator: the tasks a checkpoint waits for."""

    tasks: dict[SubtaskId, Any]


class CheckpointListener(Protocol):
    """What the coordinator tells the run: a checkpoint about to be stored, completed, aborted."""

    def completing(self, done: Any) -> None: ...

    def completed(self, done: Any, subsumed: list[int]) -> None: ...

    def aborted(self, cp: int, kind: str, reason: str, cause: str) -> None: ...


class ControllerRun(TaskRun, Protocol):
    """The checkpoint controller: the pending completion notifications and the in-flight data."""

    notifications: list[tuple[Any, int]]

    def inflight_bytes(self) -> int: ...


class CheckedRun(RunContext, Protocol):
    """The run-time checks (checks.run_checks): the tasks and the checkpoint storage they judge."""

    tasks: dict[SubtaskId, Any]
    storage: Any
    edge_unaligned: dict[int, bool]


class RecoveryRun(TaskRun, Protocol):
    """Recovery rebuilds the run: it also sees the checkpoint storage, the restore reports, the
    expectations and the oracle, and asks the engine to start an attempt and to rebuild its tasks."""

    storage: Any  # storage.memory.CheckpointStorage
    notifications: list[tuple[Any, int]]
    restore_reports: list[dict[str, Any]]
    expect: Any
    oracle: Any
    broadcast_fanout: Any  # recovery.fanout.BroadcastFanout

    def start_attempt(self, region: frozenset[SubtaskId] | None) -> None: ...

    def rebuild(self, restored: Any, new_parallelism: dict[str, int] | None) -> None: ...

    def redeploy(self, region: frozenset[SubtaskId]) -> None: ...
