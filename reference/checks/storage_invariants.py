"""The on-disk storage's invariants beyond REF: SAVEPOINT_KEPT and NO_ORPHANS; and, for either storage,
RETAINED and RESTORE_POINT (``RetentionWatch``).

REF (reference.storage.fs: ``_check_ref``) asks that no file a *retained* checkpoint references is
deleted. Two promises reach further than the retained window:

* SAVEPOINT_KEPT: a completed savepoint belongs to the user, not to the job. Subsumption drops it
  from the store (savepoints are always subsumable, facts §8.2) but never deletes it, so its
  ``_metadata`` and every file it names stay; so do the files of the snapshot a ``no_claim``
  restore started from (facts §8.4). Checked after every completion that subsumed something and
  when the job ends.
* NO_ORPHANS: when the job ends (``FsCheckpointStorage.close``), every file in the job's
  directories (its job directory, its savepoint directories, and with entropy injection the
  job directories under each random prefix) is referenced by a retained checkpoint or by a
  savepoint the run completed, or is not the job's to delete: it was there before the run and
  no claimed checkpoint owned it (a ``no_claim`` restore's files, another run's leftovers).
  This is reference.storage.inspection's orphan rule seen from the job that wrote the files.

The watch exists for an on-disk storage only (``checks.run_checks`` subscribes it); it reads the storage's store of
completed checkpoints (``held``) and the disk, never the engine's state.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cutcheck.model.errors import InvariantViolation
from cutcheck.model.kinds import CheckpointKind
from cutcheck.reference.storage.files import METADATA, SAVEPOINT_PREFIX
from cutcheck.reference.storage.fs import FsCheckpointStorage
from cutcheck.reference.storage.inspection import entropy_roots
from cutcheck.reference.storage.memory import latest_index
from cutcheck.reference.storage.retention import expected_retention

if TYPE_CHECKING:
    from cutcheck.reference.storage.fs import FsCheckpointStorage, Held
    from cutcheck.reference.storage.memory import CompletedCheckpoint


@dataclass(frozen=True, slots=True)
class KeptSnapshot:
    """A snapshot that must stay restorable whatever the store does: its _metadata and files."""

    cp: int
    what: str  # "savepoint 4", "checkpoint 7 restored in no_claim mode"
    files: tuple[str, ...]  # absolute, real paths; the _metadata first

    @classmethod
    def of(cls, held: Held, what: str) -> KeptSnapshot:
        return cls(held.cp, what, tuple(_files_of(held)))


class StorageWatch:
    """SAVEPOINT_KEPT and NO_ORPHANS over one FsCheckpointStorage, from its first to its last step."""

    def __init__(self, storage: FsCheckpointStorage):
        self.storage = storage
        self.kept: list[KeptSnapshot] = [KeptSnapshot.of(h, f"{h.kind} {h.cp} restored in no_claim mode")
                                         for h in storage.held if not h.owned]
        claimed = {f for h in storage.held if h.owned for f in _files_of(h)}
        # What the run found on disk and does not own: never its orphans.
        self.not_ours = frozenset(self._scope_files()) - claimed

    @classmethod
    def of(cls, storage: object) -> StorageWatch | None:
        """A watch for an on-disk storage (None for any other); ``at_close`` runs when it reports closing."""
        return cls(storage) if isinstance(storage, FsCheckpointStorage) else None

    # ------------------------------------------------------------------ hooks
    def on_complete(self, done: CompletedCheckpoint, subsumed: list[int]) -> None:
        if done.kind == CheckpointKind.SAVEPOINT:
            held = next(h for h in reversed(self.storage.held) if h.cp == done.cp)  # the latest is never subsumed
            self.kept.append(KeptSnapshot.of(held, f"savepoint {done.cp}"))
        if subsumed:
            self.check_kept(f"after checkpoint {done.cp} completed and subsumed {', '.join(map(str, subsumed))}")

    def at_close(self) -> None:
        self.check_kept("when the job ended")
        self.check_no_orphans()

    # ------------------------------------------------------------------ the checks
    def check_kept(self, when: str) -> None:
        """SAVEPOINT_KEPT: every file of every kept snapshot exists."""
        for snap in self.kept:
            for path in snap.files:
                if not os.path.exists(path):
                    raise InvariantViolation("SAVEPOINT_KEPT", f"{when}: {snap.what} is no longer restorable: "
                                                               f"{path} was deleted")

    def check_no_orphans(self) -> None:
        """NO_ORPHANS: every file of the job's directories is referenced, or not the job's."""
        referenced = {f for h in self.storage.held for f in _files_of(h)}
        referenced.update(f for snap in self.kept for f in snap.files)
        orphans = sorted(f for f in self._scope_files() if f not in referenced and f not in self.not_ours)
        if orphans:
            raise InvariantViolation(
                "NO_ORPHANS",
                f"when the job ended: {len(orphans)} file(s) no retained checkpoint or savepoint references, "
                f"e.g. {', '.join(orphans[:3])}; retained: {', '.join(str(h.cp) for h in self.storage.held) or 'none'}",
            )

    def _scope_files(self) -> list[str]:
        """Every file in the job's directories, as real paths."""
        s = self.storage
        roots = [s.job_dir]
        if os.path.isdir(s.base):
            prefix = f"{SAVEPOINT_PREFIX}{s.job[:6]}-"
            roots += [os.path.join(s.base, n) for n in sorted(os.listdir(s.base)) if n.startswith(prefix)]
        entropy = s.config.entropy
        if entropy and entropy in s.data_base:

            _, data_roots = entropy_roots(s.data_base, entropy, s.config.entropy_length)
            roots += [os.path.join(r, s.job) for r in data_roots]
        found: set[str] = set()
        for root in roots:
            for d, _dirs, names in os.walk(root):
                found.update(os.path.realpath(os.path.join(d, n)) for n in names)
        return sorted(found)


