"""The scenario's ``storage`` section and how a run opens its checkpoint storage.

    "storage": {"dir": "ckpts/_entropy_/flink", "incremental": true, "restore_mode": "no_claim",
                "entropy": "_entropy_", "entropy_length": 4, "inline_threshold": 20480, "job": "..."}

``dir`` is relative to the working directory. ``incremental`` defaults to the checkpoint
section's; ``restore_mode`` (claim | no_claim, default no_claim like Flink) applies when the run
restores (``--restore PATH`` or a ``"restore": {"path": ..., "mode": ...}`` section); ``entropy``
is the marker replaced in data-file paths (facts §5.6), off by default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from cutcheck.model.errors import ScenarioError, StorageError
from cutcheck.model.kinds import RestoreMode, values
from cutcheck.model.sections import Field, Section

RESTORE_MODES = values(RestoreMode)
DEFAULT_INLINE_THRESHOLD = 20 * 1024  # state.storage.fs.memory-threshold
MAX_INLINE_THRESHOLD = 1024 * 1024

STORAGE = Section("storage", {
    "dir": Field(str, nullable=True),
    "job": Field(str, nullable=True),
    "entropy": Field(str, nullable=True),
    "incremental": Field(bool),
    "inline_threshold": Field(int, low=0, high=MAX_INLINE_THRESHOLD, default=DEFAULT_INLINE_THRESHOLD,
                              says=f"bytes in 0..{MAX_INLINE_THRESHOLD} (Flink's maximum)"),
    "entropy_length": Field(int, low=1, default=4, says="a positive integer (s3.entropy.length)"),
    "restore_mode": Field(str, choices=RESTORE_MODES, default="no_claim"),
})


class ResubmitFrom(StrEnum):
    """What a resubmitted job restores from: the first job's latest retained checkpoint, or its latest savepoint."""

    CHECKPOINT = "checkpoint"
    SAVEPOINT = "savepoint"


RESUBMIT = Section("resubmit", {"from": Field(str, choices=values(ResubmitFrom)),
                                "mode": Field(str, choices=RESTORE_MODES, default="no_claim")},
                   shape="an object with 'from' (checkpoint or savepoint) and optional 'mode' (claim or no_claim)")
RESTORE = Section("restore", {"path": Field(str), "mode": Field(str, choices=RESTORE_MODES, nullable=True)},
                  shape="an object with 'path' (a chk-N or savepoint directory) and optional 'mode'")


@dataclass(frozen=True, slots=True)
class StorageConfig:
    dir: str
    job: str | None = None
    incremental: bool = False
    inline_threshold: int = DEFAULT_INLINE_THRESHOLD
    entropy: str | None = None
    entropy_length: int = 4
    restore_mode: RestoreMode = RestoreMode.NO_CLAIM
    seed: int = 0

    @classmethod
    def from_json(cls, raw: Any, where: str = "scenario", *, incremental: bool = False, seed: int = 0,
                  dir_override: str | None = None) -> StorageConfig | None:
        """None when there is no directory (the run keeps checkpoints in memory)."""
        sec = validate(raw, where)
        directory = dir_override or sec.get("dir")
        if directory is None:
            return None
        return cls(dir=str(directory), job=sec.get("job"), incremental=sec.get("incremental", incremental),
                   inline_threshold=sec["inline_threshold"], entropy=sec.get("entropy"),
                   entropy_length=sec["entropy_length"], restore_mode=RestoreMode(sec["restore_mode"]), seed=seed)


def validate(raw: Any, where: str = "scenario") -> dict[str, Any]:
    """The storage section's fields, absent ones (or all, when there is no section) at their defaults."""
    sec = STORAGE.read(raw, where)
    job = sec.get("job")
    if job is not None and ("/" in job or job in (".", "..")):
        raise ScenarioError(f"{where}: storage.job {job!r} must be a plain directory name.")
    return sec


def restore_section(raw: Any, where: str = "scenario") -> tuple[str | None, RestoreMode | None]:
    """The scenario's ``restore`` section: (path, mode)."""
    if raw is None:
        return None, None
    sec = RESTORE.read(raw, where)
    if "path" not in sec:
        raise ScenarioError(f"{RESTORE.at(where)}: must be {RESTORE.shape}.")
    mode = sec.get("mode")
    return sec["path"], None if mode is None else RestoreMode(mode)


@dataclass(frozen=True, slots=True)
class Resubmit:
    """The scenario's ``resubmit`` section: after the job ends clean, a second job restores from it."""

    source: ResubmitFrom
    mode: RestoreMode


def resubmit_section(raw: Any, where: str = "scenario", *, storage: bool = True, restore: bool = False) -> Resubmit | None:
    """The ``resubmit`` section, refused with a ``restore`` section or without a ``storage`` section."""
    if raw is None:
        return None
    sec = RESUBMIT.read(raw, where)
    if "from" not in sec:
        raise ScenarioError(f"{RESUBMIT.at(where)}: must be {RESUBMIT.shape}.")
    if restore:
        raise ScenarioError(f"{where}: resubmit and restore exclude each other; a resubmitted job restores from the "
                            "first job's own checkpoint, so drop one of them.")
    if not storage:
        raise ScenarioError(f"{where}: resubmit needs on-disk checkpoints; add a storage section (with a dir, or run "
                            "with --checkpoint-dir).")
    return Resubmit(ResubmitFrom(sec["from"]), RestoreMode(sec["mode"]))


def flink_entropy(path: os.PathLike[str] | str, key: str | None, length: int) -> tuple[str | None, int]:
    """``s3.entropy.key`` and ``s3.entropy.length`` from a Flink configuration file (flat ``flink-conf.yaml``
    lines ``a.b.c: v`` or the nested ``config.yaml`` of Flink 2.x); ``key``/``length`` where it sets none.
    A file that sets no entropy key means none: data files then live under the path given only."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageError(f"--flink-conf {path}: cannot be read ({type(exc).__name__}); give Flink's config.yaml or "
                           f"flink-conf.yaml.") from None
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing mappings
    for raw in lines:
        text = raw.split(" #", 1)[0].rstrip()
        if not text.strip() or text.lstrip().startswith(("#", "-")) or ":" not in text:
            continue
        indent = len(text) - len(text.lstrip())
        name, _, value = text.strip().partition(":")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        full = ".".join([*(k for _, k in stack), name.strip()])
        if value.strip():
            found[full] = value.strip().strip("'\"")
        else:
            stack.append((indent, name.strip()))
    raw_length = found.get("s3.entropy.length", str(length))
    if not raw_length.isdigit() or int(raw_length) < 1:
        raise StorageError(f"--flink-conf {path}: s3.entropy.length {raw_length!r} is not a positive integer; fix it "
                           f"in the file.")
    return found.get("s3.entropy.key") or None, int(raw_length)
