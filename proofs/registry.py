"""The registry of named proofs and ``run``.

A proof is a function returning a :class:`ProofResult`. Names with a bracket are negative
controls or variants (``cut-unaligned[no-output-state]``); a negative control is expected to give
a counterexample, a positive proof to be proved.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from model.errors import CutcheckError

STATUSES = ("proved", "counterexample", "unknown")


@dataclass(frozen=True, slots=True)
class ProofResult:
    name: str
    status: str  # proved | counterexample | unknown
    bound: str  # "unbounded" or the bound a bounded proof used
    seconds: float
    counterexample: str | None = None  # a short readable trace or assignment
    expected: str = "proved"  # what the registry expects: proved, or counterexample for a negative control

    @property
    def as_expected(self) -> bool:
        return self.status == self.expected

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "status": self.status,
            "expected": self.expected,
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
_MODULES = ("proofs.cut", "proofs.replay", "proofs.keygroups", "proofs.rescale", "proofs.inflight")


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
