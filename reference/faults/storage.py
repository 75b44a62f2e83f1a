"""Faults in checkpoint storage: the shared-state registry, retention and discarding."""

from __future__ import annotations

from typing import Any

from cutcheck.reference.core.seams import Fault, Layer


class DiscardOnAbort(Fault):
    """Aborting a checkpoint deletes shared files other checkpoints still use (the JobManager discards on abort)."""

    name, seam, layer, key = "discard-on-abort", "shared_files_discarded_on_abort", Layer.STORAGE, "FLINK-24611"

    def rule(self, correct: Any, shared: list[str]) -> list[str]:
        return shared


class RegistryKeyWithoutContent(Fault):
    """Shared files are registered by key group only, so new content is taken for the registered file of that key group.

    FLINK-29095: after a TaskManager crash the backend re-uploaded new content under a reused file
    name; the JobManager discarded it as a duplicate, and the checkpoint completed with the wrong file.
    """

    name, seam, layer, key = "registry-key-without-content", "registry_key", Layer.STORAGE, "FLINK-29095"

    def rule(self, correct: Any, vertex: str, kg: int, digest: str) -> str:
        return correct(vertex, kg, "")


class RestoredSharedStateDiscarded(Fault):
    """Subsumption deletes shared files of a checkpoint the job restored without claiming it.

    FLINK-26985: shared state of a restored checkpoint was discarded "regardless of whether it was
    created by this job"; the fix discards only files created after the highest unclaimed checkpoint.
    """

    name, seam, layer, key = ("restored-shared-state-discarded", "registry_may_discard", Layer.STORAGE,
                              "FLINK-26985")

    def rule(self, correct: Any, created_by: int, highest_not_claimed: int) -> bool:
        return True


class OrphanAfterFailedUpload(Fault):
    """Files uploaded for a checkpoint that then fails are never discarded, so they stay in storage forever.

    FLINK-30461: after an exception in a RocksDB incremental checkpoint, the files it had already
    uploaded were neither registered nor deleted, and remained forever (see also FLINK-37867).
    """

    name, seam, layer, key = ("orphan-after-failed-upload", "exclusive_files_discarded_on_abort", Layer.STORAGE,
                              "FLINK-30461")

    def rule(self, correct: Any, exclusive: list[str]) -> list[str]:
        return []


class CheckpointIdRestartsAfterRestore(Fault):
    """Checkpoint ids start over from 1 after a restore, so the restored job reuses ids of the earlier run.

    apache/iceberg#18123: on a restart the checkpoint counter started over from 1 while the table
    still carried the previous run's higher checkpoint id, so every new committable was taken as
    already committed and silently dropped.
    """

    name, seam, layer, key = ("checkpoint-id-restarts-after-restore", "first_checkpoint_id_after_restore",
                              Layer.STORAGE, "apache/iceberg#18123")

    def rule(self, correct: Any, restored: int) -> int:
        return 1


class NoClaimFirstCheckpointIncremental(Fault):
    """After a no_claim restore the job builds on the restored checkpoint's files as if it owned them.

    FLINK-25192: no-claim mode must force the first successful checkpoint after the restore to be a
    full one; an incremental one re-references (and later discards) files the job does not own.
    """

    name, seam, layer, key = ("no-claim-first-checkpoint-incremental", "builds_on_restored", Layer.STORAGE,
                              "FLINK-25192")

    def rule(self, correct: Any, claimed: bool) -> bool:
        return True
