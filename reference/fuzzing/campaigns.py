"""Fuzz campaigns: Hypothesis-driven (with shrinking) and seed-driven (distributable).

A Hypothesis campaign draws a scenario through ``reference.fuzzing.generate`` and the engine's
schedule through a recording chooser (how many choices it scripts and their seed are drawn too), so shrinking
makes graphs smaller, failures fewer and schedules shorter; ``reference.fuzzing.shrink`` then cuts
the scenario itself (records, choices, vertices). A finding is returned as a replayable scenario
(its choices written into ``schedule.choices``).

``seconds`` is a wall around the whole campaign, shrinking included: the search may use all of it,
shrinking a finding uses what is left, and every scenario runs inside the wall (``reference.core.deadline``:
the engine loop looks at the clock every few hundred steps), so no single scenario can overrun it. A
scenario the wall cuts is unjudged (counted in ``cut_by_wall``, neither ok nor a finding); shrinking
cut by it keeps the smallest counterexample found so far, which replays as it is.

A seed campaign maps integers to scenarios (``verdicts.scenario_of_seed`` with ``guided.seed_gen``)
and is what a Spark cluster runs: ``guided.guided_verdict_of_seed`` is a plain top-level function of
one integer.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Flaky

from cutcheck.model.errors import CutcheckError
from cutcheck.reference.core.coverage import Coverage
from cutcheck.reference.core.deadline import BudgetExhausted, walled
from cutcheck.reference.fuzzing.abstract_coverage import AbstractCoverage
from cutcheck.reference.fuzzing.generate import scenario_dict, scenario_from_seed
from cutcheck.reference.fuzzing.guided import RecordingDraw, maybe_bursts, seed_gen
from cutcheck.reference.fuzzing.hypothesis_runs import (
    GuidedExamples,
    HypothesisRecordingDraw,
    pinned_constants,
    private_hypothesis_home,
    sticky_interrupts,
    stop_if_interrupted,
)
from cutcheck.reference.fuzzing.kill import KillResult, kill
from cutcheck.reference.fuzzing.shapes import BURSTING
from cutcheck.reference.fuzzing.shrink import shrink_scenario, size_of
from cutcheck.reference.fuzzing.timed import ReplayChooser
from cutcheck.reference.fuzzing.verdicts import (
    Verdict,
    count_skips,
    run_scenario,
    scenario_of_seed,
    verdict_of_seed,
)
from cutcheck.reference.runtime.scheduler import RecordingChooser, interleaving_of

__all__ = ["CampaignResult", "KillResult", "ScenarioMix", "Verdict", "hypothesis_campaign", "kill",
           "run_scenario", "scenario_from_seed", "scenario_of_seed", "seed_campaign", "seed_gen", "verdict_of_seed"]

# Of a --seconds budget: a seed campaign that has a finding searches on for more only this far, so
# that the rest is left for shrinking the first one (a Hypothesis campaign stops at its first finding).
SEARCH_SHARE = 0.8
SHRINK_SECONDS = 60.0  # shrinking budget of a campaign bounded by examples only
CHOICE_BUDGET = 300  # most scheduler choices a Hypothesis example scripts
GUIDED_SEEDS = 500_000  # guided batches' Hypothesis seeds start here (plain ones count from 0, as unguided)
# Every GUIDED_EVERY-th batch is guided, the others plain. At 2 (measured, bench_fuzz, 2026-11-26) a fault
# the unguided campaign found only after 80 or more scenarios could fall past a 60 s budget on a loaded
# machine (the plain batches take half the time); a larger value gives guidance less.
GUIDED_EVERY = 2


@dataclass(slots=True)
class ScenarioMix:
    """What kinds of scenarios a campaign ran (shrinking runs are not counted)."""

    modes: dict[str, int] = field(default_factory=dict)
    with_failures: int = 0  # scenarios that scheduled a failure
    restarted: int = 0  # scenarios where a failure fired and the job recovered
    with_rescales: int = 0  # scenarios that scheduled a rescale
    rescaled: int = 0  # scenarios where a restore changed the parallelism
    on_disk: int = 0  # scenarios with on-disk (incremental) checkpoint storage

    def add(self, sdict: dict[str, Any], verdict: Verdict) -> None:
        mode = sdict.get("checkpoint", {}).get("mode", "aligned")
        self.modes[mode] = self.modes.get(mode, 0) + 1
        self.with_failures += bool(sdict.get("failures"))
        self.restarted += verdict.restarts > 0
        self.with_rescales += bool(sdict.get("rescales"))
        self.rescaled += verdict.rescaled
        self.on_disk += "storage" in sdict

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        modes = ", ".join(f"{m} {n}" for m, n in sorted(self.modes.items()))
        return (f"modes: {modes}; {self.with_failures} with failures, {self.restarted} recovered from one; "
                f"{self.with_rescales} with rescales, {self.rescaled} rescaled; {self.on_disk} with on-disk checkpoints")


@dataclass(slots=True)
class CampaignResult:
    examples: int = 0
    refused: int = 0
    looped: int = 0  # jobs that restarted for ever on failed checkpoints, as Flink would
    stalled: int = 0  # jobs whose data flow stalled on a barrier alignment, as Flink's protocol does
    skipped: dict[str, int] = field(default_factory=dict)  # runs per check skipped and why (verdicts.count_skips)
    seconds: float = 0.0
    failure: Verdict | None = None  # the shrunk counterexample, if any
    verdicts: list[dict[str, Any]] = field(default_factory=list)  # seed campaigns only
    covered: ScenarioMix = field(default_factory=ScenarioMix)  # Hypothesis campaigns
    coverage: Coverage = field(default_factory=Coverage)  # cells the campaign's runs reached
    abstract: AbstractCoverage = field(default_factory=AbstractCoverage)  # abstract states they were in
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase: search, shrink
    limits: dict[str, Any] = field(default_factory=dict)  # the budget and what ended each phase
    cut_by_wall: int = 0  # scenarios the time budget stopped while they ran: unjudged
    guidance: dict[str, Any] = field(default_factory=dict)  # the corpus a guided campaign kept, its mutants run

    @property
    def split(self) -> dict[str, Any]:
        """How the budget went: seconds searching, seconds shrinking (both phases of it)."""
        shrank = sum(v for k, v in self.phases.items() if k != "search")
        return {"budget": self.limits.get("seconds"), "searched": round(self.phases.get("search", 0.0), 3),
                "shrank": round(shrank, 3), "cut_by_wall": self.cut_by_wall}

    def describe_guidance(self) -> str:
        """What steered the campaign (empty for an unguided one)."""
        if not self.guidance:
            return ""
        return (f"guided: {self.guidance['corpus']} scenarios kept for reaching new abstract cells, "
                f"{self.guidance['mutated']} mutants of them run, {self.guidance.get('replayed', 0)} timed replays")

    def describe_split(self) -> str:
        budget = self.limits.get("seconds")
        head = f"budget {budget:g} s: " if budget is not None else ""
        split = self.split
        cut = f"; {self.cut_by_wall} scenario(s) cut by the wall, unjudged" if self.cut_by_wall else ""
        return f"{head}searched {split['searched']:.1f} s, shrank {split['shrank']:.1f} s{cut}"

    @property
    def ok(self) -> bool:
        return self.failure is None and all(v["ok"] for v in self.verdicts)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scenarios_run": self.examples, "examples": self.examples, "refused": self.refused,
                               "restart_loops": self.looped, "alignment_stalls": self.stalled, "skipped": self.skipped, "seconds": self.seconds,
                               "covered": self.covered.to_json(),
                               "coverage": self.coverage.to_json(), "phases": self.phases, "limits": self.limits,
                               "abstract_coverage": self.abstract.to_json(), "split": self.split,
                               "guidance": self.guidance}
        if self.failure is not None:
            out["violation"] = self.failure.violations[0]
            out["size"] = size_of(self.failure.scenario)
        return out


def hypothesis_campaign(*, examples: int = 100, seconds: float | None = None, mutants: Sequence[str] = (),
                        seed: int = 0, choice_budget: int = CHOICE_BUDGET, shrink: bool = True,
                        gen: dict[str, Any] | None = None, shrink_seconds: float = SHRINK_SECONDS,
                        progress: Callable[[int], None] | None = None) -> CampaignResult:
    """Search for a finding; stop at the first one (shrunk), after ``examples`` or ``seconds``.

    Examples run in batches of 20 Hypothesis examples, each batch with its own derived seed, so a
    time budget can stop the search between batches (and within one: late examples are skipped).
    Without ``gen`` the campaign is guided (``hypothesis_runs.GuidedExamples``): examples mutate the
    scenarios that reached new abstract cells, or walk ``FEATURE_CYCLE`` forcing under-reached
    feature pairs, with the interleaving knobs drawn (all drawn, so they shrink towards plain scenarios). Hypothesis writes nothing outside a temporary directory
    (``private_hypothesis_home``).
    """
    with private_hypothesis_home(), sticky_interrupts(), pinned_constants():
        return _campaign(examples, seconds, mutants, seed, choice_budget, shrink, gen, shrink_seconds, progress)


def _campaign(examples: int, seconds: float | None, mutants: Sequence[str], seed: int, choice_budget: int,
              shrink: bool, gen: dict[str, Any] | None, shrink_seconds: float,
              progress: Callable[[int], None] | None) -> CampaignResult:
    if examples < 1:
        raise CutcheckError(f"examples {examples}: a campaign needs at least one scenario.")
    if seconds is not None and not seconds > 0:
        raise CutcheckError(f"seconds {seconds}: a time budget must be more than 0 seconds.")
    result = CampaignResult()
    start = time.monotonic()
    end = start + seconds if seconds is not None else None  # the wall: search and shrinking end here
    result.limits = {"seconds": seconds, "examples": examples, "search_until": seconds, "search_stopped_by": "examples"}
    search = _Search(tuple(mutants), gen, choice_budget, result, progress, end,
                     (lambda: end) if end is not None else (lambda: time.monotonic() + shrink_seconds))
    guide = search.guide
    batch = 0
    while result.examples < examples and search.found is None:
        if end is not None and time.monotonic() >= end:
            result.limits["search_stopped_by"] = "budget"
            break
        # Guided campaigns alternate plain batches (the unguided campaign's, seeds and all) and guided ones.
        guided = search.guide is not None and batch % GUIDED_EVERY == GUIDED_EVERY - 1
        plain = batch if search.guide is None else batch - batch // GUIDED_EVERY
        batch_seed = seed * 1_000_003 + (GUIDED_SEEDS + batch // GUIDED_EVERY if guided else plain)
        search.run_batch(min(20, examples - result.examples), batch_seed, shrink=shrink, guided=guided)
        stop_if_interrupted()
        batch += 1
    if search.found is None and end is not None and time.monotonic() >= end:
        result.limits["search_stopped_by"] = "budget"  # the wall came during the last batch
    found_at = search.found_at or time.monotonic()
    result.phases["search"] = found_at - start
    if search.found is not None:
        result.limits["search_stopped_by"] = "finding"
        result.phases["hypothesis_shrink"] = time.monotonic() - found_at
    if search.found is not None and shrink:
        t = time.monotonic()
        shrunk = shrink_scenario(search.found, search.shrink_end)
        search.found = shrunk.verdict
        result.phases["scenario_shrink"] = time.monotonic() - t
        result.limits["shrink_until"] = round(search.shrink_end - start, 3)
        result.limits["shrink_stopped_by"] = "done" if shrunk.complete and not search.hypothesis_cut else "budget"
        result.limits["shrink_runs"] = search.shrink_runs + shrunk.runs
    result.failure = search.found
    result.seconds = time.monotonic() - start
    if guide is not None:
        result.guidance = {"corpus": len(guide.corpus), "mutated": guide.mutated, "replayed": guide.replayed,
                           "shaped": dict(guide.shaped)}
    return result


class _Search:
    """One Hypothesis property over the generator. At the first finding the search turns into
    shrinking (Hypothesis's own, in the same run), which stops at the deadline ``shrink_end``. Every
    scenario runs inside the wall of its phase (``search_end``, then ``shrink_end``)."""

    def __init__(self, mutants: tuple[str, ...], gen: dict[str, Any] | None, choice_budget: int,
                 result: CampaignResult, progress: Callable[[int], None] | None, search_end: float | None,
                 shrink_deadline: Callable[[], float]):
        self.mutants, self.gen, self.choice_budget = mutants, gen, choice_budget
        self.result, self.progress, self.search_end = result, progress, search_end
        self.shrink_deadline = shrink_deadline
        self.found: Verdict | None = None
        self.found_at: float | None = None
        self.shrink_end = 0.0
        self.hypothesis_cut = False  # the deadline stopped Hypothesis's shrinking
        self.shrink_runs = 0
        self.guide = GuidedExamples(result.abstract) if gen is None else None

    def example(self, data: Any) -> None:
        stop_if_interrupted()
        shrinking = self.found is not None
        wall = self.shrink_end if shrinking else self.search_end
        self._stop_at(wall)
        how, plan = "plain", None
        draw: RecordingDraw
        if self.guide is None:
            gen, draw = self.gen or {}, HypothesisRecordingDraw(data)
        else:
            gen, draw, how, plan = self.guide.draw(data)
        chooser: RecordingChooser | ReplayChooser
        if plan is not None:  # a timed replay: its parent's scenario and schedule, one event added (``timed``)
            sdict, chooser = plan.scenario, plan.chooser()
        else:
            sdict = scenario_dict(draw, mutants=self.mutants, **gen)
            if how != "plain":
                maybe_bursts(sdict, draw, always=how in BURSTING)
            # The scripted schedule: how many choices it scripts is drawn (and shrinks towards none), the
            # choices themselves come from a drawn seed. Drawing each choice through Hypothesis made long
            # runs overrun its choice buffer, which it then reported as inconsistent data generation.
            budget = data.draw(st.integers(0, self.choice_budget))
            rng = random.Random(data.draw(st.integers(0, 2**32 - 1)))
            chooser = RecordingChooser(lambda n: rng.randrange(n), budget, sdict["seed"], fallback=interleaving_of(sdict))
        self._stop_at(wall)
        try:
            with walled(wall):
                verdict = run_scenario(sdict, chooser)
        except BudgetExhausted:
            self.result.cut_by_wall += 1  # unjudged
            raise
        if shrinking:
            self.shrink_runs += 1
        else:
            r = self.result
            r.examples += 1
            r.refused += verdict.refused
            r.looped += verdict.looped
            r.stalled += verdict.stalled
            count_skips(r.skipped, verdict.to_json())
            r.covered.add(sdict, verdict)
            r.coverage.merge(verdict.coverage)
            if self.guide is not None:
                self.guide.learn(draw, gen, verdict, how, chooser.choices)  # before the merge: it keeps what is new
            r.abstract.merge(verdict.abstract)
            if self.progress is not None:
                self.progress(1)
        if verdict.ok or (self.found is not None and verdict.invariant != self.found.invariant):
            return  # while shrinking, only the same finding counts
        sdict["schedule"]["choices"] = list(chooser.choices)
        if self.found is None:
            self.found_at = time.monotonic()
            self.shrink_end = self.shrink_deadline()
        self.found = verdict  # the last failing example Hypothesis runs is its smallest so far
        raise AssertionError(verdict.violations)

    @staticmethod
    def _stop_at(wall: float | None) -> None:
        """Past the wall, Hypothesis's whole run ends here: BudgetExhausted is no Exception, so Hypothesis
        lets it through (as it does Ctrl-C) without replaying anything; ``found`` already holds the
        smallest failing example so far. (Returning instead, as a "pass", left Hypothesis drawing the
        rest of its batch, and a replay that drew less than the original made it report inconsistent
        data generation.)"""
        if wall is not None and time.monotonic() >= wall:
            raise BudgetExhausted("the campaign's time budget ended")

    def run_batch(self, size: int, batch_seed: int, *, shrink: bool, guided: bool = False) -> None:
        if self.guide is not None:
            self.guide.freeze(active=guided)  # what this batch's examples steer by, the same in every replay
        phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]

        @settings(max_examples=size, deadline=None, database=None, verbosity=Verbosity.quiet, phases=phases,
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
        @hypothesis_seed(batch_seed)
        @given(st.data())
        def prop(data: Any) -> None:
            self.example(data)

        try:
            prop()
        except BudgetExhausted:
            self.hypothesis_cut = self.found is not None  # the wall stopped the search or Hypothesis's shrinking
            return
        except Flaky:
            # With nothing found, a batch Hypothesis gave up on: the campaign goes on with the next batch.
            return
        except Exception:  # noqa: BLE001 - the AssertionError of a finding
            if self.found is None:
                raise


def seed_campaign(seeds: Sequence[int], *, mutants: Sequence[str] = (), gen: dict[str, Any] | None = None,
                  progress: Callable[[int], None] | None = None, stop_at_first: bool = False,
                  seconds: float | None = None, start: float | None = None,
                  keep_for_shrinking: bool = False) -> CampaignResult:
    """The verdict of each seed in order, every scenario inside the wall ``start + seconds`` (``start``:
    monotonic, default now); a seed the wall cuts is unjudged and ends the campaign. Without ``gen``
    each seed takes the seed campaign's guidance (``guided.seed_gen``: its focus, and a feature pair
    walked in turn), as ``fuzz --seeds``, its workers and Spark tasks do. With
    ``keep_for_shrinking``, once some seed failed the search ends at ``SEARCH_SHARE`` of the budget, so
    that the rest is left for shrinking the first finding."""
    result = CampaignResult()
    start = time.monotonic() if start is None else start
    wall = start + seconds if seconds is not None else None
    result.limits = {"seconds": seconds, "examples": len(seeds), "search_stopped_by": "examples"}
    with walled(wall):
        for s in seeds:
            now = time.monotonic()
            found = keep_for_shrinking and any(not v["ok"] for v in result.verdicts)
            if seconds is not None and now - start >= (SEARCH_SHARE * seconds if found else seconds):
                result.limits["search_stopped_by"] = "budget"
                break
            try:
                # Past a finding a seed runs inside the search's share, not the whole wall: one started
                # just before the share ended ran to the wall (under load) and left shrinking nothing.
                with walled(start + SEARCH_SHARE * seconds if found and seconds is not None else wall):
                    verdict = verdict_of_seed(s, mutants, seed_gen(s) if gen is None else gen)
            except BudgetExhausted:
                result.cut_by_wall += 1
                result.limits["search_stopped_by"] = "budget"
                break
            add_seed_verdict(result, verdict)
            if progress is not None:
                progress(1)
            if stop_at_first and not result.verdicts[-1]["ok"]:
                result.limits["search_stopped_by"] = "finding"
                break
    result.seconds = result.phases["search"] = time.monotonic() - start
    return result


def shrink_seed_finding(seed: int, mutants: Sequence[str], deadline: float) -> tuple[Verdict | None, bool]:
    """The scenario of a failing seed, shrunk until ``deadline`` (monotonic) by ``reference.fuzzing.shrink``;
    whether shrinking finished. The seed's own scenario when it does not fail here (another process's
    verdict that this one cannot reproduce is reported as it was); None when the deadline came before
    the seed's scenario ran again (the seed's own scenario is then the counterexample)."""
    try:
        with walled(deadline):
            found = run_scenario(scenario_of_seed(seed, mutants, seed_gen(seed)))
    except BudgetExhausted:
        return None, False
    if found.ok:
        return found, True
    shrunk = shrink_scenario(found, deadline)
    return shrunk.verdict, shrunk.complete


def add_seed_verdict(result: CampaignResult, v: dict[str, Any]) -> None:
    """Count one seed verdict (from this process, a worker or a Spark task) into ``result``."""
    result.coverage.merge(Coverage.from_json(v.pop("coverage", {})))
    result.abstract.merge(AbstractCoverage.from_json(v.pop("abstract", {})))
    result.verdicts.append(v)
    result.examples += 1
    result.refused += v["refused"]
    result.looped += v.get("looped", False)
    result.stalled += v.get("stalled", False)
    count_skips(result.skipped, v)
