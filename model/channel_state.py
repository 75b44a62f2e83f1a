"""The state of one channel u→d in the protocol model, and the algebra its rules are written in.

See ``model.protocol`` for the whole picture. State: u's output queue ``out`` and d's input queue
``inq`` (data records only), the ghost histories ``sent`` and ``done``, the recovered records still
at the head of each queue, one :class:`Slot` per checkpoint in progress, and the latest completed
checkpoint (:class:`Last`). A barrier is not a queue element: its slot records where it is
(``loc``) and how many data records precede it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from typing import Protocol as TypingProtocol

if TYPE_CHECKING:
    from cutcheck.model.protocol import Protocol

# Where a checkpoint's barrier is on this channel.
NONE, OUT, PRIO, INQ, AT_D = 0, 1, 2, 3, 4
LOC_NAMES = {
    NONE: "not emitted",
    OUT: "in u's output queue",
    PRIO: "priority lane",
    INQ: "in d's input queue",
    AT_D: "taken by d",
}

class Ops(TypingProtocol):
    """The algebra the rules are written in: implemented by ``model.trace.PyOps`` and ``proofs.z3ops.Z3Ops``."""

    def lit(self, v: int | bool) -> Any: ...
    def and_(self, *bs: Any) -> Any: ...
    def or_(self, *bs: Any) -> Any: ...
    def not_(self, b: Any) -> Any: ...
    def implies(self, a: Any, b: Any) -> Any: ...
    def eq(self, a: Any, b: Any) -> Any: ...
    def ite(self, c: Any, a: Any, b: Any) -> Any: ...
    def max0(self, x: Any) -> Any: ...
    def empty(self) -> Any: ...
    def length(self, s: Any) -> Any: ...
    def concat(self, *ss: Any) -> Any: ...
    def take(self, s: Any, n: Any) -> Any: ...  # first n (all if n > len, none if n <= 0)
    def drop(self, s: Any, n: Any) -> Any: ...  # all but the first n (all if n <= 0)
    def fresh(self, sent: Any, n: Any) -> Any: ...  # the next n records u produces after ``sent``


@dataclass(frozen=True, slots=True)
class Slot:
    """One checkpoint on this channel. ``cp`` is identity only: no rule reads it."""

    cp: Any
    up: Any  # u has taken its snapshot and emitted the barrier
    down: Any  # d has taken its snapshot
    unal: Any  # the barrier is (or became) an unaligned, priority one
    loc: Any
    bout: Any  # data records ahead of the barrier in u's output queue (loc == OUT)
    bpos: Any  # data records ahead of the barrier, in channel order, in d's input queue (INQ, AT_D)
    recording: Any  # d snapshotted before the barrier reached it: transmitted records are input state
    completed: Any
    sent_snap: Any  # what u had sent at its snapshot (the cut point)
    pre: Any  # what d had applied at its snapshot
    istate: Any
    ostate: Any


@dataclass(frozen=True, slots=True)
class Last:
    """The latest completed checkpoint, what a restore starts from (Flink restores the latest)."""

    cp: Any
    valid: Any
    sent: Any
    pre: Any
    istate: Any
    ostate: Any


@dataclass(frozen=True, slots=True)
class ChannelState:
    out: Any
    inq: Any
    sent: Any
    done: Any
    rec_in: Any  # recovered records still at the head of ``inq``
    rec_out: Any  # recovered records still at the head of ``out``
    slots: tuple[Slot, ...]
    last: Last


@dataclass(frozen=True, slots=True)
class Params:
    """Action parameters: ``n`` records, slot index ``i`` (always concrete), barrier kind, checkpoint id."""

    n: Any = 0
    i: int = 0
    unal: Any = False
    cp: Any = 0


Clause = tuple[str, Any]
Guard = Callable[["Protocol", Ops, ChannelState, Params], list[Clause]]
Effect = Callable[["Protocol", Ops, ChannelState, Params], ChannelState]


@dataclass(frozen=True, slots=True)
class Action:
    name: str  # the rule, TLA+ style
    event: str | None  # its word in the trace vocabulary (None: internal step)
    guard: Guard
    effect: Effect


def fresh_slot(o: Ops, cp: Any) -> Slot:
    e = o.empty()
    return Slot(
        cp,
        o.lit(False),
        o.lit(False),
        o.lit(False),
        o.lit(NONE),
        o.lit(-1),
        o.lit(-1),
        o.lit(False),
        o.lit(False),
        e,
        e,
        e,
        e,
    )


def initial_state(o: Ops) -> ChannelState:
    e = o.empty()
    return ChannelState(e, e, e, e, o.lit(0), o.lit(0), (), Last(o.lit(-1), o.lit(False), e, e, e, e))


def _set_slot(s: ChannelState, i: int, sl: Slot) -> ChannelState:
    return replace(s, slots=s.slots[:i] + (sl,) + s.slots[i + 1 :])


def _reached_d(o: Ops, sl: Slot) -> Any:
    return o.or_(sl.loc == INQ, sl.loc == AT_D)
