"""The scenario's ``storage`` section and how a run opens its checkpoint storage.

    "storage": {"dir": "ckpts/_entropy_/flink", "incremental": true, "restore_mode": "no_claim",
                "entropy": "_entropy_", "entropy_length": 4, "inline_threshold": 20480, "job": "..."}

``dir`` is relative to the working directory. ``incremental`` defaults to the checkpoint
section's; ``restore_mode`` (claim | no_claim, default no_claim like Flink) applies when the run
restores (``--restore PATH`` or a ``"restore": {"path": ..., "mode": ...}`` section); ``entropy``
is the marker replaced in data-file paths (facts §5.6), off by default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cutcheck.model.errors import ScenarioError

RESTORE_MODES = ("claim", "no_claim")
DEFAULT_INLINE_THRESHOLD = 20 * 1024  # state.storage.fs.memory-threshold
MAX_INLINE_THRESHOLD = 1024 * 1024
_FIELDS = {"dir", "incremental", "restore_mode", "entropy", "entropy_length", "inline_threshold", "job"}
_RESTORE_FIELDS = {"path", "mode"}


@dataclass(frozen=True, slots=True)
class StorageConfig:
    dir: str
    job: str | None = None
    incremental: bool = False
    inline_threshold: int = DEFAULT_INLINE_THRESHOLD
    entropy: str | None = None
    entropy_length: int = 4
    restore_mode: str = "no_claim"
    seed: int = 0

    @classmethod
    def from_json(cls, raw: Any, where: str = "scenario", *, incremental: bool = False, seed: int = 0,
                  dir_override: str | None = None) -> StorageConfig | None:
        """None when there is no directory (the run keeps checkpoints in memory)."""
        sec = validate(raw, where)
        directory = dir_override or sec.get("dir")
        if directory is None:
            return None
        return cls(dir=str(directory), job=sec.get("job"), incremental=bool(sec.get("incremental", incremental)),
                   inline_threshold=sec.get("inline_threshold", DEFAULT_INLINE_THRESHOLD), entropy=sec.get("entropy"),
                   entropy_length=sec.get("entropy_length", 4), restore_mode=sec.get("restore_mode", "no_claim"),
                   seed=seed)


def validate(raw: Any, where: str = "scenario") -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: 'storage' must be a JSON object.")
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise ScenarioError(f"{where}: storage: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_FIELDS))}.")
    for name in ("dir", "entropy", "job"):
        if name in raw and raw[name] is not None and (not isinstance(raw[name], str) or not raw[name]):
            raise ScenarioError(f"{where}: storage.{name} must be a non-empty string.")
    job = raw.get("job")
    if job is not None and ("/" in job or job in (".", "..")):
        raise ScenarioError(f"{where}: storage.job {job!r} must be a plain directory name.")
    if "incremental" in raw and not isinstance(raw["incremental"], bool):
        raise ScenarioError(f"{where}: storage.incremental must be true or false.")
    t = raw.get("inline_threshold", DEFAULT_INLINE_THRESHOLD)
    if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t <= MAX_INLINE_THRESHOLD:
        raise ScenarioError(f"{where}: storage.inline_threshold must be bytes in 0..{MAX_INLINE_THRESHOLD} (Flink's maximum), got {t!r}.")
    n = raw.get("entropy_length", 4)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ScenarioError(f"{where}: storage.entropy_length must be a positive integer (s3.entropy.length), got {n!r}.")
    mode = raw.get("restore_mode", "no_claim")
    if mode not in RESTORE_MODES:
        raise ScenarioError(f"{where}: storage.restore_mode {mode!r} is not one of {', '.join(RESTORE_MODES)}.")
    return dict(raw)


def restore_section(raw: Any, where: str = "scenario") -> tuple[str | None, str | None]:
    """The scenario's ``restore`` section: (path, mode)."""
    if raw is None:
        return None, None
    if not isinstance(raw, dict) or not isinstance(raw.get("path"), str):
        raise ScenarioError(f"{where}: 'restore' must be an object with 'path' (a chk-N or savepoint directory) and optional 'mode'.")
    unknown = sorted(set(raw) - _RESTORE_FIELDS)
    if unknown:
        raise ScenarioError(f"{where}: restore: unknown field(s) {', '.join(unknown)}; allowed: path, mode.")
    mode = raw.get("mode")
    if mode is not None and mode not in RESTORE_MODES:
        raise ScenarioError(f"{where}: restore.mode {mode!r} is not one of {', '.join(RESTORE_MODES)}.")
    return raw["path"], mode
