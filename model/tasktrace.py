"""Trace validation of one task's input channels together: d's snapshot step (``model.trace``
checks each channel; this module adds the rule that ties them).

d's snapshot of a checkpoint is one atomic step, recorded as consecutive ``snapshot_down``
events of its channels (no other d-side event between); aligned and at-least-once tasks snapshot
after the barrier of every channel (at-least-once never blocks a channel meanwhile); an unaligned
barrier (a priority arrival, or one converted in d's queue on timeout) makes the snapshot d's very
next step, whichever channel it came on; in an unaligned job, a task with a forced-aligned input
aligns on all of them (facts §3.4–3.7). The mutant ``partial-input-state`` applies to channels
whose gate is not 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cutcheck.model.protocol import AT_D, INQ, Protocol, can_task_snapshot, normalize_mode
from cutcheck.model.trace import PY, ChannelChecker, Rejection, TraceVerdict

_D_SIDE = frozenset({"process", "priority_arrival", "barrier_processed", "snapshot_down"})


class TaskChecker:
    """d's input channels together: each replays through a :class:`ChannelChecker` (with its gate),
    and d's snapshot step is checked across them (see the module docstring)."""

    def __init__(self, mode: str, gates: dict[Any, int] | None = None, mutant: str | None = None) -> None:
        self.mode, self.mutant = normalize_mode(mode), mutant
        self.gates = dict(gates or {})
        self.checkers = {ch: ChannelChecker(mode, mutant, g) for ch, g in self.gates.items()}
        self.index, self.stopped = 0, False
        self.failures: list[Rejection] = []
        self.open_snapshot: tuple[Any, set[Any]] | None = None  # (cp, channels done) while recording it
        self.snapshotted: set[Any] = set()  # checkpoints whose d-side snapshot step is over
        self.must_snapshot: Any = None  # cp whose unaligned barrier d has seen and not yet acted on

    def copy(self) -> TaskChecker:
        c = object.__new__(TaskChecker)
        c.mode, c.mutant, c.gates = self.mode, self.mutant, self.gates
        c.checkers = {ch: k.copy() for ch, k in self.checkers.items()}
        c.index, c.failures, c.stopped = self.index, list(self.failures), self.stopped
        c.open_snapshot = (
            None if self.open_snapshot is None else (self.open_snapshot[0], set(self.open_snapshot[1]))
        )
        c.snapshotted, c.must_snapshot = set(self.snapshotted), self.must_snapshot
        return c

    def _channel(self, ch: Any) -> ChannelChecker:
        if ch not in self.checkers:
            self.gates.setdefault(ch, 0)
            self.checkers[ch] = ChannelChecker(self.mode, self.mutant, self.gates[ch])
        return self.checkers[ch]

    def _d_side(self, ch: Any, ev: tuple[Any, ...]) -> bool:
        if ev[0] == "timeout_switch":  # d converts a barrier in its own queue; u one in its output
            sl = self._channel(ch).slot(ev[1])
            return sl is not None and sl.loc == INQ
        return ev[0] in _D_SIDE

    def task_rule(self, ch: Any, ev: tuple[Any, ...]) -> str | None:
        """None if d's snapshot step allows ``ev`` on channel ``ch`` now, else why not."""
        if not self._d_side(ch, ev):
            return None
        snap = ev[0] == "snapshot_down"
        if self.must_snapshot is not None and not (snap and ev[1] == self.must_snapshot):
            return f"d saw the unaligned barrier of checkpoint {self.must_snapshot}: its snapshot must come first"
        if self.open_snapshot is not None and not (snap and ev[1] == self.open_snapshot[0]):
            return (
                f"d's snapshot of checkpoint {self.open_snapshot[0]} must cover all its channels in one step"
            )
        if not snap:
            return None
        cp = ev[1]
        if cp in self.snapshotted:
            return f"d's snapshot of checkpoint {cp} was already taken (on other channels) and is over"
        if self.open_snapshot is None:
            slots = [k.slot(cp) for k in self.checkers.values()]
            for name, ok in can_task_snapshot(Protocol(self.mode), PY, slots):
                if not ok:
                    return f"TaskSnapshot of checkpoint {cp} not enabled: requires {name}"
        return None

    def feed(self, ch: Any, ev: tuple[Any, ...]) -> bool:
        if self.stopped:
            return False
        ev = tuple(ev)
        index, self.index = self.index, self.index + 1
        chk = self._channel(ch)
        reason = self.task_rule(ch, ev)
        before = len(chk.failures)
        if reason is None and not chk.feed(ev):
            reason = chk.failures[-1].reason
        for f in chk.failures[before:]:
            if f.kind != "protocol":
                self.failures.append(Rejection(index, (ch, ev), f"channel {ch}: {f.reason}", f.kind))
        if reason is not None:
            self.failures.append(Rejection(index, (ch, ev), f"channel {ch}: {reason}", "protocol"))
            self.stopped = True
            return False
        self._after(ch, ev)
        return True

    def _after(self, ch: Any, ev: tuple[Any, ...]) -> None:
        word = ev[0]
        if word == "restore":
            self.open_snapshot, self.must_snapshot = None, None
            return
        if not self._d_side(ch, ev) and word != "timeout_switch":
            return
        if word == "snapshot_down":
            cp = ev[1]
            done = self.open_snapshot[1] if self.open_snapshot else set()
            done.add(ch)
            self.open_snapshot = (cp, done)
            if self.must_snapshot == cp:
                self.must_snapshot = None
            if done >= set(self.checkers):
                self.open_snapshot = None
                self.snapshotted.add(cp)
            return
        if self.open_snapshot is not None:  # another d-side step: the snapshot step is over
            self.snapshotted.add(self.open_snapshot[0])
            self.open_snapshot = None
        sl = self.checkers[ch].slot(ev[1]) if word != "process" else None
        if sl is not None and sl.loc == AT_D and sl.unal and not sl.down:
            self.must_snapshot = ev[1]

    def candidates(self, max_n: int = 2, restore: bool = True) -> list[tuple[Any, tuple[Any, ...]]]:
        """(channel, event) pairs enabled now: for random walks of a whole task."""
        out = []
        top = max((k._top for k in self.checkers.values()), default=0)
        for ch, k in self.checkers.items():
            for ev in k.candidates(max_n, restore=False, abort=False):
                if ev[0] in ("snapshot_up", "snapshot_down") and ev[1] not in {sl.cp for sl in k.state.slots}:
                    ev = (ev[0], top + 1, *ev[2:])  # one new checkpoint id for the whole task
                    if k.enabled(ev) is not None:
                        continue
                if self.task_rule(ch, ev) is None:
                    out.append((ch, ev))
        lasts = {k.state.last.cp if k.state.last.valid else None for k in self.checkers.values()}
        if restore and len(lasts) == 1 and None not in lasts:  # a global restore, on every channel
            out.append(("*", ("restore", lasts.pop())))
        return out

    def feed_all(self, ch: Any, ev: tuple[Any, ...]) -> bool:
        """``ch == "*"`` feeds ``ev`` to every channel (a global restore), else as :meth:`feed`."""
        if ch != "*":
            return self.feed(ch, ev)
        return all(self.feed(c, ev) for c in list(self.checkers))

    def verdict(self) -> TraceVerdict:
        accepted = not any(f.kind in ("protocol", "observation") for f in self.failures)
        completions = sum(k.completions for k in self.checkers.values())
        return TraceVerdict(accepted, self.index, completions, tuple(self.failures))


def check_task_trace(
    mode: str,
    events: Iterable[tuple[Any, tuple[Any, ...]]],
    gates: dict[Any, int] | None = None,
    mutant: str | None = None,
) -> TraceVerdict:
    """Replay the events of all input channels of one task, in the order they happened, as
    ``(channel, event)`` pairs; ``gates`` maps each channel to its input gate (default: all gate 0,
    channels taken from the events)."""
    checker = TaskChecker(mode, gates, mutant)
    if gates is None:
        events = list(events)
        for ch, _ in events:
            checker._channel(ch)
    for ch, ev in events:
        if not checker.feed(ch, ev):
            break
    return checker.verdict()
