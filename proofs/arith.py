"""Integer rules written once for Python ints and for Z3 (like ``model.protocol.Ops`` for sequences).

Division is the one operation that differs: Python floors; over Z3 it is a fresh integer q with
its defining inequalities ``b*q <= a < b*q + b`` (b > 0), as the facts' Java int division is on
non-negative operands. Rule encodings in ``proofs`` take an arith first, so the same function is
cross-checked against ``model``'s concrete rule on a grid and proved over unbounded integers.
"""

from __future__ import annotations

from typing import Any

import z3


class PyArith:
    def div(self, a: int, b: int) -> int:
        return a // b

    def and_(self, *bs: Any) -> bool:
        return all(bs)

    def or_(self, *bs: Any) -> bool:
        return any(bs)

    def not_(self, b: Any) -> bool:
        return not b

    def ite(self, c: Any, a: Any, b: Any) -> Any:
        return a if c else b


class Z3Arith:
    def __init__(self, tag: str = "q") -> None:
        self.side: list[z3.BoolRef] = []
        self._tag = tag
        self._cache: dict[tuple[int, int], z3.ArithRef] = {}

    def div(self, a: Any, b: Any) -> Any:
        a, b = _int(a), _int(b)
        key = (a.get_id(), b.get_id())
        if key not in self._cache:  # one quotient per (a, b): equal terms must give equal quotients
            q = z3.Int(f"{self._tag}{len(self._cache)}")
            self.side += [b * q <= a, a < b * q + b]
            self._cache[key] = q
        return self._cache[key]

    def and_(self, *bs: Any) -> Any:
        return z3.And(*bs)

    def or_(self, *bs: Any) -> Any:
        return z3.Or(*bs)

    def not_(self, b: Any) -> Any:
        return z3.Not(b)

    def ite(self, c: Any, a: Any, b: Any) -> Any:
        return z3.If(c, a, b)


def _int(x: Any) -> Any:
    return z3.IntVal(x) if isinstance(x, int) else x


PY = PyArith()


PROVE_SEEDS = 3


def prove(goal: Any, hyps: list[Any], timeout_ms: int = 60000) -> tuple[str, z3.ModelRef | None]:
    """("proved", None), ("counterexample", model) or ("unknown", None) for ``hyps ⇒ goal``.

    Non-linear integer problems can send Z3 down a search that does not end where another random
    seed answers at once (a negative control that takes 0.2 s timed out once at 60 s in a verify run),
    so the time is split over ``PROVE_SEEDS`` solver seeds; the answer does not depend on the seed."""
    for seed in range(PROVE_SEEDS):
        sol = z3.Solver()
        sol.set("timeout", max(1, timeout_ms // PROVE_SEEDS))
        sol.set("random_seed", seed)
        sol.add(*hyps, z3.Not(goal))
        r = sol.check()
        if r == z3.unsat:
            return "proved", None
        if r == z3.sat:
            return "counterexample", sol.model()
    return "unknown", None


def show(model: z3.ModelRef, names: dict[str, Any]) -> str:
    """A counterexample as ``name=value`` pairs, in the given order."""
    return ", ".join(f"{k}={model.eval(v, model_completion=True)}" for k, v in names.items())
