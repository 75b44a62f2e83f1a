"""The split-handover cells of the abstract coverage: what FLINK-19856's class of bug needs.

A restore that rescales the producers of an edge hands a source split to another producer subtask, so
the split's in-flight records restored as channel state sit on one channel of a keyed consumer's gate
while its new records come over another channel of that gate. Only the gate's recovery keeps the new
ones behind the restored ones (facts §5); a bug there breaks ORDER in no other situation. The cells:

* ``handover input``: a channel of such a gate still holds restored *input* state (the receiver's
  recovered buffers) of a key and split while another channel's sender already holds new records of
  that key and split;
* ``handover output``: the same with restored *output* state (recovered buffers the sender re-sends
  before the end of its channel state).

``HandoverWatch`` finds them for ``AbstractObserver``: it is armed when a restore put channel state on
an ordered edge of a keyed consumer (``KeyedOperator.awaiting``) and looks after each step until every
such gate has consumed what was restored (or both cells were seen). It only reads the engine.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from cutcheck.reference.runtime.network import Buf
from cutcheck.reference.runtime.records import KEY, SPLIT

Cell = tuple[str, str, str]
INPUT: Cell = ("handover", "input", "")
OUTPUT: Cell = ("handover", "output", "")

KeySplit = tuple[int, int]


@dataclass(slots=True)
class _Restored:
    """One channel's restored records: per key and split, the sequence number of its last restored
    input record and of its last restored output record (-1: none)."""

    ch: Any
    last: dict[KeySplit, tuple[int, int]] = field(default_factory=dict)


def _restored_of(ch: Any) -> _Restored:
    seen = _Restored(ch)
    seq = 0
    for b in ch.recovered:
        for rec in b.recs:
            ks = (rec[KEY], rec[SPLIT])
            seen.last[ks] = (seq, seen.last.get(ks, (-1, -1))[1])
            seq += 1
    for item in ch.sender.queue:
        if item.__class__ is not Buf or item.seq0 >= ch.sender.recovered_end:
            continue
        for k, rec in enumerate(item.recs):
            ks = (rec[KEY], rec[SPLIT])
            seen.last[ks] = (seen.last.get(ks, (-1, -1))[0], item.seq0 + k)
    return seen


class HandoverWatch:
    """Armed by a restore (``restored``), looked at after each step (``look``) while armed."""

    __slots__ = ("gates", "done")

    def __init__(self) -> None:
        self.gates: list[list[_Restored]] = []  # per watched gate, its channels' restored records
        self.done: set[Cell] = set()  # cells this run already counted (one hit each is enough)

    @property
    def armed(self) -> bool:
        return bool(self.gates)

    def restored(self, engine: Any) -> None:
        """A restore finished: watch the gates of keyed consumers that restored records on an ordered edge
        and have a second channel on which new records could come."""
        self.gates = []
        if {INPUT, OUTPUT} <= self.done:
            return
        for task in engine.tasks.values():
            op = task.op
            if not getattr(op, "awaiting", None):
                continue
            for gate in task.gates:
                chans = [ch for ch in gate.channels if ch.edge in op.check_order_edges and ch.sender is not None]
                held = [_restored_of(ch) for ch in chans if ch.sender.recovered_end]
                if held and len(chans) > 1:
                    self.gates.append(held)

    def look(self, hits: Counter[Cell]) -> None:
        """Count a cell when a sender holds a new record of a key and split that another channel of its gate
        still holds restored; disarm once nothing restored is left."""
        still: list[list[_Restored]] = []
        for held in self.gates:
            left = [r for r in held if r.ch.processed < r.ch.sender.recovered_end]
            if not left:
                continue
            still.append(left)
            for ch in left[0].ch.gate.channels:
                for cell in self._overtaking(ch, left):
                    if cell not in self.done:
                        self.done.add(cell)
                        hits[cell] += 1
        self.gates = still if {INPUT, OUTPUT} - self.done else []

    @staticmethod
    def _overtaking(ch: Any, left: list[_Restored]) -> set[Cell]:
        sp = ch.sender
        if sp is None:
            return set()
        new: set[KeySplit] = {(rec[KEY], rec[SPLIT]) for rec in sp.current or ()}
        for item in sp.queue:
            if item.__class__ is Buf and item.seq0 >= sp.recovered_end:
                new.update((rec[KEY], rec[SPLIT]) for rec in item.recs)
        found: set[Cell] = set()
        if not new:
            return found
        for r in left:
            if r.ch is ch:
                continue
            at = r.ch.processed
            for ks in new & r.last.keys():
                last_in, last_out = r.last[ks]
                if last_in >= at:
                    found.add(INPUT)
                if last_out >= at:
                    found.add(OUTPUT)
        return found
