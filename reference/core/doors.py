"""The doors between the rooms: what each room may see of a run, as ``typing.Protocol``s.

The loop (``reference.engine.Engine`` and the batch engine) is the one object behind every door;
the rooms never import it. Each door lists what its room reads or calls, so a reader can tell from a
signature how much of the run a function may touch. The doors nest: every room sees the run context;
the run-time and checkpointing rooms also see the tasks and the coordinator; recovery, which rebuilds
the run, sees the most.

Types of other rooms appear as ``Any``: this module imports nothing of the engine (it is the leaf
room), only the model's rules.
"""

from __future__ import annotations

from typing import Any, Protocol

from cutcheck.model.execution import ExecutionGraph
from cutcheck.model.graph import JobGraph
from cutcheck.reference.core.seams import Rules


class RunContext(Protocol):
    """Every room: the step and attempt, the scenario and its graphs, the rules in force, the event log."""

    step: int
    attempt: int
    scenario: Any  # reference.scenario.Scenario
    graph: JobGraph
    exec_graph: ExecutionGraph
    parallelism: dict[str, int]
    rules: Rules

    def event(self, kind: str, detail: str = "") -> None: ...


class TraceRun(RunContext, Protocol):
    """The trace recorder (checks.tracing) and the shuffle service that gives channels their traces."""

    tracing: bool
    traces: dict[tuple[int, int, int], Any]
    trace_suspended: bool
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

    tasks: dict[Any, Any]
    subpartitions: list[Any]
    coordinator: Any  # checkpointing.coordinator.Coordinator
    store: Any  # runtime.sinks.TransactionStore
    vertex_index: dict[str, int]
    layouts: Any
    order_edges: dict[str, frozenset[int]]
    debloat: Any
    coverage: Any  # core.coverage.Coverage
    alignment_steps: dict[int, int]
    inflight_at_trigger: dict[int, int]
    aligned_processed: dict[int, int]
    buffer_size_at_trigger: dict[int, int]

    def new_barrier_handler(self) -> BarrierHandler: ...

    def snapshot_task(self, task: Any, b: Any, *, unaligned: bool, received: set[int], first: Any,
                      direct: bool = False) -> Any: ...

    def maybe_acknowledge(self, task: Any, snap: Any) -> None: ...

    def timed_out(self, cp: int) -> bool: ...

    def check_cut(self, done: Any) -> None: ...

    def on_complete(self, done: Any, subsumed: list[int]) -> None: ...

    def on_abort(self, cp: int) -> None: ...


class RecoveryRun(TaskRun, TraceRun, Protocol):
    """Recovery rebuilds the run: it also sees the checkpoint storage, the pending notifications, the
    trigger timer, the restart count and restore reports, the expectations and the oracle."""

    storage: Any  # storage.memory.CheckpointStorage
    notifications: list[tuple[Any, int]]
    next_trigger: int
    restarts: int
    restore_reports: list[dict[str, Any]]
    trace_archive: list[dict[tuple[int, int, int], Any]]
    expect: Any
    oracle: Any

    def _build(self, restored: Any, new_parallelism: dict[str, int] | None = None) -> None: ...
