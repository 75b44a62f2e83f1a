"""Faults in exactly-once sinks: the two-phase commit's writer and committer."""

from __future__ import annotations

from typing import Any

from cutcheck.reference.faults.seams import Fault, Layer


class CommitterDropsLate(Fault):
    """The committer drops restored committables whose checkpoint already completed, as if they were late."""

    name, seam, layer, key = "committer-drops-late", "committables_to_recommit", Layer.SINKS, "apache/iceberg#10892"

    def rule(self, correct: Any, pending: list[list[Any]], restored_cp: int) -> list[list[Any]]:
        from cutcheck.reference.runtime.sinks import FINAL

        return [e for e in pending if e[0] == FINAL or e[0] > restored_cp]
