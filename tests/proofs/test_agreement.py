"""One rule table, two executions: random traces run through ``model.protocol`` on Python values
(``model.trace``) and on Z3 terms (``proofs.z3ops``) must agree on every guard and on the final
state. This is what lets the proofs speak for the checker the engine is validated with."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest
import z3
from hypothesis import given
from hypothesis import strategies as st

from cutcheck.model.protocol import MODES, ChannelState, Last, Params, Slot, fresh_slot, initial_state
from cutcheck.model.trace import ChannelChecker, Runs
from cutcheck.proofs.z3ops import SEQ, Z3Ops


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


def run_both(mode: str, mutant: str | None, events: list[tuple[Any, ...]]) -> None:
    chk = ChannelChecker(mode, mutant)
    o = Z3Ops("agree")
    zs: ChannelState = initial_state(o)
    facts: list[Any] = []  # fresh blocks pinned to the Python numbering
    claims: list[Any] = []  # each Python verdict, as Z3 must see it
    for ev in events:
        py_reason = chk.enabled(ev)
        cps_before = [sl.cp for sl in chk.state.slots]
        try:
            action, params, pstate = chk._resolve(ev)
        except Exception:
            continue  # malformed or unknown: no rule to compare
        if action is None:
            chk.feed(ev)
            continue
        for sl in pstate.slots[len(zs.slots):]:  # the checker opened a slot for a new checkpoint
            zs = replace(zs, slots=zs.slots + (fresh_slot(o, sl.cp),))
        zp = Params(n=z3.IntVal(params.n), i=params.i, unal=z3.BoolVal(params.unal), cp=params.cp)
        guard = z3.And(*[g for _, g in chk.protocol.guard(action, o, zs, zp)])
        claims.append(guard if py_reason is None else z3.Not(guard))
        if py_reason is not None:
            if [sl.cp for sl in pstate.slots] != cps_before:
                zs = replace(zs, slots=zs.slots[: len(cps_before)])
            continue
        zs = chk.protocol.effect(action, o, zs, zp)
        chk.feed(ev)
        if action.event == "emit":  # Z3's block is arbitrary: pin it to the records Python numbered
            facts.append(o.blocks[-1] == z3_value(Runs(((len(chk.state.sent) - params.n, len(chk.state.sent)),))))
        keep = {sl.cp for sl in chk.state.slots}
        zs = replace(zs, slots=tuple(sl for sl in zs.slots if sl.cp in keep))
    claims += equalities(zs, chk.state)
    sol = z3.Solver()
    sol.set("timeout", 30000)
    sol.add(*o.side, *facts, z3.Not(z3.And(*claims)))
    assert sol.check() == z3.unsat, events


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
