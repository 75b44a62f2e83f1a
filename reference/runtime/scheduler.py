"""The scheduler's chooser: every nondeterministic choice of the engine goes through one of these.

A seeded chooser makes runs reproducible; an external chooser (Hypothesis draws integers) lets a
test drive, and shrink, the schedule itself. A scenario may opt into an interleaving chooser
(``schedule.chooser`` "pct", or a ``barrier_delay``): it sees the enabled actions themselves, not
only their weights (``ActionChooser``), so it can hold a barrier at its sender or run one thread of
the job ahead of the others on purpose; ``chooser_for`` builds what a scenario asks for.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Callable, Sequence
from enum import StrEnum
from itertools import accumulate
from typing import Any, Protocol, runtime_checkable

Action = tuple[int, Callable[[Any], None], Any]  # (weight, what runs, its argument), as the engine lists them


class Chooser(Protocol):
    def choose(self, weights: Sequence[int]) -> int:
        """Pick an index into ``weights`` (all positive), with probability proportional to the weight."""
        ...


@runtime_checkable
class ActionChooser(Protocol):
    """A chooser that sees the enabled actions (and the engine, read-only) rather than their weights.
    The engine asks ``choose_action`` instead of ``choose`` when ``sees_actions`` is true."""

    sees_actions: bool

    def choose(self, weights: Sequence[int]) -> int: ...

    def choose_action(self, engine: Any, actions: Sequence[Action]) -> int: ...


def pick(chooser: Chooser, engine: Any, actions: Sequence[Action]) -> int:
    """The engine's one call per step: the index of the action to run."""
    if getattr(chooser, "sees_actions", False):
        return int(chooser.choose_action(engine, actions))  # type: ignore[attr-defined]
    return chooser.choose([a[0] for a in actions])


class SeededChooser:
    """Deterministic weighted choice from a seed (Python's Mersenne Twister, stable across platforms)."""

    __slots__ = ("_rng",)

    def __init__(self, seed: int):
        self._rng = random.Random(seed)

    def choose(self, weights: Sequence[int]) -> int:
        n = len(weights)
        if n == 1:
            return 0
        cumulative = list(accumulate(weights))
        # The first index whose cumulative weight exceeds r: the weighted pick, in C.
        return bisect_right(cumulative, self._rng.randrange(cumulative[-1]))


class ExternalChooser:
    """Delegates each choice to a function ``draw(n) -> int in [0, n)``, e.g. Hypothesis' ``data.draw``.

    Weights are ignored on purpose: the external driver decides, and shrinking towards index 0
    shortens schedules (index 0 is always the most "progressing" action in the engine's ordering).
    After ``budget`` choices it falls back to a seeded chooser so that runs always finish.
    """

    __slots__ = ("_draw", "_budget", "_fallback", "used")

    def __init__(self, draw: Callable[[int], int], budget: int = 2000, seed: int = 0):
        self._draw = draw
        self._budget = budget
        self._fallback = SeededChooser(seed)
        self.used = 0

    def choose(self, weights: Sequence[int]) -> int:
        if len(weights) == 1:
            return 0
        if self.used >= self._budget:
            return self._fallback.choose(weights)
        self.used += 1
        return self._draw(len(weights))


class ScriptedChooser:
    """Replays recorded choices (modulo the number of enabled actions), then chooses by seed (or by
    ``fallback``, the scenario's interleaving chooser, which then sees only the steps after the script)."""

    __slots__ = ("_choices", "_at", "_fallback", "sees_actions")

    def __init__(self, choices: Sequence[int], seed: int, fallback: Chooser | None = None):
        self._choices = list(choices)
        self._at = 0
        self._fallback = fallback if fallback is not None else SeededChooser(seed)
        self.sees_actions = bool(getattr(self._fallback, "sees_actions", False))

    def choose(self, weights: Sequence[int]) -> int:
        if len(weights) == 1:
            return 0
        if self._at < len(self._choices):
            c = self._choices[self._at] % len(weights)
            self._at += 1
            return c
        return self._fallback.choose(weights)

    def choose_action(self, engine: Any, actions: Sequence[Action]) -> int:
        if len(actions) > 1 and self._at < len(self._choices):
            c = self._choices[self._at] % len(actions)
            self._at += 1
            return c
        return pick(self._fallback, engine, actions)


