"""Faults in batch execution: region failover and the blocking partitions it relies on."""

from __future__ import annotations

from typing import Any

from cutcheck.reference.core.seams import Fault, Layer


class BlockingPartitionLeak(Fault):
    """A restarted producer's old blocking partition is never released, so it stays on disk after the job.

    FLINK-13371: partitions of producers that were reset (or whose consumers were never deployed)
    were not released, and leaked until the cluster shut down.
    """

    name, seam, layer, key = ("blocking-partition-leak", "releases_partition_of_reset_producer", Layer.BATCH,
                              "FLINK-13371")

    def rule(self, correct: Any) -> bool:
        return False
