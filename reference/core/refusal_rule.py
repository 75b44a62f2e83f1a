"""Which rule decides rescale refusals ("Cannot rescale the given pointwise partitioner") in this context.

Read by reference.recovery.rescale_refusal (the engine's decision) and reference.checks.restore_judgement
(RESTORE_JUDGED, the same rule stated again); set by ``refusal_rule`` around engine runs.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator
from contextvars import ContextVar


class RefusalRule(enum.Enum):
    """Which rule decides the "Cannot rescale the given pointwise partitioner" refusal.

    PER_VERTEX is what Flink 1.19 and releases without FLINK-38267's fix do, the engine's default.
    PER_EXCHANGE is what Flink documents ("Checkpointing under backpressure": pointwise and broadcast
    connections are kept aligned, every other exchange checkpoints unaligned, and unaligned
    checkpoints can be restored rescaled) and what FLINK-38267's fix implements: only an exchange
    that itself holds in-flight data is remapped, so only such an exchange with an UNSUPPORTED
    mapper refuses. ``cutcheck flink hunt`` predicts with PER_EXCHANGE: a version that refuses more is
    a finding, not a prediction.
    """

    PER_VERTEX = "per-vertex"
    PER_EXCHANGE = "per-exchange"


_RULE: ContextVar[RefusalRule] = ContextVar("cutcheck_refusal_rule", default=RefusalRule.PER_VERTEX)


@contextlib.contextmanager
def refusal_rule(rule: RefusalRule) -> Iterator[None]:
    """Engine runs inside decide rescale refusals by ``rule``."""
    token = _RULE.set(rule)
    try:
        yield
    finally:
        _RULE.reset(token)


def current_rule() -> RefusalRule:
    return _RULE.get()
