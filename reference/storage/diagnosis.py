"""Why a checkpoint can never be restored, and the safe thing to do about it.

A checkpoint is NOT RESTORABLE when a file its ``_metadata`` names is missing (or lies outside the
storage inspected). Real Flink leaves such checkpoints behind in two ways an operator meets
(docs/flink-facts.md §8.4, §8.6):

* **A claim restore.** A job restored in CLAIM mode owns every file the restored checkpoint names
  and deletes the shared ones once no checkpoint of its own uses them. Flink owns only the
  checkpoint restored: an older checkpoint of the claimed job, or one of a job the claimed
  checkpoint was itself claimed from, still names those shared files, and loses them.
  Signature: only ``shared/`` files are missing.
* **A kill during Flink's own discard** of a subsumed checkpoint: the files go before the
  checkpoint's ``_metadata`` and directory, so a JobManager killed in between leaves a
  ``_metadata`` naming files that are gone. Signature: files of the checkpoint's own directory
  are missing, and its job has a newer completed checkpoint.

Anything else (the newest checkpoint lost its own files) is a deletion outside Flink: a lifecycle
rule, a person, a partial copy. The safe action is the same for all: nothing can restore the
checkpoint, so set it aside whole with ``cutcheck storage quarantine-checkpoint`` (reversible; files
another checkpoint references stay), after which ``orphans --delete`` runs again.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from enum import StrEnum

from cutcheck.reference.storage.files import SHARED_DIR
from cutcheck.reference.storage.guard import chk_id
from cutcheck.reference.storage.inspection import CheckpointInfo, CheckpointListing
from cutcheck.reference.storage.scope import inside


class Cause(StrEnum):
    CLAIMED = "claim restore"
    KILLED_DISCARD = "killed discard"
    DELETED = "deleted outside Flink"
    OUTSIDE = "outside the storage"


@dataclass(frozen=True, slots=True)
class Diagnosis:
    checkpoint: CheckpointInfo
    cause: Cause
    why: str  # the likely cause, in a sentence
    action: str  # the command that sets it aside, reversibly

    def to_json(self, uri: object = str) -> dict[str, object]:
        show = uri if callable(uri) else str
        return {"checkpoint": show(self.checkpoint.path), "cause": self.cause.value, "why": self.why,
                "missing": [show(p) for p in self.checkpoint.missing],
                "outside": [show(p) for p in self.checkpoint.outside], "action": self.action}


def _newer_in_job(listing: CheckpointListing, c: CheckpointInfo) -> bool:
    n = chk_id(os.path.basename(c.path))
    if n is None:
        return False
    job = os.path.dirname(c.path)
    return any(os.path.dirname(o.path) == job and (chk_id(os.path.basename(o.path)) or 0) > n
               for o in listing.checkpoints)


def diagnose(listing: CheckpointListing, c: CheckpointInfo, *, endpoint_url: str | None = None) -> Diagnosis:
    """The likely cause of one NOT RESTORABLE checkpoint and the command that sets it aside."""
    action = "cutcheck storage quarantine-checkpoint " + shlex.quote(listing.uri(c.path)) + (
        f" --endpoint-url {shlex.quote(endpoint_url)}" if endpoint_url else "")
    if not c.missing:
        return Diagnosis(c, Cause.OUTSIDE, "it names files outside the storage inspected (a moved or copied directory "
                         "whose _metadata holds the original's absolute paths); it restores only while those exist",
                         action)
    own = [p for p in c.missing if inside(p, c.path)]
    shared = [p for p in c.missing if SHARED_DIR in p.split("/")[:-1]]
    if not own and len(shared) == len(c.missing):
        why = ("a claim restore: a job restored in CLAIM mode from a checkpoint that shares these files (a newer "
               "checkpoint of this job, or one built on it) owned them and deleted them once it no longer used "
               "them; Flink owns only the checkpoint restored, not older ones naming the same shared files")
        return Diagnosis(c, Cause.CLAIMED, why, action)
    if own and _newer_in_job(listing, c):
        why = ("Flink was killed while discarding this subsumed checkpoint: its files went first, and the "
               "_metadata that names them was never removed")
        return Diagnosis(c, Cause.KILLED_DISCARD, why, action)
    return Diagnosis(c, Cause.DELETED, "files deleted outside Flink (a lifecycle rule, a manual delete, a partial "
                     "copy)", action)


def describe(d: Diagnosis, name: str, uri: object = str) -> str:
    """One paragraph: which files are missing, the likely cause, the safe action."""
    show = uri if callable(uri) else str
    c = d.checkpoint
    bad = c.missing or c.outside
    first = ", ".join(str(show(p)) for p in bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
    what = (f"{len(c.missing)} file(s) it references are missing: {first}" if c.missing
            else f"it references {first}, outside the storage inspected")
    if d.cause is Cause.OUTSIDE:
        return (f"{name} is NOT RESTORABLE here: {what} ({d.why}). Restore from the original, or name that "
                f"directory with --keep-referenced-by if both are meant to stay")
    return (f"{name} is NOT RESTORABLE: {what}. Likely cause: {d.why}. Nothing can restore it; set it aside "
            f"(reversible, files other checkpoints use stay): {d.action}")
