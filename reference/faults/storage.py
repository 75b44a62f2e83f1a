"""Faults in checkpoint storage: the shared-state registry, retention and discarding."""

from __future__ import annotations

from typing import Any

from cutcheck.reference.faults.seams import Fault, Layer


class DiscardOnAbort(Fault):
    """Aborting a checkpoint deletes shared files other checkpoints still use (the JobManager discards on abort)."""

    name, seam, layer, key = "discard-on-abort", "shared_files_discarded_on_abort", Layer.STORAGE, "FLINK-24611"

    def rule(self, correct: Any, shared: list[str]) -> list[str]:
        return shared
