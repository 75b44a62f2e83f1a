"""rescale-routing: with the RecordFilter, each restored keyed record is accepted by exactly one new
subtask, its owner, and records of a virtual channel keep their order (facts §3.8).

A keyed record with key group kg (job max parallelism M) sits in the channel state of its old
owner o. On restore with the RANGE mapper, every new subtask whose old interval holds o reads o's
state; when o goes to several new subtasks (ambiguous), each keeps a record only if kg is in its
own new range, otherwise it accepts all. Proved for all 1 ≤ old, new ≤ M and every M that is a
power of two up to 32768 (Flink's default max parallelism always is); for other M, see
``range-mapper-complete[any-max-parallelism]``: the mapper itself can miss the owner.

The proof is a chain of Z3 lemmas, each proved here over unbounded integers and then used as
instances: (1) scaling: with M·t = 32768, owner(kg, M, p) = owner(kg·t, 32768, p); (2) a key
group at 32768 lies in its owner's range; (3) the mapper's interval holds every old subtask whose
range overlaps (``range-mapper-complete``). Order is an inductive invariant of delivery: the
indexes of accepted records, in delivery order, increase.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import z3

from cutcheck.proofs.arith import Z3Arith, prove, show
from cutcheck.proofs.keygroups import FLINK_KG, FLINK_MAPPERS, UPPER, refuted
from cutcheck.proofs.registry import ProofResult, register

Accept = Callable[[Any, Any, Any, Any], Any]  # (received, ambiguous, owner_new, j) -> accepted
Deliver = Callable[[Any, Any, Any], tuple[Any, Any]]  # (out array, length, index) -> (out, length)


def flink_filter(received: Any, ambiguous: Any, owner_new: Any, j: Any) -> Any:
    """RecordFilter: ambiguous old subtasks' records are kept only by their new owner."""
    return z3.And(received, z3.Or(z3.Not(ambiguous), owner_new == j))


def no_filter(received: Any, ambiguous: Any, owner_new: Any, j: Any) -> Any:
    """The mutant no-rescale-filter: ambiguous channel state is delivered unfiltered."""
    return received


def append(out: Any, n: Any, idx: Any) -> tuple[Any, Any]:
    """The demultiplexer hands an accepted record on after those before it."""
    return z3.Store(out, n, idx), n + 1


def prove_routing(accept: Accept = flink_filter) -> ProofResult:
    kg_rules, a = FLINK_KG, Z3Arith("rq")
    m, t, p, kg = z3.Ints("M t p kg")
    pow2 = [m * t == UPPER, t >= 1, m >= 1]
    # Lemma (1): scaling a key group by t = 32768/M keeps its owner.
    status, model = prove(
        kg_rules.owner(a, m, p, kg) == kg_rules.owner(a, UPPER, p, kg * t),
        pow2 + [p >= 1, p <= m, kg >= 0, kg < m] + a.side,
    )
    if status != "proved":
        return refuted(status, "lemma (scaling) fails" + (f": {show(model, {'M': m, 'p': p, 'kg': kg})}" if model else ""))
    # Lemma (2): a key group at 32768 lies in its owner's range.
    big, q = z3.Int("KG"), kg_rules.owner(a, UPPER, p, z3.Int("KG"))
    status, _ = prove(
        z3.And(kg_rules.start(a, UPPER, p, q) <= big, big <= kg_rules.end(a, UPPER, p, q)),
        [p >= 1, p <= UPPER, big >= 0, big < UPPER] + a.side,
    )
    if status != "proved":
        return refuted(status, "lemma (owner's range) fails")

    # The claim, with the lemmas instantiated at this record.
    a = Z3Arith("rr")
    old_p, new_p, j = z3.Ints("old_p new_p j")
    dom = pow2 + [old_p >= 1, old_p <= m, new_p >= 1, new_p <= m, kg >= 0, kg < m, j >= 0, j < new_p]
    o, star = kg_rules.owner(a, m, old_p, kg), kg_rules.owner(a, m, new_p, kg)
    big = kg * t
    o32, star32 = kg_rules.owner(a, UPPER, old_p, big), kg_rules.owner(a, UPPER, new_p, big)
    lemmas = [o == o32, star == star32]
    for pp, qq in ((old_p, o), (new_p, star)):  # lemma (2) at o32 = o and star32 = star
        lemmas.append(z3.And(kg_rules.start(a, UPPER, pp, qq) <= big, big <= kg_rules.end(a, UPPER, pp, qq)))

    def receives(jj: Any) -> Any:
        lo, hi = FLINK_MAPPERS.old_interval(a, old_p, new_p, jj)
        return z3.And(lo <= o, o <= hi)

    def overlap(jj: Any) -> Any:  # lemma (3) instance: RANGE is exact at 32768
        k = kg_rules
        return z3.And(
            k.start(a, UPPER, old_p, o) <= k.end(a, UPPER, new_p, jj),
            k.start(a, UPPER, new_p, jj) <= k.end(a, UPPER, old_p, o),
        )

    lemmas += [receives(star) == overlap(star)]
    ambiguous = z3.Bool("ambiguous")  # o goes to two different new subtasks => ambiguous
    facts = [z3.Implies(z3.And(receives(j), receives(star), j != star), ambiguous)]
    goal = z3.And(
        accept(receives(star), ambiguous, star, star),
        z3.Implies(j != star, z3.Not(accept(receives(j), ambiguous, star, j))),
    )
    status, model = prove(goal, dom + lemmas + facts + a.side)
    if status != "proved":
        names = {
            "job maxP": m,
            "old p": old_p,
            "new p": new_p,
            "key group": kg,
            "old subtask": o,
            "owner (new)": star,
            "also accepted by new subtask": j,
        }
        return refuted(status, f"a record accepted twice or never: {show(model, names)}" if model else None)
    return ProofResult("", "proved", "maxP a power of two <= 32768", 0.0, method="values", limit=UPPER)


