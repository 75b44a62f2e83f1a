"""Faults in batch execution: region failover and the blocking partitions it relies on."""

from __future__ import annotations

from collections.abc import Callable

from cutcheck.reference.core.seams import AnyFault, Fault, Layer
from cutcheck.reference.recovery.region_failover import releases_partition_of_reset_producer


def _blocking_partition_leak(correct: Callable[[], bool]) -> bool:
    """A restarted producer's old blocking partition is never released, so it stays on disk after the job.

    FLINK-13371: partitions of producers that were reset (or whose consumers were never deployed)
    were not released, and leaked until the cluster shut down.
    """
    return False


FAULTS: tuple[AnyFault, ...] = (
    Fault("blocking-partition-leak", releases_partition_of_reset_producer, Layer.BATCH, _blocking_partition_leak,
          key="FLINK-13371"),
)
