"""The mutation check: a seed campaign with one mutant switched on, until some check finds it.

No mutant gets generator hints: every mutant is hunted by the same campaign (``FEATURE_CYCLE``
walks the foci of ``verdicts.FOCI``, each a swarm mask with a few features forced on), as a mutant
nobody has catalogued yet would be by ``cutcheck fuzz``. A kill counts only when the same scenario
passes with the mutant switched off; when it fails so, the campaign found a fault of the engine (or
the generator) itself, which is reported as a finding with its scenario, not as a kill.

A run the judge leaves unjudged (``reference.judge``: it stopped at its step limit with nothing
broken) is no kill by itself; it is one only when the same scenario without the mutant ends and holds
within the same step limit: then the mutant is what keeps the job from finishing (LIVENESS; a lost
trigger that leaves a checkpoint waiting is TRIGGER's when the checkpoint expires or the run stops).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from cutcheck.model.errors import CutcheckError
from cutcheck.reference.core.deadline import BudgetExhausted, walled
from cutcheck.reference.faults.catalogue import CATALOGUE
from cutcheck.reference.fuzzing.verdicts import run_scenario, scenario_of_seed, verdict_of_seed
from cutcheck.reference.judge import Outcome


@dataclass(slots=True)
class KillResult:
    mutant: str
    killed: bool
    seconds: float
    examples: int
    violation: str = ""
    seed: int | None = None
    # A scenario that fails WITHOUT the mutant: an engine finding (its first violation and scenario).
    engine_finding: dict[str, str] | None = None
    scenario: dict[str, Any] | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"mutant": self.mutant, "found": self.killed, "seconds": self.seconds, "scenarios_run": self.examples,
                "violation": self.violation, "seed": self.seed, "engine_finding": self.engine_finding}


def kill(mutant: str, *, seconds: float = 60.0, max_seeds: int = 100_000, first_seed: int = 0,
         extra_gen: dict[str, Any] | None = None) -> KillResult:
    """Seeds ``first_seed``, ``first_seed + 1``, … with the mutant on, until a verdict fails, ``seconds``
    pass or ``max_seeds`` ran; every scenario runs inside that wall (``reference.core.deadline``), so a
    scenario running to its step limit ends the hunt on time, unjudged. ``extra_gen``: fixed generator
    settings instead of the feature cycle. Test-only faults of the catalogue may be hunted too (the
    detection benchmark measures their rate)."""
    if mutant not in CATALOGUE:
        raise CutcheckError(f"unknown mutant {mutant!r}; known: {', '.join(CATALOGUE)}.")
    start = time.monotonic()
    n = 0
    for s in range(first_seed, first_seed + max_seeds):
        if time.monotonic() - start > seconds:
            break
        try:
            with walled(start + seconds):
                v = verdict_of_seed(s, (mutant,), extra_gen)
        except BudgetExhausted:
            break
        n += 1
        if v["ok"]:
            continue
        # The same scenario with the mutant switched off (not the seed's scenario without mutants,
        # which the generator may draw differently: it allows batch jobs only without mutants).
        found = scenario_of_seed(s, (mutant,), extra_gen)
        clean = run_scenario(dict(found, mutants=[]))
        if v.get("outcome") == Outcome.UNJUDGED.value and clean.judgement.outcome is not Outcome.HOLDS and clean.ok:
            continue  # unjudged with the mutant, and without it the job does not end clean either: no kill
        if not clean.ok:
            return KillResult(mutant, False, time.monotonic() - start, n, "", s, clean.violations[0],
                              dict(found, mutants=[]))
        return KillResult(mutant, True, time.monotonic() - start, n, v["violations"][0]["invariant"], s,
                          scenario=found)
    return KillResult(mutant, False, time.monotonic() - start, n)
