"""Bounded, deterministic sources. Splits are operator list state: (split, next offset) entries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cutcheck.reference.runtime.operators import Operator
from cutcheck.reference.runtime.records import mix64

if TYPE_CHECKING:
    from cutcheck.reference.runtime.tasks import Task


class SourceOperator(Operator):
    def __init__(self, task: Task):
        super().__init__(task)
        self.layout = task.engine.layouts[task.sid.vertex]
        p, i = task.parallelism, task.sid.index
        # Initial assignment: split s to subtask s mod p; the list is [local split, next offset].
        self.splits: list[list[int]] = [[s, 0] for s in range(self.layout.splits) if s % p == i]
        self.turn = 0

    def exhausted(self) -> bool:
        return all(off >= self.layout.split_size(s) for s, off in self.splits)

    def produce(self, budget: int) -> int:
        """Emit up to ``budget`` records, round robin over unfinished splits; stop early when output is full."""
        task, layout, emitted = self.task, self.layout, 0
        # SourceLayout.record, inlined: this loop makes every record of the job.
        nsplits, keys, rid_base, split_base = layout.splits, layout.keys, layout.rid_base, layout.split_base
        salt = layout.seed * 1_000_003
        size = layout.split_size
        # [entry, its split's size] of every unfinished split
        live: list[tuple[list[int], int]] = [(e, size(e[0])) for e in self.splits if e[1] < size(e[0])]
        emit, turn = task.emit, self.turn
        task.output_available()
        while live and emitted < budget and not task.out_blocked:
            entry, end = live[turn % len(live)]
            s, off = entry
            j = off * nsplits + s
            emit((rid_base + j, mix64(salt + j) % keys, j, split_base + s, off, 0, -1))
            off += 1
            entry[1] = off
            emitted += 1
            turn += 1
            if off >= end:
                live = [x for x in live if x[0][1] < x[1]]
        self.turn = turn
        return emitted

    def snapshot(self) -> dict[str, Any]:
        return {"splits": [(layout_split, off) for layout_split, off in self.splits]}

    def restore(self, state: dict[str, Any]) -> None:
        self.splits = [[s, off] for s, off in state.get("splits", [])]
        self.turn = 0
