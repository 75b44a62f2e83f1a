"""The wall of a time-bounded campaign, as the engine loop sees it.

A campaign bounded by ``--seconds`` runs each scenario inside ``walled(at)``; the engine loop
(``Engine.run``) and the trace validation after it (``checks.tracing.validate_traces``) ask
``current_wall()`` once and call ``Wall.check`` every step (every event), which looks at the clock
every ``CHECK_EVERY`` calls and raises ``BudgetExhausted`` once the wall has passed. The scenario
then ends unjudged (neither ok nor a finding): a run cut short says nothing about the protocol.

Outside ``walled`` the wall is ``UNBOUNDED``, whose check returns at once (no clock is read), so
``simulate`` and every replay run exactly as they did.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

# Engine steps (or traced events validated) between two looks at the clock. A step of the fuzz cycle's
# jobs took 0.09 ms on average and 0.4 ms at worst on the 2-core development machine (2026-11-26, seeds
# 0-35); a clock read (about 0.1 us) per 32 such steps costs nothing measurable. Hypothesis campaigns of
# 3 s on that machine under a load of 15 ended 13-136 ms past the wall with 256 steps between looks,
# 19-80 ms with 32: the rest is the machine's load, not the interval.
CHECK_EVERY = 32


class BudgetExhausted(BaseException):
    """The wall passed while a scenario ran.

    A BaseException, as KeyboardInterrupt is, on purpose: between the engine loop and the campaign,
    ``except Exception`` turns whatever the engine raises into an ENGINE_FAULT finding, and a run
    cut by the clock is not one. Cleanups (``finally``, a run directory's discard) still run."""


@dataclass(slots=True)
class Wall:
    at: float | None  # time.monotonic() when the budget ends; None: no budget
    countdown: int = CHECK_EVERY

    def check(self) -> None:
        if self.at is None:
            return
        self.countdown -= 1
        if self.countdown > 0:
            return
        self.countdown = CHECK_EVERY
        if time.monotonic() >= self.at:
            raise BudgetExhausted("the campaign's time budget ended while this scenario ran")


UNBOUNDED = Wall(None)
_WALL: ContextVar[Wall] = ContextVar("cutcheck_wall", default=UNBOUNDED)


def current_wall() -> Wall:
    """The wall of the campaign this run belongs to; ``UNBOUNDED`` outside a time-bounded campaign."""
    return _WALL.get()


@contextlib.contextmanager
def walled(at: float | None) -> Iterator[Wall]:
    """Runs started inside stop at ``at`` (monotonic seconds); ``None``: no wall."""
    wall = Wall(at) if at is not None else UNBOUNDED
    token = _WALL.set(wall)
    try:
        yield wall
    finally:
        _WALL.reset(token)
