"""Faults in checkpoint storage: the shared-state registry, retention and discarding."""

from __future__ import annotations

from typing import Any

from cutcheck.reference.faults.seams import Fault, Layer


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
