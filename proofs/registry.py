"""The registry of named proofs and ``run``.

A proof is a function returning a :class:`ProofResult`. Names with a bracket are negative
controls or variants (``cut-unaligned[no-output-state]``); a negative control is expected to give
a counterexample, a positive proof to be proved.

Every result says how it was obtained (``method``), which gives its label:

* ``induction``: "proved (unbounded induction)": an inductive invariant (or a direct proof) over
  unbounded values, sequences of any length;
* ``values``: "proved for all values up to N": Z3 proved it for every value of a bounded domain
  (``limit`` = N, e.g. max parallelism 32768), symbolically, not by enumeration;
* ``assumptions``: "proved under assumptions": proved, but only given ``assumptions``, which are
  printed with it;
* ``search``: "bounded search": a search of bounded depth, which finds a counterexample (a negative
  control's trace) or finds none (never reported as proved);
* ``model``: a counterexample that is a Z3 model of the negated claim.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from cutcheck.model.errors import CutcheckError

STATUSES = ("proved", "counterexample", "unknown")
METHODS = {  # method -> how it reads in a label
    "induction": "unbounded induction",
    "values": "all values up to {limit}",
    "assumptions": "under assumptions",
    "search": "bounded search",
    "model": "Z3 model",
}
PROVED_LABELS = {
    "induction": "proved (unbounded induction)",
    "values": "proved for all values up to {limit}",
    "assumptions": "proved under assumptions",
}


@dataclass(frozen=True, slots=True)
class ProofResult:
    name: str
    status: str  # proved | counterexample | unknown
    bound: str  # "unbounded" or the bound a bounded proof used
    seconds: float
    counterexample: str | None = None  # a short readable trace or assignment
    expected: str = "proved"  # what the registry expects: proved, or counterexample for a negative control
    method: str = "induction"  # how the status was obtained: one of METHODS
    limit: int | None = None  # N of "proved for all values up to N" (method "values")
    assumptions: tuple[str, ...] = ()  # what a proof "under assumptions" assumes

    def __post_init__(self) -> None:
        if self.status not in STATUSES or self.method not in METHODS:
            raise ValueError(f"bad proof result: status {self.status!r}, method {self.method!r}")
        if (self.method == "assumptions") != bool(self.assumptions):
            raise ValueError("a proof is 'under assumptions' exactly when it lists its assumptions")
        if self.method == "values" and self.limit is None:
            raise ValueError("'proved for all values up to N' needs its N (limit)")
        if self.status == "proved" and self.method not in PROVED_LABELS:
            raise ValueError(f"a {METHODS[self.method]} does not prove anything")

    @property
    def as_expected(self) -> bool:
        return self.status == self.expected

    @property
    def label(self) -> str:
        """How to read the result: one of PROVED_LABELS for a proof, else "status (method)"."""
        if self.status == "proved":
            return PROVED_LABELS[self.method].format(limit=self.limit)
        return f"{self.status} ({METHODS[self.method].format(limit=self.limit)})"

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "status": self.status,
            "expected": self.expected,
            "label": self.label,
            "method": self.method,
            "limit": self.limit,
            "assumptions": list(self.assumptions),
            "bound": self.bound,
            "seconds": round(self.seconds, 3),
            "counterexample": self.counterexample,
        }


@dataclass(frozen=True, slots=True)
class Proof:
    name: str
    fn: Callable[[], ProofResult]
    expected: str
    doc: str


REGISTRY: dict[str, Proof] = {}
_MODULES = tuple(f"cutcheck.proofs.{m}" for m in ("cut", "concurrent", "replay", "keygroups", "rescale", "inflight"))


def register(
    name: str, expected: str = "proved"
) -> Callable[[Callable[[], ProofResult]], Callable[[], ProofResult]]:
    def deco(fn: Callable[[], ProofResult]) -> Callable[[], ProofResult]:
        REGISTRY[name] = Proof(name, fn, expected, (fn.__doc__ or "").strip())
        return fn

    return deco


def _load() -> None:
    for m in _MODULES:
        importlib.import_module(m)


def names() -> list[str]:
    _load()
    return list(REGISTRY)


def run(names: Iterable[str] | None = None) -> list[ProofResult]:
    """Run the named proofs (all when ``names`` is None), in registry order for a full run."""
    _load()
    wanted = list(REGISTRY) if names is None else list(names)
    unknown = [n for n in wanted if n not in REGISTRY]
    if unknown:
        raise CutcheckError(
            f"unknown proof name(s) {', '.join(unknown)}; known proofs: {', '.join(REGISTRY)}."
        )
    results = []
    for n in wanted:
        p = REGISTRY[n]
        t0 = time.perf_counter()
        r = p.fn()
        results.append(replace(r, name=n, expected=p.expected, seconds=time.perf_counter() - t0))
    return results
