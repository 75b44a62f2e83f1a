"""How a campaign runs Hypothesis: in a private home, with Ctrl-C that cannot be lost, with no
constants drawn from whatever source the command loaded (``pinned_constants``: a campaign seed is
the same campaign in every command), and guided by what the campaign reached (``GuidedExamples``)."""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from cutcheck.reference.fuzzing.abstract_coverage import AbstractCoverage
from cutcheck.reference.fuzzing.guided import (
    PAIR_CHOICES,
    REPLAY_SHARE,
    Entry,
    RecordingDraw,
    force,
    keep,
    mutate,
    pair_hits,
    pick,
    ranked_pairs,
    timed_entries,
)
from cutcheck.reference.fuzzing.shapes import SHAPE_EVERY, WARM_UP
from cutcheck.reference.fuzzing.shapes import wanted as wanted_shapes
from cutcheck.reference.fuzzing.timed import Replay, replay, wanted_moments
from cutcheck.reference.fuzzing.verdicts import FEATURE_CYCLE, FOCI, Verdict

NEEDY = 3  # foci an example may be steered to (the ones with the least-reached pairs)


@contextlib.contextmanager
def private_hypothesis_home() -> Iterator[None]:
    """Hypothesis caches what it reads from source files (and keeps its example database, when one is
    configured) under ``.hypothesis/`` in the working directory; a campaign must leave nothing in the
    user's directory, so Hypothesis gets a new temporary home, removed at the end however the campaign
    ends (Ctrl-C included), and the home it had before is put back."""
    from hypothesis import configuration

    previous = vars(configuration).get("__hypothesis_home_directory")
    home = tempfile.mkdtemp(prefix="cutcheck-hypothesis-")
    configuration.set_hypothesis_home_dir(home)
    try:
        yield
    finally:
        configuration.set_hypothesis_home_dir(previous)
        shutil.rmtree(home, ignore_errors=True)


_INTERRUPTED = threading.Event()


