"""Guided campaigns: keep the scenarios that reached new abstract states and mutate them.

A seed campaign draws every scenario afresh, so an interleaving that one scenario in 500 reaches
stays one in 500 however long the campaign runs. Here every scenario is drawn through a
``RecordingDraw``, which keeps the integers it drew; a scenario whose run reached an abstract cell
(``reference.fuzzing.abstract_coverage``) that no earlier run reached joins the corpus, and later
scenarios are, about half the time, mutants of a corpus entry: the same draws with a few changed or
the tail drawn afresh, which mostly keeps the graph and changes timing, schedule or faults. Entries
that reached rare cells are picked more often. Fresh scenarios walk the campaign foci
(``verdicts.FEATURE_CYCLE``), half of them with the interleaving knobs (``interleave``), and force on
the swarm feature pair that runs have reached least so far. While a channel transition that needs a
savepoint or a failover in one precise step is unreached, half the mutants are timed replays of an
entry whose run marked such a step (``reference.fuzzing.timed``), and some fresh scenarios take the
shape that marks them (``shapes.CROWD``), as do the restore and stale cells a campaign reaches
rarely (``reference.fuzzing.shapes``).

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
from cutcheck.reference.fuzzing.abstract_cells import ABSTRACT_UNIVERSE, Cell, cell_name
from cutcheck.reference.fuzzing.abstract_coverage import AbstractCoverage
from cutcheck.reference.fuzzing.generate import MODES, scenario_dict
from cutcheck.reference.fuzzing.shapes import CROWD, RETRIGGER, SHAPE_EVERY, WARM_UP
from cutcheck.reference.fuzzing.shapes import wanted as wanted_shapes
from cutcheck.reference.fuzzing.swarm import LATE, MASKABLE, Draw, Feature
from cutcheck.reference.fuzzing.timed import (
    Replay,
    ReplayChooser,
    replay,
    replayable,
    wanted_moments,
)
from cutcheck.reference.fuzzing.verdicts import FEATURE_CYCLE, FOCI, Verdict, run_scenario, verdict_of_seed

MUTATE_SHARE = 0.5  # of the scenarios once the corpus has entries
INTERLEAVE_SHARE = 0.5  # of the fresh scenarios: the interleaving knobs drawn too
MAX_CORPUS = 200  # entries kept (the ones with the rarest cells when full)
REPLAY_SHARE = 0.5  # of the mutants, while a timed transition is unreached and some entry marked a moment for it
SEED_RANGE = 2**31 - 1  # a draw this wide is a seed


class RecordingDraw:
    """Draws integers from ``rng`` (after replaying ``prefix``, each value folded into its range) and
    records every value, so the scenario can be mutated draw by draw."""

    __slots__ = ("_rng", "_prefix", "draws", "seeds")

    def __init__(self, rng: random.Random | None, prefix: Sequence[int] = ()):
        self._rng = rng
        self._prefix = list(prefix)
        self.draws: list[int] = []
        self.seeds: list[int] = []  # positions of seed-sized draws (the scenario's seed, which drives its schedule)

    def fresh(self, lo: int, hi: int) -> int:
        """A draw past the prefix (a Hypothesis campaign's subclass draws it through Hypothesis)."""
        assert self._rng is not None
        return self._rng.randint(lo, hi)

    def integer(self, lo: int, hi: int) -> int:
        i = len(self.draws)
        if i < len(self._prefix):
            v = self._prefix[i]
            if not lo <= v <= hi:
                v = lo + (v - lo) % (hi - lo + 1)
        else:
            v = self.fresh(lo, hi)
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
    moments: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # its run's (``AbstractCoverage.moments``)
    # What replays it step for step (``timed``): the scenario it ran and its scheduler's scripted choices.
    scenario: dict[str, Any] = field(default_factory=dict)
    choices: list[int] = field(default_factory=list)


@dataclass(slots=True)
class GuidedResult:
    examples: int = 0
    mutated: int = 0  # scenarios that were mutants of corpus entries
    replayed: int = 0  # timed replays of corpus entries (``timed``)
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
        out: dict[str, Any] = {"scenarios_run": self.examples, "mutated": self.mutated, "replayed": self.replayed,
                               "corpus": self.corpus,
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
        parent = pick(rng, corpus, result.abstract) if corpus and rng.random() < MUTATE_SHARE else None
        timed = timed_entries(corpus, result.abstract) if parent is not None and result.examples >= WARM_UP else []
        plan: Replay | None = None
        if timed and rng.random() < REPLAY_SHARE:
            parent = pick(rng, timed, result.abstract)
            kind = rng.choice(wanted_moments(parent.moments, result.abstract))
            plan = replay(parent.scenario, parent.choices, kind, rng.choice(parent.moments[kind]))
            gen, prefix = parent.gen, []
            replayed = (list(parent.draws), list(parent.seeds))  # its corpus entry mutates the parent's draws
        elif parent is not None:
            gen, prefix = parent.gen, mutate(rng, parent.draws, parent.seeds)
            result.mutated += 1
        else:
            gen, prefix = fresh_gen(rng, result.examples, result.abstract, corpus), []
        draw = RecordingDraw(rng, prefix)
        chooser: ReplayChooser | None = None
        if plan is None:
            sdict = scenario_dict(draw, mutants=mutants, **gen)
            maybe_bursts(sdict, draw, always=gen in (CROWD, RETRIGGER))
        else:
            draw.draws, draw.seeds = replayed
            sdict, chooser = plan.scenario, plan.chooser()
            result.replayed += 1
        try:
            with walled(wall):
                verdict = run_scenario(sdict, chooser)
        except BudgetExhausted:
            result.cut_by_wall += 1  # unjudged: a run cut short says nothing about the protocol
            break
        result.examples += 1
        if progress is not None:
            progress(1)
        for cell in keep(corpus, draw, gen, verdict, result.abstract, chooser.choices if chooser is not None else ()):
            result.first_reached[cell_name(cell)] = round(time.monotonic() - start, 2)
        result.abstract.merge(verdict.abstract)
        result.coverage.merge(verdict.coverage)
        if not verdict.ok:
            result.failure = verdict
            result.found_after = time.monotonic() - start
            break
    result.corpus = len(corpus)
    result.seconds = time.monotonic() - start
    return result


def keep(corpus: list[Entry], draw: RecordingDraw, gen: dict[str, Any], verdict: Verdict,
         reached: AbstractCoverage, choices: Sequence[int] = ()) -> set[Cell]:
    """The cells ``verdict``'s run reached that ``reached`` (the campaign's, before this run is merged)
    has not; with any, the scenario joins ``corpus`` (past ``MAX_CORPUS`` entries, the one with the most
    common cells leaves), with what replays its run (its scenario and the scheduler's ``choices``)."""
    new = reached.new_in(verdict.abstract)
    # A run that marked the first moment for an unreached timed transition is kept for its replays, new
    # cells or not (the first only: a moment of a common kind would otherwise fill the corpus).
    if new or (replayable(verdict.scenario) and any(not any(e.moments.get(k) for e in corpus)
                                                    for k in wanted_moments(verdict.abstract.moments, reached))):
        cells = frozenset(c for c, n in verdict.abstract.hits.items() if n)
        moments = {k: list(v) for k, v in verdict.abstract.moments.items()} if replayable(verdict.scenario) else {}
        corpus.append(Entry(list(draw.draws), list(draw.seeds), gen, cells, moments, verdict.scenario, list(choices)))
        if len(corpus) > MAX_CORPUS:
            corpus.remove(min(corpus, key=lambda e: _rarity(e, reached)))
    return new


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


def fresh_gen(rng: random.Random, n: int, reached: AbstractCoverage, corpus: Sequence[Entry] = ()) -> dict[str, Any]:
    """The next focus of the cycle, with the interleaving knobs half the time, and the least-reached
    reachable pair of maskable swarm features forced on; while a rarely reached cell is unreached,
    one in ``shapes.SHAPE_EVERY`` the shape that makes it (``shapes.wanted``)."""
    shapes = wanted_shapes(reached, corpus, n)
    if shapes and rng.randrange(SHAPE_EVERY) == 0:
        return dict(rng.choice(shapes)[1])
    focus = FEATURE_CYCLE[n % len(FEATURE_CYCLE)]
    gen = dict(FOCI[focus])
    if focus != "batch" and rng.random() < INTERLEAVE_SHARE:
        gen["interleave"] = True
    return force(gen, least_reached_pair(rng, reached, gen))


# Pairs with a checkpointing mode (a reported feature, not in the mask) are forced through ``modes``.
MODE_OF = {Feature.UNALIGNED: "unaligned", Feature.ALIGNED_TIMEOUT: "aligned_timeout"}
_MASKABLE = {f.value: f for f in (*MASKABLE, *LATE)}  # LATE: drawn last, forced all the same
_FORCIBLE = _MASKABLE | {f.value: f for f in MODE_OF}
# What a feature needs on beside it to show in a scenario at all (generate, generate_faults): forcing
# a pair forces these too, else the pair would be asked for and never reached.
NEEDS: dict[Feature, tuple[Feature, ...]] = {
    Feature.WORKER_FAILURE: (Feature.FAILURE,), Feature.FAILURE_IN_RECOVERY: (Feature.FAILURE,),
    Feature.RESCALE: (Feature.FAILURE,), Feature.REFUSABLE_RESCALE: (Feature.RESCALE, Feature.FAILURE),
    Feature.FINITE_TOLERANCE: (Feature.EXPIRY,), Feature.INCREMENTAL: (Feature.STORAGE,),
    Feature.INLINE_ZERO: (Feature.STORAGE,), Feature.CLAIM: (Feature.STORAGE,), Feature.RESUBMIT: (Feature.STORAGE,),
}
PAIR_CHOICES = 8  # a Hypothesis example forces one of this many least-reached pairs (it shrinks to the first)


def with_needs(pair: Sequence[Feature]) -> tuple[Feature, ...]:
    """The pair and what its features need to show (``NEEDS``), each once, in order."""
    return tuple(dict.fromkeys(f for p in pair for f in (*NEEDS.get(p, ()), p)))


def _excluded(gen: dict[str, Any]) -> set[Feature]:
    """Maskable features the focus ``gen`` rules out (a pair with one of them, or needing one, would be
    forced in vain)."""
    # An at-least-once sink duplicates records after a failure, as in Flink; outside the at-least-once
    # focus the exactly-once verdict would call that a finding, so only that focus brings one in.
    excluded = set() if Feature.AT_LEAST_ONCE_SINK in gen.get("on", ()) else {Feature.AT_LEAST_ONCE_SINK}
    excluded |= set(gen.get("off", ()))  # a focus that turns a feature off (handover) never shows it
    if not gen.get("batch"):
        excluded.add(Feature.BLOCKING)  # a forced batch job would lose the focus's checkpointing features
    if gen.get("storage") is False:
        excluded.add(Feature.STORAGE)
    if gen.get("rescale") is False:
        excluded |= {Feature.RESCALE, Feature.REFUSABLE_RESCALE}
    if gen.get("rescale") == "always":
        excluded.add(Feature.RESUBMIT)  # a resubmit is drawn only for scenarios without rescales
    if "aligned" not in gen.get("modes", ("aligned",)):
        excluded.add(Feature.CONCURRENT)  # concurrent checkpoints are drawn for aligned mode only
    excluded |= {f for f, mode in MODE_OF.items() if mode not in gen.get("modes", MODES)}
    return excluded


def ranked_pairs(reached: AbstractCoverage, gen: dict[str, Any]) -> list[tuple[Feature, Feature]]:
    """The reachable pairs of maskable features (and checkpointing modes, ``MODE_OF``) the focus ``gen``
    does not rule out, fewest hits first (ties in name order): a batch focus walks the pairs with
    blocking exchanges, the others never force a batch job."""
    excluded = _excluded(gen)
    batch = bool(gen.get("batch"))
    ranked: list[tuple[int, str, str]] = []
    for cell, why in ABSTRACT_UNIVERSE.items():
        if cell[0] != "pair" or why is not None or cell[1] not in _FORCIBLE or cell[2] not in _FORCIBLE:
            continue
        pair = (_FORCIBLE[cell[1]], _FORCIBLE[cell[2]])
        if not excluded & set(with_needs(pair)) and (Feature.BLOCKING in pair) == batch:
            ranked.append((reached.hits[cell], cell[1], cell[2]))
    return [(_FORCIBLE[a], _FORCIBLE[b]) for _, a, b in sorted(ranked)]


def least_reached_pair(rng: random.Random, reached: AbstractCoverage, gen: dict[str, Any]) -> tuple[Feature, ...]:
    """The reachable pair of maskable features with the fewest hits (ties broken by ``rng``) that the
    focus ``gen`` does not rule out (a batch focus takes no checkpointing features, say)."""
    ranked = ranked_pairs(reached, gen)
    if not ranked:
        return ()
    fewest = pair_hits(reached, ranked[0])
    return rng.choice([p for p in ranked if pair_hits(reached, p) == fewest])


def pair_hits(reached: AbstractCoverage, pair: tuple[Feature, Feature]) -> int:
    a, b = sorted((pair[0].value, pair[1].value))
    return reached.hits["pair", a, b]


def force(gen: dict[str, Any], pair: Sequence[Feature]) -> dict[str, Any]:
    """``gen`` with the features of ``pair`` and what they need (``with_needs``) forced on beside its own,
    a checkpointing mode of the pair as the only mode (concurrent checkpoints with aligned mode, the
    only one that draws them), and the pair's graph features shown in the graph (``graph_dict``'s
    ``show``: a forced vertex kind otherwise shows in a third of the graphs)."""
    if not pair:
        return gen
    on = (*gen.get("on", ()), *(f for f in with_needs(pair) if f not in MODE_OF))
    out = gen | {"on": tuple(dict.fromkeys(on)), "graph_shape": gen.get("graph_shape", {}) | {"show": tuple(pair)}}
    for f in pair:
        if f in MODE_OF:
            out["modes"] = (MODE_OF[f],)
    if Feature.CONCURRENT in pair:
        out["modes"] = ("aligned",)
    if Feature.RESUBMIT in pair:
        out["rescale"] = False  # a resubmit is drawn only for scenarios without rescales
    return out


def seed_gen(seed: int) -> dict[str, Any]:
    """The generator settings of seed ``seed`` in a seed campaign (``fuzz --seeds``, its worker processes
    and Spark tasks), a function of the seed alone: the focus of the seed's place in the cycle, as the
    mutation check has it, with the swarm pairs that focus allows forced on in turn, one pair a seed
    (seed // len(cycle), modulo their number): every allowed pair once in each pass over them, where
    independent masks bring a pair of two one-in-two features in a quarter of the seeds and some pairs
    (of features a focus rarely draws) almost never."""
    gen = dict(FOCI[FEATURE_CYCLE[seed % len(FEATURE_CYCLE)]])
    pairs = ranked_pairs(AbstractCoverage(), gen)  # nothing reached: name order, the same in every process
    if not pairs:
        return gen
    return force(gen, pairs[(seed // len(FEATURE_CYCLE)) % len(pairs)])


def guided_verdict_of_seed(seed: int, mutants: Sequence[str] = ()) -> dict[str, Any]:
    """``verdicts.verdict_of_seed`` with the seed campaign's guidance (``seed_gen``): what a worker
    process or a Spark task of ``fuzz --seeds`` runs, a plain top-level function of one integer."""
    return verdict_of_seed(seed, mutants, seed_gen(seed))


BURSTS = 4  # savepoint bursts a scenario may get (``savepoint_bursts``)


def maybe_bursts(sdict: dict[str, Any], draw: Draw, *, always: bool = False) -> None:
    """One guided scenario in four (``always``: every one) gets ``savepoint_bursts`` (drawn last: it
    shrinks to none); not a batch job (no checkpoints), a resubmit (its second job restores what the
    first one's savepoints decided) or, unless ``always`` (the retrigger shape), at-least-once checkpointing."""
    if (any(e.get("exchange") == "blocking" for e in sdict["graph"]["edges"]) or "resubmit" in sdict
            or (sdict["checkpoint"].get("mode") == "at_least_once" and not always)):
        return
    if draw.integer(0, 3) == 3 or always:
        savepoint_bursts(sdict, draw)


def timed_entries(corpus: Sequence[Entry], reached: AbstractCoverage) -> list[Entry]:
    """The entries whose run marked a moment for a transition ``reached`` lacks (``timed``)."""
    return [e for e in corpus if e.moments and wanted_moments(e.moments, reached)]




def savepoint_bursts(sdict: dict[str, Any], draw: Draw) -> None:
    """Savepoints two at a time, each pair due at one step, a few times over the run: the orders a
    stream of lone savepoints almost never gives, several checkpoints falling due in one step and a
    savepoint pending beside an unaligned checkpoint whose channels persist (two triggers in one
    step, a barrier arriving as a savepoint starts, a region failover aborting both). Drawn through
    ``draw`` after the scenario, so the rest of it is the one the same draws give without them."""
    interval = sdict["checkpoint"]["interval"]
    first = draw.integer(1, 2 * interval)
    gap = draw.integer(1, 2 * interval)
    steps = [first + k * gap for k in range(draw.integer(1, BURSTS))]
    sdict["savepoints"] = [*sdict.get("savepoints", []), *({"at_step": t} for t in steps for _ in range(2))]


def _rarity(entry: Entry, reached: AbstractCoverage) -> float:
    return sum(1.0 / max(1, reached.hits[c]) for c in entry.cells)


def pick(rng: random.Random, corpus: Sequence[Entry], reached: AbstractCoverage) -> Entry:
    """A corpus entry, the ones that reached rare cells more often."""
    weights = [_rarity(e, reached) for e in corpus]
    return rng.choices(corpus, weights=weights)[0]
