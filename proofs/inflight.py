"""inflight-bound: buffer accounting never exceeds FLIP-183's worst case (invariant BOUND).

Between one result partition (``subpartitions`` subpartitions) and one input gate (``channels``
channels), with ``exclusive`` buffers per channel or subpartition, ``floating`` per gate or
partition and buffers of at most ``buffer_bytes`` bytes, FLIP-183 bounds the in-flight bytes by

    buffer_bytes·subpartitions·exclusive + buffer_bytes·floating      (upstream)
  + buffer_bytes·channels·exclusive + buffer_bytes·floating           (downstream).

Accounting rules assumed (those of ``model.inflight.NetworkConfig``, whose methods are run here on
Z3 terms, so the proof reads the model's own rule):

* a sender holds at most its output pool, ``output_pool_size(subpartitions)`` buffers, counting
  queued ones and the one being filled; it requests a buffer only while below the pool;
* a receiver holds at most ``exclusive`` buffers per channel plus ``floating`` per gate
  (``input_gate_buffers(channels)``); a buffer is sent only against a credit, i.e. while the
  target channel has a free exclusive buffer or the gate a free floating one. The proof tracks
  the exclusive buffers of all channels together (≤ channels·exclusive), a sound over-approximation
  of the per-channel rule;
* each buffer holds at most ``buffer_bytes`` bytes (debloating only lowers the size used);
  sending moves a buffer, recycling frees one; events ride in buffers' place and are not data.

An inductive invariant over the buffer counts, for all positive parameters (unbounded), implies
the byte bound.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import z3

from cutcheck.model.inflight import NetworkConfig
from cutcheck.proofs.registry import ProofResult, register

# (held, pool) -> may the sender take another buffer?
PoolGuard = Callable[[Any, Any], Any]


def below_pool(held: Any, pool: Any) -> Any:
    return held < pool


def prove_bound(
    may_request: PoolGuard = below_pool,
    exclusive_credit: PoolGuard = below_pool,
    floating_credit: PoolGuard = below_pool,
) -> ProofResult:
    S, C, E, F, B = z3.Ints("subpartitions channels exclusive floating buffer_bytes")
    params = [S >= 1, C >= 1, E >= 1, F >= 0, B >= 1]
    net = SimpleNamespace(exclusive=E, floating=F, output_pool=None)
    pool = NetworkConfig.output_pool_size(net, S)  # type: ignore[arg-type]
    gate_ex = NetworkConfig.input_gate_buffers(net, C) - F  # type: ignore[arg-type]  # exclusive part

    hs, rx, rf = z3.Ints("sender_held receiver_exclusive receiver_floating")

    def inv(hs: Any, rx: Any, rf: Any) -> Any:
        return z3.And(hs >= 0, hs <= pool, rx >= 0, rx <= gate_ex, rf >= 0, rf <= F)

    # Actions: (guard, next sender_held, next receiver_exclusive, next receiver_floating)
    actions = {
        "SenderRequestsBuffer": (may_request(hs, pool), hs + 1, rx, rf),
        "SendOnExclusiveCredit": (z3.And(hs >= 1, exclusive_credit(rx, gate_ex)), hs - 1, rx + 1, rf),
        "SendOnFloatingCredit": (z3.And(hs >= 1, floating_credit(rf, F)), hs - 1, rx, rf + 1),
        "ReceiverRecyclesExclusive": (rx >= 1, hs, rx - 1, rf),
        "ReceiverRecyclesFloating": (rf >= 1, hs, rx, rf - 1),
    }
    flip183 = (B * S * E + B * F) + (B * C * E + B * F)
    # Every buffer holds at most B bytes, so the bytes in flight are at most B times the buffers.
    bytes_bound = (hs + rx + rf) * B <= flip183
    checks = [
        ("initiation", [], inv(0, 0, 0)),
        ("invariant implies the FLIP-183 bound", [inv(hs, rx, rf)], bytes_bound),
    ]
    for name, (guard, a, b, c) in actions.items():
        checks.append((name, [inv(hs, rx, rf), guard], inv(a, b, c)))
    for name, hyps, goal in checks:
        sol = z3.Solver()
        sol.set("timeout", 30000)
        sol.add(*params, *hyps, z3.Not(goal))
        r = sol.check()
        if r == z3.sat:
            m = sol.model()
            vals = ", ".join(f"{v}={m.eval(v, model_completion=True)}" for v in (S, C, E, F, B, hs, rx, rf))
            return ProofResult(
                "", "counterexample", "unbounded", 0.0, f"{name} breaks the accounting: {vals}", method="model"
            )
        if r != z3.unsat:
            return ProofResult("", "unknown", "unbounded", 0.0, f"{name}: solver gave {r}")
    return ProofResult("", "proved", "unbounded (induction)", 0.0)


@register("inflight-bound")
def inflight_bound() -> ProofResult:
    """Buffer accounting keeps in-flight bytes within FLIP-183's worst case (all parameters unbounded)."""
    return prove_bound()
