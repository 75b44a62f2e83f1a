"""Faults in exactly-once sinks: the two-phase commit's writer and committer."""

from __future__ import annotations

from typing import Any

from cutcheck.reference.core.seams import Fault, Layer
from cutcheck.reference.runtime.sinks import FINAL


class CommitterDropsLate(Fault):
    """The committer drops restored committables whose checkpoint already completed, as if they were late."""

    name, seam, layer, key = "committer-drops-late", "committables_to_recommit", Layer.SINKS, "apache/iceberg#10892"

    def rule(self, correct: Any, pending: list[list[Any]], restored_cp: int) -> list[list[Any]]:

        return [e for e in pending if e[0] == FINAL or e[0] > restored_cp]


class TxnIdPoolReuse(Fault):
    """Transaction names come from a pool of two per subtask, so a later transaction reuses an earlier one's name.

    FLINK-8132: with a pool of two transactional producers, txn1 and txn3 were the same transaction to
    the Kafka broker, so recovering and committing txn1 committed (or reset) txn3 instead.
    """

    name, seam, layer, key = "txn-id-pool-reuse", "transaction_name", Layer.SINKS, "FLINK-8132"

    def rule(self, correct: Any, sid: object, attempt: int, n: int) -> str:
        return correct(sid, attempt, n % 2)


class NotifyCommitsOnlyExactCheckpoint(Fault):
    """A completion notification commits only the committables of exactly that checkpoint, not older ones.

    FLINK-10377: TwoPhaseCommitSinkFunction assumed one notification per checkpoint, in order; when a
    notification was subsumed by a later one, the earlier checkpoint's transaction was never committed.
    """

    name, seam, layer, key = ("notify-commits-only-exact-checkpoint", "committable_due", Layer.SINKS, "FLINK-10377")

    def rule(self, correct: Any, committable_cp: int, completed_cp: int) -> bool:
        return committable_cp == completed_cp


class CommittableRestampedOnRestore(Fault):
    """Restored committables are re-stamped with the restoring attempt, so their names no longer match what was staged.

    apache/iceberg#16008: the DynamicCommitter re-stamped restored committables with the new JobID, so
    the de-duplication missed the earlier commit and rows were committed twice.
    """

    name, seam, layer, key = ("committable-restamped-on-restore", "restored_committables", Layer.SINKS,
                              "apache/iceberg#16008")

    def rule(self, correct: Any, pending: list[list[Any]], attempt: int) -> list[list[Any]]:
        import re

        return [[cp, re.sub(r"-a\d+-t", f"-a{attempt}-t", txn)] for cp, txn in correct(pending, attempt)]


class CommittablesNotFlushedAtEndOfInput(Fault):
    """At end of input the writer keeps its open transaction for a later snapshot instead of emitting its committable.

    FLINK-26403: SinkWriterOperator did not drain its pending committables on endOfInput and left them
    for the final checkpoint, where they were deserted: data loss, or a committer waiting forever.
    """

    name, seam, layer, key = ("committables-not-flushed-at-end-of-input", "flushes_committables_at_end_of_input",
                              Layer.SINKS, "FLINK-26403")

    def rule(self, correct: Any) -> bool:
        return False
