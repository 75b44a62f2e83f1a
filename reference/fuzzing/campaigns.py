"""Fuzz campaigns: Hypothesis-driven (with shrinking) and seed-driven (distributable), and the mutation check.

A Hypothesis campaign draws a scenario through ``reference.fuzzing.generate`` and the engine's schedule
through a recording chooser, so shrinking makes graphs smaller, failures fewer and schedules
shorter; a failure is returned as a replayable scenario (its choices written into
``schedule.choices``). A seed campaign maps integers to scenarios (``scenario_from_seed``) and is
what a Spark cluster runs: ``verdict_of_seed`` is a plain top-level function of one integer.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from cutcheck.model.errors import CutcheckError, RestoreRefused
from cutcheck.reference.faults.catalogue import MUTANTS
from cutcheck.reference.fuzzing.generate import scenario_dict, scenario_from_seed
from cutcheck.reference.runtime.scheduler import RecordingChooser
from cutcheck.reference.scenario import Scenario
from cutcheck.reference.simulate import simulate

# How each mutant is hunted: generator settings that make its faulty rule matter.
KILL_SETTINGS: dict[str, dict[str, Any]] = {
    "no-output-state": {"modes": ("unaligned",)},
    "process-after-barrier": {"modes": ("unaligned",)},
    "partial-input-state": {"modes": ("unaligned",)},
    "early-checkpoint-in-recovery": {"modes": ("unaligned",)},
    "committer-drops-late": {"modes": ("aligned", "unaligned")},
    "skip-stateless-reassignment": {"modes": ("unaligned",), "rescale": "always"},
    "no-rescale-filter": {"modes": ("unaligned",), "rescale": "always"},
    "discard-on-abort": {"modes": ("aligned",), "storage": True},
}


# The generator settings of KILL_SETTINGS that scenario_dict understands.
KILL_GEN: dict[str, dict[str, Any]] = {
    m: {k: v for k, v in opts.items() if k in ("modes", "rescale", "storage")} for m, opts in KILL_SETTINGS.items()
}


@dataclass(slots=True)
class Verdict:
    ok: bool
    refused: bool
    violations: list[dict[str, str]]
    scenario: dict[str, Any]
    seed: int | None = None
    restarts: int = 0  # failures that fired (the job recovered this often)
    rescaled: bool = False  # some restore changed the parallelism

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "ok": self.ok, "refused": self.refused, "violations": self.violations}


def run_scenario(sdict: dict[str, Any], chooser: Any = None) -> Verdict:
    """Run one scenario; a restore Flink refuses is a 'refused' verdict, not a failure.

    A scenario whose ``storage`` section names no directory checkpoints into a fresh temporary one.
    """
    with tempfile.TemporaryDirectory(prefix="cutcheck-fuzz-") as tmp:
        checkpoint_dir = tmp if "storage" in sdict and not sdict["storage"].get("dir") else None
        try:
            result = simulate(Scenario.from_json(sdict), chooser=chooser, checkpoint_dir=checkpoint_dir)
        except RestoreRefused as exc:
            return Verdict(True, True, [{"invariant": "REFUSED", "detail": str(exc)}], sdict)
    return Verdict(result.ok, False, result.violations, sdict, restarts=result.restarts,
                   rescaled=any(r.get("rescaled") for r in result.restores))


def verdict_of_seed(seed: int, mutants: Sequence[str] = (), gen: dict[str, Any] | None = None) -> dict[str, Any]:
    """The verdict of the scenario a seed names, as a JSON-able dict (a Spark task's whole work)."""
    sdict = scenario_from_seed(seed, mutants=mutants, **(gen or {}))
    try:
        v = run_scenario(sdict)
    except CutcheckError as exc:  # an invalid generated scenario is a bug in the generator
        return {"seed": seed, "ok": False, "refused": False, "violations": [{"invariant": "GENERATOR", "detail": str(exc)}]}
    return v.to_json() | {"seed": seed}


@dataclass(slots=True)
class Coverage:
    """What the scenarios of a campaign exercised (shrinking runs are not counted)."""

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
    seconds: float = 0.0
    failure: Verdict | None = None  # the shrunk counterexample, if any
    verdicts: list[dict[str, Any]] = field(default_factory=list)  # seed campaigns only
    covered: Coverage = field(default_factory=Coverage)  # Hypothesis campaigns

    @property
    def ok(self) -> bool:
        return self.failure is None and all(v["ok"] for v in self.verdicts)


class _HypothesisDraw:
    __slots__ = ("data",)

    def __init__(self, data: Any):
        self.data = data

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))