@contextlib.contextmanager
def sticky_interrupts() -> Iterator[None]:
    """Ctrl-C that cannot be lost: Hypothesis runs a garbage-collector callback, and a KeyboardInterrupt
    raised inside one is printed and dropped by Python (the campaign then ran on for its whole budget).
    The handler also sets a flag that every example looks at first, so the next example ends the run;
    the dropped one is not printed (the run says "interrupted" once)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(signum: int, frame: Any) -> None:
        _INTERRUPTED.set()
        raise KeyboardInterrupt

    def unraisable(info: Any) -> None:
        if not isinstance(info.exc_value, KeyboardInterrupt):  # the flag carries a dropped Ctrl-C
            previous_hook(info)

    _INTERRUPTED.clear()
    previous, previous_hook = signal.signal(signal.SIGINT, on_sigint), sys.unraisablehook
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook = previous_hook
        _INTERRUPTED.clear()


def stop_if_interrupted() -> None:
    if _INTERRUPTED.is_set():
        raise KeyboardInterrupt


@contextlib.contextmanager
def pinned_constants() -> Iterator[None]:
    """No constants from the source of loaded modules: Hypothesis draws, now and then, an integer it
    read from the source of every module loaded outside site-packages (cutcheck's own, in an editable
    checkout), so the same campaign seed drew other scenarios in ``verify`` than in a benchmark or
    ``fuzz`` (each loads other modules, and lazily loaded ones joined mid-run): at seed 0, 600
    examples reached the same cell count and missed different pairs. Inside a campaign the pool of
    such constants is empty, whatever is loaded (its own fixed constants stay), so a campaign seed is
    the campaign in every command; the scan of the source (about 1.5 s) is no longer paid. The
    previous lookup is put back at the end. A Hypothesis without this pool has nothing to pin."""
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
    except ImportError:
        yield
        return
    lookup = getattr(providers, "_get_local_constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if lookup is None or cache is None:
        yield
        return
    empty = Constants()
    providers._get_local_constants = lambda: empty
    cache.cache.clear()  # drawn with the source's constants before: rebuilt from the pinned pool
    try:
        yield
    finally:
        providers._get_local_constants = lookup
        cache.cache.clear()


class HypothesisRecordingDraw(RecordingDraw):
    """A Hypothesis example's draws, recorded (``guided.RecordingDraw``): a corpus entry's prefix
    first, then each value drawn through Hypothesis, which shrinks those."""

    __slots__ = ("_data",)

    def __init__(self, data: Any, prefix: Sequence[int] = ()):
        super().__init__(None, prefix)
        self._data = data

    def fresh(self, lo: int, hi: int) -> int:
        from hypothesis import strategies as st

        value: int = self._data.draw(st.integers(lo, hi))
        return value


class GuidedExamples:
    """How each example of a Hypothesis campaign chooses what to run, steered by what the campaign has
    reached so far (``reference.fuzzing.guided``). Batches alternate: a plain batch is the unguided
    campaign's next batch, with its Hypothesis seed and its draws, example for example, so guidance
    delays what the unguided campaign finds by the guided batches' time at most and never loses it for
    want of examples (with guidance mixed into every batch, faults the unguided campaign found on 5 of
    5 seeds within 50 scenarios went unfound in 200 on 4 of them: Hypothesis's own mutation of earlier
    examples lost its footing). A guided batch's examples, once the corpus has entries, are half mutants of a
    scenario that reached new abstract cells (the ones with rare cells picked more often) and half
    are fresh: the cycle's focus (one in four steered to a focus whose allowed pairs are least
    reached) with the interleaving knobs in one in four, one of the ``PAIR_CHOICES`` least-reached
    swarm-feature pairs the focus allows forced on (an unreached one while there is one), and now and then savepoint bursts
    (``guided.maybe_bursts``). While a transition that needs an event in one precise step is unreached
    (``timed.TIMED_FOR``), half the mutants are timed replays of an entry whose run marked such a step,
    and while a cell the cycle reaches rarely is unreached, one fresh example in ``SHAPE_EVERY`` takes the
    shape that makes it (``shapes.wanted``: the one that marks failover moments among them).

    Examples see the corpus and the counts as they were when their batch began (``freeze``): Hypothesis
    replays an example's draws while it shrinks, and the same draws must give the same scenario. Every
    draw shrinks towards a fresh scenario of the first focus with no knobs, forcing the least-reached pair.
    """

    __slots__ = ("corpus", "reached", "mutated", "replayed", "shaped", "seen", "active", "_corpus", "_hits", "_needy",
                 "_starved", "_shapes", "_batch")

    def __init__(self, reached: AbstractCoverage):
        self.corpus: list[Entry] = []
        self.reached = reached  # the campaign's, merged after each example
        self.mutated = 0
        self.replayed = 0  # timed replays run (``timed``)
        self.seen = 0  # examples run
        self.shaped: Counter[str] = Counter()  # fresh examples per shape run (``shapes.wanted``)
        self._shapes: list[tuple[str, dict[str, Any]]] = []  # the batch's (``shapes.wanted``)
        self.active = False  # this batch is guided (``freeze``)
        self._corpus: tuple[Entry, ...] = ()
        self._hits = AbstractCoverage()
        self._needy: tuple[str, ...] = ()
        self._starved = False  # a needy focus allows a pair no run reached yet
        self._batch = 0  # examples run when this batch began (``freeze``): mixed into shaped examples' seeds

    def freeze(self, *, active: bool) -> None:
        self.active = active
        self._corpus = tuple(self.corpus)
        self._hits = hits = AbstractCoverage(Counter(self.reached.hits))
        # The foci whose least-reached allowed pair has the fewest hits, and among those the ones with the
        # most pairs at that count: a focus a cycle step brings up rarely (at-least-once, batch: one in
        # 18) would otherwise leave its own pairs unreached. (Ties went to cycle order: early in a
        # campaign every focus has an unreached pair, and at-least-once, late in the cycle, with ~29
        # pairs only it allows, was never needy: 5-7 of its pairs unreached after 600 examples.)
        least: dict[str, tuple[int, int]] = {}
        for focus in dict.fromkeys(FEATURE_CYCLE):
            counts = [pair_hits(hits, p) for p in ranked_pairs(hits, FOCI[focus])]
            fewest = min(counts, default=2**31)
            least[focus] = (fewest, -counts.count(fewest))
        self._needy = tuple(sorted(least, key=lambda f: least[f])[:NEEDY])
        # Steered one in two while a pair is unreached (one in four after).
        self._starved = least[self._needy[0]][0] == 0
        self._shapes = wanted_shapes(hits, self._corpus, self.seen)
        self._batch = self.seen

    def draw(self, data: Any) -> tuple[dict[str, Any], RecordingDraw, str, Replay | None]:
        """The generator settings and the draw of one example, how it was guided: "plain" (the cycle's
        focus alone, as an unguided campaign draws it), "fresh", a shape's name (``shapes.wanted``), "mutant" or
        "replay", and for a replay what it runs (``timed.replay``: the draw then only records the
        parent's draws, for the corpus)."""
        from hypothesis import strategies as st

        focus = FEATURE_CYCLE[data.draw(st.integers(0, len(FEATURE_CYCLE) - 1))]
        if not self.active:  # a plain batch: the unguided campaign's example, draw for draw
            return dict(FOCI[focus]), HypothesisRecordingDraw(data), "plain", None
        steer = data.draw(st.integers(0, 3))  # one in four (two while a pair is unreached): a needy focus
        if steer == 3 or (self._starved and steer == 2):
            focus = self._needy[data.draw(st.integers(0, len(self._needy) - 1))]
        if self._corpus and data.draw(st.integers(0, 1)):
            rng = random.Random(data.draw(st.integers(0, 2**32 - 1)))
            # While a timed transition is unreached, half the mutants replay a parent whose run marked a
            # moment for it, with the event that provokes it at that step (``timed``).
            timed = timed_entries(self._corpus, self._hits) if self.seen >= WARM_UP else []
            if timed and rng.random() < REPLAY_SHARE:
                parent = pick(rng, timed, self._hits)
                kind = rng.choice(wanted_moments(parent.moments, self._hits))
                plan = replay(parent.scenario, parent.choices, kind, rng.choice(parent.moments[kind]))
                recorded = HypothesisRecordingDraw(data)
                recorded.draws, recorded.seeds = list(parent.draws), list(parent.seeds)
                return dict(parent.gen), recorded, "replay", plan
            parent = pick(rng, self._corpus, self._hits)
            return dict(parent.gen), HypothesisRecordingDraw(data, mutate(rng, parent.draws, parent.seeds)), "mutant", None
        if self._shapes and data.draw(st.integers(0, SHAPE_EVERY - 1)) == 0:
            name, shape = self._shapes[data.draw(st.integers(0, len(self._shapes) - 1))]
            # Drawn from a seed, not value by value: Hypothesis favours the bounds of each range (one
            # subtask, few records), and the rates a shape is tuned for are those of uniform draws. It
            # favours them in the seed too (most shaped examples drew seed 0, the same scenario again), so
            # the batch's start is mixed in: the batches' shaped examples differ, and each replays exactly.
            drawn = data.draw(st.integers(0, 2**32 - 1))
            return dict(shape), RecordingDraw(random.Random(drawn ^ (self._batch * 0x9E3779B1))), name, None
        gen = dict(FOCI[focus])
        if focus != "batch" and data.draw(st.integers(0, 3)) == 3:  # one in four: its runs are longer
            gen["interleave"] = True
        ranked = ranked_pairs(self._hits, gen)[:PAIR_CHOICES]
        # A pair no run reached yet is forced before any reached one: drawn among all the least-reached,
        # a last unreached pair came up one time in PAIR_CHOICES and stayed unreached (seed 2: 716/717).
        ranked = [p for p in ranked if pair_hits(self._hits, p) == 0] or ranked
        if ranked:
            gen = force(gen, ranked[data.draw(st.integers(0, len(ranked) - 1))])
        return gen, HypothesisRecordingDraw(data), "fresh", None

    def learn(self, draw: RecordingDraw, gen: dict[str, Any], verdict: Verdict, how: str,
              choices: Sequence[int] = ()) -> None:
        """Keep the example's scenario, with its scheduler's ``choices``, when its run reached new cells
        (call before merging its coverage)."""
        keep(self.corpus, draw, gen, verdict, self.reached, choices)
        self.mutated += how == "mutant"
        self.replayed += how == "replay"
        self.seen += 1
        if how not in ("plain", "fresh", "mutant", "replay"):
            self.shaped[how] += 1
