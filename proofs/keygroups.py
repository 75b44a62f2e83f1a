"""Key groups and the rescale mappers, over unbounded integers (facts §1.3–1.4, §2.4).

The rules are encoded once against ``proofs.arith`` (Python ints or Z3 with division by its
defining inequalities), cross-checked against ``model.keygroups`` / ``model.partitioning`` on a
grid, and proved by Z3 for all parallelisms 1 ≤ p ≤ maxP ≤ 32768. Z3 runs first, so a mutated
encoding is refuted by a Z3 counterexample; the grid then ties the encoding to the model's code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from cutcheck.model.keygroups import key_group_range, operator_index
from cutcheck.model.partitioning import RANGE, ROUND_ROBIN
from cutcheck.proofs.arith import PY, Z3Arith, prove, show
from cutcheck.proofs.registry import ProofResult, register

UPPER = 1 << 15  # Flink's upper bound of max parallelism; the RANGE mapper computes with it
Rule = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class KeyGroupRules:
    """``start``/``end`` of subtask i's range and the ``owner`` of a key group: (arith, maxP, p, x)."""

    start: Rule = lambda a, m, p, i: a.div(i * m + p - 1, p)  # ceil(i*maxP/p)
    end: Rule = lambda a, m, p, i: a.div((i + 1) * m - 1, p)  # floor(((i+1)*maxP - 1)/p)
    owner: Rule = lambda a, m, p, kg: a.div(kg * p, m)  # kg*p/maxP


@dataclass(frozen=True, slots=True)
class MapperRules:
    """``range_old``: the old interval [lo, hi] of new subtask j (RANGE); ``rr``: whether old i goes
    to new n (ROUND_ROBIN: new n gets old n, n+newP, n+2·newP, …)."""

    kg: KeyGroupRules = KeyGroupRules()
    range_old: Rule | None = None
    rr: Rule = lambda a, i, n, old_p, new_p: a.and_(i >= n, i < old_p, (i - n) == new_p * a.div(i - n, new_p))

    def old_interval(self, a: Any, old_p: Any, new_p: Any, j: Any) -> tuple[Any, Any]:
        if self.range_old is not None:
            return self.range_old(a, old_p, new_p, j)
        k = self.kg
        start, end = k.start(a, UPPER, new_p, j), k.end(a, UPPER, new_p, j)
        return k.owner(a, UPPER, old_p, start), k.owner(a, UPPER, old_p, end)


FLINK_KG = KeyGroupRules()


def refuted(status: str, cex: str | None) -> ProofResult:
    """A claim Z3 did not prove: a counterexample is a Z3 model; an unknown stays in the domain."""
    if status == "counterexample":
        return ProofResult("", status, "unbounded", 0.0, cex, method="model")
    return ProofResult("", status, f"values up to {UPPER}", 0.0, cex, method="values", limit=UPPER)
FLINK_MAPPERS = MapperRules()


def _grid_keygroups(rules: KeyGroupRules) -> str | None:
    for m in (1, 2, 3, 5, 8, 10, 17, 128):
        for p in range(1, min(m, 12) + 1):
            for i in range(p):
                r = key_group_range(m, p, i)
                if (rules.start(PY, m, p, i), rules.end(PY, m, p, i)) != (r.start, r.end):
                    return f"encoding differs from model.keygroups.key_group_range({m}, {p}, {i}) = {r}"
            for kg in range(m):
                if rules.owner(PY, m, p, kg) != operator_index(kg, m, p):
                    return f"encoding differs from model.keygroups.operator_index({kg}, {m}, {p})"
    return None


def keygroup_ownership(rules: KeyGroupRules = FLINK_KG) -> ProofResult:
    a = Z3Arith("kq")
    m, p, i, kg = z3.Ints("maxP p i kg")
    dom = [p >= 1, p <= m, m <= UPPER, i >= 0, i < p, kg >= 0, kg < m]
    start, end, own = rules.start(a, m, p, i), rules.end(a, m, p, i), rules.owner(a, m, p, kg)
    nxt_start = rules.start(a, m, p, i + 1)
    first, last = rules.start(a, m, p, 0), rules.end(a, m, p, p - 1)
    claims = {
        "the owner is a subtask": z3.And(own >= 0, own < p),
        "exactly one owner, whose range holds the key group": (z3.And(start <= kg, kg <= end)) == (own == i),
        "ranges are non-empty": start <= end,
        "ranges are contiguous": z3.Implies(i + 1 < p, nxt_start == end + 1),
        "ranges cover [0, maxP)": z3.And(first == 0, last == m - 1),
    }
    for name, goal in claims.items():
        status, model = prove(goal, dom + a.side)
        if status != "proved":
            cex = f"{name}: fails at {show(model, {'maxP': m, 'p': p, 'i': i, 'kg': kg})}" if model else name
            return refuted(status, cex)
    diff = _grid_keygroups(rules)
    if diff:
        return ProofResult("", "counterexample", "grid", 0.0, diff, method="search")
    return ProofResult("", "proved", "1 <= p <= maxP <= 32768", 0.0, method="values", limit=UPPER)


