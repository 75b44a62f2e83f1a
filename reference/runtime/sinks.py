"""Sinks: exactly-once as a writer and a committer (two-phase commit, facts §7.2), and at-least-once.

The writer stages records in a transaction of an external store and pre-commits it before the
barrier (``prepareSnapshotPreBarrier``); the committable travels to the committer (chained, same
subtask), which keeps it in its checkpointed state and commits on completion notification, and
again, idempotently, on restore. The external store outlives failures; committing is the only way
rows reach the committed output, which is what the oracle and the logs see.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cutcheck.model.errors import InvariantViolation
from cutcheck.reference.core.seams import seam
from cutcheck.reference.runtime.operators import Operator

if TYPE_CHECKING:
    from cutcheck.reference.runtime.network import InputChannel
    from cutcheck.reference.runtime.records import Record
    from cutcheck.reference.runtime.tasks import Task

FINAL = -1  # committables of the end of input, bound to the next checkpoint this subtask takes part in



@seam
def committables_to_recommit(pending: list[list[Any]], restored_cp: int) -> list[list[Any]]:
    """On restore the committer keeps every committable it restored, those of checkpoints that already
    completed included, and commits them again (committing is idempotent, facts §7.2)."""
    return pending


@seam
def transaction_name(sid: object, attempt: int, n: int) -> str:
    """A writer's n-th transaction of an attempt is named by its subtask, the attempt and n: never
    reused, so recovering one transaction can never commit another (facts §11.1)."""
    return f"{sid}-a{attempt}-t{n}"


@seam
def committable_due(committable_cp: int, completed_cp: int) -> bool:
    """A completion notification commits every committable of that checkpoint or an earlier one:
    notifications may be lost or subsumed, and the newest one stands for them all (facts §11.1)."""
    return committable_cp <= completed_cp


@seam
def restored_committables(pending: list[list[Any]], attempt: int) -> list[list[Any]]:
    """Restored committables keep the transaction names they were pre-committed under, whatever the
    restoring attempt: the name is what makes committing them again idempotent (facts §11.1)."""
    return pending


@seam
def flushes_committables_at_end_of_input(open_txn: str | None) -> bool:
    """At end of input the writer pre-commits its open transaction, if it has one, and hands the
    committable on, bound to the final checkpoint; nothing is left for a snapshot that will never
    come (facts §11.1)."""
    return open_txn is not None


class TransactionStore:
    """The external system: staged transactions, and the set of those committed."""

    def __init__(self, on_commit: Any):
        self.staged: dict[str, list[Record]] = {}
        self.committed: set[str] = set()
        self.commit_seq = 0
        self._on_commit = on_commit  # callback(rows of one commit, txn, sink subtask, checkpoint, attempt, seq)

    def stage(self, txn: str, rec: Record) -> None:
        self.staged[txn].append(rec)

    def open(self, txn: str) -> None:
        self.staged[txn] = []

    def commit(self, txn: str, sink: str, checkpoint: int, attempt: int) -> bool:
        """Commit once; a second commit of the same transaction is 'already committed' (idempotent)."""
        if txn in self.committed:
            return False
        rows = self.staged.pop(txn, None)
        if rows is None:
            raise InvariantViolation("COMMIT", f"{sink} committed transaction {txn} that was never staged or was aborted")
        self.committed.add(txn)
        self.commit_seq += 1
        self._on_commit(rows, txn, sink, checkpoint, attempt, self.commit_seq)
        return True

    def abort_all_except(self, keep: set[str]) -> int:
        """Writers abort every open or pre-committed transaction the restored state does not name."""
        doomed = [t for t in self.staged if t not in keep]
        for t in doomed:
            del self.staged[t]
        return len(doomed)


class SinkOperator(Operator):
    def __init__(self, task: Task):
        super().__init__(task)
        self.exactly_once = task.vertex.delivery == "exactly_once"
        self.store: TransactionStore = task.engine.store
        self.next_txn = 0
        self.txn: str | None = None
        # committer state: (checkpoint id or FINAL, txn), in pre-commit order
        self.pending: list[list[Any]] = []
        if self.exactly_once:
            self._open()

    def _open(self) -> None:
        self.txn = self.task.engine.rules[transaction_name](self.task.sid, self.task.engine.attempt, self.next_txn)
        self.next_txn += 1
        self.store.open(self.txn)

    def apply(self, rec: Record, ch: InputChannel) -> None:
        if self.exactly_once:
            self.apply_many([rec], 0, 1, ch)
        else:
            # At-least-once: written straight through, as its own committed "transaction".
            txn = f"{self.task.sid}-a{self.task.engine.attempt}-r{rec[0]}-{self.next_txn}"
            self.next_txn += 1
            self.store.open(txn)
            self.store.stage(txn, rec)
            self.store.commit(txn, str(self.task.sid), -1, self.task.engine.attempt)

    def apply_many(self, recs: list[Record], i: int, stop: int, ch: InputChannel) -> int:
        if self.exactly_once:
            try:
                self.store.staged[self.txn].extend(recs[i:stop])  # type: ignore[index]
            except KeyError:
                # Only a transaction the writer opened and nobody committed or aborted takes rows.
                raise InvariantViolation("COMMIT", f"{self.task.sid} wrote to transaction {self.txn}, which is "
                                                   "not open (committed or aborted)") from None
            return stop  # a sink has no output, so it is never blocked
        return super().apply_many(recs, i, stop, ch)

    def pre_barrier(self, cp: int) -> None:
        """prepareSnapshotPreBarrier: pre-commit the open transaction, hand the committable on, open a new one."""
        if not self.exactly_once:
            return
        for entry in self.pending:
            if entry[0] == FINAL:
                entry[0] = cp
        if self.txn is not None and not self.task.finished:
            self.pending.append([cp, self.txn])
            self._open()

    def end_of_input(self) -> None:
        if self.exactly_once and self.task.engine.rules[flushes_committables_at_end_of_input](self.txn):
            self.pending.append([FINAL, self.txn])
            self.txn = None

    def notify_complete(self, cp: int) -> None:
        """Commit every pending committable of a checkpoint ≤ cp, in checkpoint order."""
        keep = []
        due = self.task.engine.rules[committable_due]
        for entry in self.pending:
            if entry[0] != FINAL and due(entry[0], cp):
                self._commit(entry[0], entry[1])
            else:
                keep.append(entry)
        self.pending = keep
        # COMMIT, stated apart from the rule above: a completion commits every committable up to it
        # (facts §11.1); one left waiting commits late or, if no later notification comes, never.
        late = [e for e in keep if e[0] != FINAL and e[0] <= cp]
        if late:
            raise InvariantViolation("COMMIT", f"{self.task.sid} kept {late[0][1]} of checkpoint {late[0][0]} after the "
                                               f"notification of checkpoint {cp}, which commits every committable up to it")

    def _commit(self, cp: int, txn: str) -> None:
        latest = self.task.engine.coordinator.latest_completed_id()
        if cp > latest:
            raise InvariantViolation("COMMIT", f"{self.task.sid} committed {txn} of checkpoint {cp} before it completed (latest {latest})")
        attempt = int(txn.split("-a")[-1].split("-")[0])
        self.store.commit(txn, str(self.task.sid), cp, attempt)

    def snapshot(self) -> dict[str, Any]:
        return {"pending": [list(e) for e in self.pending], "next_txn": self.next_txn}

    def restore(self, state: dict[str, Any]) -> None:
        pending = [list(e) for e in state.get("pending", [])]
        self.pending = self.task.engine.rules[restored_committables](pending, self.task.engine.attempt)
        self.next_txn = state.get("next_txn", 0)

    def recover_and_commit(self, restored_cp: int) -> None:
        """On restore the committer commits everything up to the restored checkpoint again (facts §7.2)."""
        self.pending = self.task.engine.rules[committables_to_recommit](self.pending, restored_cp)
        self.notify_complete(restored_cp)

    def transactions(self) -> set[str]:
        return {e[1] for e in self.pending}
