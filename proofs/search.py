"""Concrete counterexamples for the channel proofs: a bounded breadth-first search over the rule
table (``model.trace``'s checker), and its confirmation as a path of the Z3 encoding.

The search includes restores (a completed checkpoint, a failure, recovery from it, and a later
checkpoint taken while recovered records are still queued) and, with ``concurrent`` > 1, several
checkpoints in flight on the channel at once. It is bounded (``max_depth`` events, counts of 1);
it only ever turns a failed induction into a "counterexample", never a success into "proved".
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import z3

from cutcheck.model.invariants import cut_holds
from cutcheck.model.protocol import ChannelState, Params, Protocol, fresh_slot, initial_state
from cutcheck.model.trace import ChannelChecker
from cutcheck.proofs.z3ops import Z3Ops

Event = tuple[Any, ...]
COUNT_WORDS = ("emit", "transmit", "process")


def find_trace(
    protocol: Protocol, max_depth: int = 10, restore: bool = True, concurrent: int = 1, max_states: int = 400_000
) -> list[Event] | None:
    """The shortest event list (counts of 1, at most ``concurrent`` checkpoints in flight) that
    ends in a completed checkpoint violating CUT, or None up to ``max_depth`` events."""
    start = ChannelChecker(protocol.mode, protocol=protocol)
    frontier: list[tuple[ChannelChecker, list[Event]]] = [(start, [])]
    seen = {_key(start)}
    for _ in range(max_depth):
        nxt = []
        for chk, path in frontier:
            fresh = len(chk.state.slots) < concurrent
            for ev in chk.candidates(max_n=1, restore=restore, abort=False, new_checkpoint=fresh):
                c = chk.copy()
                c.feed(ev)
                if any(f.kind == "cut" for f in c.failures):
                    return path + [ev]
                k = _key(c)
                if k not in seen and len(seen) < max_states:
                    seen.add(k)
                    nxt.append((c, path + [ev]))
        frontier = nxt
    return None


def _key(chk: ChannelChecker) -> Any:
    # Checkpoint ids are names: two states that differ only in them behave alike. The next id
    # matters only through how many checkpoints have started, which the slots already bound.
    s = chk.state
    slots = tuple(replace(sl, cp=0) for sl in s.slots)
    return replace(s, slots=slots, last=replace(s.last, cp=0))


def z3_path(protocol: Protocol, events: list[Event]) -> tuple[Z3Ops, ChannelState, list[Any]]:
    """The events as a path of the Z3 encoding: the final state and every guard on the way.

    Z3's slots mirror the concrete checker's: a slot opens when a checkpoint first appears, and
    closes when the checker retires it (then ``RetireCheckpoint``'s guard is part of the path)."""
    chk = ChannelChecker(protocol.mode, protocol=protocol)
    retire = next(a for a in protocol.actions if a.event is None)
    o = Z3Ops("path")
    s: ChannelState = initial_state(o)
    cps: list[Any] = []  # the checkpoint of each Z3 slot, in the checker's order
    conds: list[Any] = []
    for ev in events:
        word = ev[0]
        action = protocol.action(word)
        if word in COUNT_WORDS:
            p = Params(n=z3.IntVal(ev[1]), cp=z3.IntVal(0))
        elif word == "restore":
            p = Params(cp=s.last.cp)
        else:
            if ev[1] not in cps:
                cps.append(ev[1])
                s = replace(s, slots=s.slots + (fresh_slot(o, z3.IntVal(len(cps))),))
            unal = z3.BoolVal(word == "snapshot_up" and ev[2] == "unaligned")
            p = Params(i=cps.index(ev[1]), unal=unal, cp=s.slots[cps.index(ev[1])].cp)
        conds += [g for _, g in protocol.guard(action, o, s, p)]
        s = protocol.effect(action, o, s, p)
        if not chk.feed(ev):
            conds.append(z3.BoolVal(False))  # the checker refused it: not a path
            break
        keep = [sl.cp for sl in chk.state.slots]
        for k in reversed(range(len(cps))):
            if cps[k] in keep:
                continue
            if word not in ("restore", "abort"):  # those clear the slot themselves; else it retired
                conds += [g for _, g in protocol.guard(retire, o, s, Params(i=k))]
            del cps[k]
            s = replace(s, slots=s.slots[:k] + s.slots[k + 1 :])
    return o, s, conds


def z3_confirms(protocol: Protocol, events: list[Event]) -> bool:
    """The trace is a path of the Z3 encoding: every guard holds and CUT fails at the end."""
    o, s, conds = z3_path(protocol, events)
    lc = s.last
    sol = z3.Solver()
    sol.set("timeout", 20000)
    sol.add(*conds, *o.side, lc.valid, z3.Not(cut_holds(lc.pre, lc.istate, lc.ostate, lc.sent, ops=o)))
    return sol.check() == z3.sat


def render(events: list[Event], protocol: Protocol) -> str:
    """The trace, one event a line, and what the concrete checker says about it."""
    chk = ChannelChecker(protocol.mode, protocol=protocol)
    for ev in events:
        if not chk.feed(ev):
            break
    verdict = chk.verdict()
    lines = [f"{k + 1:>2}. {' '.join(str(x) for x in ev)}" for k, ev in enumerate(events)]
    lines.append(
        f"=> {verdict.reason}" if verdict.failures else "=> (the concrete replay accepted it: encoding mismatch)"
    )
    return "\n".join(lines)
