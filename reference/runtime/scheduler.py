"""The scheduler's chooser: every nondeterministic choice of the engine goes through one of these.

A seeded chooser makes runs reproducible; an external chooser (Hypothesis draws integers) lets a
test drive, and shrink, the schedule itself.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Protocol


class Chooser(Protocol):
    def choose(self, weights: Sequence[int]) -> int:
        """Pick an index into ``weights`` (all positive), with probability proportional to the weight."""
        ...


class SeededChooser:
    """Deterministic weighted choice from a seed (Python's Mersenne Twister, stable across platforms)."""

    __slots__ = ("_rng",)

    def __init__(self, seed: int):
        self._rng = random.Random(seed)

    def choose(self, weights: Sequence[int]) -> int:
        n = len(weights)
        if n == 1:
            return 0
        cumulative = list(accumulate(weights))
        # The first index whose cumulative weight exceeds r: the weighted pick, in C.
        return bisect_right(cumulative, self._rng.randrange(cumulative[-1]))


class ExternalChooser:
    """Delegates each choice to a function ``draw(n) -> int in [0, n)``, e.g. Hypothesis' ``data.draw``.

    Weights are ignored on purpose: the external driver decides, and shrinking towards index 0
    shortens schedules (index 0 is always the most "progressing" action in the engine's ordering).
    After ``budget`` choices it falls back to a seeded chooser so that runs always finish.
    """

    __slots__ = ("_draw", "_budget", "_fallback", "used")

    def __init__(self, draw: Callable[[int], int], budget: int = 2000, seed: int = 0):
        self._draw = draw
        self._budget = budget
        self._fallback = SeededChooser(seed)
        self.used = 0

    def choose(self, weights: Sequence[int]) -> int:
        if len(weights) == 1:
            return 0
        if self.used >= self._budget:
            return self._fallback.choose(weights)
        self.used += 1
        return self._draw(len(weights))


class ScriptedChooser:
    """Replays recorded choices (modulo the number of enabled actions), then chooses by seed."""

    __slots__ = ("_choices", "_at", "_fallback")

    def __init__(self, choices: Sequence[int], seed: int):
        self._choices = list(choices)
        self._at = 0
        self._fallback = SeededChooser(seed)

    def choose(self, weights: Sequence[int]) -> int:
        if len(weights) == 1:
            return 0
        if self._at < len(self._choices):
            c = self._choices[self._at] % len(weights)
            self._at += 1
            return c
        return self._fallback.choose(weights)


class RecordingChooser:
    """Draws each choice from ``draw(n)`` for the first ``budget`` choices and records them, so
    the schedule can be written into a replayable scenario (``schedule.choices``)."""

    __slots__ = ("_draw", "_budget", "_fallback", "choices")

    def __init__(self, draw: Callable[[int], int], budget: int, seed: int):
        self._draw = draw
        self._budget = budget
        self._fallback = SeededChooser(seed)
        self.choices: list[int] = []

    def choose(self, weights: Sequence[int]) -> int:
        if len(weights) == 1:
            return 0
        if len(self.choices) < self._budget:
            c = self._draw(len(weights))
            self.choices.append(c)
            return c
        return self._fallback.choose(weights)
