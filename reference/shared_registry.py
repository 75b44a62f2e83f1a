"""The shared-state registry: last-used-checkpoint semantics of Flink 1.15+ (facts §5.4).

Not reference counting: each shared file remembers the checkpoint that created it and the newest
checkpoint that used it. A file is registered when a subtask acknowledges (whether or not its
checkpoint later completes), and becomes garbage once every retained checkpoint is newer than its
last use (``unregister_unused(lowest retained id)``). That is what lets an aborted checkpoint's
upload be reused by the next checkpoint, and why a file of checkpoint 1 can outlive the retained
window when checkpoint 10 still uses it.

Files created by a checkpoint the job restored without claiming it (``no_claim``) are never
returned for deletion: ``highest_not_claimed`` marks them (``registerAllAfterRestored``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SharedEntry:
    path: str
    created_by: int
    last_used: int


class SharedStateRegistry:
    def __init__(self) -> None:
        self.entries: dict[str, SharedEntry] = {}
        self.highest_not_claimed = -1

    def register(self, path: str, cp: int) -> SharedEntry:
        """registerReference: a new file is created by ``cp``; a known one is now also used by it."""
        entry = self.entries.get(path)
        if entry is None:
            entry = self.entries[path] = SharedEntry(path, cp, cp)
        else:
            entry.last_used = max(entry.last_used, cp)
        return entry

    def register_restored(self, paths: list[str], cp: int, claimed: bool) -> None:
        """registerAllAfterRestored: the restored checkpoint's files, owned only when claimed."""
        for path in paths:
            self.register(path, cp)
        if not claimed:
            self.highest_not_claimed = max(self.highest_not_claimed, cp)

    def unregister_unused(self, lowest_retained: int) -> list[str]:
        """Forget every entry last used before ``lowest_retained``; return the files to delete."""
        doomed: list[str] = []
        for path, entry in list(self.entries.items()):
            if entry.last_used < lowest_retained:
                del self.entries[path]
                if entry.created_by > self.highest_not_claimed:
                    doomed.append(path)
        return sorted(doomed)

    def owned(self, path: str) -> bool:
        entry = self.entries.get(path)
        return entry is not None and entry.created_by > self.highest_not_claimed

    def __contains__(self, path: object) -> bool:
        return path in self.entries

    def __len__(self) -> int:
        return len(self.entries)
