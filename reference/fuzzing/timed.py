"""Timed replays: a corpus scenario run again, choice for choice, with one event added at a step its
run marked.

Three channel transitions (``abstract_coverage``) need two things in one step of hundreds: a
savepoint triggered in the very step a channel starts (``idle/1 -> persisting/2+``) or ends
(``persisting/1 -> idle/2+``) persisting for an unaligned checkpoint, and every pending checkpoint
aborted at once while a channel persists with a savepoint pending beside its checkpoint
(``persisting/2+ -> idle/0``). The observer marks the steps where a run came close (``moments``). A
mutant of that run (other draws) runs another schedule, so its parent's steps mean nothing there; a
replay runs the parent's own scenario with the parent's own scheduler choices (``ReplayChooser``),
so every step up to the marked one is the parent's, and the added event lands on it:

* ``crowded``: a running subtask of another pipelined region fails at the next step. Its region
  failover aborts every pending checkpoint, savepoints included (facts §9, ``SchedulerBase.restoreState``),
  while the persisting channel's task runs on: the observer sees the channel go idle with nothing pending.
* ``starts``, ``ends``: a savepoint falls due in that step. Its trigger gives the sources an action
  each, so the recorded index would name another action there; at that one step the replay runs the
  action that moved the channel in the parent's run (the task's priority event or the barrier's
  arrival at the channel), found by what it acts on.

Both are things a Flink job does: a savepoint may be triggered at any moment, a task may fail at any
moment. A job with one region has no ``crowded`` moment; ``shapes.CROWD`` is the generator shape that
makes them (unaligned checkpoints, savepoints in bursts and a side pipeline, a region of its own).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cutcheck.reference.fuzzing.abstract_cells import Cell
from cutcheck.reference.fuzzing.abstract_coverage import AbstractCoverage
from cutcheck.reference.runtime.scheduler import Action, Chooser, SeededChooser, interleaving_of, pick

# The channel transition each kind of moment provokes.
TIMED_FOR: dict[str, Cell] = {"starts": ("transition", "idle/1", "persisting/2+"),
                              "ends": ("transition", "persisting/1", "idle/2+"),
                              "crowded": ("transition", "persisting/2+", "idle/0")}


def wanted_moments(moments: dict[str, list[tuple[int, str]]], reached: AbstractCoverage) -> list[str]:
    """The kinds of ``moments`` whose transition (``TIMED_FOR``) ``reached`` has not reached: a replay
    timed for a reached one finds nothing new."""
    return [k for k in TIMED_FOR if moments.get(k) and not reached.hits[TIMED_FOR[k]]]


def replayable(scenario: dict[str, Any]) -> bool:
    """A scenario a replay can time an event in: one job (a resubmit's second job counts its steps
    from 0 again, so a marked step would not say which job's)."""
    return "resubmit" not in scenario


@dataclass(frozen=True, slots=True)
class Replay:
    """A parent's scenario with one event added, and what makes its run the parent's up to it."""

    scenario: dict[str, Any]
    script: tuple[int, ...]  # the parent's scripted choices (a Hypothesis example's; none in ``guided_campaign``)
    step: int | None = None  # the step whose action is found by what it acts on (``starts``, ``ends``)
    kind: str = ""
    channel: str = ""  # that action's channel, "subtask#index in its task"

    def chooser(self) -> ReplayChooser:
        return ReplayChooser(self.script, self.scenario.get("seed", 0), interleaving_of(self.scenario),
                             self.step, self.kind, self.channel)


def replay(scenario: dict[str, Any], script: Sequence[int], kind: str, moment: tuple[int, str]) -> Replay:
    """``scenario`` (a copy) with the event that provokes ``kind``'s transition at ``moment``."""
    out = copy.deepcopy(scenario)
    out.get("schedule", {}).pop("choices", None)  # the replay's chooser scripts the run
    step, where = moment
    if kind == "crowded":
        failures = out.get("failures", [])
        # Appended: no rescale names its index, and every earlier failure keeps its timing.
        out["failures"] = [*failures, {"at_step": step + 1, "target": where}]
        out["max_steps"] = out["max_steps"] + out["max_steps"] // (len(failures) + 1)  # room for one more restart
        return Replay(out, tuple(script))
    out["savepoints"] = [*out.get("savepoints", []), {"at_step": step}]
    return Replay(out, tuple(script), step, kind, where)


class ReplayChooser:
    """The parent run's chooser again: its scripted choices (``RecordingChooser``'s), then the same
    fallback from the same state; at ``step``, the action ``kind`` needs on ``channel``. Every choice it
    makes is recorded (``choices``), so a finding replays as ``schedule.choices``."""

    __slots__ = ("_script", "_at", "_fallback", "_fallback_sees", "_step", "_kind", "_channel", "choices")
    sees_actions = True

    def __init__(self, script: Sequence[int], seed: int, fallback: Chooser | None, step: int | None = None,
                 kind: str = "", channel: str = ""):
        self._script = list(script)
        self._at = 0
        self._fallback: Chooser = fallback if fallback is not None else SeededChooser(seed)
        self._fallback_sees = bool(getattr(self._fallback, "sees_actions", False))
        self._step, self._kind, self._channel = step, kind, channel
        self.choices: list[int] = []

    def choose(self, weights: Sequence[int]) -> int:
        """Without the actions (a wrapper that hides them): the script, then the fallback by weight."""
        if len(weights) == 1:
            return 0
        if self._at < len(self._script):
            c = self._script[self._at] % len(weights)
            self._at += 1
        else:
            c = self._fallback.choose(weights)
        self.choices.append(c)
        return c

    def choose_action(self, engine: Any, actions: Sequence[Action]) -> int:
        n = len(actions)
        if n > 1 and engine.step == self._step:
            found = moved_by(actions, self._kind, self._channel)
            if found is not None:
                self._at += self._at < len(self._script)  # the parent's choice for this step is spent
                self.choices.append(found)
                return found
        if n > 1 and self._at < len(self._script):
            # As RecordingChooser: a scripted choice only where there is one to make.
            c = self._script[self._at] % n
            self._at += 1
        elif self._fallback_sees:
            c = pick(self._fallback, engine, actions)
            if n == 1:
                return c
        elif n == 1:
            return 0
        else:
            c = self._fallback.choose([a[0] for a in actions])
        self.choices.append(c)
        return c


def moved_by(actions: Sequence[Action], kind: str, channel: str) -> int | None:
    """The index of the action that started (``starts``: the task's priority event, or a barrier at the
    head of one of its channels) or ended (``ends``: the barrier's arrival at ``channel``, or its
    handling there) the persisting of ``channel``; None when none is enabled."""
    sid, _, index = channel.rpartition("#")
    ranked: list[tuple[int, int]] = []
    for i, (_, fn, arg) in enumerate(actions):
        name = getattr(fn, "__name__", "")
        if name == "_do_priority" and str(arg.sid) == sid:
            ranked.append((0, i))
        elif name == "_do_process" and str(arg.task.sid) == sid:
            ranked.append((1 if kind == "starts" or str(arg.index_in_task) == index else 3, i))
        elif name in ("_do_transmit", "_transmit") and kind == "ends" and arg.channel is not None \
                and str(arg.channel.task.sid) == sid and str(arg.channel.index_in_task) == index:
            ranked.append((-1, i))
    return min(ranked)[1] if ranked else None
