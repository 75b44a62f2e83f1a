"""CUT for one channel: an inductive invariant over Z3 sequences, for every channel length.

The transition system is ``model.protocol``'s rule table run on ``Z3Ops``. The invariant
(:func:`invariant`) is a conjunction of shared conjuncts and one block per checkpoint slot
(:func:`slot_invariant`); it is proved by induction (initiation, a checkpoint slot opened in any
state, and consecution for every action on every slot) and implies CUT for every completed
checkpoint and for the latest completed one. ``check_induction(protocol, nslots)`` runs it with one
slot (``cut-*``) or two concurrent ones (``proofs.concurrent``). Negative controls run the same
table with a mutant: induction must fail, and a bounded search (``proofs.search``, restores
included) finds a concrete trace, replayed through ``model.trace`` and confirmed as a Z3 path.
"""

from __future__ import annotations

import itertools
from typing import Any

import z3

from cutcheck.model.invariants import cut_holds
from cutcheck.model.protocol import (
    AT_D,
    INQ,
    NONE,
    OUT,
    PRIO,
    SLOT_EVENTS,
    Action,
    ChannelState,
    ModelMutant,
    Params,
    Protocol,
    Slot,
    fresh_slot,
)
from cutcheck.proofs.registry import ProofResult, register
from cutcheck.proofs.search import find_trace, render, z3_confirms
from cutcheck.proofs.z3ops import Z3Ops, start_state, symbolic_params, symbolic_state

Named = list[tuple[str, Any]]
Split = list[tuple[Any, tuple[Any, ...]]]  # variables to case-split on, with their values


def slot_invariant(o: Z3Ops, s: ChannelState, sl: Slot) -> Named:
    done, inq, out, sent = s.done, s.inq, s.out, s.sent
    loc, P, IS, OS, SS = sl.loc, sl.pre, sl.istate, sl.ostate, sl.sent_snap
    e = o.empty()
    at = {k: loc == k for k in (NONE, OUT, PRIO, INQ, AT_D)}
    reached = o.or_(at[INQ], at[AT_D])
    only_up = o.and_(sl.up, o.not_(sl.down))
    return [
        ("barrier location is valid", o.and_(loc >= NONE, loc <= AT_D)),
        ("a barrier exists iff u snapshotted", sl.up == (loc != NONE)),
        (
            "in-order barrier in u's queue: within it, no output state",
            o.implies(at[OUT], o.and_(sl.bout >= 0, sl.bout <= o.length(out), o.not_(sl.unal), e == OS)),
        ),
        (
            "barrier at d: within d's queue",
            o.implies(reached, o.and_(sl.bpos >= 0, sl.bpos <= o.length(inq))),
        ),
        (
            "in-order barrier in d's queue: no output state",
            o.implies(at[INQ], o.and_(e == OS, o.not_(sl.unal))),
        ),
        (
            "priority barrier: output state is a prefix of u's queue",
            o.implies(at[PRIO], o.and_(sl.unal, o.take(out, o.length(OS)) == OS)),
        ),
        (
            "d records exactly between its snapshot and the barrier's arrival",
            sl.recording == o.and_(sl.down, o.not_(reached)),
        ),
        (
            "u alone snapshotted, barrier in u's queue",
            o.implies(o.and_(only_up, at[OUT]), o.concat(done, inq, o.take(out, sl.bout)) == SS),
        ),
        (
            "u alone snapshotted, priority barrier pending",
            o.implies(o.and_(only_up, at[PRIO]), o.concat(done, inq, OS) == SS),
        ),
        (
            "u alone snapshotted, barrier in d's queue",
            o.implies(o.and_(only_up, at[INQ]), o.concat(done, o.take(inq, sl.bpos)) == SS),
        ),
        (
            "u alone snapshotted, barrier taken by d",
            o.implies(o.and_(only_up, at[AT_D]), o.concat(done, o.take(inq, sl.bpos), OS) == SS),
        ),
        (
            "d alone snapshotted: recording keeps the channel whole",
            o.implies(o.and_(sl.down, o.not_(sl.up)), o.concat(P, IS, out) == sent),
        ),
        (
            "both snapshotted, barrier still in u's queue",
            o.implies(o.and_(sl.up, sl.down, at[OUT]), o.concat(P, IS, o.take(out, sl.bout)) == SS),
        ),
        (
            "both snapshotted otherwise: CUT",
            o.implies(o.and_(sl.up, sl.down, o.not_(at[OUT])), cut_holds(P, IS, OS, SS, ops=o)),
        ),
        (
            "completed only after both snapshots and the barrier's arrival",
            o.implies(sl.completed, o.and_(sl.up, sl.down, reached)),
        ),
    ]


