"""The rule table of the channel protocol (``model.protocol``): one guard and one effect per action.

Each rule is written once against the :class:`~cutcheck.model.channel_state.Ops` algebra, so the
Python execution (``model.trace``) and the Z3 encoding (``proofs``) run the same table. The
protocol's static configuration (mode, mutant) is plain Python and may be branched on.
"""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum, unique
from typing import TYPE_CHECKING

from cutcheck.model.channel_state import (
    AT_D,
    INQ,
    OUT,
    PRIO,
    Action,
    ChannelState,
    Clause,
    Last,
    Ops,
    Params,
    Slot,
    _reached_d,
    _set_slot,
    fresh_slot,
)

if TYPE_CHECKING:
    from cutcheck.model.protocol import Protocol


@unique
class ModelMutant(StrEnum):
    """The mutants that change the protocol of one channel, so the model (and its Z3 proofs) runs them too.

    Each is a fault of the engine's catalogue (``reference.faults``), which takes its name from here:
    the model and the engine share one spelling, and a test checks that both know the same list.
    """

    NO_OUTPUT_STATE = "no-output-state"
    PROCESS_AFTER_BARRIER = "process-after-barrier"
    PARTIAL_INPUT_STATE = "partial-input-state"
    EARLY_CHECKPOINT_IN_RECOVERY = "early-checkpoint-in-recovery"


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
        if P.mutant == ModelMutant.PROCESS_AFTER_BARRIER:
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
    if P.mutant == ModelMutant.EARLY_CHECKPOINT_IN_RECOVERY:
        queued = o.drop(queued, s.rec_in)
    if P.mutant == ModelMutant.PARTIAL_INPUT_STATE and P.gate != 0:
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
