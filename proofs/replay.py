"""replay-exactly-once: recovery from a completed checkpoint applies every record once, in order.

Two parts, both over Z3 sequences of any length.

1. An induction with ghost fields (:class:`Ghost`, carried beside the rule table's state and never
   read by a rule): ``post``, what u emitted after the latest completed checkpoint's cut point, and
   per slot what u emitted after that slot's snapshot. The invariant (:func:`ghost_invariant`):
   u's history is the latest cut point followed by ``post`` (and a snapshotted slot's cut point
   followed by its ghost), and u's history is a prefix of its source. It holds initially and is
   kept by every action of ``model.protocol`` on either of two slots, in the aligned, unaligned
   and timeout modes (the frame argument of ``proofs.concurrent`` applies: each conjunct mentions
   one slot). This proves what the proof used to assume: what u sent is its cut point followed by
   its post-snapshot output.

2. From any state satisfying that invariant and CUT for the latest completed checkpoint
   (``proofs.cut``, proved inductive): fail; run the protocol's ``RestoreFromLatest``; drain with
   the protocol's own effects (d processes its recovered input state, u re-sends its recovered
   output state, u emits as many records as ``post`` holds, d processes everything). Every guard
   holds, and d has applied exactly what u had sent before the failure, in order. Record values
   are arbitrary; sequence equality with distinct records means each record once.

Assumed: u replays deterministically. Its records are one fixed stream (``Z3Ops(source=…)``:
``fresh(sent, n)`` is the n records after ``sent`` in it), so what it emits after a restore equals
``post``; that is derived here, not assumed. The concrete model's ``PyOps.fresh`` is such a stream
(records numbered by position; tests/proofs checks it on random walks with restores). With an
arbitrary ``fresh`` the claim is false (a test shows the counterexample): it is an assumption about
u (deterministic operators and replayable sources), not a property of the channel protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from cutcheck.model.protocol import Action, ChannelState, Params, Protocol
from cutcheck.proofs.cut import _check, invariant, is_slot_action, slot_split
from cutcheck.proofs.registry import ProofResult, register
from cutcheck.proofs.z3ops import SEQ, Z3Ops, as_list, start_state, symbolic_params, symbolic_state

RestoreEffect = Callable[[Protocol, Z3Ops, ChannelState, Params], ChannelState]
DETERMINISTIC = (
    "u replays deterministically: from its cut point it emits the same records again (its output is "
    "one fixed stream, as the model's PyOps.fresh numbers records by position)",
)


GHOST_MODES = ("aligned", "unaligned", "aligned_timeout")


@dataclass(frozen=True, slots=True)
class Ghost:
    post: Any  # what u emitted after the latest completed checkpoint's cut point
    posts: tuple[Any, ...]  # per slot: what u emitted after that slot's snapshot


GhostStep = Callable[[Action, Z3Ops, ChannelState, Params, Ghost], Ghost]


def ghost_step(action: Action, o: Z3Ops, s: ChannelState, p: Params, g: Ghost) -> Ghost:
    """How an action moves the ghosts; called after its effect (``o.blocks[-1]`` is what u emitted)."""
    e = o.empty()
    name = action.name
    if name == "UpstreamEmits":
        blk = o.blocks[-1]
        return Ghost(o.concat(g.post, blk), tuple(o.concat(x, blk) for x in g.posts))
    if name == "RestoreFromLatest":  # u is back at the cut point; every slot is cleared
        return Ghost(e, tuple(e for _ in g.posts))
    if name == "CheckpointCompletes":
        return Ghost(g.posts[p.i], g.posts)
    if name in ("UpstreamSnapshot", "CheckpointAborted", "RetireCheckpoint"):
        return Ghost(g.post, g.posts[: p.i] + (e,) + g.posts[p.i + 1 :])
    return g


def ghost_invariant(o: Z3Ops, s: ChannelState, g: Ghost, source: Any) -> list[tuple[int | None, str, Any]]:
    """(slot or None, name, formula) for each conjunct."""
    lc = s.last
    out: list[tuple[int | None, str, Any]] = [
        (None, "u's history is a prefix of its source", z3.PrefixOf(s.sent, source)),
        (
            None,
            "u's history is the latest cut point, then what it emitted since (ghost)",
            z3.Implies(lc.valid, s.sent == o.concat(lc.sent, g.post)),
        ),
    ]
    for k, (sl, post) in enumerate(zip(s.slots, g.posts, strict=True)):
        out.append(
            (k, "u's history is a slot's cut point, then what it emitted since (ghost)",
             z3.Implies(sl.up, s.sent == o.concat(sl.sent_snap, post)))
        )
    return out


def _sym_ghost(nslots: int) -> Ghost:
    return Ghost(z3.Const("g.post", SEQ), tuple(z3.Const(f"g.slot{k}.post", SEQ) for k in range(nslots)))


def prove_ghost(step: GhostStep = ghost_step, mode: str = "unaligned", nslots: int = 2) -> tuple[str, str | None]:
    """The ghost invariant by induction: (status, why-not)."""
    protocol, src = Protocol(mode), z3.Const("source", SEQ)
    o = Z3Ops("gi", source=src)
    init = start_state(o)
    e = o.empty()
    r = _check(o, [], z3.And(*[f for _, _, f in ghost_invariant(o, init, Ghost(e, (e,)), src)]))
    if r != z3.unsat:
        return "unknown", "initiation fails" if r == z3.sat else f"initiation: solver gave {r}"
    s, g = symbolic_state(o, "s", nslots), _sym_ghost(nslots)
    for action in protocol.actions:
        for i in range(nslots) if is_slot_action(action) else [0]:
            o = Z3Ops(f"g{action.name}{i}", source=src)
            pre = ghost_invariant(o, s, g, src)
            q = symbolic_params("p")
            p = Params(n=q.n, i=i, unal=q.unal, cp=q.cp)
            guard = [c for _, c in protocol.guard(action, o, s, p)]
            nxt = protocol.effect(action, o, s, p)
            for k, name, goal in ghost_invariant(o, nxt, step(action, o, s, p, g), src):
                mine = {i, i if k is None else k}
                hyps = [f for j, _, f in pre if j is None or j in mine] + guard
                r = _check(o, hyps, goal, slot_split(s.slots[i if k is None else k], p.unal))
                if r == z3.sat:
                    return "counterexample", f"{action.name} breaks '{name}'"
                if r != z3.unsat:
                    return "unknown", f"{action.name} / '{name}': solver gave {r}"
    return "proved", None


def prove_replay(
    restore: RestoreEffect | None = None, mode: str = "unaligned", deterministic: bool = True
) -> ProofResult:
    """``restore`` replaces the protocol's RestoreFromLatest effect (tests pass mutated ones);
    ``deterministic=False`` drops the assumption (u's re-emitted records are then arbitrary)."""
    protocol, src = Protocol(mode), z3.Const("source", SEQ)
    o = Z3Ops("replay", source=src if deterministic else None)
    s, g = symbolic_state(o, "s"), _sym_ghost(1)
    lc = s.last
    # Of the CUT invariant only its conclusion for the latest checkpoint is needed (fewer
    # hypotheses keep the sequence solver fast); the invariant proves it in every reachable state.
    cut = dict(invariant(o, s))["the latest completed checkpoint satisfies CUT"]
    hyps: list[Any] = [cut, lc.valid] + [f for k, _, f in ghost_invariant(o, s, g, src) if k is None]
    goals: list[Any] = []

    def step(word: str, st: ChannelState, p: Params) -> ChannelState:
        action = protocol.action(word)
        # A drain step with n = 0 does not happen; its guard (n >= 1) is only required when n >= 1.
        guard = z3.And(*[c for _, c in protocol.guard(action, o, st, p)])
        goals.append(guard if word == "restore" else z3.Implies(p.n >= 1, guard))
        if word == "restore" and restore is not None:
            return restore(protocol, o, st, p)
        nxt = protocol.effect(action, o, st, p)
        return nxt if word == "restore" else _when(p.n >= 1, nxt, st)

    # Drain: each step moves everything there is, so a mutated restore is drained the same way.
    st = step("restore", s, Params(cp=lc.cp))
    st = step("process", st, Params(n=o.length(st.inq)))
    st = step("transmit", st, Params(n=o.length(st.out)))
    st = step("process", st, Params(n=o.length(st.inq)))
    st = step("emit", st, Params(n=o.length(g.post)))  # as many records as u emitted after its cut point
    st = step("transmit", st, Params(n=o.length(st.out)))
    st = step("process", st, Params(n=o.length(st.inq)))
    goals += [st.done == s.sent, st.inq == o.empty(), st.out == o.empty()]
    sol = z3.Solver()
    sol.set("timeout", 30000)
    sol.add(*hyps, *o.side, *o.cone(hyps + goals), z3.Not(z3.And(*goals)))
    r = sol.check()
    if r == z3.unsat:
        # The ghost invariant in every mode whose CUT is proved (their guards differ, not the effects).
        status, why = "proved", None
        for m in GHOST_MODES:
            status, why = prove_ghost(mode=m)
            if status != "proved":
                why = f"{m}: {why}"
                break
        if status == "proved":
            return ProofResult("", "proved", "unbounded", 0.0, method="assumptions", assumptions=DETERMINISTIC)
        return ProofResult("", "unknown", "unbounded", 0.0, f"ghost induction: {why}",
                           method="assumptions", assumptions=DETERMINISTIC)
    if r == z3.unknown:
        return ProofResult("", "unknown", "unbounded", 0.0, "solver gave unknown",
                           method="assumptions", assumptions=DETERMINISTIC)
    m = sol.model()

    def val(x: Any) -> str:
        return str(as_list(m, x))

    cex = (
        f"processed before snapshot {val(lc.pre)}, input state {val(lc.istate)}, output state "
        f"{val(lc.ostate)}, post-snapshot output {val(g.post)}, re-emitted {val(o.blocks[-1])}:\n"
        f"  u sent {val(s.sent)} but after recovery d applied {val(st.done)}"
    )
    return ProofResult("", "counterexample", "unbounded", 0.0, cex, method="model")


def _when(c: Any, a: ChannelState, b: ChannelState) -> ChannelState:
    """Field-wise if-then-else of two channel states (a drain step of zero records is skipped)."""
    return ChannelState(
        z3.If(c, a.out, b.out),
        z3.If(c, a.inq, b.inq),
        z3.If(c, a.sent, b.sent),
        z3.If(c, a.done, b.done),
        z3.If(c, a.rec_in, b.rec_in),
        z3.If(c, a.rec_out, b.rec_out),
        a.slots,
        a.last,
    )


@register("replay-exactly-once")
def replay_exactly_once() -> ProofResult:
    """Restore, then replay input state, output state and u's post-snapshot output: each record
    once, in order. u's history = cut point + post-snapshot output is proved (ghost induction);
    that u re-emits the same output is assumed (deterministic replay)."""
    return prove_replay()