def shared_invariant(o: Z3Ops, s: ChannelState) -> Named:
    lc = s.last
    return [
        (
            "channel conserves records: done + input queue + output queue = sent",
            o.concat(s.done, s.inq, s.out) == s.sent,
        ),
        (
            "the latest completed checkpoint satisfies CUT",
            o.implies(lc.valid, cut_holds(lc.pre, lc.istate, lc.ostate, lc.sent, ops=o)),
        ),
    ]


def invariant(o: Z3Ops, s: ChannelState) -> Named:
    out = shared_invariant(o, s)
    for sl in s.slots:
        out += slot_invariant(o, s, sl)
    return out


def cut_property(o: Z3Ops, s: ChannelState) -> Any:
    """What the invariant must imply: CUT for every completed checkpoint and for the latest one."""
    lc = s.last
    conj = [o.implies(lc.valid, cut_holds(lc.pre, lc.istate, lc.ostate, lc.sent, ops=o))]
    conj += [
        o.implies(sl.completed, cut_holds(sl.pre, sl.istate, sl.ostate, sl.sent_snap, ops=o))
        for sl in s.slots
    ]
    return o.and_(*conj)


def slot_split(sl: Slot, unal: Any = None) -> Split:
    """Split on the barrier's location, the two snapshots and (for a snapshot) the barrier kind."""
    split: Split = [(sl.loc, tuple(z3.IntVal(v) for v in (NONE, OUT, PRIO, INQ, AT_D)))]
    split += [(v, (z3.BoolVal(False), z3.BoolVal(True))) for v in (sl.up, sl.down)]
    return split + ([(unal, (z3.BoolVal(False), z3.BoolVal(True)))] if unal is not None else [])


def is_slot_action(action: Action) -> bool:
    """A rule on one checkpoint (it reads ``Params.i``), as opposed to one that moves data."""
    return action.event is None or action.event in SLOT_EVENTS


