"""Faults in exactly-once sinks: the two-phase commit's writer and committer."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from cutcheck.reference.core.seams import AnyFault, Fault, Layer
from cutcheck.reference.runtime.sinks import (
    FINAL,
    committable_due,
    committables_to_recommit,
    flushes_committables_at_end_of_input,
    restored_committables,
    transaction_name,
)

Committables = list[list[Any]]  # [checkpoint, transaction name] pairs


def _committer_drops_late(correct: Callable[[Committables, int], Committables], pending: Committables,
                          restored_cp: int) -> Committables:
    """The committer drops restored committables whose checkpoint already completed, as if they were late."""
    return [e for e in pending if e[0] == FINAL or e[0] > restored_cp]


def _txn_id_pool_reuse(correct: Callable[[object, int, int], str], sid: object, attempt: int, n: int) -> str:
    """Transaction names come from a pool of two per subtask, so a later transaction reuses an earlier one's name.

    FLINK-8132: with a pool of two transactional producers, txn1 and txn3 were the same transaction to
    the Kafka broker, so recovering and committing txn1 committed (or reset) txn3 instead.
    """
    return correct(sid, attempt, n % 2)


def _notify_commits_only_exact(correct: Callable[[int, int], bool], committable_cp: int, completed_cp: int) -> bool:
    """A completion notification commits only the committables of exactly that checkpoint, not older ones.

    FLINK-10377: TwoPhaseCommitSinkFunction assumed one notification per checkpoint, in order; when a
    notification was subsumed by a later one, the earlier checkpoint's transaction was never committed.
    """
    return committable_cp == completed_cp


def _committable_restamped(correct: Callable[[Committables, int], Committables], pending: Committables,
                           attempt: int) -> Committables:
    """Restored committables are re-stamped with the restoring attempt, so their names no longer match what was staged.

    apache/iceberg#16008: the DynamicCommitter re-stamped restored committables with the new JobID, so
    the de-duplication missed the earlier commit and rows were committed twice.
    """
    return [[cp, re.sub(r"-a\d+-t", f"-a{attempt}-t", txn)] for cp, txn in correct(pending, attempt)]


def _not_flushed_at_end_of_input(correct: Callable[[str | None], bool], open_txn: str | None) -> bool:
    """At end of input the writer keeps its open transaction for a later snapshot instead of emitting its committable.

    FLINK-26403: SinkWriterOperator did not drain its pending committables on endOfInput and left them
    for the final checkpoint, where they were deserted: data loss, or a committer waiting forever.
    """
    return False


FAULTS: tuple[AnyFault, ...] = (
    Fault("committer-drops-late", committables_to_recommit, Layer.SINKS, _committer_drops_late,
          key="apache/iceberg#10892"),
    Fault("txn-id-pool-reuse", transaction_name, Layer.SINKS, _txn_id_pool_reuse, key="FLINK-8132"),
    Fault("notify-commits-only-exact-checkpoint", committable_due, Layer.SINKS, _notify_commits_only_exact,
          key="FLINK-10377"),
    Fault("committable-restamped-on-restore", restored_committables, Layer.SINKS, _committable_restamped,
          key="apache/iceberg#16008"),
    Fault("committables-not-flushed-at-end-of-input", flushes_committables_at_end_of_input, Layer.SINKS,
          _not_flushed_at_end_of_input, key="FLINK-26403"),
)
