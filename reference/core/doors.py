"""The doors between the rooms: what each room may see of a run, as ``typing.Protocol``s.

The loop (``reference.engine.Engine`` and the batch engine) is the one object behind every door;
the rooms never import it. Each door lists what its room reads or calls, so a reader can tell from a
signature how much of the run a function may touch. The doors nest: every room sees the run context;
the run-time and checkpointing rooms also see the tasks and the coordinator; recovery, which rebuilds
the run, sees the most.

This module imports nothing of the engine (it is the leaf room), only the model: what every room
reads of the scenario is stated here as read-only ``ScenarioView`` protocols. The wider doors live in
the room that uses them, typed with the classes of the rooms below it: ``runtime.doors.TaskRun``
(tasks, channels, the coordinator and controller as a task sees them),
``checkpointing.coordinator.CoordinatorRun`` and ``CheckpointListener``,
``checkpointing.controller.ControllerRun``, ``checks.invariants.CheckedRun`` and
``recovery.doors.RecoveryRun``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from cutcheck.model.execution import ExecutionGraph
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
    @property
    def ack_delay(self) -> int: ...


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

    def wants(self, kind: type[object]) -> bool: ...


class ChannelEvents(Protocol):
    """Where a channel's protocol events go when the run records them (the run's event bus)."""

    def publish(self, event: tuple[object, ...]) -> None: ...

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


class RetainedView(Protocol):
    """The checkpoint store as the trace recorder reads it: ids and kinds, in the order added."""

    def retained(self) -> list[tuple[int, str]]: ...


class TraceRun(RunContext, Protocol):
    """The trace recorder (checks.tracing): which edges may carry unaligned barriers, and which
    completed checkpoint the store would restore."""

    edge_unaligned: dict[int, bool]

    @property
    def storage(self) -> RetainedView: ...
