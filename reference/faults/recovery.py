"""Faults in failover and in the replay of recovered channel state."""

from __future__ import annotations

from typing import Any

from cutcheck.reference.faults.seams import Fault, Layer


class EarlyCheckpointInRecovery(Fault):
    """A checkpoint completes before recovered data is drained, without capturing it."""

    name, seam, layer, key = "early-checkpoint-in-recovery", "captures_recovered_data", Layer.RECOVERY, "FLINK-20654"

    def rule(self, correct: Any) -> bool:
        return False


class RestartFailedTaskOnly(Fault):
    """Region failover restarts only the failed task, not its region."""

    name, seam, layer, test_only = "restart-failed-task-only", "restarts_whole_region", Layer.RECOVERY, True

    def rule(self, correct: Any) -> bool:
        return False
