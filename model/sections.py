"""One validator for the JSON objects users write: scenario sections, job-graph vertices and edges.

A :class:`Section` lists the fields an object may have and, per field, its type, range or choices
(a :class:`Field`). :meth:`Section.read` checks an object against it and raises one sentence
naming the place and the field, in one of these forms::

    s.json: storage: unknown field(s) colour; known: dir, entropy, ...
    s.json: debloat.threshold must be a percentage 0..100, got 250.
    s.json: checkpoint.mode 'x' is not one of aligned, unaligned, aligned_timeout, at_least_once.

Checks that span fields (``record_bytes`` fits in ``buffer_bytes``) or need the job graph (a
failure's target names a subtask) stay with the code that owns the section.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cutcheck.model.errors import CutcheckError, ScenarioError

__all__ = ["Field", "Section", "int_fields", "reject_unknown"]

_MISSING: Any = object()


def reject_unknown(obj: Mapping[str, Any], known: Iterable[str], at: str, error: type[CutcheckError] = ScenarioError,
                   qualifier: str = "") -> None:
    """Raise ``error`` when ``obj`` has a key outside ``known``: ``at: unknown field(s) x; known: …``.

    ``qualifier`` follows the unknown names (`` for kind map``) when what is known depends on it."""
    allowed = set(known)
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise error(f"{at}: unknown field(s) {', '.join(unknown)}{qualifier}; known: {', '.join(sorted(allowed))}.")


@dataclass(frozen=True, slots=True)
class Field:
    """What one field accepts. ``kind`` is int, bool or str (None: any JSON value, checked by the
    section's owner); ``low``/``high`` bound an int, ``choices`` close a str; ``nullable`` admits
    null; ``says`` replaces the whole generated description (to add a unit or a Flink option name)."""

    kind: type | None = None
    low: int | None = None
    high: int | None = None
    choices: tuple[str, ...] = ()
    nullable: bool = False
    default: Any = _MISSING
    says: str | None = None

    def describe(self) -> str:
        """What a valid value is, as the end of "... must be ___"."""
        if self.says is not None:
            return self.says
        if self.choices:
            text = f"one of {', '.join(self.choices)}"
        elif self.kind is bool:
            text = "true or false"
        elif self.kind is str:
            text = "a non-empty string"
        elif self.kind is int:
            if self.high is not None:
                text = f"an integer in {self.low}..{self.high}"
            elif self.low == 1:
                text = "a positive integer"
            elif self.low == 0:
                text = "a non-negative integer"
            elif self.low is not None:
                text = f"an integer of at least {self.low}"
            else:
                text = "an integer"
        else:
            text = "a JSON value"
        return f"{text} or null" if self.nullable else text

    def refusal(self, path: str, value: Any) -> str:
        """The sentence refusing ``value`` at ``path``."""
        if self.choices and self.says is None:
            return f"{path} {value!r} is not one of {', '.join(self.choices)}."
        return f"{path} must be {self.describe()}, got {value!r}."

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.nullable or self.kind is None
        if self.choices:
            return value in self.choices
        if self.kind is bool:
            return isinstance(value, bool)
        if self.kind is str:
            return isinstance(value, str) and bool(value)
        if self.kind is int:
            return (isinstance(value, int) and not isinstance(value, bool)
                    and (self.low is None or value >= self.low) and (self.high is None or value <= self.high))
        return True


@dataclass(frozen=True, slots=True)
class Section:
    """The fields a JSON object may have. ``name`` is how errors address it (``storage``; empty for
    a whole document); ``shape`` completes "must be ___" when the value is not an object at all."""

    name: str
    fields: Mapping[str, Field]
    error: type[CutcheckError] = ScenarioError
    shape: str = "a JSON object"
    optional: bool = True  # null or absent reads as {} (a list entry is not optional)

    @classmethod
    def of(cls, name: str, config: type, specs: Mapping[str, Field] | None = None, **options: Any) -> Section:
        """The section of a dataclass: its field names, each with the spec ``specs`` gives (else any value)."""
        specs = specs or {}
        names = [f.name for f in dataclasses.fields(config)]
        stray = set(specs) - set(names)
        if stray:  # a spec for a field the dataclass lacks would never be checked
            raise TypeError(f"{config.__name__} has no field(s) {', '.join(sorted(stray))}")
        return cls(name, {n: specs.get(n, Field()) for n in names}, **options)

    @classmethod
    def names(cls, name: str, known: Iterable[str], **options: Any) -> Section:
        """A section whose fields are any JSON value (their owner checks them)."""
        return cls(name, {n: Field() for n in known}, **options)

    def at(self, where: str, name: str | None = None) -> str:
        """How errors address the section: ``where: name`` (either part may be empty)."""
        label = self.name if name is None else name
        return ": ".join(part for part in (where, label) if part)

    def check_names(self, obj: Mapping[str, Any], at: str, qualifier: str = "") -> None:
        reject_unknown(obj, self.fields, at, self.error, qualifier)

    def read(self, raw: Any, where: str, *, name: str | None = None) -> dict[str, Any]:
        """Check ``raw`` and return its fields, with the declared defaults of absent ones.

        ``where`` is the file or document; ``name`` overrides the section's (``failures[2]``)."""
        label = self.name if name is None else name
        at = self.at(where, name)
        if raw is None and self.optional:
            raw = {}
        if not isinstance(raw, Mapping):
            raise self.error(f"{at}: must be {self.shape}.")
        self.check_names(raw, at)
        out: dict[str, Any] = {}
        for key, spec in self.fields.items():
            if key in raw:
                value = raw[key]
                if not spec.accepts(value):
                    raise self.error(spec.refusal(self.at(where, f"{label}.{key}" if label else f"'{key}'"), value))
                out[key] = value
            elif spec.default is not _MISSING:
                out[key] = spec.default
        return out


def int_fields(names: Iterable[str], low: int, **options: Any) -> dict[str, Field]:
    """Several int fields alike (sections with many counts)."""
    return {n: Field(int, low=low, **options) for n in names}
