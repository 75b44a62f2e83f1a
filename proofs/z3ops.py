"""``model.protocol.Ops`` over Z3: records are Ints, queues and histories are Z3 sequences of Int.

The rule table of ``model.protocol`` runs unchanged on these values and yields Z3 terms; ``fresh``
records the side condition it introduces (a new block of arbitrary records of length n), which
the caller must assert alongside the guard. Proving for arbitrary record values is stronger than
the concrete model's consecutive numbering.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import z3

from cutcheck.model.protocol import ChannelState, Last, Params, Slot, fresh_slot, initial_state

SEQ = z3.SeqSort(z3.IntSort())


class Z3Ops:
    """``source``: None (u's records are arbitrary, each block independent of the others: the CUT
    proofs hold for any u), or a sequence, u's deterministic output stream: ``fresh(sent, n)`` is
    then the n records that follow ``sent`` in it, as ``model.trace.PyOps`` numbers records by
    their position (its stream is 0, 1, 2, …)."""

    def __init__(self, tag: str = "", source: Any = None) -> None:
        self.source = source
        self.side: list[z3.BoolRef] = []
        self.defs: dict[int, list[z3.BoolRef]] = {}  # id of a fresh constant -> its defining equations
        self._memo: dict[int, frozenset[int]] = {}
        self._alive: list[Any] = []
        self.blocks: list[Any] = []  # the fresh blocks, in the order the effects emitted them
        self._k = 0
        self._splits: dict[tuple[int, int], tuple[Any, Any]] = {}
        self._tag = tag

    def lit(self, v: int | bool) -> Any:
        return z3.BoolVal(v) if isinstance(v, bool) else z3.IntVal(v)

    def and_(self, *bs: Any) -> Any:
        return z3.And(*bs) if bs else z3.BoolVal(True)

    def or_(self, *bs: Any) -> Any:
        return z3.Or(*bs) if bs else z3.BoolVal(False)

    def not_(self, b: Any) -> Any:
        return z3.Not(b)

    def implies(self, a: Any, b: Any) -> Any:
        return z3.Implies(a, b)

    def eq(self, a: Any, b: Any) -> Any:
        return a == b

    def ite(self, c: Any, a: Any, b: Any) -> Any:
        return z3.If(c, a, b)

    def max0(self, x: Any) -> Any:
        return z3.If(x > 0, x, 0)

    def empty(self) -> Any:
        return z3.Empty(SEQ)

    def length(self, s: Any) -> Any:
        return z3.Length(s)

    def concat(self, *ss: Any) -> Any:
        return ss[0] if len(ss) == 1 else z3.Concat(*ss)

    def take(self, s: Any, n: Any) -> Any:
        return self._split(s, n)[0]

    def drop(self, s: Any, n: Any) -> Any:
        return self._split(s, n)[1]

    def _split(self, s: Any, n: Any) -> tuple[Any, Any]:
        # Z3's sequence solver is weak on nested seq.extract (take of a drop of …) but instant on
        # word equations, so a split is two fresh sequences with its defining equations: s = a ++ b,
        # |a| = n clamped to [0, |s|]. They determine a and b, so asserting them is sound.
        n = z3.IntVal(n) if isinstance(n, int) else n
        if z3.eq(n, z3.Length(s)):  # the whole sequence: no split needed (and none is easier)
            return s, self.empty()
        key = (s.get_id(), n.get_id())
        if key not in self._splits:
            self._k += 1
            a = z3.Const(f"take{self._tag}_{self._k}", SEQ)
            b = z3.Const(f"drop{self._tag}_{self._k}", SEQ)
            k = z3.If(n <= 0, 0, z3.If(n >= z3.Length(s), z3.Length(s), n))
            self._define([a, b], [s == z3.Concat(a, b), z3.Length(a) == k])
            self._splits[key] = (a, b)
        return self._splits[key]

    def fresh(self, sent: Any, n: Any) -> Any:
        self._k += 1
        blk = z3.Const(f"blk{self._tag}_{self._k}", SEQ)
        if self.source is None:
            self._define([blk], [z3.Length(blk) == n])
        else:  # the source continues after what u has sent: sent ++ blk ++ rest
            rest = z3.Const(f"rest{self._tag}_{self._k}", SEQ)
            self._define([blk, rest], [z3.Length(blk) == n, self.source == z3.Concat(sent, blk, rest)])
        self.blocks.append(blk)
        return blk

    def _define(self, names: list[Any], eqs: list[z3.BoolRef]) -> None:
        self.side += eqs
        for v in names:
            self.defs[v.get_id()] = eqs

    def cone(self, formulas: list[Any]) -> list[z3.BoolRef]:
        """The definitions the given formulas depend on, transitively (cone of influence): a query
        with only these is equivalent and much easier for the sequence solver than one with all."""
        out: dict[int, z3.BoolRef] = {}
        todo = [d for f in formulas for d in self._defined_under(f)]
        while todo:
            v = todo.pop()
            for d in self.defs[v]:
                if d.get_id() not in out:
                    out[d.get_id()] = d
                    todo += self._defined_under(d)
        return list(out.values())

    def _defined_under(self, e: Any) -> frozenset[int]:
        """Ids of the defined constants occurring in ``e`` (memoized: queries share most subterms)."""
        memo = self._memo
        stack = [(e, False)]
        while stack:
            x, expanded = stack.pop()
            k = x.get_id()
            if k in memo:
                continue
            kids = x.children()
            if expanded or not kids:
                acc = {k} if k in self.defs else set()
                for c in kids:
                    acc |= memo[c.get_id()]
                memo[k] = frozenset(acc)
                self._alive.append(x)  # an id is only unique while its AST lives: keep it alive
            else:
                stack.append((x, True))
                stack += [(c, False) for c in kids if c.get_id() not in memo]
        return memo[e.get_id()]


def _const(name: str, like: Any) -> Any:
    if z3.is_bool(like):
        return z3.Bool(name)
    if z3.is_int(like):
        return z3.Int(name)
    return z3.Const(name, SEQ)


def symbolic_state(o: Z3Ops, prefix: str, nslots: int = 1) -> ChannelState:
    """A state whose every field is a fresh Z3 constant named ``prefix.field``."""
    init = replace_slots(initial_state(o), tuple(fresh_slot(o, 0) for _ in range(nslots)))

    def sym(obj: Any, path: str) -> Any:
        vals = {}
        for f in fields(obj):
            v = getattr(obj, f.name)
            if f.name == "cp" and isinstance(obj, Slot):
                vals[f.name] = z3.IntVal(int(path.rsplit("slot", 1)[1]))
            elif isinstance(v, Last | Slot):
                vals[f.name] = sym(v, f"{path}.{f.name}")
            elif isinstance(v, tuple):
                vals[f.name] = tuple(sym(x, f"{path}.slot{k}") for k, x in enumerate(v))
            else:
                vals[f.name] = _const(f"{path}.{f.name}", v)
        return type(obj)(**vals)

    return sym(init, prefix)


def replace_slots(s: ChannelState, slots: tuple[Slot, ...]) -> ChannelState:
    from dataclasses import replace

    return replace(s, slots=slots)


def start_state(o: Z3Ops) -> ChannelState:
    """The initial state with one (fresh) checkpoint slot: the Z3 encoding tracks one checkpoint."""
    return replace_slots(initial_state(o), (fresh_slot(o, 0),))


def symbolic_params(prefix: str, cp: Any = None) -> Params:
    return Params(
        n=z3.Int(f"{prefix}.n"),
        i=0,
        unal=z3.Bool(f"{prefix}.unal"),
        cp=z3.Int(f"{prefix}.cp") if cp is None else cp,
    )


def state_eq(a: Any, b: Any) -> list[z3.BoolRef]:
    """Field-wise equalities between two states (or slots, or Last records)."""
    out: list[z3.BoolRef] = []
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, tuple):
            for u, v in zip(x, y, strict=True):
                out += state_eq(u, v)
        elif isinstance(x, Last | Slot):
            out += state_eq(x, y)
        else:
            out.append(x == y)
    return out


def as_list(model: z3.ModelRef, seq: Any) -> list[int]:
    """A sequence's value in a model, as a Python list (for readable counterexamples)."""
    v = model.eval(seq, model_completion=True)
    out: list[int] = []
    todo = [v]
    while todo:
        e = todo.pop(0)
        if z3.is_app_of(e, z3.Z3_OP_SEQ_CONCAT):
            todo = list(e.children()) + todo
        elif z3.is_app_of(e, z3.Z3_OP_SEQ_UNIT):
            out.append(e.arg(0).as_long())
        elif not z3.is_app_of(e, z3.Z3_OP_SEQ_EMPTY):
            raise ValueError(f"unexpected sequence value {e}")
    return out