class RecordingChooser:
    """Draws each choice from ``draw(n)`` for the first ``budget`` choices and records them, so
    the schedule can be written into a replayable scenario (``schedule.choices``)."""

    __slots__ = ("_draw", "_budget", "_fallback", "choices", "sees_actions")

    def __init__(self, draw: Callable[[int], int], budget: int, seed: int, fallback: Chooser | None = None):
        self._draw = draw
        self._budget = budget
        self._fallback = fallback if fallback is not None else SeededChooser(seed)
        self.sees_actions = bool(getattr(self._fallback, "sees_actions", False))
        self.choices: list[int] = []

    def choose(self, weights: Sequence[int]) -> int:
        if len(weights) == 1:
            return 0
        if len(self.choices) < self._budget:
            c = self._draw(len(weights))
            self.choices.append(c)
            return c
        return self._fallback.choose(weights)

    def choose_action(self, engine: Any, actions: Sequence[Action]) -> int:
        if len(actions) > 1 and len(self.choices) < self._budget:
            c = self._draw(len(actions))
            self.choices.append(c)
            return c
        return pick(self._fallback, engine, actions)


class ChooserKind(StrEnum):
    """How a scenario's steps are chosen (``schedule.chooser``)."""

    WEIGHTED = "weighted"  # by the actions' weights, from the seed: every scenario's default
    PCT = "pct"  # randomized priorities per thread with a few priority change points (PCT)


# PCT assumes a program that terminates; a job's checkpoint timer gives its high-priority threads new
# work for ever (a 200-record job under strict priorities took 681 checkpoints in 20 000 steps and
# moved no record), so one step in FAIR_SHARE is a plain weighted choice: every thread runs eventually.
FAIR_SHARE = 16
SLOW_SHARE = 8  # one barrier in this many is held (``barrier_delay``)
SLOW_TASK_SHARE = 2  # one task in this many is slow to take checkpoints (``barrier_delay``; 4 found FLINK-21104 a third as often)
RUSH_SHARE = 2  # of the steps where such actions are enabled, all but one in this many run one of them
STALE_WAIT = 3  # most ``barrier_delay``s a stale barrier waits for a newer checkpoint to reach its receiver
STALL_STREAK = 4  # checkpoints ended in a row without one completing, after which nothing is held (``_stalled``)
NOTIFIER = "completion notifications"  # the thread of the coordinator's notify actions


def thread_of(arg: Any) -> Any:
    """The thread an action belongs to: a sender (output subpartition), a task (its channels' actions), or the notifier."""
    if hasattr(arg, "partition"):  # an OutputSubpartition: its transmits are the network's, not the task's
        return arg
    if isinstance(arg, tuple):
        return NOTIFIER
    return getattr(arg, "task", arg)


def held_barrier(fn: Any, arg: Any) -> Any:
    """The barrier this action moves, if any: the barrier (priority or aligned) at the head of a sender's
    queue, the trigger a task without live input (a source) takes next, or the priority barrier a task
    with pending priority events handles next (the first channel's, as ``Task.handle_priority`` takes
    them). In Flink each travels on its own: a network buffer, a trigger RPC, a mailbox event."""
    if getattr(fn, "__name__", "") == "_do_direct_checkpoint":  # the engine's action for a trigger
        triggers = arg.direct_triggers
        return triggers[0] if triggers else None
    if hasattr(arg, "partition"):
        queue = arg.queue
        if queue and hasattr(queue[0], "cp") and hasattr(queue[0], "priority"):
            return queue[0]
        return None
    if getattr(arg, "pending_priority", 0):
        return next((ch.priority[0] for ch in arg.channels if ch.priority), None)
    return None


