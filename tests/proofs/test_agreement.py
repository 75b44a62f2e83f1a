"""The checker the engine's traces are validated with (``model.trace.ChannelChecker``, on Python
values) and the Z3 encoding the proofs reason about (``proofs.z3ops.Z3Ops``) must judge random
traces alike: an event one refuses the other refuses too, for the same reason (the same first
failing clause of the same rule, or both before any rule, e.g. a checkpoint that has not started),
every CUT verdict at a completion is the same, and after every event the two states are equal,
field by field. This is what lets the proofs speak for the checker.

The Z3 side below takes nothing from the checker: it resolves each event into an action and its
parameters itself, keeps its own slots (opening one at a checkpoint's first snapshot, retiring one
when Z3 proves the retire rule enabled), and decides every guard and every comparison with the
solver. Records are numbered by the encoding itself: u's stream is ``Z3Ops``'s ``source``, pinned
to 0, 1, 2, ... as the checker numbers them, so a restore rewinds u and it re-emits the same
records (u replays deterministically, the assumption ``proofs.replay`` states). A question Z3
cannot decide either way is a failure, never a skip. (Z3 is a dependency of cutcheck, not an
optional one.)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields, replace
from typing import Any

import pytest
import z3
from hypothesis import given
from hypothesis import strategies as st

from cutcheck.model.invariants import cut_holds
from cutcheck.model.protocol import (
    ACTIONS,
    BY_EVENT,
    MODES,
    Action,
    ChannelState,
    Last,
    Params,
    Protocol,
    Slot,
    fresh_slot,
    initial_state,
)
from cutcheck.model.trace import ChannelChecker, Runs
from cutcheck.proofs.z3ops import SEQ, Z3Ops, as_list

BARRIER_WORDS = ("transmit_barrier", "priority_arrival", "barrier_processed", "timeout_switch")
NOT_ENABLED = " not enabled: requires "  # how the checker words a rule's refusal: "<Rule> not enabled: requires <clause>"


def z3_value(v: Any) -> Any:
    if isinstance(v, Runs):
        units = [z3.Unit(z3.IntVal(x)) for x in v]
        return z3.Empty(SEQ) if not units else units[0] if len(units) == 1 else z3.Concat(*units)
    if isinstance(v, bool):
        return z3.BoolVal(v)
    return z3.IntVal(v)


def paired_fields(zs: Any, ps: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Every field of the two states, as (its path, the Z3 term, the Python value)."""
    for f in fields(ps):
        pv, zv, name = getattr(ps, f.name), getattr(zs, f.name), f"{path}{f.name}"
        if f.name == "cp" and isinstance(ps, Slot | Last):
            continue  # identity only, no Z3 term: the slots' checkpoints are compared as lists
        if isinstance(pv, tuple):
            assert len(zv) == len(pv), f"{name}: Z3 has {len(zv)}, Python {len(pv)}"
            for k, (a, b) in enumerate(zip(zv, pv, strict=True)):
                yield from paired_fields(a, b, f"{name}[{k}].")
        elif isinstance(pv, Slot | Last):
            yield from paired_fields(zv, pv, f"{name}.")
        else:
            yield name, zv, pv


def python_refusal(chk: ChannelChecker, ev: tuple[Any, ...]) -> tuple[str, str] | None:
    """The checker's verdict on an event: None (enabled), ("rule", failing clause) or ("resolve", reason)."""
    reason = chk.enabled(ev)
    if reason is None:
        return None
    return ("rule", reason.split(NOT_ENABLED, 1)[1]) if NOT_ENABLED in reason else ("resolve", reason)


class Z3Channel:
    """One channel executed on Z3 terms, with its own event resolution and slot bookkeeping."""

    def __init__(self, protocol: Protocol, records: int) -> None:
        self.protocol = protocol
        source = z3.Const("source", SEQ)  # u's stream: fresh(sent, n) is the n records after ``sent`` in it
        self.o = Z3Ops("agree", source=source)
        self.state: ChannelState = initial_state(self.o)
        self.finished: set[Any] = set()  # checkpoints retired or aborted on this channel
        self.solver = z3.Solver()
        self.solver.set("timeout", 30000)
        self.told = 0  # how many of the encoding's side conditions the solver has been given
        # ``records`` bounds what u can have sent (the trace's emit counts summed), so every record
        # the trace can emit is a number here, as in the checker's numbering.
        self.solver.add(z3.PrefixOf(z3_value(Runs(((0, records),))), source))

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

    def value(self, term: Any) -> Any:
        """A determined term's value, readable (for failure messages)."""
        assert self.solver.check() == z3.sat
        model = self.solver.model()
        return as_list(model, term) if term.sort() == SEQ else model.eval(term, model_completion=True)

    def resolve(self, ev: tuple[Any, ...]) -> tuple[Action | None, Params, ChannelState] | str:
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

    def refusal(self, ev: tuple[Any, ...]) -> tuple[str, str] | None:
        """None if the event is enabled, else ("rule", its first clause Z3 proves false) or ("resolve", why)."""
        resolved = self.resolve(ev)
        if isinstance(resolved, str):
            return "resolve", resolved
        action, params, state = resolved
        if action is None:
            return None
        clauses = self.protocol.guard(action, self.o, state, params)
        if self.decide(z3.And(*[g for _, g in clauses], self.o.lit(True)), f"the guard of {ev}"):
            return None
        return "rule", next(name for name, g in clauses if not self.decide(g, f"clause {name!r} of {ev}"))

    def apply(self, ev: tuple[Any, ...]) -> None:
        resolved = self.resolve(ev)
        assert not isinstance(resolved, str)
        action, params, state = resolved
        if action is None:
            return
        self.state = self.protocol.effect(action, self.o, state, params)
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

    def differences(self, ps: ChannelState) -> list[str]:
        """The fields where this state and the checker's differ ([] if Z3 proves them all equal)."""
        pairs = list(paired_fields(self.state, ps))
        if self.decide(z3.And(*[zv == z3_value(pv) for _, zv, pv in pairs]), "the states' equality"):
            return []
        return [f"{name}: Z3 {self.value(zv)}, Python {pv!r}" for name, zv, pv in pairs
                if not self.decide(zv == z3_value(pv), name)]


