"""The checkpoint protocol of one channel u→d as an explicit transition system.

One table of rules (``Protocol.actions``) serves both concrete execution (``model.trace``, Python
values: run-length sequences of record numbers) and the Z3 encoding (``proofs``, Z3 sequences of
Int). Every guard and effect is written once, against the tiny :class:`Ops` algebra, so the
executable model and the proved one cannot disagree. Static configuration (mode, mutant, gate)
is plain Python and may be branched on; state may only be touched through ``ops``.

State of a channel: u's output queue ``out`` and d's input queue ``inq`` (data records only),
the ghost histories ``sent`` (what u emitted, in order, as its state reflects it) and ``done``
(what d applied), the number of recovered records still at the head of each queue, one
:class:`Slot` per checkpoint in progress on the channel, and the latest completed checkpoint.

Barriers are not queue elements: a slot records where its barrier is (``loc``) and how many data
records precede it in channel order (``bout`` in the output queue, ``bpos`` in the input queue).
A priority barrier is modelled as sitting at the front of u's output (``PRIO``): Flink polls the
priority section first and the network is FIFO, so no buffer is transmitted while it is pending.

Names follow the rules they implement (TLA+ style); invariants live in ``proofs.cut`` and
``model.invariants``, apart from the actions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any
from typing import Protocol as TypingProtocol

from cutcheck.model.errors import CutcheckError
from cutcheck.model.kinds import CheckpointMode, values

# Where a checkpoint's barrier is on this channel.
NONE, OUT, PRIO, INQ, AT_D = 0, 1, 2, 3, 4
LOC_NAMES = {
    NONE: "not emitted",
    OUT: "in u's output queue",
    PRIO: "priority lane",
    INQ: "in d's input queue",
    AT_D: "taken by d",
}

MODES = values(CheckpointMode)
# Mutants of DESIGN.md; only the first four change the channel protocol, the others are accepted
# (the engine passes its scenario's list through) and ignored here.
PROTOCOL_MUTANTS = (
    "no-output-state",
    "process-after-barrier",
    "partial-input-state",
    "early-checkpoint-in-recovery",
)
OTHER_MUTANTS = (
    "skip-stateless-reassignment",
    "no-rescale-filter",
    "discard-on-abort",
    "committer-drops-late",
)


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


# ---------------------------------------------------------------------------------------- rules
# Data movement. Every slot follows the records that move, so that its counts stay true.


def can_emit(P: Protocol, o: Ops, s: ChannelState, p: Params) -> list[Clause]:
    return [("n >= 1", p.n >= 1)]


def do_emit(P: Protocol, o: Ops, s: ChannelState, p: Params) -> ChannelState:
    blk = o.fresh(s.sent, p.n)
    return replace(s, out=o.concat(s.out, blk), sent=o.concat(s.sent, blk))


def can_send_buffer(P: Protocol, o: Ops, s: ChannelState, p: Params) -> list[Clause]:
    cl: list[Clause] = [("n >= 1", p.n >= 1), ("u's output queue holds n records", p.n <= o.length(s.out))]
    for sl in s.slots:
        # The priority section is polled first and the network is FIFO.
        cl.append((f"no priority barrier {sl.cp} pending ahead of the data", sl.loc != PRIO))
        cl.append(
            (f"no in-order barrier {sl.cp} among the n oldest records", o.or_(sl.loc != OUT, p.n <= sl.bout))
        )
    return cl


def do_send_buffer(P: Protocol, o: Ops, s: ChannelState, p: Params) -> ChannelState:
    moved = o.take(s.out, p.n)
    slots = tuple(
        replace(
            sl,
            bout=o.ite(sl.loc == OUT, sl.bout - p.n, sl.bout),
            istate=o.ite(sl.recording, o.concat(sl.istate, moved), sl.istate),
        )
        for sl in s.slots
    )
    return replace(
        s, out=o.drop(s.out, p.n), inq=o.concat(s.inq, moved), rec_out=o.max0(s.rec_out - p.n), slots=slots
    )


def can_process(P: Protocol, o: Ops, s: ChannelState, p: Params) -> list[Clause]:
    cl: list[Clause] = [("n >= 1", p.n >= 1), ("d's input queue holds n records", p.n <= o.length(s.inq))]
    for sl in s.slots:
        cl.append(
            (f"no in-order barrier {sl.cp} among the n oldest records", o.or_(sl.loc != INQ, p.n <= sl.bpos))
        )
        if P.mode == "at_least_once":
            continue  # barrier tracking never blocks: the control that shows duplicates
        blocked = o.and_(sl.loc == AT_D, o.not_(sl.down))
        if P.mutant == "process-after-barrier":
            blocked = o.and_(blocked, o.not_(sl.unal))
        # Aligned: the channel stays blocked until d snapshots; unaligned: the barrier triggers it at once.
        cl.append((f"channel not blocked by barrier {sl.cp} (d has not snapshotted)", o.not_(blocked)))
    return cl


def do_process(P: Protocol, o: Ops, s: ChannelState, p: Params) -> ChannelState:
    slots = tuple(
        replace(sl, bpos=o.ite(_reached_d(o, sl), o.max0(sl.bpos - p.n), sl.bpos)) for sl in s.slots
    )
    return replace(
        s,
        inq=o.drop(s.inq, p.n),
        done=o.concat(s.done, o.take(s.inq, p.n)),
        rec_in=o.max0(s.rec_in - p.n),
        slots=slots,
    )


# Barrier movement.


def can_send_barrier(P: Protocol, o: Ops, s: ChannelState, p: Params) -> list[Clause]:
    sl = s.slots[p.i]
    return [
        ("barrier is in u's output queue", sl.loc == OUT),
        ("barrier is at the head of the output queue", sl.bout == 0),
    ]


def do_send_barrier(P: Protocol, o: Ops, s: ChannelState, p: Params) -> ChannelState:
    sl = s.slots[p.i]
    # The channel sees the barrier as it arrives: from here on nothing more is input state.
    return _set_slot(s, p.i, replace(sl, loc=o.lit(INQ), bpos=o.length(s.inq), recording=o.lit(False)))


def can_arrive_priority(P: Protocol, o: Ops, s: ChannelState, p: Params) -> list[Clause]:
    return [("a priority barrier is pending", s.slots[p.i].loc == PRIO)]


def do_arrive_priority(P: Protocol, o: Ops, s: ChannelState, p: Params) -> ChannelState:
    sl = s.slots[p.i]
    # Everything queued at d was sent before the barrier (its sequence number is larger).
    return _set_slot(s, p.i, replace(sl, loc=o.lit(AT_D), bpos=o.length(s.inq), recording=o.lit(False)))


def can_take_barrier(P: Protocol, o: Ops, s: ChannelState, p: Params) -> list[Clause]:
    sl = s.slots[p.i]
    return [
        ("barrier is in d's input queue", sl.loc == INQ),
        ("barrier is at the head of the input queue", sl.bpos == 0),
    ]


def do_take_barrier(P: Protocol, o: Ops, s: ChannelState, p: Params) -> ChannelState:
    return _set_slot(s, p.i, replace(s.slots[p.i], loc=o.lit(AT_D)))


# Snapshots.


def can_snapshot_up(P: Protocol, o: Ops, s: ChannelState, p: Params) -> list[Clause]:
    cl: list[Clause] = [("u has not snapshotted for this checkpoint", o.not_(s.slots[p.i].up))]
    if P.mode in ("aligned", "at_least_once"):
        cl.append((f"{P.mode} barriers are in-order", o.not_(p.unal)))
    return cl


def do_snapshot_up(P: Protocol, o: Ops, s: ChannelState, p: Params) -> ChannelState:
    sl = s.slots[p.i]
    ostate = P.overtaken(o, s, o.length(s.out))
    return _set_slot(
        s,
        p.i,
        replace(
            sl,
            up=o.lit(True),
            unal=p.unal,
            sent_snap=s.sent,
            loc=o.ite(p.unal, PRIO, OUT),
            bout=o.length(s.out),
            ostate=o.ite(p.unal, ostate, o.empty()),
        ),
    )


def can_snapshot_down(P: Protocol, o: Ops, s: ChannelState, p: Params) -> list[Clause]:
    sl = s.slots[p.i]
    cl: list[Clause] = [("d has not snapshotted for this checkpoint", o.not_(sl.down))]
    if P.mode in ("aligned", "at_least_once"):
        cl.append(("d snapshots after taking this channel's barrier", sl.loc == AT_D))
    elif P.mode == "unaligned":
        # Forced-aligned edges (pointwise, broadcast) send in-order barriers and d aligns on them.
        cl.append(("d aligns on a forced-aligned barrier", o.or_(o.not_(sl.up), sl.unal, sl.loc == AT_D)))
    return cl


def do_snapshot_down(P: Protocol, o: Ops, s: ChannelState, p: Params) -> ChannelState:
    sl = s.slots[p.i]
    reached = _reached_d(o, sl)
    queued = o.ite(reached, o.take(s.inq, sl.bpos), s.inq)
    recording = o.not_(reached)
    if P.mutant == "early-checkpoint-in-recovery":
        queued = o.drop(queued, s.rec_in)
    if P.mutant == "partial-input-state" and P.gate != 0:
        queued, recording = o.empty(), o.lit(False)
    return _set_slot(s, p.i, replace(sl, down=o.lit(True), pre=s.done, istate=queued, recording=recording))


def can_switch_on_timeout(P: Protocol, o: Ops, s: ChannelState, p: Params) -> list[Clause]:
    sl = s.slots[p.i]
    return [
        ("mode is aligned_timeout", o.lit(P.mode == "aligned_timeout")),
        ("an in-order barrier is pending", o.or_(sl.loc == OUT, sl.loc == INQ)),
    ]


def do_switch_on_timeout(P: Protocol, o: Ops, s: ChannelState, p: Params) -> ChannelState:
    sl = s.slots[p.i]
    in_out = sl.loc == OUT
    # In u's queue: the records ahead become output state and the barrier is re-sent with priority.
    # In d's queue: it moves to the priority section; d's snapshot captures the records ahead of it.
    return _set_slot(
        s,
        p.i,
        replace(
            sl,
            unal=o.lit(True),
            loc=o.ite(in_out, PRIO, AT_D),
            ostate=o.ite(in_out, P.overtaken(o, s, sl.bout), sl.ostate),
        ),
    )


# Completion, abort, recovery.


def can_complete(P: Protocol, o: Ops, s: ChannelState, p: Params) -> list[Clause]:
    sl = s.slots[p.i]
    return [
        ("u has snapshotted", sl.up),
        ("d has snapshotted", sl.down),
        ("the barrier has reached d (input state is final)", _reached_d(o, sl)),
        ("not completed before", o.not_(sl.completed)),
    ]


def do_complete(P: Protocol, o: Ops, s: ChannelState, p: Params) -> ChannelState:
    sl = s.slots[p.i]
    s = _set_slot(s, p.i, replace(sl, completed=o.lit(True)))
    return replace(s, last=Last(sl.cp, o.lit(True), sl.sent_snap, sl.pre, sl.istate, sl.ostate))


def can_retire(P: Protocol, o: Ops, s: ChannelState, p: Params) -> list[Clause]:
    sl = s.slots[p.i]
    return [("completed", sl.completed), ("barrier taken by d", sl.loc == AT_D)]


def do_clear_slot(P: Protocol, o: Ops, s: ChannelState, p: Params) -> ChannelState:
    return _set_slot(s, p.i, fresh_slot(o, s.slots[p.i].cp))


def can_abort(P: Protocol, o: Ops, s: ChannelState, p: Params) -> list[Clause]:
    return [("not completed", o.not_(s.slots[p.i].completed))]


def can_restore(P: Protocol, o: Ops, s: ChannelState, p: Params) -> list[Clause]:
    return [
        ("a checkpoint has completed", s.last.valid),
        ("it is the latest completed checkpoint", p.cp == s.last.cp),
    ]


def do_restore(P: Protocol, o: Ops, s: ChannelState, p: Params) -> ChannelState:
    lc = s.last
    # u resumes at its cut point and re-emits deterministically; recovered input is read first
    # (it is at the head of d's queue), recovered output is sent before new output.
    return replace(
        s,
        sent=lc.sent,
        done=lc.pre,
        inq=lc.istate,
        out=lc.ostate,
        rec_in=o.length(lc.istate),
        rec_out=o.length(lc.ostate),
        slots=tuple(fresh_slot(o, sl.cp) for sl in s.slots),
    )


def can_task_snapshot(P: Protocol, o: Ops, slots: list[Slot | None]) -> list[Clause]:
    """The snapshot step of a task d over all its input channels (one slot per channel, None where
    the checkpoint has not reached it): d applies DownstreamSnapshot to every channel at once.
    Aligned and at-least-once tasks snapshot after the last barrier; so does a task with a
    forced-aligned input in an unaligned job (facts §3.7). Unaligned: on the first barrier of any
    channel, which ``model.tasktrace`` enforces as "the next step after a priority arrival"."""
    arrived = o.and_(*[o.lit(False) if sl is None else sl.loc == AT_D for sl in slots])
    if P.mode in ("aligned", "at_least_once"):
        return [("every channel's barrier was taken (aligned)", arrived)]
    if P.mode == "unaligned":
        forced = o.or_(*[o.lit(False) if sl is None else o.and_(sl.up, o.not_(sl.unal)) for sl in slots])
        return [("a task with a forced-aligned input aligns", o.implies(forced, arrived))]
    return []  # aligned_timeout: aligned until the timeout, which may fire before any barrier


ACTIONS: tuple[Action, ...] = (
    Action("UpstreamEmits", "emit", can_emit, do_emit),
    Action("SendBuffer", "transmit", can_send_buffer, do_send_buffer),
    Action("SendBarrier", "transmit_barrier", can_send_barrier, do_send_barrier),
    Action("DownstreamProcesses", "process", can_process, do_process),
    Action("UpstreamSnapshot", "snapshot_up", can_snapshot_up, do_snapshot_up),
    Action("PriorityBarrierArrives", "priority_arrival", can_arrive_priority, do_arrive_priority),
    Action("DownstreamTakesBarrier", "barrier_processed", can_take_barrier, do_take_barrier),
    Action("DownstreamSnapshot", "snapshot_down", can_snapshot_down, do_snapshot_down),
    Action("AlignmentTimesOut", "timeout_switch", can_switch_on_timeout, do_switch_on_timeout),
    Action("CheckpointCompletes", "complete", can_complete, do_complete),
    Action("CheckpointAborted", "abort", can_abort, do_clear_slot),
    Action("RestoreFromLatest", "restore", can_restore, do_restore),
    Action("RetireCheckpoint", None, can_retire, do_clear_slot),
)
BY_EVENT = {a.event: a for a in ACTIONS if a.event}
SLOT_EVENTS = frozenset(
    {
        "transmit_barrier",
        "snapshot_up",
        "priority_arrival",
        "barrier_processed",
        "snapshot_down",
        "timeout_switch",
        "complete",
        "abort",
    }
)


def normalize_mode(mode: str) -> CheckpointMode:
    base = mode.split(":", 1)[0]  # "aligned_timeout:T" names the timeout too
    if base not in MODES:
        raise CutcheckError(f"unknown checkpoint mode {mode!r}; use one of {', '.join(MODES)}.")
    return CheckpointMode(base)


@dataclass(frozen=True, slots=True)
class Protocol:
    """The protocol of one channel in a mode, with at most one mutant; ``gate`` is the channel's input gate at d."""

    mode: CheckpointMode  # a mode's string ("aligned_timeout:T" too) is normalized to its member
    mutant: str | None = None
    gate: int = 0
    actions: tuple[Action, ...] = field(default=ACTIONS, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", normalize_mode(self.mode))
        known = PROTOCOL_MUTANTS + OTHER_MUTANTS
        if self.mutant is not None and self.mutant not in known:
            raise CutcheckError(f"unknown mutant {self.mutant!r}; known mutants: {', '.join(known)}.")

    def overtaken(self, o: Ops, s: ChannelState, k: Any) -> Any:
        """The output state of a barrier that overtakes the ``k`` oldest queued records."""
        if self.mutant == "no-output-state":
            return o.empty()
        ahead = o.take(s.out, k)
        return o.drop(ahead, s.rec_out) if self.mutant == "early-checkpoint-in-recovery" else ahead

    def action(self, word: str) -> Action:
        """The rule for a word of the trace vocabulary (in this protocol's table)."""
        for a in self.actions:
            if a.event == word:
                return a
        raise KeyError(word)

    def guard(self, action: Action, o: Ops, s: ChannelState, p: Params) -> list[Clause]:
        return action.guard(self, o, s, p)

    def effect(self, action: Action, o: Ops, s: ChannelState, p: Params) -> ChannelState:
        return action.effect(self, o, s, p)
