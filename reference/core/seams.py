"""Seams: the places where the engine applies a rule that a fault may replace.

The protocol code states each such rule once, as a function marked ``@seam``; the decorator turns it
into a :class:`Seam`, a typed handle that the protocol code applies through the run's :class:`Rules`
(``engine.rules[persisted_output](state)``). Because the handle is an ordinary name, a misspelt seam is
an undefined name to a type checker, and the rule's signature travels with it: ``Rules[...]`` returns a
callable of exactly the rule's type.

A :class:`Fault` is a re-created bug: one seam and the wrong rule for it. The wrong rule receives the
correct one as its first argument, so a fault that is wrong only in some cases can defer to it in the
others; its type is checked against the seam's. Faults are plain values, registered by listing them
(``reference.faults.catalogue``); nothing here keeps a global registry, so importing a module never
adds a seam or a fault. With no fault switched on, ``Rules`` hands out the correct rules themselves,
so the protocol code has no ``if name in mutants`` anywhere.

This module imports nothing of the engine: the rooms import it, never the other way round.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True, eq=False)
class Seam(Generic[P, R]):
    """One place where a fault may replace a rule: the rule's name and its correct version.

    Seams compare by identity, so two seams never stand for each other, whatever their names.
    """

    rule: Callable[P, R]
    name: str = field(init=False)
    where: str = field(init=False)  # the module that states the rule, for the catalogue's listing

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.rule.__name__)
        object.__setattr__(self, "where", self.rule.__module__.removeprefix("cutcheck."))

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """The correct rule (what a fault defers to, and what code outside a run may call)."""
        return self.rule(*args, **kwargs)


def seam(rule: Callable[P, R]) -> Seam[P, R]:
    """Mark ``rule`` as the correct rule at a seam of its name."""
    return Seam(rule)


class Layer(StrEnum):
    """Where in Flink the bug a fault re-creates lived."""

    BARRIERS = "barriers"
    COORDINATOR = "coordinator"
    RECOVERY = "recovery"
    RESCALE = "rescale"
    KEYGROUPS = "keygroups"
    STORAGE = "storage"
    SAVEPOINTS = "savepoints"
    SINKS = "sinks"
    DEBLOATING = "debloating"
    BATCH = "batch"
    SHUFFLE = "shuffle"


@dataclass(frozen=True, slots=True)
class Fault(Generic[P, R]):
    """A re-created bug: the wrong ``rule`` at one ``seam``.

    The first line of the rule's docstring is the bug's one-line mechanism (the rest tells the bug's
    story); ``key`` is the issue that reported it (Flink JIRA, or Iceberg/Kafka), empty for a generic
    class of bug with no one report. ``test_only`` faults show that a check can fail and are not part
    of the mutation score.
    """

    name: str
    seam: Seam[P, R]
    layer: Layer
    rule: Callable[Concatenate[Callable[P, R], P], R]
    key: str = ""
    test_only: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", str(self.name))  # a name the model spells (ModelMutant) as a plain str
        if not (self.rule.__doc__ or "").strip():
            raise TypeError(f"fault {self.name!r} needs a docstring on its rule: its mechanism")

    @property
    def mechanism(self) -> str:
        return (self.rule.__doc__ or "").strip().splitlines()[0]

    def bound(self) -> Callable[P, R]:
        """The wrong rule, ready to apply where the correct one would be."""
        return functools.partial(self.rule, self.seam.rule)


# A fault of any seam; the catalogue and a run's rules hold faults of many seams side by side.
AnyFault = Fault[..., Any]


class Rules:
    """The rules in force in one run: at every seam the correct rule, or the one fault replacing it."""

    __slots__ = ("faults", "_replaced")

    def __init__(self, switched_on: Iterable[AnyFault] = ()) -> None:
        self.faults: dict[Seam[..., Any], AnyFault] = {}
        for fault in switched_on:
            if fault.seam in self.faults:
                raise ValueError(f"faults {self.faults[fault.seam].name!r} and {fault.name!r} replace the same "
                                 f"seam {fault.seam.name!r}; switch on one of them")
            self.faults[fault.seam] = fault
        self._replaced: dict[Seam[..., Any], Callable[..., Any]] = {s: f.bound() for s, f in self.faults.items()}

    def __getitem__(self, at: Seam[P, R]) -> Callable[P, R]:
        replaced: Callable[P, R] | None = self._replaced.get(at)
        return at.rule if replaced is None else replaced

    @property
    def names(self) -> frozenset[str]:
        return frozenset(f.name for f in self.faults.values())

    def __contains__(self, name: object) -> bool:
        return name in self.names