class InterleavingChooser:
    """Explores interleavings on purpose, as PCT does (Burckhardt et al., ASPLOS 2010), plus held barriers.

    * ``kind`` PCT: each thread (a task, a sender, the notifier) gets a random priority when first
      seen, and the enabled thread of highest priority runs (its own actions by weight); at ``depth``
      change points, drawn among the first ``horizon`` steps, the running thread drops below every
      other. A low-priority sender then keeps its barrier queued while the rest of the job runs on.
    * ``barrier_delay``: one barrier in ``SLOW_SHARE`` (drawn per sender or task and checkpoint) waits
      at its sender, or among its task's priority events, until a latency of up to ``barrier_delay``
      steps since its trigger has passed, unless nothing else can run: a checkpoint can then expire
      while its barrier is still at a sender. One task in ``SLOW_TASK_SHARE`` is slow: each barrier at
      its senders waits ``barrier_delay`` or not at all, and it takes a newer checkpoint only once an
      older one's barrier has left its senders and a buffer has crossed behind it.
    * After an abort: a barrier of the aborted checkpoint at a sender waits until its receiver has
      taken a newer checkpoint from another input (at most ``STALE_WAIT`` delays), a task with such a
      barrier at its senders takes the newer checkpoint only after a buffer crossed behind it, and the
      checkpoint right after an aborted one is never held and moves first (``_rushed``): it completes
      with the stale barrier and the records behind it inside its cut (FLINK-21104's order, which the
      weighted chooser reached in about one of 500 seeds).
    * After ``STALL_STREAK`` aborts in a row nothing is held until a checkpoint completes (``_stalled``).
    Every draw comes from one seeded generator, so the scenario's seed reproduces the schedule.
    """

    __slots__ = ("_rng", "kind", "delay", "_changes", "_priority", "_latency", "_slow", "_behind", "_steps", "sees_actions")

    def __init__(self, seed: int, kind: ChooserKind = ChooserKind.PCT, depth: int = 0, horizon: int = 1,
                 barrier_delay: int = 0):
        self._rng = random.Random(seed)
        self.kind = kind
        self.delay = barrier_delay
        self._changes = sorted(self._rng.randrange(max(1, horizon)) for _ in range(depth)) if kind is ChooserKind.PCT else []
        self._priority: dict[int, tuple[float, Any]] = {}  # id(thread) -> (priority, the thread, kept alive)
        self._latency: dict[tuple[int, int], tuple[int, Any]] = {}  # (id(sender), checkpoint) -> (steps, the sender)
        self._slow: dict[int, tuple[bool, Any]] = {}  # id(task) -> (takes every checkpoint late?, the task)
        self._behind: dict[int, tuple[int, Any]] = {}  # id(sender) -> (records sent when its stale barrier left, it)
        self._steps = 0
        self.sees_actions = True

    def choose(self, weights: Sequence[int]) -> int:
        """Without the actions (a caller that only has weights): a weighted choice from the seed."""
        cumulative = list(accumulate(weights))
        return bisect_right(cumulative, self._rng.randrange(cumulative[-1]))

    def choose_action(self, engine: Any, actions: Sequence[Action]) -> int:
        self._steps += 1
        if len(actions) == 1:
            return 0
        idx = list(range(len(actions)))
        if self.delay and not _stalled(engine):
            free = [i for i in idx if not self._held(engine, actions[i][1], actions[i][2])]
            idx = free or idx  # nothing else can run: the held barrier goes (no deadlock of our making)
            rushed = [i for i in idx if self._rushed(engine, actions[i][1], actions[i][2])]
            if rushed and self._rng.randrange(RUSH_SHARE):
                idx = rushed
        if self.kind is not ChooserKind.PCT or self._rng.randrange(FAIR_SHARE) == 0:
            return idx[self.choose([actions[i][0] for i in idx])]
        best = max(self._prio(thread_of(actions[i][2])) for i in idx)
        mine = [i for i in idx if self._prio(thread_of(actions[i][2])) == best]
        chosen = mine[self.choose([actions[i][0] for i in mine])] if len(mine) > 1 else mine[0]
        while self._changes and self._changes[0] <= self._steps:
            self._changes.pop(0)
            thread = thread_of(actions[chosen][2])
            self._priority[id(thread)] = (-float(len(self._changes) + 1) - self._rng.random(), thread)
        return chosen

    def _prio(self, thread: Any) -> float:
        known = self._priority.get(id(thread))
        if known is None:
            known = self._priority[id(thread)] = (self._rng.random(), thread)
        return known[0]

    def _held(self, engine: Any, fn: Any, arg: Any) -> bool:
        barrier = held_barrier(fn, arg)
        if barrier is None:
            return False
        step = engine.step
        sender = hasattr(arg, "partition")
        if sender and _aborted(engine, barrier.cp):
            return self._stale_waits(engine, arg, barrier)
        if not sender:
            # A slow task holds a newer checkpoint back behind any older barrier at its senders; any
            # task behind a stale one (of an aborted checkpoint), so that records cross after it first.
            return self._after_stale_barriers(arg, barrier.cp, None if self._slow_task(arg) else engine)
        key = (id(arg), barrier.cp)
        latency = self._latency.get(key)
        if latency is None:
            if _follows_an_abort(engine, barrier.cp):
                # The checkpoint after an expired one crosses at once: it then completes while the
                # expired one's barriers are still held (meeting them), instead of expiring behind them.
                latency = self._latency[key] = (0, arg)
            elif sender and self._slow_task(arg.task):
                # Each of a slow task's barriers waits ``delay`` at its senders or none, one in two: a
                # checkpoint expires with its barrier queued there, and the next one may complete.
                latency = self._latency[key] = (self.delay if self._rng.randrange(2) else 0, arg)
            else:
                # Most barriers cross at once; one in SLOW_SHARE after a latency of its own, so one link can
                # carry one checkpoint's barrier fast and the next one's slowly (big jobs still complete).
                slow = self._rng.randrange(SLOW_SHARE) == 0
                latency = self._latency[key] = (self._rng.randint(1, self.delay) if slow else 0, arg)
        # A latency from the trigger, not a wait per barrier: the barriers of checkpoints triggered
        # back to back leave in order, instead of piling up one ``delay`` behind the other.
        return bool(step - barrier.trigger_step < latency[0])

    def _rushed(self, engine: Any, fn: Any, arg: Any) -> bool:
        """Whether this action carries the checkpoint after an aborted one (its barrier or trigger), or a
        buffer queued behind a stale barrier that has left: those go first (the newer one completes)."""
        barrier = held_barrier(fn, arg)
        if barrier is not None:
            return _follows_an_abort(engine, barrier.cp) and barrier.cp in engine.coordinator.pending
        return hasattr(arg, "partition") and id(arg) in self._behind

    def _stale_waits(self, engine: Any, sender: Any, barrier: Any) -> bool:
        """Whether the barrier of an aborted checkpoint still waits at ``sender``: until a newer checkpoint
        is pending and the receiving task has taken it from another live input, at most ``STALE_WAIT``
        delays after its trigger (a receiver without one could take it only behind this barrier: the
        wait would make the newer checkpoint expire too). The stale barrier then reaches a task that
        persists the newer checkpoint on this channel, with records behind it (FLINK-21104's order)."""
        if engine.step - barrier.trigger_step >= STALE_WAIT * self.delay or not _other_inputs(sender.channel):
            return False
        newer = min((c for c in engine.coordinator.pending if c > barrier.cp), default=None)
        return newer is None or bool(sender.channel.task.last_cp < newer)

    def _after_stale_barriers(self, task: Any, cp: int, only_aborted: Any = None) -> bool:
        """Whether a slow task still holds back checkpoint ``cp`` (its trigger, or a priority barrier at
        its input): while an older checkpoint's barrier is queued at one of its senders, and after it
        left, until a buffer behind it crossed too; its consumers may already persist the newer one
        (FLINK-21104's order; in Flink the trigger RPC or mailbox and the network travel independently)."""
        held = False
        for p in task.partitions:
            for sp in p.subpartitions:
                q = sp.queue
                head = q[0] if q else None
                if (head is not None and head.__class__.__name__ == "Barrier" and head.cp < cp
                        and (only_aborted is None or _aborted(only_aborted, head.cp))):
                    self._behind[id(sp)] = (sp.transmitted, sp)
                    held = True
                    continue
                mark = self._behind.get(id(sp))
                if mark is None:
                    continue
                if sp.transmitted > mark[0] or not any(x.__class__.__name__ == "Buf" for x in q):
                    del self._behind[id(sp)]  # a buffer crossed behind it, or none is queued to
                else:
                    held = True
        return held

    def _slow_task(self, task: Any) -> bool:
        """Whether ``task`` is slow to take checkpoints (drawn when first seen, one in SLOW_TASK_SHARE)."""
        known = self._slow.get(id(task))
        if known is None:
            known = self._slow[id(task)] = (self._rng.randrange(SLOW_TASK_SHARE) == 0, task)
        return known[0]