def check_induction(protocol: Protocol, nslots: int = 1) -> tuple[str, str | None]:
    """Initiation, consecution for every action on every slot, and invariant ⇒ CUT, with ``nslots``
    checkpoint slots. Returns (status, why-not): status "counterexample" only when Z3 found a
    state satisfying the invariant that a step breaks (a counterexample to induction), "unknown"
    when the solver gave up."""
    o = Z3Ops("i")
    init = start_state(o)
    r = _check(o, [], z3.And(*[f for _, f in invariant(o, init)]))
    if r != z3.unsat:
        return _fail(r, "initiation fails", "initiation")
    o = Z3Ops("c")
    s = symbolic_state(o, "s", nslots)
    shared = [f for _, f in shared_invariant(o, s)]
    per_slot = [[f for _, f in slot_invariant(o, s, sl)] for sl in s.slots]
    # A checkpoint opens a fresh slot in whatever state the channel is in.
    fresh = fresh_slot(o, z3.IntVal(nslots))
    r = _check(o, shared, z3.And(*[f for _, f in slot_invariant(o, s, fresh)]))
    if r != z3.unsat:
        return _fail(r, "a new checkpoint's slot breaks the invariant", "opening a slot")
    r = _check(o, shared + sum(per_slot, []), cut_property(o, s))
    if r != z3.unsat:
        return _fail(r, "the invariant does not imply CUT", "invariant => CUT")
    for action in protocol.actions:
        for i in range(nslots) if is_slot_action(action) else [0]:
            p = symbolic_params("p")
            p = Params(n=p.n, i=i, unal=p.unal, cp=p.cp)
            guard = [(slots_of(g), g) for _, g in protocol.guard(action, o, s, p)]
            nxt = protocol.effect(action, o, s, p)
            goals = [(None, name, f) for name, f in shared_invariant(o, nxt)]
            goals += [(k, name, f) for k, sl in enumerate(nxt.slots) for name, f in slot_invariant(o, nxt, sl)]
            for k, name, goal in goals:
                # Only what the step and the goal involve: the slot acted on (a slot action) and the
                # goal's slot, with the guard's clauses about them. Dropping hypotheses is sound,
                # and it keeps the sequence solver on queries the size of the one-slot ones.
                mine = {i, k if k is not None else i} if is_slot_action(action) else {0 if k is None else k}
                hyps = shared + [f for j in sorted(mine) for f in per_slot[j]]
                if any(z3.eq(goal, h) for h in hyps):
                    continue  # the step left this conjunct as it was (a step on another slot)
                hyps += [g for used, g in guard if used <= mine]
                r = _check(o, hyps, goal, slot_split(s.slots[k if k is not None else i], p.unal))
                where = f"{action.name}" + (f" on slot {i}" if nslots > 1 and is_slot_action(action) else "")
                if r == z3.sat:
                    slot = f" of slot {k}" if nslots > 1 and k is not None else ""
                    return "counterexample", f"{where} breaks '{name}'{slot}"
                if r != z3.unsat:
                    return "unknown", f"{where} / '{name}': solver gave {r}"
    return "proved", None


def slots_of(f: Any) -> set[int]:
    """The checkpoint slots whose state variables ``f`` mentions (``symbolic_state`` names them
    ``s.slot<k>.<field>``)."""
    out: set[int] = set()
    todo, seen = [f], set()
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            name = str(e)
            if name.startswith("s.slot"):
                out.add(int(name[len("s.slot") :].split(".", 1)[0]))
        todo.extend(e.children())
    return out


def _fail(r: z3.CheckSatResult, sat_reason: str, what: str) -> tuple[str, str]:
    # An invariant that fails initiation or does not imply CUT is a wrong invariant, not a
    # counterexample to CUT: "unknown" either way, but the reason says which it is.
    return "unknown", sat_reason if r == z3.sat else f"{what}: solver gave {r}"


def _check(
    o: Z3Ops, hyps: list[Any], goal: Any, split: Split | None = None, timeout_ms: int = 10000, fast_ms: int = 1000
) -> z3.CheckSatResult:
    """Is ``hyps ⇒ goal`` valid (unsat), refuted (sat) or unknown?

    Z3 does not case-split on the control state by itself, and every split definition is a word
    equation the sequence solver must carry; so when the whole query is unknown, split on
    ``split``'s variables, substitute them everywhere (in the query *and* in the definitions it
    needs, so that a case is exactly the query with those values), simplify, and keep only the
    definitions the surviving formulas need. Valid iff every case is; a sat case is a model of the
    whole query."""
    base = [*hyps, z3.Not(goal)]
    r = _solve(base + o.cone(base), fast_ms) if fast_ms > 0 else z3.unknown
    if r != z3.unknown or not split:
        return r
    for values in itertools.product(*[vals for _, vals in split]):
        sub = [(v, val) for (v, _), val in zip(split, values, strict=True)]
        case = _substituted(base, sub)
        if case is None:
            continue
        defs = _substituted(o.cone(case), sub)
        if defs is None:
            continue
        r = _solve(case + defs, timeout_ms)
        if r != z3.unsat:
            return r
    return z3.unsat


def _substituted(fs: list[Any], sub: list[tuple[Any, Any]]) -> list[Any] | None:
    """The formulas with ``sub`` applied and simplified, trivially true ones dropped; None if one is false."""
    out = []
    for f in fs:
        g = z3.simplify(z3.substitute(f, *sub))
        if z3.is_false(g):
            return None
        if not z3.is_true(g):
            out.append(g)
    return out


