"""Faults in checkpoint storage: the shared-state registry, retention and discarding."""

from __future__ import annotations

from collections.abc import Callable

from cutcheck.reference.core.seams import AnyFault, Fault, Layer
from cutcheck.reference.storage.rules import (
    builds_on_restored,
    exclusive_files_discarded_on_abort,
    files_discarded_when_subsumed,
    first_checkpoint_id_after_restore,
    job_owns_completed,
    registry_key,
    shared_files_discarded_on_abort,
)
from cutcheck.reference.storage.shared_registry import registry_may_discard


def _discard_on_abort(correct: Callable[[list[str]], list[str]], shared: list[str]) -> list[str]:
    """Aborting a checkpoint deletes shared files other checkpoints still use (the JobManager discards on abort)."""
    return shared


def _registry_key_without_content(correct: Callable[[str, int, str], str], vertex: str, kg: int, digest: str) -> str:
    """Shared files are registered by key group only, so new content is taken for the registered file of that key group.

    FLINK-29095: after a TaskManager crash the backend re-uploaded new content under a reused file
    name; the JobManager discarded it as a duplicate, and the checkpoint completed with the wrong file.
    """
    return correct(vertex, kg, "")


def _restored_shared_state_discarded(correct: Callable[[int, int], bool], created_by: int,
                                     highest_not_claimed: int) -> bool:
    """Subsumption deletes shared files of a checkpoint the job restored without claiming it.

    FLINK-26985: shared state of a restored checkpoint was discarded "regardless of whether it was
    created by this job"; the fix discards only files created after the highest unclaimed checkpoint.
    """
    return True


def _orphan_after_failed_upload(correct: Callable[[list[str]], list[str]], exclusive: list[str]) -> list[str]:
    """Files uploaded for a checkpoint that then fails are never discarded, so they stay in storage forever.

    FLINK-30461: after an exception in a RocksDB incremental checkpoint, the files it had already
    uploaded were neither registered nor deleted, and remained forever (see also FLINK-37867).
    """
    return []


def _checkpoint_id_restarts(correct: Callable[[int], int], restored: int) -> int:
    """Checkpoint ids start over from 1 after a restore, so the restored job reuses ids of the earlier run.

    apache/iceberg#18123: on a restart the checkpoint counter started over from 1 while the table
    still carried the previous run's higher checkpoint id, so every new committable was taken as
    already committed and silently dropped.
    """
    return 1


def _no_claim_first_checkpoint_incremental(correct: Callable[[bool], bool], claimed: bool) -> bool:
    """After a no_claim restore the job builds on the restored checkpoint's files as if it owned them.

    FLINK-25192: no-claim mode must force the first successful checkpoint after the restore to be a
    full one; an incremental one re-references (and later discards) files the job does not own.
    """
    return True


def _shared_files_never_discarded(correct: Callable[[int, int], bool], created_by: int,
                                  highest_not_claimed: int) -> bool:
    """The registry forgets shared files no checkpoint uses any more but never deletes them, so they stay as orphans.

    Not a re-created Flink bug, though in the score: it shows that NO_ORPHANS, and the inspection of a
    checkpoint directory, find shared files the job left behind.
    """
    return False


def _savepoint_owned_by_the_job(correct: Callable[[bool], bool], savepoint: bool) -> bool:
    """A savepoint is taken for the job's own, so retention discards it like a checkpoint when it is subsumed.

    Not a re-created Flink bug, though in the score: it shows that SAVEPOINT_KEPT catches the job deleting
    a user's savepoint.
    """
    return True


def _subsumed_checkpoint_left_on_disk(correct: Callable[[list[str]], list[str]], exclusive: list[str]) -> list[str]:
    """Subsuming a checkpoint deletes its metadata but leaves its exclusive files on disk.

    Not a re-created Flink bug, though in the score: it shows that NO_ORPHANS counts the files of a
    subsumed checkpoint as the job's garbage, though no retained checkpoint references them.
    """
    return []


FAULTS: tuple[AnyFault, ...] = (
    Fault("discard-on-abort", shared_files_discarded_on_abort, Layer.STORAGE, _discard_on_abort, key="FLINK-24611"),
    Fault("registry-key-without-content", registry_key, Layer.STORAGE, _registry_key_without_content,
          key="FLINK-29095"),
    Fault("restored-shared-state-discarded", registry_may_discard, Layer.STORAGE, _restored_shared_state_discarded,
          key="FLINK-26985"),
    Fault("orphan-after-failed-upload", exclusive_files_discarded_on_abort, Layer.STORAGE, _orphan_after_failed_upload,
          key="FLINK-30461"),
    Fault("checkpoint-id-restarts-after-restore", first_checkpoint_id_after_restore, Layer.STORAGE,
          _checkpoint_id_restarts, key="apache/iceberg#18123"),
    Fault("no-claim-first-checkpoint-incremental", builds_on_restored, Layer.STORAGE,
          _no_claim_first_checkpoint_incremental, key="FLINK-25192"),
    Fault("shared-files-never-discarded", registry_may_discard, Layer.STORAGE, _shared_files_never_discarded),
    Fault("savepoint-owned-by-the-job", job_owns_completed, Layer.STORAGE, _savepoint_owned_by_the_job),
    Fault("subsumed-checkpoint-left-on-disk", files_discarded_when_subsumed, Layer.STORAGE,
          _subsumed_checkpoint_left_on_disk),
)