def _grid_mappers(rules: MapperRules) -> str | None:
    for old in range(1, 11):
        for new in range(1, 11):
            for j in range(new):
                lo, hi = rules.old_interval(PY, old, new, j)
                if tuple(range(lo, hi + 1)) != RANGE.old_subtasks(j, old, new):
                    return f"RANGE encoding differs from model.partitioning at {old}->{new}, new subtask {j}"
                rr = tuple(i for i in range(old) if rules.rr(PY, i, j, old, new))
                if rr != ROUND_ROBIN.old_subtasks(j, old, new):
                    return f"ROUND_ROBIN encoding differs from model.partitioning at {old}->{new}, new subtask {j}"
    return None


def mapper_claims(
    rules: MapperRules, job_max_p: Any = UPPER
) -> tuple[dict[str, tuple[Any, dict[str, Any]]], list[Any]]:
    """RANGE: old i is in new j's interval iff their key-group ranges (at ``job_max_p``) overlap."""
    a = Z3Arith("mq")
    old_p, new_p, i, j, n, n2 = z3.Ints("old_p new_p i j n n2")
    m = job_max_p
    dom = [old_p >= 1, old_p <= m, new_p >= 1, new_p <= m, m <= UPPER, i >= 0, i < old_p, j >= 0, j < new_p]
    dom += [n >= 0, n < new_p, n2 >= 0, n2 < new_p]
    lo, hi = rules.old_interval(a, old_p, new_p, j)
    k = rules.kg
    overlap = z3.And(
        k.start(a, m, old_p, i) <= k.end(a, m, new_p, j), k.start(a, m, new_p, j) <= k.end(a, m, old_p, i)
    )
    mapped = z3.And(lo <= i, i <= hi)
    rng = {"old p": old_p, "new p": new_p, "old subtask": i, "new subtask": j}
    rr = {"old p": old_p, "new p": new_p, "old subtask": i, "new subtask": n, "other new subtask": n2}
    if not isinstance(m, int):
        rng["job maxP"] = m
    claims = {
        "RANGE gives new j exactly the old subtasks whose ranges overlap j's": (mapped == overlap, rng),
        "ROUND_ROBIN gives each old subtask to some new subtask": (
            rules.rr(a, i, i - new_p * a.div(i, new_p), old_p, new_p),
            rr,
        ),
        "ROUND_ROBIN gives each old subtask to at most one new subtask": (
            z3.Implies(z3.And(rules.rr(a, i, n, old_p, new_p), rules.rr(a, i, n2, old_p, new_p)), n == n2),
            rr,
        ),
    }
    return claims, dom + a.side


def range_mapper_complete(rules: MapperRules = FLINK_MAPPERS) -> ProofResult:
    claims, hyps = mapper_claims(rules)
    for name, (goal, names) in claims.items():
        status, model = prove(goal, hyps)
        if status != "proved":
            cex = f"{name}: fails at {show(model, names)}" if model else name
            return refuted(status, cex)
    diff = _grid_mappers(rules)
    if diff:
        return ProofResult("", "counterexample", "grid", 0.0, diff, method="search")
    return ProofResult("", "proved", "1 <= old, new <= 32768", 0.0, method="values", limit=UPPER)


@register("keygroup-ownership")
def keygroup_ownership_proof() -> ProofResult:
    """Every key group has exactly one owner, inside its range; ranges are contiguous and cover [0, maxP)."""
    return keygroup_ownership()


@register("range-mapper-complete")
def range_mapper_complete_proof() -> ProofResult:
    """RANGE gives each new subtask exactly the overlapping old subtasks; ROUND_ROBIN assigns each old one once."""
    return range_mapper_complete()


@register("range-mapper-complete[any-max-parallelism]", expected="counterexample")
def range_mapper_any_max_parallelism() -> ProofResult:
    """A finding about Flink, not a mutant: RANGE computes with maxP = 32768, so for a job whose max
    parallelism is not a power of two (and old·new > 32768) it can miss an overlapping old subtask."""
    m = z3.Int("job maxP")
    claims, hyps = mapper_claims(FLINK_MAPPERS, job_max_p=m)
    exact, names = claims["RANGE gives new j exactly the old subtasks whose ranges overlap j's"]
    overlap_implies_mapped = z3.Implies(exact.arg(1), exact.arg(0))
    status, model = prove(overlap_implies_mapped, hyps + [m >= 1])
    cex = f"an overlapping old subtask is not mapped at {show(model, names)}" if model else None
    return refuted(status, cex)
