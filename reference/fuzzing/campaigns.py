"""Fuzz campaigns: Hypothesis-driven (with shrinking) and seed-driven (distributable).

A Hypothesis campaign draws a scenario through ``reference.fuzzing.generate`` and the engine's
schedule through a recording chooser (how many choices it scripts and their seed are drawn too), so shrinking
makes graphs smaller, failures fewer and schedules shorter; ``reference.fuzzing.shrink`` then cuts
the scenario itself (records, choices, vertices). A finding is returned as a replayable scenario
(its choices written into ``schedule.choices``). ``seconds`` bounds the whole campaign, shrinking
included: the search may use the first ``SEARCH_SHARE`` of it, shrinking goes on to the end.

A seed campaign maps integers to scenarios (``verdicts.scenario_of_seed``) and is what a Spark
cluster runs: ``verdict_of_seed`` is a plain top-level function of one integer.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Flaky

from cutcheck.model.errors import CutcheckError
from cutcheck.reference.core.coverage import Coverage
from cutcheck.reference.fuzzing.abstract_coverage import AbstractCoverage
from cutcheck.reference.fuzzing.generate import scenario_dict, scenario_from_seed
from cutcheck.reference.fuzzing.kill import KillResult, kill
from cutcheck.reference.fuzzing.shrink import shrink_scenario, size_of
from cutcheck.reference.fuzzing.verdicts import (
    FEATURE_CYCLE,
    FOCI,
    Verdict,
    count_skips,
    run_scenario,
    scenario_of_seed,
    verdict_of_seed,
)
from cutcheck.reference.runtime.scheduler import RecordingChooser, interleaving_of

__all__ = ["CampaignResult", "KillResult", "ScenarioMix", "Verdict", "hypothesis_campaign", "kill",
           "run_scenario", "scenario_from_seed", "scenario_of_seed", "seed_campaign", "verdict_of_seed"]

SEARCH_SHARE = 0.8  # of a --seconds budget; the rest is kept for shrinking a finding
SHRINK_SECONDS = 60.0  # shrinking budget of a campaign bounded by examples only
CHOICE_BUDGET = 300  # most scheduler choices a Hypothesis example scripts


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
    skipped: dict[str, int] = field(default_factory=dict)  # runs per check skipped and why (verdicts.count_skips)
    seconds: float = 0.0
    failure: Verdict | None = None  # the shrunk counterexample, if any
    verdicts: list[dict[str, Any]] = field(default_factory=list)  # seed campaigns only
    covered: ScenarioMix = field(default_factory=ScenarioMix)  # Hypothesis campaigns
    coverage: Coverage = field(default_factory=Coverage)  # cells the campaign's runs reached
    abstract: AbstractCoverage = field(default_factory=AbstractCoverage)  # abstract states they were in
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase: search, shrink
    limits: dict[str, Any] = field(default_factory=dict)  # the budget and what ended each phase

    @property
    def ok(self) -> bool:
        return self.failure is None and all(v["ok"] for v in self.verdicts)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scenarios_run": self.examples, "examples": self.examples, "refused": self.refused,
                               "restart_loops": self.looped, "skipped": self.skipped, "seconds": self.seconds,
                               "covered": self.covered.to_json(),
                               "coverage": self.coverage.to_json(), "phases": self.phases, "limits": self.limits,
                               "abstract_coverage": self.abstract.to_json()}
        if self.failure is not None:
            out["violation"] = self.failure.violations[0]
            out["size"] = size_of(self.failure.scenario)
        return out


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
def _sticky_interrupts() -> Iterator[None]:
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


def _stop_if_interrupted() -> None:
    if _INTERRUPTED.is_set():
        raise KeyboardInterrupt


def hypothesis_campaign(*, examples: int = 100, seconds: float | None = None, mutants: Sequence[str] = (),
                        seed: int = 0, choice_budget: int = CHOICE_BUDGET, shrink: bool = True,
                        gen: dict[str, Any] | None = None, shrink_seconds: float = SHRINK_SECONDS,
                        progress: Callable[[int], None] | None = None) -> CampaignResult:
    """Search for a finding; stop at the first one (shrunk), after ``examples`` or ``seconds``.

    Examples run in batches of 20 Hypothesis examples, each batch with its own derived seed, so a
    time budget can stop the search between batches (and within one: late examples are skipped).
    Without ``gen`` each example's generator settings come from ``FEATURE_CYCLE`` (drawn, so they
    shrink towards plain scenarios). Hypothesis writes nothing outside a temporary directory
    (``private_hypothesis_home``).
    """
    with private_hypothesis_home(), _sticky_interrupts():
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
    end = start + seconds if seconds is not None else None
    search_end = start + SEARCH_SHARE * seconds if seconds is not None else None
    result.limits = {"seconds": seconds, "examples": examples, "search_until": None if seconds is None
                     else round(SEARCH_SHARE * seconds, 3), "search_stopped_by": "examples"}
    search = _Search(tuple(mutants), gen, choice_budget, result, progress, search_end,
                     (lambda: end) if end is not None else (lambda: time.monotonic() + shrink_seconds))
    batch = 0
    while result.examples < examples and search.found is None:
        if search_end is not None and time.monotonic() >= search_end:
            result.limits["search_stopped_by"] = "budget"
            break
        search.run_batch(min(20, examples - result.examples), seed * 1_000_003 + batch, shrink=shrink)
        _stop_if_interrupted()
        batch += 1
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
    return result


class _Search:
    """One Hypothesis property over the generator. At the first finding the search turns into
    shrinking (Hypothesis's own, in the same run), which stops at the deadline ``shrink_end``."""

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

    def example(self, data: Any) -> None:
        _stop_if_interrupted()
        shrinking = self.found is not None
        gen = self.gen if self.gen is not None else FOCI[FEATURE_CYCLE[data.draw(st.integers(0, len(FEATURE_CYCLE) - 1))]]
        sdict = scenario_dict(_HypothesisDraw(data), mutants=self.mutants, **gen)
        # The scripted schedule: how many choices it scripts is drawn (and shrinks towards none), the
        # choices themselves come from a drawn seed. Drawing each choice through Hypothesis made long
        # runs overrun its choice buffer, which it then reported as inconsistent data generation.
        budget = data.draw(st.integers(0, self.choice_budget))
        rng = random.Random(data.draw(st.integers(0, 2**32 - 1)))
        # The deadlines are looked at only after every draw: an example that stopped drawing early
        # when time ran out made Hypothesis report inconsistent data generation on a replay.
        if shrinking and time.monotonic() >= self.shrink_end:
            self.hypothesis_cut = True
            return  # out of time: every further candidate "passes", so Hypothesis stops shrinking
        if not shrinking and self.search_end is not None and time.monotonic() >= self.search_end:
            return  # the rest of this batch is past the search budget
        chooser = RecordingChooser(lambda n: rng.randrange(n), budget, sdict["seed"], fallback=interleaving_of(sdict))
        verdict = run_scenario(sdict, chooser)
        if shrinking:
            self.shrink_runs += 1
        else:
            r = self.result
            r.examples += 1
            r.refused += verdict.refused
            r.looped += verdict.looped
            count_skips(r.skipped, verdict.to_json())
            r.covered.add(sdict, verdict)
            r.coverage.merge(verdict.coverage)
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

    def run_batch(self, size: int, batch_seed: int, *, shrink: bool) -> None:
        phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]

        @settings(max_examples=size, deadline=None, database=None, verbosity=Verbosity.quiet, phases=phases,
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
        @hypothesis_seed(batch_seed)
        @given(st.data())
        def prop(data: Any) -> None:
            self.example(data)

        try:
            prop()
        except Flaky:
            # The deadline cut shrinking (a failing example then "passed"), or, with nothing found, a
            # batch Hypothesis gave up on: the campaign goes on with the next batch.
            return
        except Exception:  # noqa: BLE001 - the AssertionError of a finding
            if self.found is None:
                raise


class _HypothesisDraw:
    __slots__ = ("data",)

    def __init__(self, data: st.DataObject):
        self.data = data

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))


