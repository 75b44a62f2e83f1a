"""What differs between apache-flink releases, in one place: which releases exist, what Python and Java
each runs on, and the configuration keys that were renamed between them.

cutcheck writes its job and cluster configuration with the newest keys (Flink 2.x); ``adapt`` renames
them for an older release. Each row carries where the fact comes from. The Python rows were checked
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


@dataclass(frozen=True, slots=True)
class KeyRename:
    """A configuration key cutcheck sets, under its 2.x name, and its name before release ``since``."""

    key: str
    old: str
    since: tuple[int, int]
    source: str


# Keys Flink renamed in 1.20, which kept the old names as deprecated fallbacks (2.1.0 still has them).
# Checked by the key strings in each release's flink-dist jar: 1.19.3 has only the old names, 1.20.3
# and 2.1.0 both. The value formats are the same on both sides of each rename.
RENAMES: tuple[KeyRename, ...] = (
    KeyRename("execution.checkpointing.dir", "state.checkpoints.dir", (1, 20),
              "CheckpointingOptions.CHECKPOINTS_DIRECTORY (1.20: deprecated key state.checkpoints.dir)"),
    KeyRename("execution.checkpointing.num-retained", "state.checkpoints.num-retained", (1, 20),
              "CheckpointingOptions.MAX_RETAINED_CHECKPOINTS (1.20)"),
    KeyRename("execution.checkpointing.incremental", "state.backend.incremental", (1, 20),
              "CheckpointingOptions.INCREMENTAL_CHECKPOINTS (1.20)"),
    KeyRename("execution.checkpointing.data-inline-threshold", "state.storage.fs.memory-threshold", (1, 20),
              "CheckpointingOptions.FS_SMALL_FILE_THRESHOLD (1.20)"),
    KeyRename("execution.state-recovery.path", "execution.savepoint.path", (1, 20),
              "StateRecoveryOptions.SAVEPOINT_PATH (1.20; 1.19: SavepointConfigOptions)"),
    KeyRename("execution.state-recovery.claim-mode", "execution.savepoint-restore-mode", (1, 20),
              "StateRecoveryOptions.RESTORE_MODE (1.20, enum RecoveryClaimMode; 1.19: RestoreMode, same names)"),
    KeyRename("execution.state-recovery.ignore-unclaimed-state", "execution.savepoint.ignore-unclaimed-state", (1, 20),
              "StateRecoveryOptions.SAVEPOINT_IGNORE_UNCLAIMED_STATE (1.20)"),
    KeyRename("execution.checkpointing.savepoint-dir", "state.savepoints.dir", (1, 20),
              "CheckpointingOptions.SAVEPOINT_DIRECTORY (1.20)"),
)


def adapt(conf: dict[str, str], version: str) -> dict[str, str]:
    """``conf`` (2.x keys) with every renamed key under the name ``version`` reads."""
    release = parse(version)[:2]
    old = {r.key: r.old for r in RENAMES if release < r.since}
    return {old.get(k, k): v for k, v in conf.items()}


def installed() -> str:
    """The version of the PyFlink this process imports (the worker's release, or the flink extra in-process)."""
    from pyflink.version import __version__

    return str(__version__)
