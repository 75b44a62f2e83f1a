"""Concrete execution of ``model.protocol`` and trace validation (as in TLA+ trace validation).

A recorded channel trace is replayed through the protocol's rule table, one event at a time; the
checker accepts it, or names the first event whose rule is not enabled, and checks CUT at every
``complete``. Use :func:`check_channel_trace` on a whole list, or :class:`ChannelChecker` to feed
events one by one while a run goes. ``model.tasktrace`` adds the multi-channel snapshot rule (``check_task_trace``).

Vocabulary (one tuple per event; see ``model.protocol`` for the rules):
``("emit", n)``, ``("transmit", n)``, ``("transmit_barrier", cp)``, ``("process", n)``,
``("snapshot_up", cp, "aligned"|"unaligned")``, ``("priority_arrival", cp)``,
``("barrier_processed", cp)``, ``("snapshot_down", cp)``, ``("timeout_switch", cp)``,
``("complete", cp)``, ``("restore", cp)`` and, added here, ``("abort", cp)`` (cp was abandoned: d
stops aligning on it and its barrier, if still travelling, is ignored). ``complete`` may carry a
third element, a mapping of what the engine itself persisted for this channel and checkpoint:
``{"processed", "input_state", "output_state", "sent"}``, each a count or a sequence of record
numbers; the checker compares it with what the protocol derives. That is how a mutant that
persists the wrong channel state (and otherwise emits the same events) is caught.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from cutcheck.model.errors import CutcheckError
from cutcheck.model.invariants import cut_holds
from cutcheck.model.protocol import (
    BY_EVENT,
    SLOT_EVENTS,
    Action,
    ChannelState,
    Params,
    Protocol,
    Slot,
    fresh_slot,
    initial_state,
    normalize_mode,
)
from cutcheck.model.pyops import EMPTY, PY, PyOps, Runs

# Runs and PyOps moved to model.pyops; model.trace still names them for its users.
__all__ = ["EMPTY", "PY", "ChannelChecker", "PyOps", "Rejection", "Runs", "TraceVerdict", "check_channel_trace",
           "observation"]


@dataclass(frozen=True, slots=True)
class Rejection:
    index: int  # position of the event in the trace
    event: tuple[Any, ...]
    reason: str
    kind: str  # "protocol" (rule not enabled, replay stops), "observation" or "cut" (replay goes on)


@dataclass(frozen=True, slots=True)
class TraceVerdict:
    accepted: bool  # every event was enabled and every observation matched
    events: int  # events replayed
    completions: int
    failures: tuple[Rejection, ...]

    @property
    def ok(self) -> bool:
        return self.accepted and not self.failures

    @property
    def first(self) -> Rejection | None:
        return self.failures[0] if self.failures else None

    @property
    def index(self) -> int | None:
        return self.failures[0].index if self.failures else None

    @property
    def event(self) -> tuple[Any, ...] | None:
        return self.failures[0].event if self.failures else None

    @property
    def reason(self) -> str:
        return self.failures[0].reason if self.failures else ""


_COUNT_WORDS = ("emit", "transmit", "process")
_BARRIER_WORDS = (
    "transmit_barrier",
    "priority_arrival",
    "barrier_processed",
    "snapshot_down",
    "timeout_switch",
    "complete",
)


class ChannelChecker:
    """Replays one channel's events through the protocol; feed events in order, then ``verdict()``."""

    def __init__(self, mode: str, mutant: str | None = None, gate: int = 0, protocol: Protocol | None = None) -> None:
        self.protocol = protocol or Protocol(normalize_mode(mode), mutant, gate)  # a Protocol with its own rule table wins
        self.state: ChannelState = initial_state(PY)
        self.index = 0
        self.completions = 0
        self.failures: list[Rejection] = []
        self.stopped = False
        self._finished: set[Any] = set()  # checkpoints whose slot retired or aborted on this channel
        self._top = 0  # highest integer checkpoint id seen, to propose a new one in ``candidates``

    def copy(self) -> ChannelChecker:
        c = object.__new__(ChannelChecker)
        c.protocol, c.state, c.index, c.completions = self.protocol, self.state, self.index, self.completions
        c.failures, c.stopped, c._finished = list(self.failures), self.stopped, set(self._finished)
        c._top = self._top
        return c

    def candidates(
        self, max_n: int = 2, restore: bool = True, abort: bool = True, new_checkpoint: bool = True
    ) -> list[tuple[Any, ...]]:
        """The events enabled now (counts up to ``max_n``): for random walks and exhaustive search."""
        evs: list[tuple[Any, ...]] = [(w, n) for w in _COUNT_WORDS for n in range(1, max_n + 1)]
        cps = [sl.cp for sl in self.state.slots] + ([self._top + 1] if new_checkpoint else [])
        for cp in cps:
            evs += [("snapshot_up", cp, "aligned"), ("snapshot_up", cp, "unaligned")]
            evs += [(w, cp) for w in _BARRIER_WORDS]
            if abort and cp != self._top + 1:
                evs.append(("abort", cp))
        if restore and self.state.last.valid:
            evs.append(("restore", self.state.last.cp))
        return [ev for ev in evs if self.enabled(ev) is None]

    # -- helpers the task checker uses
    def slot(self, cp: Any) -> Slot | None:
        return next((sl for sl in self.state.slots if sl.cp == cp), None)

    def enabled(self, event: tuple[Any, ...]) -> str | None:
        """None if ``event`` is enabled in the current state, else the reason it is not."""
        try:
            action, params, state = self._resolve(event)
        except _Reject as r:
            return r.reason
        if action is None:
            return None
        for name, ok in self.protocol.guard(action, PY, state, params):
            if not ok:
                return f"{action.name} not enabled: requires {name}"
        return None

    def feed(self, event: tuple[Any, ...]) -> bool:
        """Apply one event; False (and the replay stops) if the protocol rejects it."""
        if self.stopped:
            return False
        event = tuple(event)
        index, self.index = self.index, self.index + 1
        reason = self.enabled(event)
        if reason is not None:
            self.failures.append(Rejection(index, event, reason, "protocol"))
            self.stopped = True
            return False
        action, params, state = self._resolve(event)
        if action is None:
            return True
        self.state = self.protocol.effect(action, PY, state, params)
        if isinstance(params.cp, int) and not isinstance(params.cp, bool):
            self._top = max(self._top, params.cp)
        if action.event == "complete":
            self.completions += 1
            self._check_completion(index, event)
        self._tidy()
        return True

    def verdict(self) -> TraceVerdict:
        accepted = not any(f.kind in ("protocol", "observation") for f in self.failures)
        return TraceVerdict(accepted, self.index, self.completions, tuple(self.failures))

    # -- internals
    def _resolve(self, event: tuple[Any, ...]) -> tuple[Action | None, Params, ChannelState]:
        if not event or event[0] not in BY_EVENT:
            raise _Reject(f"unknown event {event[:1]!r}; the vocabulary is {', '.join(sorted(BY_EVENT))}")
        word = event[0]
        action = self.protocol.action(word)
        want = 3 if word == "snapshot_up" else 2
        if len(event) < want or (len(event) > want and word != "complete") or len(event) > 3:
            raise _Reject(f"malformed {word} event {event!r}")
        if word in ("emit", "transmit", "process"):
            if not isinstance(event[1], int) or isinstance(event[1], bool):
                raise _Reject(f"{word} needs a record count, got {event[1]!r}")
            return action, Params(n=event[1]), self.state
        cp = event[1]
        if word == "restore":
            return action, Params(cp=cp), self.state
        unal = False
        if word == "snapshot_up":
            if event[2] not in ("aligned", "unaligned"):
                raise _Reject(f"snapshot_up kind must be 'aligned' or 'unaligned', got {event[2]!r}")
            unal = event[2] == "unaligned"
        state = self.state
        i = next((k for k, sl in enumerate(state.slots) if sl.cp == cp), None)
        if i is None:
            if cp in self._finished:
                if word in ("transmit_barrier", "priority_arrival", "barrier_processed", "timeout_switch"):
                    return None, Params(), state  # the barrier of an aborted checkpoint is ignored
                raise _Reject(f"checkpoint {cp} already finished or aborted on this channel")
            if word not in ("snapshot_up", "snapshot_down"):
                raise _Reject(f"checkpoint {cp} has not started on this channel (no snapshot yet)")
            state = replace(state, slots=state.slots + (fresh_slot(PY, cp),))
            i = len(state.slots) - 1
        assert word in SLOT_EVENTS
        return action, Params(i=i, unal=unal, cp=cp), state

    def _check_completion(self, index: int, event: tuple[Any, ...]) -> None:
        lc = self.state.last
        if not cut_holds(lc.pre, lc.istate, lc.ostate, lc.sent):
            self.failures.append(
                Rejection(
                    index,
                    event,
                    (
                        f"CUT violated at checkpoint {lc.cp}: processed {lc.pre!r} + input state {lc.istate!r} + "
                        f"output state {lc.ostate!r} != sent {lc.sent!r}"
                    ),
                    "cut",
                )
            )
        if len(event) == 3:
            self._check_observation(index, event, event[2])

    def _check_observation(self, index: int, event: tuple[Any, ...], obs: Any) -> None:
        if not isinstance(obs, Mapping):
            self.failures.append(
                Rejection(index, event, "complete's third element must be a mapping", "observation")
            )
            return
        lc = self.state.last
        derived = {"processed": lc.pre, "input_state": lc.istate, "output_state": lc.ostate, "sent": lc.sent}
        for key, seen in obs.items():
            if key not in derived:
                self.failures.append(Rejection(index, event, f"unknown observation {key!r}", "observation"))
                continue
            want = derived[key]
            same = seen == len(want) if isinstance(seen, int) else tuple(seen) == tuple(want)
            if not same:
                self.failures.append(
                    Rejection(
                        index,
                        event,
                        (
                            f"{key} of checkpoint {lc.cp}: the engine persisted {seen!r}, the protocol derives "
                            f"{len(want)} records {want!r}"
                        ),
                        "observation",
                    )
                )

    def _tidy(self) -> None:
        """Apply the internal RetireCheckpoint step and drop slots that hold nothing (aborted, restored)."""
        retire = next(a for a in self.protocol.actions if a.event is None)
        keep = []
        for i, sl in enumerate(self.state.slots):
            if all(ok for _, ok in self.protocol.guard(retire, PY, self.state, Params(i=i))):
                self._finished.add(sl.cp)
                continue
            if not (sl.up or sl.down):
                self._finished.add(sl.cp)
                continue
            keep.append(sl)
        if len(keep) != len(self.state.slots):
            self.state = replace(self.state, slots=tuple(keep))


class _Reject(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def check_channel_trace(
    mode: str, events: Iterable[tuple[Any, ...]], mutant: str | None = None, gate: int = 0
) -> TraceVerdict:
    """Replay one channel's events; the verdict names the first rejected event and every CUT failure."""
    checker = ChannelChecker(mode, mutant, gate)
    for ev in events:
        if not checker.feed(ev):
            break
    return checker.verdict()


def observation(state: ChannelState) -> dict[str, tuple[int, ...]]:
    """What a faithful engine persisted for the latest completed checkpoint (used to record traces)."""
    lc = state.last
    if not lc.valid:
        raise CutcheckError("no checkpoint has completed on this channel yet.")
    return {
        "processed": tuple(lc.pre),
        "input_state": tuple(lc.istate),
        "output_state": tuple(lc.ostate),
        "sent": tuple(lc.sent),
    }
