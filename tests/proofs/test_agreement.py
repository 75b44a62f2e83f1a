"""The checker the engine's traces are validated with (``model.trace.ChannelChecker``, on Python
values) and the Z3 encoding the proofs reason about (``proofs.z3ops.Z3Ops``) must judge random
traces alike: every event enabled in one is enabled in the other, every CUT verdict at a completion
is the same, and the final channel states are equal. This is what lets the proofs speak for the
checker.

The Z3 side below takes nothing from the checker: it resolves each event into an action and its
parameters itself, keeps its own slots (opening one at a checkpoint's first snapshot, retiring one
when Z3 proves the retire rule enabled), numbers emitted records itself, and decides every guard
with the solver. A guard Z3 cannot decide either way is a failure, never a skip; every event is
compared, unknown and refused ones included. (Z3 is a dependency of cutcheck, not an optional one.)
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest
import z3
from hypothesis import given
from hypothesis import strategies as st

from cutcheck.model.invariants import cut_holds
from cutcheck.model.protocol import (
    BY_EVENT,
    MODES,
    ChannelState,
    Last,
    Params,
    Protocol,
    Slot,
    fresh_slot,
    initial_state,
)
from cutcheck.model.trace import ChannelChecker, Runs
from cutcheck.proofs.z3ops import SEQ, Z3Ops

BARRIER_WORDS = ("transmit_barrier", "priority_arrival", "barrier_processed", "timeout_switch")


def z3_value(v: Any) -> Any:
    if isinstance(v, Runs):
        units = [z3.Unit(z3.IntVal(x)) for x in v]
        return z3.Empty(SEQ) if not units else units[0] if len(units) == 1 else z3.Concat(*units)
    if isinstance(v, bool):
        return z3.BoolVal(v)
    return z3.IntVal(v)


def equalities(zs: Any, ps: Any) -> list[Any]:
    out = []
    for f in fields(ps):
        pv, zv = getattr(ps, f.name), getattr(zs, f.name)
        if f.name == "cp" and isinstance(ps, Slot | Last):
            continue  # identity only
        if isinstance(pv, tuple):
            out += [e for a, b in zip(zv, pv, strict=True) for e in equalities(a, b)]
        elif isinstance(pv, Slot | Last):
            out += equalities(zv, pv)
        else:
            out.append(zv == z3_value(pv))
    return out


class Z3Channel:
    """One channel executed on Z3 terms, with its own event resolution and slot bookkeeping."""

    def __init__(self, protocol: Protocol) -> None:
        self.protocol = protocol
        self.o = Z3Ops("agree")
        self.state: ChannelState = initial_state(self.o)
        self.finished: set[Any] = set()  # checkpoints retired or aborted on this channel
        self.emitted = 0  # records numbered 0, 1, 2, ... in emission order
        self.solver = z3.Solver()
        self.solver.set("timeout", 30000)
        self.told = 0  # how many of the encoding's side conditions the solver has been given

    def decide(self, formula: Any, what: str) -> bool:
        """Whether the formula holds in the current (fully determined) state; failing if Z3 cannot tell."""
        self.solver.add(*self.o.side[self.told:])
        self.told = len(self.o.side)
        answers = []
        for claim in (z3.Not(formula), formula):
            self.solver.push()
            self.solver.add(claim)
            answers.append(self.solver.check())
            self.solver.pop()
        if answers[0] == z3.unsat and answers[1] == z3.sat:
            return True
        if answers[1] == z3.unsat and answers[0] == z3.sat:
            return False
        raise AssertionError(f"Z3 cannot decide {what}: {answers}")

    def resolve(self, ev: tuple[Any, ...]) -> tuple[Any, Params, ChannelState] | str:
        """The action, its parameters and the state it applies to; ``None`` as action for an ignored
        event; a string when the event names nothing the channel can do."""
        word = ev[0]
        if word not in BY_EVENT:
            return f"unknown event {word}"
        action = self.protocol.action(word)
        if word in ("emit", "transmit", "process"):
            return action, Params(n=z3.IntVal(ev[1])), self.state
        if word == "restore":
            return action, Params(cp=ev[1]), self.state
        cps = [sl.cp for sl in self.state.slots]
        state = self.state
        if ev[1] not in cps:
            if ev[1] in self.finished:
                return (None, Params(), state) if word in BARRIER_WORDS else f"checkpoint {ev[1]} is over"
            if word not in ("snapshot_up", "snapshot_down"):
                return f"checkpoint {ev[1]} has not started"
            state = replace(state, slots=state.slots + (fresh_slot(self.o, ev[1]),))
            cps.append(ev[1])
        unal = z3.BoolVal(word == "snapshot_up" and ev[2] == "unaligned")
        return action, Params(i=cps.index(ev[1]), unal=unal, cp=ev[1]), state

    def enabled(self, ev: tuple[Any, ...]) -> bool:
        resolved = self.resolve(ev)
        if isinstance(resolved, str):
            return False
        action, params, state = resolved
        if action is None:
            return True
        guard = z3.And(*[g for _, g in self.protocol.guard(action, self.o, state, params)], self.o.lit(True))
        return self.decide(guard, f"the guard of {ev}")

    def apply(self, ev: tuple[Any, ...]) -> None:
        resolved = self.resolve(ev)
        assert not isinstance(resolved, str)
        action, params, state = resolved
        if action is None:
            return
        before = len(self.o.blocks)
        self.state = self.protocol.effect(action, self.o, state, params)
        for blk in self.o.blocks[before:]:  # pin each new block to the next record numbers
            n = ev[1]
            self.o.side.append(blk == z3_value(Runs(((self.emitted, self.emitted + n),))))
            self.emitted += n
        retire = next(a for a in self.protocol.actions if a.event is None)
        keep = []
        for i, sl in enumerate(self.state.slots):
            done = z3.And(*[g for _, g in self.protocol.guard(retire, self.o, self.state, Params(i=i))], self.o.lit(True))
            if self.decide(done, f"retiring checkpoint {sl.cp}") or not self.decide(z3.Or(sl.up, sl.down), "a slot's sides"):
                self.finished.add(sl.cp)
            else:
                keep.append(sl)
        self.state = replace(self.state, slots=tuple(keep))

    def cut_holds(self) -> bool:
        lc = self.state.last
        return self.decide(cut_holds(lc.pre, lc.istate, lc.ostate, lc.sent, ops=self.o), "CUT")


def run_both(mode: str, mutant: str | None, events: list[tuple[Any, ...]]) -> None:
    chk = ChannelChecker(mode, mutant)
    z = Z3Channel(Protocol(mode, mutant))
    for k, ev in enumerate(events):
        py_enabled = chk.enabled(ev) is None
        assert z.enabled(ev) == py_enabled, f"event {k} {ev} of {events}: checker says {chk.enabled(ev)!r}"
        if not py_enabled:
            continue
        cut_failures = sum(f.kind == "cut" for f in chk.failures)
        chk.feed(ev)
        z.apply(ev)
        if ev[0] == "complete":
            py_cut = sum(f.kind == "cut" for f in chk.failures) == cut_failures
            assert z.cut_holds() == py_cut, f"CUT at event {k} {ev} of {events}"
        assert [sl.cp for sl in z.state.slots] == [sl.cp for sl in chk.state.slots], f"slots after event {k} of {events}"
    assert z.decide(z3.And(*equalities(z.state, chk.state)), "the final states' equality"), events


WORDS = ("emit", "transmit", "process", "transmit_barrier", "priority_arrival", "barrier_processed",
         "snapshot_down", "timeout_switch", "complete", "abort", "restore")


@st.composite
def traces(draw: Any, mode: str, mutant: str | None) -> list[tuple[Any, ...]]:
    """Mostly enabled events (to get deep), sometimes any event (to compare rejections too)."""
    chk, events = ChannelChecker(mode, mutant), []
    for _ in range(draw(st.integers(1, 25))):
        if draw(st.integers(0, 4)) == 0:
            word = draw(st.sampled_from((*WORDS, "snapshot_up")))
            arg = draw(st.integers(1, 3))
            ev = (word, arg, draw(st.sampled_from(("aligned", "unaligned")))) if word == "snapshot_up" else (word, arg)
        else:
            options = chk.candidates(max_n=2)
            ev = options[draw(st.integers(0, len(options) - 1))]
        events.append(ev)
        chk.feed(ev) if chk.enabled(ev) is None else None
    return events


@pytest.mark.parametrize("mode", MODES)
@given(data=st.data())
def test_python_and_z3_execute_the_same_rules(mode: str, data: Any) -> None:
    run_both(mode, None, data.draw(traces(mode, None)))


@pytest.mark.parametrize("mutant", ["no-output-state", "process-after-barrier", "early-checkpoint-in-recovery"])
@given(data=st.data())
def test_python_and_z3_agree_on_mutants(mutant: str, data: Any) -> None:
    run_both("unaligned", mutant, data.draw(traces("unaligned", mutant)))
