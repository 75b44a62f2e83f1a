"""Coverage fed from the run's event bus: the cells of ``core.coverage`` each event reaches."""

from __future__ import annotations

from cutcheck.reference.core.coverage import Coverage
from cutcheck.reference.events.stream import EventBus, FailureHappened, HandlerDispatched, StorageTransition


def count_coverage(bus: EventBus, cov: Coverage) -> None:
    """Count handler dispatches, storage transitions and failures of one run on ``cov``."""
    hits = cov.hits

    def on_dispatch(e: HandlerDispatched) -> None:
        hits["handler", e.state, e.event] += 1

    def on_transition(e: StorageTransition) -> None:
        cov.hit("storage", e.name)

    def on_failure(e: FailureHappened) -> None:
        # What failed, and what recovery will do (published before the failover changes anything).
        cov.hit("failure", "checkpoint-failure" if e.target.startswith("job:") else
                "worker" if e.target.startswith("worker:") else "task")
        cov.hit("failure", "from-checkpoint" if e.from_checkpoint else "from-scratch")
        if e.during_recovery:
            cov.hit("failure", "during-recovery")

    bus.subscribe(HandlerDispatched, on_dispatch)
    bus.subscribe(StorageTransition, on_transition)
    bus.subscribe(FailureHappened, on_failure)