def _stalled(engine: Any) -> bool:
    """Whether ``STALL_STREAK`` checkpoints or more ended since the last completed one: then nothing is held,
    so holds never keep a job from completing checkpoints (its exactly-once sinks from finishing)."""
    c = getattr(engine, "coordinator", None)  # a unit test's stand-in has none, and never stalls
    done = c.completed_ids[-1] if c is not None and c.completed_ids else 0
    return c is not None and c.next_id - 1 - done - sum(1 for cp in c.pending if cp > done) >= STALL_STREAK


def _other_inputs(channel: Any) -> bool:
    """Whether the task ``channel`` feeds has another live input through which a newer barrier can reach it."""
    return any(ch is not channel and not ch.ended and not ch.eop_arrived for ch in channel.task.channels)


def _aborted(engine: Any, cp: int) -> bool:
    """Whether checkpoint ``cp`` was triggered and aborted (expired or declined): neither pending nor
    completed. An engine without a coordinator (a unit test's stand-in) has no aborts."""
    coordinator = getattr(engine, "coordinator", None)
    if coordinator is None or cp >= coordinator.next_id:
        return False
    return cp not in coordinator.pending and cp not in coordinator.completed_ids


def _follows_an_abort(engine: Any, cp: int) -> bool:
    """Whether checkpoint ``cp - 1`` was aborted (expired or declined; ``_aborted``)."""
    return cp > 1 and _aborted(engine, cp - 1)


