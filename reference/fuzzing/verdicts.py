"""The verdict of one fuzz scenario: the run, judged by ``reference.judge``; any exception a finding.

Every fuzz and kill verdict runs the engine with channel tracing, and ``reference.judge.judge``
decides, as it does for ``simulate``, ``verify`` and the Flink bridge: the engine's checks, the
exactly-once oracle (at least once in at-least-once checkpointing) and trace validation (``TRACE``),
with the skips it names. An exception the engine raises (an internal assertion, a KeyError, ...) is
an ``ENGINE_FAULT`` finding, shrunk and written like any violation; only a restore Flink itself
refuses is a legitimate ending (``refused``), and so is a job whose checkpoints keep failing past a
finite tolerance, which restarts for ever, as it would in Flink (``looped``, see ``restart_loop``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cutcheck.model.errors import CutcheckError, InvariantViolation, RestoreRefused
from cutcheck.reference.core.coverage import Coverage, note_refusal, note_restores
from cutcheck.reference.fuzzing.abstract_coverage import AbstractCoverage, observe
from cutcheck.reference.fuzzing.generate import scenario_from_seed
from cutcheck.reference.fuzzing.swarm import Feature
from cutcheck.reference.judge import (
    ENGINE_FAULT,
    GENERATOR,
    LOOP_FAILOVERS,
    RESTART_LOOP,
    TRACE,
    Judgement,
    Outcome,
    finding,
    judge,
    refused,
    restart_loop,
    skip_key,
)
from cutcheck.reference.scenario import Scenario
from cutcheck.reference.simulate import simulate

# Names campaigns, the shrinker and the tests import from here (the judge decides what they mean).
__all__ = ["ENGINE_FAULT", "GENERATOR", "LOOP_FAILOVERS", "RESTART_LOOP", "TRACE", "Verdict", "count_skips",
           "restart_loop", "run_scenario", "scenario_of_seed", "verdict_of_seed"]

# The generator settings a campaign cycles through, one per scenario, the same for every mutant (no
# per-mutant hints). Every entry still draws a swarm mask (reference.fuzzing.swarm), so any feature
# can come up anywhere; each focus forces on the few features a bug class needs together, which a
# half-probability mask combines too rarely: small jobs (a fault shows in a small job as well, and
# they run several times faster), unaligned checkpoints (where channel state lives), on-disk storage,
# rescales, expiring checkpoints with slow vertices (stale barriers), savepoints, failures during
# recovery, refusable rescales, batch jobs and at-least-once checkpointing; now and then a job of
# the full default size.
SMALL: dict[str, Any] = {"max_records": 40, "max_parallelism": 3}
UNALIGNED: dict[str, Any] = {"modes": ("unaligned",)}
FOCI: dict[str, dict[str, Any]] = {
    "swarm-small": SMALL,
    "unaligned": {**UNALIGNED, **SMALL},
    "storage": {"storage": True, "max_records": 60},
    # Keyed state behind a slow vertex: channel state on hash edges, whose key-group ranges a rescale
    # splits ambiguously (the record filter's case), restored soon after a checkpoint.
    "rescale-unaligned": {"rescale": "always", "on": (Feature.KEYED_COUNT, Feature.BACKPRESSURE), **UNALIGNED,
                          "after_checkpoint": True, "keyed_pressure": True, **SMALL},
    # The same, with the first rescale moving the source the keyed vertex reads: a source split handed to
    # another producer while its records are in flight, restored on one channel of the keyed gate while its
    # new records come over another (``reference.fuzzing.handover``, FLINK-19856's class).
    # Few keys and at least three splits per source (a key's records recur in each split, and a growing source
    # moves some split), enough records that splits still emit after the checkpoint, in-memory checkpoints
    # (fast runs), and no edge that would keep the source from rescaling (pointwise, broadcast, custom).
    "handover": {"rescale": "always", "on": (Feature.KEYED_COUNT, Feature.BACKPRESSURE), **UNALIGNED,
                 "off": (Feature.EMPTY_SOURCE, Feature.MAX_PARALLELISM, Feature.RESCALE_EDGE, Feature.BROADCAST,
                         Feature.CUSTOM, Feature.BROADCAST_STATE),
                 "after_checkpoint": True, "keyed_pressure": True, "handover": True, "storage": False,
                 "max_records": 120, "max_parallelism": 3, "graph_shape": {"max_keys": 2, "min_splits": 3}},
    # With the interleaving knobs (``generate_interleaving``): held barriers and slow tasks against
    # short checkpoint timeouts, so that a newer checkpoint meets an expired one's barrier (FLINK-21104).
    "expiry-unaligned": {"on": (Feature.EXPIRY, Feature.BACKPRESSURE), **UNALIGNED, **SMALL, "interleave": True,
                         "held_barriers": True},
    "savepoints": {"on": (Feature.SAVEPOINT,), "modes": ("unaligned", "aligned_timeout"), **SMALL},
    "recovery": {"on": (Feature.FAILURE, Feature.FAILURE_IN_RECOVERY), **UNALIGNED, **SMALL},
    "rescale": {"rescale": "always", "max_records": 80},
    "aligned-timeout": {"modes": ("aligned_timeout",), "on": (Feature.FAILURE,), **SMALL},
    # Alignment timeouts with the interleaving knobs and held barriers: a checkpoint whose alignment timed
    # out into unaligned, its blocked channels kept, is aborted before its last barrier comes, and the
    # cancel marker ends that collection (``cancelling``: cancel ends-unaligned-blocked). Measured on seeds
    # 1000-1299 on clean code: 30 of 300 reach that cell; with only failures (the aligned-timeout focus),
    # 2 of 150; with expiry and the knobs but barriers held only sometimes, 0 of 300. A focus of its own:
    # in place of the aligned-timeout focus it slowed the Hypothesis campaign's steered examples, which a
    # sender-side timeout conversion fault needs (found at 1 of 3 campaign seeds instead of 3 of 3).
    "aligned-timeout-expiry": {"modes": ("aligned_timeout",),
                               "on": (Feature.FAILURE, Feature.EXPIRY, Feature.BACKPRESSURE),
                               **SMALL, "interleave": True, "held_barriers": True},
    "storage-unaligned": {"storage": True, "on": (Feature.SAVEPOINT, Feature.FAILURE), **UNALIGNED, **SMALL},
    # Rescales of vertices on pointwise or broadcast edges behind a slow vertex: restores Flink refuses.
    "refusable-rescale": {"on": (Feature.RESCALE, Feature.REFUSABLE_RESCALE, Feature.BACKPRESSURE), **UNALIGNED,
                          **SMALL},
    # A second job restores the first one's checkpoint or savepoint, claimed or not (ownership bugs).
    # Keyed state in shared files, so that the second job has restored files to keep or to take over.
    "resubmit": {"storage": True, "on": (Feature.RESUBMIT, Feature.INCREMENTAL, Feature.INLINE_ZERO, Feature.KEYED_COUNT),
                 "rescale": False, "keyed_pressure": True, **SMALL},
    "batch": {"batch": True, **SMALL},
    # At-least-once checkpointing: barriers only tracked, duplicates after a failover accepted
    # (``_delivered``), expiring checkpoints aborted while tracked, and restores of an early checkpoint
    # while records still flow (the failures come soon after it).
    "at-least-once": {"modes": ("at_least_once",), "on": (Feature.AT_LEAST_ONCE_SINK, Feature.FAILURE,
                                                          Feature.EXPIRY), "after_checkpoint": True, "batch": False,
                      "max_records": 150, "max_parallelism": 3},
    "swarm": {},
}
# The order seeds walk the foci in: unaligned jobs (where most bug classes live) come up most often,
# and rescaled unaligned ones, whose faults show in few of their runs, in one seed of five, with one
# more seed of 19 for the handover focus (also keyed and rescaled unaligned; a split handed over shows
# in about a third of its runs, measured over 200 seeds). Expiring
# unaligned checkpoints twice: bugs of an aborted checkpoint's leftovers meeting the next one (stale
# barriers, persisters still bound to it) show in a few percent of that focus's runs.
FEATURE_CYCLE: tuple[str, ...] = (
    "swarm-small", "rescale-unaligned", "unaligned", "storage", "rescale-unaligned", "expiry-unaligned",
    "savepoints", "rescale-unaligned", "recovery", "rescale", "aligned-timeout", "aligned-timeout-expiry",
    "handover", "storage-unaligned", "refusable-rescale", "resubmit", "batch", "at-least-once", "swarm",
)


def focus_of_seed(seed: int) -> str:
    return FEATURE_CYCLE[seed % len(FEATURE_CYCLE)]


def features_of_seed(seed: int) -> dict[str, Any]:
    return dict(FOCI[focus_of_seed(seed)])


def scenario_of_seed(seed: int, mutants: Sequence[str] = (), gen: dict[str, Any] | None = None) -> dict[str, Any]:
    """The scenario a seed campaign runs for ``seed``: the generator's, with ``gen`` or else the
    seed's place in ``FEATURE_CYCLE`` choosing its settings."""
    return scenario_from_seed(seed, mutants=mutants, **(features_of_seed(seed) if gen is None else gen))