def _solve(assertions: list[Any], timeout_ms: int) -> z3.CheckSatResult:
    # The sequence solver's search is seed-sensitive (the same query takes 10 ms or times out), so
    # an unknown is retried with other seeds and growing shares of the budget (a portfolio).
    r = z3.unknown
    for seed, share in enumerate((0.1, 0.1, 0.2, 0.25, 0.35)):
        sol = z3.Solver()
        sol.set("timeout", max(100, int(timeout_ms * share)))
        sol.set("random_seed", seed)
        sol.add(*assertions)
        r = sol.check()
        if r != z3.unknown:
            return r
    return r


def cut_result(
    mode: str,
    mutant: str | None = None,
    gate: int = 0,
    depth: int = 10,
    nslots: int = 1,
    protocol: Protocol | None = None,
) -> ProofResult:
    """Induction with ``nslots`` slots; if it fails, the bounded search for a concrete trace."""
    protocol = protocol or Protocol(mode, mutant, gate)
    status, why = check_induction(protocol, nslots)
    if status == "proved":
        slots = "one checkpoint in flight" if nslots == 1 else f"{nslots} concurrent checkpoints"
        return ProofResult("", "proved", f"unbounded ({slots})", 0.0)
    events = find_trace(protocol, depth, restore=True, concurrent=nslots)
    if events is None:
        return ProofResult(
            "", "unknown", f"search depth {depth}", 0.0, f"induction: {why}; no trace up to depth {depth}", method="search"
        )
    confirmed = z3_confirms(protocol, events)
    trace = render(events, protocol) + ("" if confirmed else "\n(Z3 does not confirm this path: encoding mismatch)")
    return ProofResult(
        "",
        "counterexample" if confirmed else "unknown",
        f"search <= {depth} events (trace of {len(events)})",
        0.0,
        f"induction: {why}\n{trace}",
        method="search",
    )


@register("cut-aligned")
def cut_aligned() -> ProofResult:
    """Aligned barriers: CUT holds for every completed checkpoint, any channel length (induction)."""
    return cut_result("aligned")


@register("cut-unaligned")
def cut_unaligned() -> ProofResult:
    """Unaligned barriers (and forced-aligned edges in an unaligned job): CUT by induction."""
    return cut_result("unaligned")


@register("cut-timeout")
def cut_timeout() -> ProofResult:
    """Aligned with timeout: barriers switch to priority in u's or d's queue; CUT by induction."""
    return cut_result("aligned_timeout")


@register("cut-unaligned[no-output-state]", expected="counterexample")
def cut_no_output_state() -> ProofResult:
    """Negative control: the barrier overtakes output buffers without persisting them."""
    return cut_result("unaligned", ModelMutant.NO_OUTPUT_STATE)


@register("cut-unaligned[process-after-barrier]", expected="counterexample")
def cut_process_after_barrier() -> ProofResult:
    """Negative control: a record behind the priority barrier is applied before d's snapshot."""
    return cut_result("unaligned", ModelMutant.PROCESS_AFTER_BARRIER)


@register("cut-unaligned[partial-input-state]", expected="counterexample")
def cut_partial_input_state() -> ProofResult:
    """Negative control: d captures input state only for its first gate; this channel is on gate 1."""
    return cut_result("unaligned", ModelMutant.PARTIAL_INPUT_STATE, gate=1)


@register("cut-unaligned[early-checkpoint-in-recovery]", expected="counterexample")
def cut_early_checkpoint_in_recovery() -> ProofResult:
    """Negative control for recovery: after a restore, a checkpoint taken while recovered records
    are still queued leaves them out of its channel state (the search must go through a restore)."""
    return cut_result("unaligned", ModelMutant.EARLY_CHECKPOINT_IN_RECOVERY, depth=12)


@register("cut[at_least_once]", expected="counterexample")
def cut_at_least_once() -> ProofResult:
    """Negative control: barrier tracking never blocks, so post-barrier records precede d's snapshot."""
    return cut_result("at_least_once")
