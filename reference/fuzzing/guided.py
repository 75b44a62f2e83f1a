"""Guided campaigns: keep the scenarios that reached new abstract states and mutate them.

A seed campaign draws every scenario afresh, so an interleaving that one scenario in 500 reaches
stays one in 500 however long the campaign runs. Here every scenario is drawn through a
``RecordingDraw``, which keeps the integers it drew; a scenario whose run reached an abstract cell
(``reference.fuzzing.abstract_coverage``) that no earlier run reached joins the corpus, and later
scenarios are, about half the time, mutants of a corpus entry: the same draws with a few changed or
the tail drawn afresh, which mostly keeps the graph and changes timing, schedule or faults. Entries
that reached rare cells are picked more often. Fresh scenarios walk the campaign foci
(``verdicts.FEATURE_CYCLE``), half of them with the interleaving knobs (``interleave``), and force on
the swarm feature pair that runs have reached least so far.

``seconds`` is a wall (``reference.core.deadline``), as in the other campaigns: the deadline is
checked on entry of each scenario and every scenario runs inside it, so none overruns it; one the
wall cuts is unjudged (``cut_by_wall``) and ends the campaign.

Everything comes from the campaign seed, so a campaign seed reproduces the campaign (up to where a
time budget ends it).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cutcheck.model.errors import CutcheckError
from cutcheck.reference.core.coverage import Coverage
from cutcheck.reference.core.deadline import BudgetExhausted, walled
from cutcheck.reference.fuzzing.abstract_coverage import ABSTRACT_UNIVERSE, AbstractCoverage, Cell, cell_name
from cutcheck.reference.fuzzing.generate import scenario_dict
from cutcheck.reference.fuzzing.swarm import MASKABLE, Feature
from cutcheck.reference.fuzzing.verdicts import FEATURE_CYCLE, FOCI, Verdict, run_scenario

MUTATE_SHARE = 0.5  # of the scenarios once the corpus has entries
INTERLEAVE_SHARE = 0.5  # of the fresh scenarios: the interleaving knobs drawn too
MAX_CORPUS = 200
SEED_RANGE = 2**31 - 1  # a draw this wide is a seed  # entries kept (the ones with the rarest cells when full)


class RecordingDraw:
    """Draws integers from ``rng`` (after replaying ``prefix``, each value folded into its range) and
    records every value, so the scenario can be mutated draw by draw."""

    __slots__ = ("_rng", "_prefix", "draws", "seeds")

    def __init__(self, rng: random.Random, prefix: Sequence[int] = ()):
        self._rng = rng
        self._prefix = list(prefix)
        self.draws: list[int] = []
        self.seeds: list[int] = []  # positions of seed-sized draws (the scenario's seed, which drives its schedule)

    def integer(self, lo: int, hi: int) -> int:
        i = len(self.draws)
        if i < len(self._prefix):
            v = self._prefix[i]
            if not lo <= v <= hi:
                v = lo + (v - lo) % (hi - lo + 1)
        else:
            v = self._rng.randint(lo, hi)
        if hi - lo >= SEED_RANGE:
            self.seeds.append(i)
        self.draws.append(v)
        return v


@dataclass(slots=True)
class Entry:
    draws: list[int]
    seeds: list[int]
    gen: dict[str, Any]
    cells: frozenset[Cell]


@dataclass(slots=True)
class GuidedResult:
    examples: int = 0
    mutated: int = 0  # scenarios that were mutants of corpus entries
    seconds: float = 0.0
    failure: Verdict | None = None
    found_after: float | None = None  # seconds into the campaign
    corpus: int = 0
    abstract: AbstractCoverage = field(default_factory=AbstractCoverage)
    coverage: Coverage = field(default_factory=Coverage)
    first_reached: dict[str, float] = field(default_factory=dict)  # cell name -> seconds into the campaign
    cut_by_wall: int = 0  # scenarios the time budget stopped while they ran: unjudged

    @property
    def ok(self) -> bool:
        return self.failure is None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scenarios_run": self.examples, "mutated": self.mutated, "corpus": self.corpus,
                               "seconds": self.seconds, "found_after": self.found_after,
                               "abstract_coverage": self.abstract.to_json(), "coverage": self.coverage.to_json(),
                               "first_reached": self.first_reached, "cut_by_wall": self.cut_by_wall}
        if self.failure is not None:
            out["violation"] = self.failure.violations[0]
        return out


def guided_campaign(*, seconds: float | None = 60.0, examples: int | None = None, mutants: Sequence[str] = (),
                    seed: int = 0, progress: Callable[[int], None] | None = None) -> GuidedResult:
    """Search until a finding, ``examples`` scenarios or the wall ``seconds`` (checked on entry of each
    scenario, and inside it by the engine loop)."""
    if seconds is None and examples is None:
        raise CutcheckError("a guided campaign needs --seconds or --examples to end.")
    if examples is not None and examples < 1:
        raise CutcheckError(f"examples {examples}: a campaign needs at least one scenario.")
    rng = random.Random(seed)
    result = GuidedResult()
    corpus: list[Entry] = []
    start = time.monotonic()
    wall = start + seconds if seconds is not None else None
    while (examples is None or result.examples < examples) and (wall is None or time.monotonic() < wall):
        parent = _pick(rng, corpus, result.abstract) if corpus and rng.random() < MUTATE_SHARE else None
        if parent is not None:
            gen, prefix = parent.gen, mutate(rng, parent.draws, parent.seeds)
            result.mutated += 1
        else:
            gen, prefix = fresh_gen(rng, result.examples, result.abstract), []
        draw = RecordingDraw(rng, prefix)
        sdict = scenario_dict(draw, mutants=mutants, **gen)
        try:
            with walled(wall):
                verdict = run_scenario(sdict)
        except BudgetExhausted:
            result.cut_by_wall += 1  # unjudged: a run cut short says nothing about the protocol
            break
        result.examples += 1
        if progress is not None:
            progress(1)
        new = result.abstract.new_in(verdict.abstract)
        result.abstract.merge(verdict.abstract)
        for cell in new:
            result.first_reached[cell_name(cell)] = round(time.monotonic() - start, 2)
        result.coverage.merge(verdict.coverage)
        if new:
            corpus.append(Entry(draw.draws, draw.seeds, gen, frozenset(c for c, n in verdict.abstract.hits.items() if n)))
            if len(corpus) > MAX_CORPUS:
                corpus.remove(min(corpus, key=lambda e: _rarity(e, result.abstract)))
        if not verdict.ok:
            result.failure = verdict
            result.found_after = time.monotonic() - start
            break
    result.corpus = len(corpus)
    result.seconds = time.monotonic() - start
    return result


def mutate(rng: random.Random, draws: Sequence[int], seeds: Sequence[int] = ()) -> list[int]:
    """One of three, at random: a new seed for the schedule (the same job, checkpoints and faults, other
    interleavings: the last seed-sized draw is the scenario's seed); the tail after a random point
    dropped, to be drawn afresh (the interleaving knobs come last, so a short tail keeps the job and
    changes its timing); or a few draws changed (each folded into whatever range it is drawn in)."""
    out = list(draws)
    if not out:
        return out
    kind = rng.randrange(3)
    if kind == 0 and seeds:
        out[seeds[-1]] = rng.randrange(2**31)
        return out
    if kind == 1:
        return out[:rng.randrange(len(out))]
    for _ in range(rng.randint(1, 3)):
        out[rng.randrange(len(out))] = rng.randrange(2**31)
    return out


def fresh_gen(rng: random.Random, n: int, reached: AbstractCoverage) -> dict[str, Any]:
    """The next focus of the cycle, with the interleaving knobs half the time, and the least-reached
    reachable pair of maskable swarm features forced on."""
    focus = FEATURE_CYCLE[n % len(FEATURE_CYCLE)]
    gen = dict(FOCI[focus])
    if focus != "batch" and rng.random() < INTERLEAVE_SHARE:
        gen["interleave"] = True
    pair = least_reached_pair(rng, reached, gen)
    if pair:
        gen["on"] = tuple(dict.fromkeys((*gen.get("on", ()), *pair)))
    return gen


_MASKABLE = {f.value: f for f in MASKABLE}


def least_reached_pair(rng: random.Random, reached: AbstractCoverage, gen: dict[str, Any]) -> tuple[Feature, ...]:
    """The reachable pair of maskable features with the fewest hits (ties broken by ``rng``) that the
    focus ``gen`` does not rule out (a batch focus takes no checkpointing features, say)."""
    # An at-least-once sink duplicates records after a failure, as in Flink; outside the at-least-once
    # focus the exactly-once verdict would call that a finding, so only that focus brings one in.
    excluded = {Feature.AT_LEAST_ONCE_SINK}
    if gen.get("batch") is False or gen.get("mutants"):
        excluded.add(Feature.BLOCKING)
    if gen.get("storage") is False:
        excluded.add(Feature.STORAGE)
    if gen.get("rescale") is False:
        excluded.add(Feature.RESCALE)
    best: list[tuple[Feature, Feature]] = []
    fewest = None
    for cell, why in ABSTRACT_UNIVERSE.items():
        if cell[0] != "pair" or why is not None or cell[1] not in _MASKABLE or cell[2] not in _MASKABLE:
            continue
        a, b = _MASKABLE[cell[1]], _MASKABLE[cell[2]]
        if a in excluded or b in excluded:
            continue
        n = reached.hits[cell]
        if fewest is None or n < fewest:
            fewest, best = n, [(a, b)]
        elif n == fewest:
            best.append((a, b))
    if gen.get("batch") and best:
        return ()  # a batch job's mask matters little: no checkpointing features apply
    return rng.choice(best) if best else ()


def _rarity(entry: Entry, reached: AbstractCoverage) -> float:
    return sum(1.0 / max(1, reached.hits[c]) for c in entry.cells)


def _pick(rng: random.Random, corpus: list[Entry], reached: AbstractCoverage) -> Entry:
    weights = [_rarity(e, reached) for e in corpus]
    return rng.choices(corpus, weights=weights)[0]