@dataclass(slots=True)
class Verdict:
    """A fuzz scenario and its judgement (``reference.judge``), with what a campaign counts of its run."""

    judgement: Judgement
    scenario: dict[str, Any]
    seed: int | None = None
    restarts: int = 0  # failures that fired (the job recovered this often)
    rescaled: bool = False  # some restore changed the parallelism
    coverage: Coverage = field(default_factory=Coverage)
    abstract: AbstractCoverage = field(default_factory=AbstractCoverage)  # abstract states the run was in

    @property
    def ok(self) -> bool:
        return self.judgement.ok

    @property
    def refused(self) -> bool:
        return self.judgement.outcome is Outcome.REFUSED

    @property
    def looped(self) -> bool:
        """The job restarted for ever on failed checkpoints, as Flink does (``restart_loop``)."""
        return self.judgement.outcome is Outcome.RESTART_LOOP

    @property
    def stalled(self) -> bool:
        """The job's data flow stalled on a barrier alignment, as Flink's protocol does (``checks.stall``)."""
        return self.judgement.outcome is Outcome.ALIGNMENT_STALL

    @property
    def violations(self) -> list[dict[str, str]]:
        return list(self.judgement.findings)

    @property
    def invariant(self) -> str:
        """The name of the first finding ("" when there is none)."""
        return self.judgement.invariant

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "ok": self.ok, "refused": self.refused, "looped": self.looped,
                "stalled": self.stalled, "violations": self.violations, "outcome": self.judgement.outcome.value,
                "skipped": [c.to_json() for c in self.judgement.skipped()]}