def _files_of(held: Held) -> list[str]:
    paths = [os.path.join(held.path, METADATA), *held.files["exclusive"], *held.files["shared"]]
    return [os.path.realpath(p) for p in paths]


class RetentionWatch:
    """RETAINED: after every completion the store holds exactly what Flink's store would
    (``storage.retention.expected_retention`` over every entry the store has seen, stated as a whole),
    so neither retention nor a savepoint ever drops the newest checkpoint later ones build on
    (FLINK-21351) and nothing is kept past ``retained``. For either storage."""

    def __init__(self, storage: Any, retained: int):
        self.storage = storage
        self.retained = retained
        self.history: list[tuple[int, str]] = list(storage.retained())  # a restored checkpoint, if any

    def on_complete(self, done: Any) -> None:
        self.history.append((done.cp, done.kind))
        expected = expected_retention(self.history, self.retained)
        held = self.storage.retained_ids()
        if held != expected:
            raise InvariantViolation("RETAINED", f"after {done.kind} {done.cp} completed the store holds {held}, "
                                                 f"but with {self.retained} retained it must hold {expected}")
        self.check_restore_point(done)

    def check_restore_point(self, done: Any) -> None:
        """RESTORE_POINT: what a failover restores is never older than a checkpoint that completed before
        it. Acks may cross, but a completed checkpoint subsumes the older pending ones, so checkpoints
        complete in id order and the store's latest (the last added) is the newest; a restore from an
        older one would roll back what the newer one's notifications committed (FLINK-6284's class)."""
        newest = max((cp for cp, kind in self.history if kind != CheckpointKind.SAVEPOINT), default=0)
        entries = self.storage.retained()
        i = latest_index(entries)
        if i is not None and entries[i][0] < newest:
            raise InvariantViolation("RESTORE_POINT", f"after {done.kind} {done.cp} completed the store's latest is "
                                                      f"{entries[i][1]} {entries[i][0]}, older than checkpoint {newest}, "
                                                      "which completed before it: a failover would restore the older one")
