"""The mutant catalogue: every fault, by name (docs/design.md "Mutants").

Each fault is a re-created bug that replaces one rule at one seam (``reference.core.seams``);
``verify`` must kill every one that is not ``test_only``. The layer modules are imported here so that
their faults register; the seams themselves register when the engine's rooms are imported.
"""

from __future__ import annotations

from dataclasses import dataclass

from cutcheck.model.errors import InvalidArgument
from cutcheck.reference.core.seams import Fault, Rules, faults, seams
from cutcheck.reference.faults import (  # noqa: F401 (registers)
    barriers,
    batch,
    keygroups,
    recovery,
    rescale,
    savepoints,
    sinks,
    storage,
)
from cutcheck.reference.recovery import rescale as _rescale  # noqa: F401
from cutcheck.reference.storage import fs, rules  # noqa: F401

CATALOGUE: dict[str, Fault] = faults()
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
    import importlib

    for room in ("engine", "batch", "recovery.rescale", "storage.fs", "storage.rules", "run_storage"):
        importlib.import_module(f"cutcheck.reference.{room}")  # their import registers the seams

    known = seams()
    rows = ["| mutant | bug | layer | mechanism | seam |", "|---|---|---|---|---|"]
    for name, f in sorted(CATALOGUE.items(), key=lambda kv: (kv[1].test_only, kv[1].layer.value, kv[0])):
        rule = known.get(f.seam)
        where = f"`{rule.__module__.removeprefix('cutcheck.')}.{f.seam}`" if rule else f"`{f.seam}` (unregistered)"
        label = f"`{name}`" + (" (tests only)" if f.test_only else "")
        rows.append(f"| {label} | {f.key or 'generic'} | {f.layer.value} | {f.mechanism} | {where} |")
    return rows
