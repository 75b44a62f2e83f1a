"""The mutant catalogue: every fault, by name (docs/design.md "Mutants").

Each fault is a re-created bug that replaces one rule at one seam (``reference.core.seams``);
``verify`` must kill every one that is not ``test_only``. The catalogue is the list below: a fault
exists because it is listed here, not because some module was imported.
"""

from __future__ import annotations

from dataclasses import dataclass

from cutcheck.model.errors import InvalidArgument
from cutcheck.reference.core.seams import AnyFault, Rules
from cutcheck.reference.faults import (
    barriers,
    batch,
    coordinator,
    keygroups,
    recovery,
    rescale,
    savepoints,
    sinks,
    storage,
)

FAULTS: tuple[AnyFault, ...] = (
    *barriers.FAULTS,
    *batch.FAULTS,
    *coordinator.FAULTS,
    *keygroups.FAULTS,
    *recovery.FAULTS,
    *rescale.FAULTS,
    *savepoints.FAULTS,
    *sinks.FAULTS,
    *storage.FAULTS,
)


def _by_name(faults: tuple[AnyFault, ...]) -> dict[str, AnyFault]:
    named: dict[str, AnyFault] = {}
    for fault in faults:
        if fault.name in named:
            raise TypeError(f"two faults are named {fault.name!r}")
        named[fault.name] = fault
    return named


CATALOGUE: dict[str, AnyFault] = _by_name(FAULTS)
# test_only: a fault the campaigns do not find (benchmarks/bench_fuzz.py measures, for every fault, on
# how many of 5 campaign seeds each campaign finds it within 60 s); a fault they find is in the score.
MUTANTS: dict[str, str] = {n: f.mechanism for n, f in CATALOGUE.items() if not f.test_only}
TEST_ONLY_FAULTS: dict[str, str] = {n: f.mechanism for n, f in CATALOGUE.items() if f.test_only}


@dataclass(frozen=True, slots=True)
class Mutants:
    """The faults a scenario switches on, by name."""

    names: frozenset[str] = frozenset()

    def __contains__(self, name: object) -> bool:
        return name in self.names

    @classmethod
    def of(cls, names: tuple[str, ...] | list[str]) -> Mutants:
        unknown = [n for n in names if n not in CATALOGUE]
        if unknown:
            raise InvalidArgument(f"unknown mutant(s) {', '.join(unknown)}; known: {', '.join(CATALOGUE)}.")
        return cls(frozenset(names))

    def rules(self) -> Rules:
        return Rules(CATALOGUE[n] for n in sorted(self.names))


def catalogue_table() -> list[str]:
    """The catalogue as Markdown rows (docs/design.md section 7 holds them; a test keeps them equal)."""
    rows = ["| mutant | bug | layer | mechanism | seam |", "|---|---|---|---|---|"]
    for name, f in sorted(CATALOGUE.items(), key=lambda kv: (kv[1].test_only, kv[1].layer.value, kv[0])):
        label = f"`{name}`" + (" (tests only)" if f.test_only else "")
        rows.append(f"| {label} | {f.key or 'generic'} | {f.layer.value} | {f.mechanism} | "
                    f"`{f.seam.where}.{f.seam.name}` |")
    return rows
