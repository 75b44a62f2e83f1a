"""Which apache-flink releases exist and what each needs to run: the Python versions it publishes wheels
for and the Java versions it supports (``cutcheck flink env`` checks them before any download).

How a release behaves once it runs (its configuration keys, its checkpointing rules) is the other table,
flink_bridge.features. Each row carries where the fact comes from. The Python rows were checked
against the package index's files (``pip install --dry-run --no-deps --only-binary=:all:
--python-version X.Y apache-flink==V``: a release "has wheels" for X.Y when that resolves), the Java
rows against Flink's "Java compatibility" page of each release line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cutcheck.model.errors import CutcheckError

# The oldest Python cutcheck itself runs on (pyproject's requires-python): the worker imports cutcheck.
CUTCHECK_PYTHON = (3, 11)


@dataclass(frozen=True, slots=True)
class ReleaseLine:
    """One minor line of apache-flink on the package index, with what it needs to run."""

    line: tuple[int, int]
    patches: tuple[int, ...]  # the released patch versions on the package index
    python: tuple[tuple[int, int], tuple[int, int]]  # lowest and highest Python the line publishes wheels for
    java: tuple[int, ...]  # Java majors the line supports (Flink's Java compatibility page)
    java_source: str

    def name(self, patch: int) -> str:
        return f"{self.line[0]}.{self.line[1]}.{patch}"

    def python_range(self) -> str:
        (a, b), (c, d) = self.python
        return f"{a}.{b}" if (a, b) == (c, d) else f"{a}.{b} to {c}.{d}"


_JAVA_1X = "Flink 1.19/1.20 docs, deployment/java_compatibility: Java 8 (deprecated since 1.15), 11, 17 (since 1.18)"
_JAVA_2X = "Flink 2.x docs, deployment/java_compatibility: Java 8 dropped, 11, 17 (default), 21 (experimental since 2.0.0, FLINK-33163)"

# Patch lists: `pip index versions apache-flink` (November 2026). Python ranges: the dry-run above on
# Python 3.6 to 3.13, per line on one patch (1.15.4: 3.6-3.8; 1.16.3: 3.6-3.9; 1.17.2: 3.7-3.10;
# 1.18.1: 3.8-3.10; 1.19.3, 1.20.3, 2.0.2: 3.8-3.11; 2.1.0, 2.2.1, 2.3.0: 3.9-3.12; none has 3.13).
RELEASES: tuple[ReleaseLine, ...] = (
    ReleaseLine((1, 15), (0, 1, 2, 3, 4), ((3, 6), (3, 8)), (8, 11), "Flink 1.15 docs: Java 8, 11"),
    ReleaseLine((1, 16), (0, 1, 2, 3), ((3, 6), (3, 9)), (8, 11), "Flink 1.16 docs: Java 8, 11"),
    ReleaseLine((1, 17), (0, 1, 2), ((3, 7), (3, 10)), (8, 11), "Flink 1.17 docs: Java 8, 11"),
    ReleaseLine((1, 18), (0, 1), ((3, 8), (3, 10)), (8, 11, 17), "Flink 1.18 docs: Java 8, 11, 17 (FLINK-15736)"),
    ReleaseLine((1, 19), (0, 1, 2, 3), ((3, 8), (3, 11)), (8, 11, 17), _JAVA_1X),
    ReleaseLine((1, 20), (0, 1, 2, 3, 4, 5), ((3, 8), (3, 11)), (8, 11, 17), _JAVA_1X),
    ReleaseLine((2, 0), (0, 1, 2), ((3, 8), (3, 11)), (11, 17, 21), _JAVA_2X),
    ReleaseLine((2, 1), (0, 1, 2, 3), ((3, 9), (3, 12)), (11, 17, 21), _JAVA_2X),
    ReleaseLine((2, 2), (0, 1), ((3, 9), (3, 12)), (11, 17, 21), _JAVA_2X),
    ReleaseLine((2, 3), (0,), ((3, 9), (3, 12)), (11, 17, 21), _JAVA_2X),
)


def parse(version: str) -> tuple[int, int, int]:
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version.strip())
    if m is None:
        raise CutcheckError(f"{version!r} is not an apache-flink release number; give one like 2.1.0 or 1.20.3.")
    return int(m[1]), int(m[2]), int(m[3])


def release_line(version: str) -> ReleaseLine:
    """The line of a released version; CutcheckError (one sentence) for a version the package index never had."""
    major, minor, patch = parse(version)
    line = next((r for r in RELEASES if r.line == (major, minor)), None)
    known = ", ".join(r.name(r.patches[0]) + (f" to {r.name(r.patches[-1])}" if len(r.patches) > 1 else "")
                      for r in RELEASES)
    if line is None or patch not in line.patches:
        raise CutcheckError(f"apache-flink {version} is not a release cutcheck knows (released: {known}); "
                            "pick one of those.")
    return line


def runnable_pythons(line: ReleaseLine) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The Python range both the release (its wheels) and cutcheck's worker run on, None when they do not meet."""
    low = max(line.python[0], CUTCHECK_PYTHON)
    return (low, line.python[1]) if low <= line.python[1] else None
