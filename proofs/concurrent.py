"""Several checkpoints on one channel: CUT by induction with two concurrent checkpoint slots, and
the frame check that makes two slots stand for any number.

Flink allows several aligned checkpoints in flight (``max_concurrent``; the fuzz runs up to 3);
the concrete checker keeps one slot per checkpoint on the channel. ``proofs.cut``'s induction is
run on a state with two symbolic slots (``check_induction(protocol, 2)``): every action, on either
slot, must keep the shared conjuncts and both slots' conjuncts, and a slot opened in any state
satisfies its block. The invariant is a conjunction of shared conjuncts and one block per slot,
each mentioning one slot, so with N slots the consecution of slot k's block under a step on slot
i involves slots i and k only, provided no rule reads a third slot. :func:`frame_check` verifies
that on three slots (every effect on slot k and on the shared state depends on the shared state,
slot k and the slot acted on, through the definitions of its splits too), so the two-slot proof
holds for any number of concurrent checkpoints. The rules are written uniformly over slots (each
reads ``s.slots[p.i]`` or maps over ``s.slots``), so two slots stand for any pair.

Negative control: a ``CheckpointCompletes`` that records the oldest slot as the latest completed
checkpoint instead of the one that completed. With one slot it is the same rule (the one-slot
proof cannot tell); with two, induction fails and the search finds a trace with two checkpoints.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import z3

from cutcheck.model.protocol import ACTIONS, Action, ChannelState, Last, Params, Protocol, Slot, do_complete
from cutcheck.proofs.cut import cut_result, is_slot_action, slots_of
from cutcheck.proofs.registry import ProofResult, register
from cutcheck.proofs.z3ops import Z3Ops, symbolic_params, symbolic_state

FRAME_SLOTS = 3


def _terms(x: Any) -> list[Any]:
    if isinstance(x, Slot | Last):
        return [t for f in fields(x) if f.name != "cp" for t in _terms(getattr(x, f.name))]
    return [x] if z3.is_expr(x) else []


def frame_check(protocol: Protocol, nslots: int = FRAME_SLOTS) -> str | None:
    """None if every rule's effect on slot k and on the shared state reads only the shared state,
    slot k and the slot acted on; else which rule reads what."""
    s = symbolic_state(Z3Ops("frame"), "s", nslots)
    for action in protocol.actions:
        for i in range(nslots) if is_slot_action(action) else [None]:
            o = Z3Ops(f"frame{action.name}")
            p = symbolic_params("p")
            nxt = protocol.effect(action, o, s, Params(n=p.n, i=i or 0, unal=p.unal, cp=p.cp))
            acted = set() if i is None else {i}
            parts: list[tuple[str, list[Any], set[int]]] = [
                (f.name, _terms(getattr(nxt, f.name)), acted) for f in fields(ChannelState) if f.name != "slots"
            ]
            parts += [(f"slot {k}", _terms(sl), acted | {k}) for k, sl in enumerate(nxt.slots)]
            for what, terms, allowed in parts:
                if any(not slots_of(t) <= allowed for t in terms + o.cone(terms)):
                    on = "" if i is None else f" on slot {i}"
                    return f"{action.name}{on}: its effect on {what} reads another slot"
    return None


def concurrent_result(protocol: Protocol, depth: int = 10) -> ProofResult:
    """Two-slot induction, then the frame check; a failure is searched for with two checkpoints."""
    r = cut_result(protocol.mode, nslots=2, depth=depth, protocol=protocol)
    if r.status != "proved":
        return r
    why = frame_check(protocol)
    if why is not None:
        return ProofResult("", "unknown", "2 slots; frame check fails", 0.0, why)
    return replace(r, bound="unbounded, any number of concurrent checkpoints (2 slots + frame check on 3)")


def complete_records_oldest(P: Protocol, o: Any, s: ChannelState, p: Params) -> ChannelState:
    """The mutant: the latest completed checkpoint is taken from the oldest slot, not slot i."""
    first = s.slots[0]
    nxt = do_complete(P, o, s, p)
    return replace(nxt, last=Last(first.cp, o.lit(True), first.sent_snap, first.pre, first.istate, first.ostate))


def with_effect(name: str, effect: Any, actions: tuple[Action, ...] = ACTIONS) -> tuple[Action, ...]:
    """The rule table with one rule's effect replaced (a mutant built in the proofs, not the model)."""
    return tuple(replace(a, effect=effect) if a.name == name else a for a in actions)


@register("cut-aligned-concurrent")
def cut_aligned_concurrent() -> ProofResult:
    """Aligned, several checkpoints in flight on a channel: CUT for each, by induction on two slots
    plus a frame check (no rule reads a third slot), hence for any number."""
    return concurrent_result(Protocol("aligned"))


@register("cut-aligned-concurrent[complete-records-oldest]", expected="counterexample")
def cut_concurrent_oldest() -> ProofResult:
    """Negative control: completing checkpoint n records the oldest pending one as the latest."""
    actions = with_effect("CheckpointCompletes", complete_records_oldest)
    return concurrent_result(Protocol("aligned", actions=actions))