def seed_campaign(seeds: Sequence[int], *, mutants: Sequence[str] = (), gen: dict[str, Any] | None = None,
                  progress: Callable[[int], None] | None = None, stop_at_first: bool = False,
                  seconds: float | None = None) -> CampaignResult:
    """The verdict of each seed in order; ``seconds`` stops the campaign between two seeds."""
    result = CampaignResult()
    start = time.monotonic()
    result.limits = {"seconds": seconds, "examples": len(seeds), "search_stopped_by": "examples"}
    for s in seeds:
        if seconds is not None and time.monotonic() - start > seconds:
            result.limits["search_stopped_by"] = "budget"
            break
        add_seed_verdict(result, verdict_of_seed(s, mutants, gen))
        if progress is not None:
            progress(1)
        if stop_at_first and not result.verdicts[-1]["ok"]:
            result.limits["search_stopped_by"] = "finding"
            break
    result.seconds = result.phases["search"] = time.monotonic() - start
    return result


def shrink_seed_finding(seed: int, mutants: Sequence[str], deadline: float) -> tuple[Verdict, bool]:
    """The scenario of a failing seed, shrunk until ``deadline`` (monotonic) by ``reference.fuzzing.shrink``;
    whether shrinking finished. The seed's own scenario when it does not fail here (another process's
    verdict that this one cannot reproduce is reported as it was)."""
    found = run_scenario(scenario_of_seed(seed, mutants))
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
    count_skips(result.skipped, v)