def hypothesis_campaign(*, examples: int = 100, seconds: float | None = None, mutants: Sequence[str] = (),
                        seed: int = 0, choice_budget: int = 300, shrink: bool = True,
                        gen: dict[str, Any] | None = None,
                        progress: Callable[[int], None] | None = None) -> CampaignResult:
    """Search for a violating scenario; stop at the first (shrunk) one, after ``examples`` or ``seconds``.

    Examples run in batches of 20 Hypothesis examples, each batch with its own derived seed, so a
    time budget can stop the campaign between batches.
    """
    if examples < 1:
        raise CutcheckError(f"examples {examples}: a campaign needs at least one scenario.")
    if seconds is not None and not seconds > 0:
        raise CutcheckError(f"seconds {seconds}: a time budget must be more than 0 seconds.")
    result = CampaignResult()
    start = time.monotonic()
    batch = 0
    while result.examples < examples and result.failure is None:
        if seconds is not None and time.monotonic() - start > seconds:
            break
        size = min(20, examples - result.examples)
        result.failure = _search_batch(size, seed * 1_000_003 + batch, tuple(mutants), dict(gen or {}),
                                       choice_budget, shrink, result, progress)
        batch += 1
    result.seconds = time.monotonic() - start
    return result


def _search_batch(size: int, batch_seed: int, mutants: tuple[str, ...], gen: dict[str, Any], choice_budget: int,
                  shrink: bool, result: CampaignResult, progress: Callable[[int], None] | None) -> Verdict | None:
    state: dict[str, Any] = {"last": None, "shrinking": False}

    @settings(max_examples=size, deadline=None, database=None, verbosity=Verbosity.quiet,
              phases=[Phase.generate, Phase.shrink] if shrink else [Phase.generate],
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
    @hypothesis_seed(batch_seed)
    @given(st.data())
    def prop(data: Any) -> None:
        sdict = scenario_dict(_HypothesisDraw(data), mutants=mutants, **gen)
        chooser = RecordingChooser(lambda n: data.draw(st.integers(0, n - 1)), choice_budget, sdict["seed"])
        verdict = run_scenario(sdict, chooser)
        if not state["shrinking"]:
            result.examples += 1
            result.refused += verdict.refused
            result.covered.add(sdict, verdict)
            if progress is not None:
                progress(1)
        if not verdict.ok:
            # The last failing example Hypothesis runs is the shrunk one; keep it with its schedule.
            sdict["schedule"]["choices"] = list(chooser.choices)
            state["last"] = verdict
            state["shrinking"] = True
            raise AssertionError(verdict.violations)

    try:
        prop()
    except AssertionError:
        return state["last"]
    return None


def seed_campaign(seeds: Sequence[int], *, mutants: Sequence[str] = (), gen: dict[str, Any] | None = None,
                  progress: Callable[[int], None] | None = None, stop_at_first: bool = False,
                  seconds: float | None = None) -> CampaignResult:
    """The verdict of each seed in order; ``seconds`` stops the campaign between two seeds."""
    result = CampaignResult()
    start = time.monotonic()
    for s in seeds:
        if seconds is not None and time.monotonic() - start > seconds:
            break
        v = verdict_of_seed(s, mutants, gen)
        result.verdicts.append(v)
        result.examples += 1
        result.refused += v["refused"]
        if progress is not None:
            progress(1)
        if stop_at_first and not v["ok"]:
            break
    result.seconds = time.monotonic() - start
    return result


@dataclass(slots=True)
class KillResult:
    mutant: str
    killed: bool
    seconds: float
    examples: int
    violation: str = ""
    seed: int | None = None


def kill(mutant: str, *, seconds: float = 60.0, max_seeds: int = 400, first_seed: int = 0,
         extra_gen: dict[str, Any] | None = None) -> KillResult:
    """Seed campaign with the mutant switched on until the engine's checks find a violation."""
    if mutant not in MUTANTS:
        raise CutcheckError(f"unknown mutant {mutant!r}; known: {', '.join(MUTANTS)}.")
    gen = dict(KILL_GEN.get(mutant, {}))
    gen.update(extra_gen or {})
    start = time.monotonic()
    n = 0
    for s in range(first_seed, first_seed + max_seeds):
        if time.monotonic() - start > seconds:
            break
        v = verdict_of_seed(s, (mutant,), gen)
        n += 1
        if any(x["invariant"] == "GENERATOR" for x in v["violations"]):
            raise CutcheckError(f"seed {s} generated an invalid scenario: {v['violations'][0]['detail']}")
        if not v["ok"]:
            # A kill counts only if the same scenario passes without the mutant; otherwise the
            # campaign found a fault of the engine (or generator) itself, which is worse news.
            clean = verdict_of_seed(s, (), gen)
            if not clean["ok"]:
                raise CutcheckError(f"hunting {mutant}: seed {s} fails without the mutant too "
                                    f"({clean['violations'][0]['invariant']}: {clean['violations'][0]['detail']}), "
                                    f"an engine fault; its scenario is reference.fuzzing.generate.scenario_from_seed({s}, **{gen!r}).")
            detail = v["violations"][0]["invariant"] if v["violations"] else "EXACTLY_ONCE"
            return KillResult(mutant, True, time.monotonic() - start, n, detail, s)
    return KillResult(mutant, False, time.monotonic() - start, n)