def run_both(
    mode: str,
    mutant: str | None,
    events: list[tuple[Any, ...]],
    z3_protocol: Protocol | None = None,
    py_protocol: Protocol | None = None,
) -> None:
    """Run the events through both executions; the protocols default to the mode's (a test plants a
    break by giving one side another rule table)."""
    chk = ChannelChecker(mode, mutant, protocol=py_protocol)
    z = Z3Channel(z3_protocol or Protocol(mode, mutant), records=sum(ev[1] for ev in events if ev[0] == "emit"))
    for k, ev in enumerate(events):
        where = f"event {k} {ev} of {mode} trace {events}"
        py, zz = python_refusal(chk, ev), z.refusal(ev)
        # Refused before any rule: the reasons are worded apart, so only that both refuse there counts.
        assert (zz and zz[0]) == (py and py[0]) and (py is None or py[0] == "resolve" or zz == py), (
            f"{where}: Python {py}, Z3 {zz}")
        if py is not None:
            continue
        cut_failures = sum(f.kind == "cut" for f in chk.failures)
        assert chk.feed(ev), where
        z.apply(ev)
        if ev[0] == "complete":
            py_cut = sum(f.kind == "cut" for f in chk.failures) == cut_failures
            assert z.cut_holds() == py_cut, f"CUT at {where}: Python {py_cut}"
        assert [sl.cp for sl in z.state.slots] == [sl.cp for sl in chk.state.slots], f"slots after {where}"
        assert not (diff := z.differences(chk.state)), f"states differ after {where}: " + "; ".join(diff)


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


# u emits after the cut point, restores, and emits again: the records re-emitted are the same ones
# (the ci profile found this once the driver numbered records by a counter that a restore did not rewind).
RESTORE_THEN_EMIT = [("snapshot_up", 1, "unaligned"), ("priority_arrival", 1), ("snapshot_down", 1),
                     ("complete", 1), ("emit", 1), ("restore", 1), ("emit", 1)]


@pytest.mark.parametrize("mode", ["unaligned", "aligned_timeout"])
def test_a_restore_rewinds_u_on_both_sides(mode: str) -> None:
    run_both(mode, None, [("emit", 2), *RESTORE_THEN_EMIT, ("transmit", 3), ("process", 1)])


def planted(mode: str, rule: str, **change: Any) -> Protocol:
    """The mode's protocol with one rule's guard or effect replaced."""
    return Protocol(mode, actions=tuple(replace(a, **change) if a.name == rule else a for a in ACTIONS))


def test_a_guard_changed_on_the_z3_side_only_is_caught() -> None:
    def restore_any(P: Protocol, o: Any, s: ChannelState, p: Params) -> list[tuple[str, Any]]:
        return [("a checkpoint has completed", s.last.valid)]  # forgets "it is the latest completed checkpoint"

    trace = [*RESTORE_THEN_EMIT[:4], ("restore", 2)]
    with pytest.raises(AssertionError, match=r"event 4 \('restore', 2\).*Python \('rule', 'it is the latest"):
        run_both("unaligned", None, trace, z3_protocol=planted("unaligned", "RestoreFromLatest", guard=restore_any))


def test_an_effect_changed_on_the_python_side_only_is_caught() -> None:
    real = BY_EVENT["transmit"].effect

    def transmit_unrecorded(P: Protocol, o: Any, s: ChannelState, p: Params) -> ChannelState:
        moved = real(P, o, s, p)  # records in flight after d's snapshot are no longer input state
        return replace(moved, slots=tuple(replace(a, istate=b.istate) for a, b in zip(moved.slots, s.slots, strict=True)))

    trace = [("emit", 2), ("snapshot_down", 1), ("transmit", 1)]
    with pytest.raises(AssertionError, match=r"states differ after event 2 .*slots\[0\]\.istate: Z3 \[0\], Python \[\]"):
        run_both("unaligned", None, trace, py_protocol=planted("unaligned", "SendBuffer", effect=transmit_unrecorded))


def test_a_rule_refused_for_another_clause_is_caught() -> None:
    def restore_reordered(P: Protocol, o: Any, s: ChannelState, p: Params) -> list[tuple[str, Any]]:
        return list(reversed(BY_EVENT["restore"].guard(P, o, s, p)))

    # Both refuse a restore before any completion, but Z3's rule names another clause first.
    with pytest.raises(AssertionError, match=r"event 0 \('restore', 1\).*Z3 \('rule', 'it is the latest"):
        run_both("aligned", None, [("restore", 1)], z3_protocol=planted("aligned", "RestoreFromLatest",
                                                                         guard=restore_reordered))