def chooser_for(schedule: Any, seed: int) -> Chooser:
    """The chooser a scenario's ``schedule`` section asks for: today's seeded weighted choice unless it
    opts into PCT or held barriers; a scripted prefix (``choices``) goes first either way."""
    kind = ChooserKind(getattr(schedule, "chooser", ChooserKind.WEIGHTED))
    delay = getattr(schedule, "barrier_delay", 0)
    base: Chooser
    if kind is ChooserKind.WEIGHTED and not delay:
        base = SeededChooser(seed)
    else:
        base = InterleavingChooser(seed, kind, getattr(schedule, "pct_depth", 0), getattr(schedule, "pct_horizon", 1),
                                   delay)
    if schedule.choices:
        return ScriptedChooser(schedule.choices, seed, fallback=base)
    return base


def interleaving_of(sdict: Any) -> Chooser | None:
    """The interleaving chooser a scenario's JSON asks for, or None (a recording chooser's fallback, so that a
    recorded schedule replays as ``chooser_for`` builds it); defaults are ``reference.scenario.Schedule``'s."""
    sched = sdict.get("schedule") or {}
    kind = ChooserKind(sched.get("chooser", ChooserKind.WEIGHTED))
    delay = sched.get("barrier_delay", 0)
    if kind is ChooserKind.WEIGHTED and not delay:
        return None
    return InterleavingChooser(sdict.get("seed", 0), kind, sched.get("pct_depth", 0), sched.get("pct_horizon", 1000),
                               delay)