def prove_order(deliver: Deliver = append) -> ProofResult:
    """Inductive: after any prefix of a virtual channel, the accepted records' indexes increase."""
    out, n, k = z3.Array("out", z3.IntSort(), z3.IntSort()), z3.Int("len"), z3.Int("k")
    acc, x, y, x0, y0 = z3.Bool("accepted"), z3.Int("x"), z3.Int("y"), z3.Int("x0"), z3.Int("y0")

    def inv(out: Any, n: Any, k: Any) -> Any:
        return z3.And(
            n >= 0,
            n <= k,
            z3.ForAll([x, y], z3.Implies(z3.And(x >= 0, x < y, y < n), out[x] < out[y])),
            z3.ForAll([x], z3.Implies(z3.And(x >= 0, x < n), z3.And(out[x] >= 0, out[x] < k))),
        )

    def broken(out: Any, n: Any, k: Any) -> Any:  # the negation, skolemized, so Z3 can find models
        return z3.Or(
            n < 0,
            n > k,
            z3.And(x0 >= 0, x0 < y0, y0 < n, out[x0] >= out[y0]),
            z3.And(x0 >= 0, x0 < n, z3.Or(out[x0] < 0, out[x0] >= k)),
        )

    out2, n2 = deliver(out, n, k)
    nxt_out, nxt_n = z3.If(acc, out2, out), z3.If(acc, n2, n)
    sol = z3.Solver()
    sol.set("timeout", 30000)
    sol.add(k >= 0, inv(out, n, k), broken(nxt_out, nxt_n, k + 1))
    r = sol.check()
    if r == z3.unsat:
        return ProofResult("", "proved", "unbounded (induction)", 0.0)
    if r == z3.sat:
        mdl = sol.model()
        ln = mdl.eval(nxt_n, model_completion=True).as_long()
        seq = [mdl.eval(nxt_out[i], model_completion=True) for i in range(min(ln, 6))]
        return ProofResult(
            "", "counterexample", "unbounded", 0.0, f"delivered indexes out of order: {seq}", method="model"
        )
    return ProofResult("", "unknown", "unbounded", 0.0, "solver gave unknown")


def rescale_routing(accept: Accept = flink_filter, deliver: Deliver = append) -> ProofResult:
    first = prove_routing(accept)
    if first.status != "proved":
        return first
    second = prove_order(deliver)
    return second if second.status != "proved" else first


@register("rescale-routing")
def rescale_routing_proof() -> ProofResult:
    """Each restored keyed record is accepted by exactly one new subtask, its owner; order is kept."""
    return rescale_routing()


@register("rescale-routing[no-rescale-filter]", expected="counterexample")
def rescale_routing_no_filter() -> ProofResult:
    """Negative control: ambiguous channel state delivered unfiltered is accepted twice."""
    return prove_routing(no_filter)