def run_scenario(sdict: dict[str, Any], chooser: Any = None, *, trace: bool = True) -> Verdict:
    """Run one scenario and judge it; a restore Flink refuses is a 'refused' verdict, any other
    exception a finding.

    A scenario whose ``storage`` section names no directory checkpoints into a fresh temporary one.
    """
    cov = Coverage()
    observer = observe(sdict)  # read-only, on the engine's bus: the same choices as without it
    with tempfile.TemporaryDirectory(prefix="cutcheck-fuzz-") as tmp:
        checkpoint_dir = tmp if "storage" in sdict and not sdict["storage"].get("dir") else None
        try:
            scenario = Scenario.from_json(sdict)
        except CutcheckError as exc:
            return Verdict(finding(GENERATOR, f"the scenario is invalid: {exc}"), sdict)
        try:
            result = simulate(scenario, chooser=chooser, checkpoint_dir=checkpoint_dir, trace=trace,
                              watch=observer.attach)
        except RestoreRefused as exc:
            note_refusal(cov, str(exc))
            return Verdict(refused(str(exc)), sdict, coverage=cov, abstract=observer.coverage)
        except InvariantViolation as exc:  # raised while the job was being built, before it ran
            return Verdict(finding(exc.name, exc.detail), sdict)
        except Exception as exc:  # noqa: BLE001 - whatever the engine raises is what the campaign must report
            return Verdict(finding(ENGINE_FAULT, f"{type(exc).__name__}: {exc}"), sdict)
    cov.merge(result.coverage)
    note_restores(cov, result.restores)
    return Verdict(judge(result, coverage=cov), sdict, restarts=result.restarts,
                   rescaled=any(r.get("rescaled") for r in result.restores), coverage=cov,
                   abstract=observer.coverage)


def count_skips(counts: dict[str, int], verdict: dict[str, Any]) -> None:
    """Add a verdict's skipped checks (``Verdict.to_json``) to a campaign's ``counts`` by check and reason."""
    for c in verdict.get("skipped", []):
        key = skip_key(c["check"], c["skip"])
        counts[key] = counts.get(key, 0) + 1


def verdict_of_seed(seed: int, mutants: Sequence[str] = (), gen: dict[str, Any] | None = None,
                    trace: bool = True) -> dict[str, Any]:
    """The verdict of the scenario a seed names (``scenario_of_seed``), as a JSON-able dict (a Spark
    task's whole work), with the run's coverage (``Coverage.to_json``'s ``reached`` hits)."""
    try:
        sdict = scenario_of_seed(seed, mutants, gen)
    except Exception as exc:  # noqa: BLE001 - a generator that crashes is a finding too
        found = Verdict(finding(GENERATOR, f"{type(exc).__name__}: {exc}"), {}, seed)
        return found.to_json() | {"coverage": {}}
    v = run_scenario(sdict, trace=trace)
    return v.to_json() | {"seed": seed, "coverage": {"reached": v.coverage.to_json()["reached"]},
                          "abstract": {"reached": v.abstract.to_json()["reached"]}}
