"""Python values for the protocol's algebra: record sequences as runs, and ``Ops`` over them.

``model.trace`` executes ``model.protocol``'s rule table on these values; ``proofs.z3ops`` is the
same algebra over Z3. Records are numbered 0, 1, 2, … in u's emission order, and move in runs, so
a sequence is a tuple of maximal ``[start, stop)`` runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["EMPTY", "PY", "PyOps", "Runs"]


class Runs:
    """An immutable sequence of ints stored as maximal runs [start, stop); records move in runs."""

    __slots__ = ("runs", "n")

    def __init__(self, runs: tuple[tuple[int, int], ...] = ()) -> None:
        merged: list[tuple[int, int]] = []
        for a, b in runs:
            if b <= a:
                continue
            if merged and merged[-1][1] == a:
                merged[-1] = (merged[-1][0], b)
            else:
                merged.append((a, b))
        self.runs = tuple(merged)
        self.n = sum(b - a for a, b in merged)

    @classmethod
    def of(cls, values: Iterable[int]) -> Runs:
        return cls(tuple((v, v + 1) for v in values))

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        for a, b in self.runs:
            yield from range(a, b)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Runs):
            return self.runs == other.runs
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.runs)

    def __repr__(self) -> str:
        return "[" + ", ".join(f"{a}" if b == a + 1 else f"{a}..{b - 1}" for a, b in self.runs) + "]"

    def take(self, k: int) -> Runs:
        if k <= 0:
            return EMPTY
        if k >= self.n:
            return self
        out: list[tuple[int, int]] = []
        for a, b in self.runs:
            if k <= 0:
                break
            out.append((a, min(b, a + k)))
            k -= b - a
        return Runs(tuple(out))

    def drop(self, k: int) -> Runs:
        if k <= 0:
            return self
        if k >= self.n:
            return EMPTY
        out: list[tuple[int, int]] = []
        for a, b in self.runs:
            if k >= b - a:
                k -= b - a
                continue
            out.append((a + k, b))
            k = 0
        return Runs(tuple(out))


EMPTY = Runs()


class PyOps:
    """``model.protocol.Ops`` on Python values; records are numbered 0, 1, 2, … in u's emission order."""

    def lit(self, v: int | bool) -> Any:
        return v

    def and_(self, *bs: Any) -> bool:
        return all(bs)

    def or_(self, *bs: Any) -> bool:
        return any(bs)

    def not_(self, b: Any) -> bool:
        return not b

    def implies(self, a: Any, b: Any) -> bool:
        return (not a) or bool(b)

    def eq(self, a: Any, b: Any) -> bool:
        return bool(a == b)

    def ite(self, c: Any, a: Any, b: Any) -> Any:
        return a if c else b

    def max0(self, x: int) -> int:
        return max(x, 0)

    def empty(self) -> Runs:
        return EMPTY

    def length(self, s: Runs) -> int:
        return len(s)

    def concat(self, *ss: Runs) -> Runs:
        return Runs(tuple(r for s in ss for r in s.runs))

    def take(self, s: Runs, n: int) -> Runs:
        return s.take(n)

    def drop(self, s: Runs, n: int) -> Runs:
        return s.drop(n)

    def fresh(self, sent: Runs, n: int) -> Runs:
        return Runs(((len(sent), len(sent) + n),))


PY = PyOps()
