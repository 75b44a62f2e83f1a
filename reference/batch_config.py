"""The scenario's ``batch`` section: where the blocking shuffle writes, and the failover strategy.
Apart from the batch engine, so that the scenario can validate it without importing the engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cutcheck.model.kinds import FailoverStrategy, values
from cutcheck.model.sections import Field, Section

STRATEGIES = values(FailoverStrategy)


@dataclass(frozen=True, slots=True)
class BatchConfig:
    """Scenario section ``batch``: where the blocking shuffle writes, and the failover strategy."""

    shuffle_dir: str | None = None  # a temp dir when None
    failover_strategy: FailoverStrategy = FailoverStrategy.REGION  # jobmanager.execution.failover-strategy

    @classmethod
    def from_json(cls, data: Any, where: str = "scenario") -> BatchConfig:
        sec = BATCH.read(data, where)
        return cls(**sec | {"failover_strategy": FailoverStrategy(sec.get("failover_strategy", FailoverStrategy.REGION))})


BATCH = Section.of("batch", BatchConfig, {
    "shuffle_dir": Field(str, nullable=True, says="a directory path or null"),
    "failover_strategy": Field(str, choices=STRATEGIES),
})
