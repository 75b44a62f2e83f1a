"""Seams: the named places where the engine applies a rule that a fault may replace.

The protocol code states each such rule once, as a function marked ``@seam``, and applies it through
the run's :class:`Rules` (``engine.rules.<seam>(...)``). A :class:`Fault` names one seam and supplies
the wrong rule; it receives the correct one as its first argument, so a fault that is wrong only in
some cases can defer to it in the others. With no fault switched on, ``Rules`` hands out the correct
rules themselves, so the protocol code has no ``if name in mutants`` anywhere.

This module imports nothing of the engine: the rooms import it, never the other way round.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_CORRECT: dict[str, Callable[..., Any]] = {}


def seam(rule: F) -> F:
    """Mark ``rule`` as the correct rule at the seam of its name."""
    name = rule.__name__
    if _CORRECT.get(name, rule) is not rule:
        raise RuntimeError(f"two rules claim the seam {name!r}")
    _CORRECT[name] = rule
    return rule


def seams() -> dict[str, Callable[..., Any]]:
    """Every seam registered so far (the modules that define them must have been imported)."""
    return dict(_CORRECT)


class Layer(StrEnum):
    """Where in Flink the bug a fault re-creates lived."""

    BARRIERS = "barriers"
    RECOVERY = "recovery"
    RESCALE = "rescale"
    KEYGROUPS = "keygroups"
    STORAGE = "storage"
    SAVEPOINTS = "savepoints"
    SINKS = "sinks"
    DEBLOATING = "debloating"
    BATCH = "batch"
    SHUFFLE = "shuffle"


_FAULTS: dict[str, Fault] = {}


class Fault:
    """A re-created bug: the wrong rule at one seam. Subclasses are registered by ``name``.

    The first line of a subclass's docstring is the bug's one-line mechanism; ``key`` is the issue
    that reported it (Flink JIRA, or Iceberg/Kafka), empty for a generic class of bug with no one
    report. ``test_only`` faults show that a check can fail and are not part of the mutation score.
    """

    name: ClassVar[str]
    seam: ClassVar[str]
    layer: ClassVar[Layer]
    key: ClassVar[str] = ""
    test_only: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not (cls.__doc__ or "").strip():
            raise TypeError(f"fault {cls.__name__} needs a docstring: its mechanism")
        if cls.name in _FAULTS:
            raise TypeError(f"two faults are named {cls.name!r}")
        _FAULTS[cls.name] = cls()

    @property
    def mechanism(self) -> str:
        return (type(self).__doc__ or "").strip().splitlines()[0]

    def rule(self, correct: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def faults() -> dict[str, Fault]:
    """Every fault registered so far, by name."""
    return dict(_FAULTS)


class Rules:
    """The rules in force in one run: at every seam the correct rule, or the one fault replacing it."""

    def __init__(self, switched_on: Iterable[Fault] = ()):
        self.faults: dict[str, Fault] = {}
        for fault in switched_on:
            if fault.seam in self.faults:
                raise ValueError(f"faults {self.faults[fault.seam].name!r} and {fault.name!r} replace the same "
                                 f"seam {fault.seam!r}; switch on one of them")
            self.faults[fault.seam] = fault

    def __getattr__(self, name: str) -> Callable[..., Any]:
        # Only reached on the first use of a seam in this run: bind it, then keep it as an attribute.
        correct = _CORRECT.get(name)
        if correct is None:
            raise AttributeError(f"no seam named {name!r}")
        fault = self.faults.get(name)
        bound = correct if fault is None else functools.partial(fault.rule, correct)
        setattr(self, name, bound)
        return bound

    @property
    def names(self) -> frozenset[str]:
        return frozenset(f.name for f in self.faults.values())

    def __contains__(self, name: object) -> bool:
        return name in self.names
