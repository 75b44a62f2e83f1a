"""replay-exactly-once: recovery from a completed checkpoint applies every record once, in order.

Start from any state of the channel satisfying the CUT invariant (``proofs.cut.invariant``,
proved inductive for every mode) with a completed checkpoint; fail; run the protocol's
``RestoreFromLatest`` effect; then drain with the protocol's own effects: d processes its
recovered input state, u re-sends its recovered output state and d processes it, u re-emits what
it had emitted after its snapshot (sources replay deterministically from their checkpointed
offsets) and d processes that. Every step's guard must hold, and at the end d has applied exactly
the records u had sent before the failure, in order: the restored prefix, then input state, then
output state, then the post-snapshot output. Record numbers are distinct, so sequence equality
means each record once.

Assumed (not part of the inductive invariant because Z3's sequence solver does not keep prefix
facts across appends; checked instead by the Hypothesis walks in tests/model/test_protocol.py):
what u sent before the failure is its cut point followed by what it emitted after the snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import z3

from model.protocol import ChannelState, Params, Protocol
from proofs.cut import invariant
from proofs.registry import ProofResult, register
from proofs.z3ops import Z3Ops, as_list, symbolic_state

RestoreEffect = Callable[[Protocol, Z3Ops, ChannelState, Params], ChannelState]


def prove_replay(restore: RestoreEffect | None = None, mode: str = "unaligned") -> ProofResult:
    """``restore`` replaces the protocol's RestoreFromLatest effect (tests pass mutated ones)."""
    protocol = Protocol(mode)
    o = Z3Ops("replay")
    s = symbolic_state(o, "s")
    lc = s.last
    post = z3.Const("post", z3.SeqSort(z3.IntSort()))
    # Of the CUT invariant only its conclusion for the latest checkpoint is needed (fewer
    # hypotheses keep the sequence solver fast); the invariant proves it in every reachable state.
    cut = dict(invariant(o, s))["the latest completed checkpoint satisfies CUT"]
    hyps: list[Any] = [cut, lc.valid, s.sent == o.concat(lc.sent, post)]
    goals: list[Any] = []

    def step(word: str, st: ChannelState, p: Params) -> ChannelState:
        action = protocol.action(word)
        # A drain step with n = 0 does not happen; its guard (n >= 1) is only required when n >= 1.
        guard = z3.And(*[g for _, g in protocol.guard(action, o, st, p)])
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
    st = step("emit", st, Params(n=o.length(post)))
    hyps.append(o.blocks[-1] == post)  # the fresh block: u re-emits exactly what it emitted before
    st = step("transmit", st, Params(n=o.length(st.out)))
    st = step("process", st, Params(n=o.length(st.inq)))
    goals += [st.done == s.sent, st.inq == o.empty(), st.out == o.empty()]
    sol = z3.Solver()
    sol.set("timeout", 30000)
    sol.add(*hyps, *o.side, *o.cone(hyps + goals), z3.Not(z3.And(*goals)))
    r = sol.check()
    if r == z3.unsat:
        return ProofResult("", "proved", "unbounded", 0.0)
    if r == z3.unknown:
        return ProofResult("", "unknown", "unbounded", 0.0, "solver gave unknown")
    m = sol.model()

    def val(x: Any) -> str:
        return str(as_list(m, x))

    cex = (
        f"processed before snapshot {val(lc.pre)}, input state {val(lc.istate)}, output state "
        f"{val(lc.ostate)}, post-snapshot output {val(post)}:\n"
        f"  u sent {val(s.sent)} but after recovery d applied {val(st.done)}"
    )
    return ProofResult("", "counterexample", "unbounded", 0.0, cex)


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
    """Restore, then replay input state, output state and u's post-snapshot output: each record once, in order."""
    return prove_replay()
