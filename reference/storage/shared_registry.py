"""The shared-state registry: last-used-checkpoint semantics of Flink 1.15+ (facts §5.4).

Not reference counting: each shared file remembers the checkpoint that created it and the newest
checkpoint that used it. A file is registered when a subtask acknowledges (whether or not its
checkpoint later completes), and becomes garbage once every retained checkpoint is newer than its
last use (``unregister_unused(lowest retained id)``). That is what lets a file of checkpoint 1
outlive the retained window while checkpoint 10 still uses it.

Entries are keyed like Flink's SharedStateRegistryKey: by what the file *is* (here the key group
and the digest of its bytes), not where it is. Registering a known key returns the file already
registered under it (``registerReference`` returns the canonical handle), which is how a later
checkpoint reuses an aborted checkpoint's upload instead of leaving it to be deleted.

Files created by a checkpoint the job restored without claiming it (``no_claim``) are never
returned for deletion, and never offered for reuse: ``highest_not_claimed`` marks them
(``registerAllAfterRestored``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cutcheck.reference.core.seams import seam


@seam
def registry_may_discard(created_by: int, highest_not_claimed: int) -> bool:
    """The registry deletes only files the job created: never those of a checkpoint restored without
    claiming it, whose id bounds ``highest_not_claimed`` (facts §8.3, §8.4)."""
    return created_by > highest_not_claimed


@dataclass(slots=True)
class SharedEntry:
    key: str
    path: str
    created_by: int
    last_used: int


class SharedStateRegistry:
    def __init__(self) -> None:
        self.entries: dict[str, SharedEntry] = {}
        self.highest_not_claimed = -1
        # Entries of a checkpoint restored without claiming it that fell out of use (kept on disk: the job
        # does not own them), counted whatever the ownership rule said: for coverage (``abstract_coverage``).
        self.released_restored = 0

    def register(self, key: str, path: str, cp: int) -> str:
        """registerReference: a new key is created by ``cp``; a known one is now also used by it.
        Returns the canonical file of the key."""
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = SharedEntry(key, path, cp, cp)
        else:
            entry.last_used = max(entry.last_used, cp)
        return entry.path

    def reusable(self, key: str) -> str | None:
        """The file registered under ``key`` if the job owns it (what a new checkpoint may reference)."""
        entry = self.entries.get(key)
        return entry.path if entry is not None and entry.created_by > self.highest_not_claimed else None

    def register_restored(self, keyed_paths: list[tuple[str, str]], cp: int, claimed: bool) -> None:
        """registerAllAfterRestored: the restored checkpoint's files, owned only when claimed."""
        for key, path in keyed_paths:
            self.register(key, path, cp)
        if not claimed:
            self.highest_not_claimed = max(self.highest_not_claimed, cp)

    def unregister_unused(self, lowest_retained: int, may_discard: Callable[[int, int], bool] | None = None) -> list[str]:
        """Forget every entry last used before ``lowest_retained``; return the files to delete.
        ``may_discard(created_by, highest_not_claimed)`` says whether the job owns a file."""
        owned = may_discard or registry_may_discard
        doomed: list[str] = []
        for key, entry in list(self.entries.items()):
            if entry.last_used < lowest_retained:
                del self.entries[key]
                self.released_restored += entry.created_by <= self.highest_not_claimed
                if owned(entry.created_by, self.highest_not_claimed):
                    doomed.append(entry.path)
        return sorted(doomed)

    def discard_all_except(self, live: set[str], may_discard: Callable[[int, int], bool] | None = None) -> list[str]:
        """At job end: forget every entry whose file no retained checkpoint uses; return owned ones."""
        owned = may_discard or registry_may_discard
        doomed: list[str] = []
        for key, entry in list(self.entries.items()):
            if entry.path not in live:
                del self.entries[key]
                if owned(entry.created_by, self.highest_not_claimed):
                    doomed.append(entry.path)
        return sorted(doomed)

    def __len__(self) -> int:
        return len(self.entries)
