"""The verdict of one fuzz scenario: the engine's checks, trace validation, and any exception a finding.

Every fuzz and kill verdict runs the engine with channel tracing and replays the traces through
the protocol's rule table (``checks.tracing``): a trace the protocol rejects is a ``TRACE``
violation even when the engine's own checks passed. An exception the engine raises (an internal
assertion, a KeyError, ...) is an ``ENGINE_FAULT`` finding, shrunk and written like any violation;
only a restore Flink itself refuses is a legitimate ending (``refused``), and so is a job whose
checkpoints keep failing past a finite tolerance, which restarts for ever, as it would in Flink
(``looped``, see ``restart_loop``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cutcheck.model.errors import CutcheckError, InvariantViolation, RestoreRefused
from cutcheck.reference.checks.tracing import validate_traces
from cutcheck.reference.core.coverage import Coverage, note_refusal, note_restores
from cutcheck.reference.fuzzing.abstract_coverage import AbstractCoverage, observe
from cutcheck.reference.fuzzing.generate import scenario_from_seed
from cutcheck.reference.fuzzing.swarm import Feature
from cutcheck.reference.scenario import Scenario
from cutcheck.reference.simulate import simulate

ENGINE_FAULT = "ENGINE_FAULT"  # the engine raised an exception
GENERATOR = "GENERATOR"  # the generator made a scenario the engine rejects as invalid
TRACE = "TRACE"  # a channel trace the protocol rejects
RESTART_LOOP = "RESTART_LOOP"  # not a finding: failed checkpoints restart the job for ever, as in Flink
LOOP_FAILOVERS = 3  # consecutive checkpoint-failure failovers without a completed checkpoint that make a loop

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
    "expiry-unaligned": {"on": (Feature.EXPIRY, Feature.BACKPRESSURE), **UNALIGNED, **SMALL},
    "savepoints": {"on": (Feature.SAVEPOINT,), "modes": ("unaligned", "aligned_timeout"), **SMALL},
    "recovery": {"on": (Feature.FAILURE, Feature.FAILURE_IN_RECOVERY), **UNALIGNED, **SMALL},
    "rescale": {"rescale": "always", "max_records": 80},
    "aligned-timeout": {"modes": ("aligned_timeout",), "on": (Feature.FAILURE,), **SMALL},
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
# and rescaled unaligned ones, whose faults show in few of their runs, in one seed of four.
FEATURE_CYCLE: tuple[str, ...] = (
    "swarm-small", "rescale-unaligned", "unaligned", "storage", "rescale-unaligned", "expiry-unaligned",
    "savepoints", "rescale-unaligned", "recovery", "rescale", "aligned-timeout", "rescale-unaligned",
    "storage-unaligned", "refusable-rescale", "resubmit", "batch", "at-least-once", "swarm",
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
    ok: bool
    refused: bool
    violations: list[dict[str, str]]
    scenario: dict[str, Any]
    seed: int | None = None
    restarts: int = 0  # failures that fired (the job recovered this often)
    rescaled: bool = False  # some restore changed the parallelism
    looped: bool = False  # the job restarted for ever on failed checkpoints, as Flink does (``restart_loop``)
    coverage: Coverage = field(default_factory=Coverage)
    abstract: AbstractCoverage = field(default_factory=AbstractCoverage)  # abstract states the run was in

    @property
    def invariant(self) -> str:
        """The name of the first finding ("" when there is none)."""
        return self.violations[0]["invariant"] if self.violations and not self.ok else ""

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "ok": self.ok, "refused": self.refused, "looped": self.looped,
                "violations": self.violations}


def run_scenario(sdict: dict[str, Any], chooser: Any = None, *, trace: bool = True) -> Verdict:
    """Run one scenario; a restore Flink refuses is a 'refused' verdict, any other exception a finding.

    A scenario whose ``storage`` section names no directory checkpoints into a fresh temporary one.
    """
    cov = Coverage()
    observer, chooser = observe(sdict, chooser)  # read-only: the same choices as without it
    with tempfile.TemporaryDirectory(prefix="cutcheck-fuzz-") as tmp:
        checkpoint_dir = tmp if "storage" in sdict and not sdict["storage"].get("dir") else None
        try:
            scenario = Scenario.from_json(sdict)
        except CutcheckError as exc:
            return _finding(sdict, GENERATOR, f"the scenario is invalid: {exc}")
        try:
            result = simulate(scenario, chooser=chooser, checkpoint_dir=checkpoint_dir, trace=trace)
        except RestoreRefused as exc:
            note_refusal(cov, str(exc))
            return Verdict(True, True, [{"invariant": "REFUSED", "detail": str(exc)}], sdict, coverage=cov,
                           abstract=observer.coverage)
        except InvariantViolation as exc:  # raised while the job was being built, before it ran
            return _finding(sdict, exc.name, exc.detail)
        except Exception as exc:  # noqa: BLE001 - whatever the engine raises is what the campaign must report
            return _finding(sdict, ENGINE_FAULT, f"{type(exc).__name__}: {exc}")
    cov.merge(result.coverage)
    note_restores(cov, result.restores)
    no_cut = scenario.checkpoint.mode == "at_least_once"
    delivered = _delivered(result.exactly_once, no_cut)
    violations = [v for v in result.violations if not (delivered and v["invariant"] == "EXACTLY_ONCE")]
    # The trace model starts every channel empty, before any checkpoint: a second job that restored a
    # checkpoint of the first (a resubmit) is outside it, so only single-job runs are trace-validated.
    resubmitted = (result.summary().get("resubmit") or {}).get("jobs") == 2
    if trace and not resubmitted:
        # At-least-once checkpoints promise no cut (a subtask may apply records past a barrier before
        # its snapshot), so the engine skips its cut checks in that mode; the trace checker judges the
        # cut of every mode, and its cut findings are dropped here for the same reason.
        for f in validate_traces(result.traces, cov):
            if no_cut and f.kind == "cut":
                continue
            edge, producer, consumer = f.key
            violations.append({"invariant": TRACE, "detail": f"channel edge {edge} {producer}->{consumer}, event "
                               f"{f.index} {list(f.event)}: {f.reason} ({f.kind})"})
    rescaled = any(r.get("rescaled") for r in result.restores)
    loop = restart_loop(result, violations)
    if loop:
        return Verdict(True, False, [{"invariant": RESTART_LOOP, "detail": loop}], sdict, restarts=result.restarts,
                       rescaled=rescaled, coverage=cov, looped=True, abstract=observer.coverage)
    return Verdict(not violations and delivered, False, violations, sdict, restarts=result.restarts,
                   rescaled=rescaled, coverage=cov, abstract=observer.coverage)


def restart_loop(result: Any, violations: Sequence[dict[str, str]]) -> str:
    """Why the run is a restart loop Flink would be in too ("" when it is not one).

    A job that tolerates ``n`` failed checkpoints fails over on the next one
    (``CheckpointFailureManager``) and restarts from its latest checkpoint; when its checkpoints take
    longer than their timeout, every attempt fails the same way, and Flink's default restart
    strategy restarts it for ever. The engine then stops it (LIVENESS, after
    ``failure_manager.RESTART_LOOP_FAILOVERS`` such failovers in a row) or reaches its step budget. That is the
    outcome Flink promises, not a finding, when LIVENESS is the only violation and the last
    ``LOOP_FAILOVERS`` failovers were the failure manager's with no checkpoint completed since the
    first of them. A job the tolerance does not end (unlimited, or never exceeded) that does not
    finish is still a finding.
    """
    if len(violations) != 1 or violations[0]["invariant"] != "LIVENESS" or violations[0]["detail"].startswith("deadlock"):
        return ""
    failovers = result.checkpoint_failovers
    if len(failovers) < LOOP_FAILOVERS:
        return ""
    since = failovers[-LOOP_FAILOVERS]
    if any(c["status"] == "completed" and c["end_step"] is not None and c["end_step"] >= since
           for c in result.checkpoints):
        return ""
    return (f"the job failed over {len(failovers)} times on more failed checkpoints than it tolerates "
            f"({result.scenario.checkpoint.tolerable_failed}) and completed no checkpoint after step {since}: it "
            f"restarts for ever, as a Flink job would")


def _delivered(verdict: Any, at_least_once: bool) -> bool:
    """Exactly once, or in at-least-once checkpointing (Flink's ``CheckpointingMode.AT_LEAST_ONCE``)
    at least once: a failover there replays records past the restored checkpoint into the sinks, so
    duplicates are what Flink promises. So are gaps in per-key counts: a keyed subtask may apply
    records past a barrier before its snapshot, so the restored count already holds a record whose
    output went into a transaction the failover aborted, and its replay counts it again (count k is
    never committed). A lost or invented record is still a finding."""
    if verdict.ok:
        return True
    return at_least_once and verdict.lost == 0 and verdict.phantom == 0


def _finding(sdict: dict[str, Any], invariant: str, detail: str) -> Verdict:
    return Verdict(False, False, [{"invariant": invariant, "detail": detail}], sdict)


def verdict_of_seed(seed: int, mutants: Sequence[str] = (), gen: dict[str, Any] | None = None,
                    trace: bool = True) -> dict[str, Any]:
    """The verdict of the scenario a seed names (``scenario_of_seed``), as a JSON-able dict (a Spark
    task's whole work), with the run's coverage (``Coverage.to_json``'s ``reached`` hits)."""
    try:
        sdict = scenario_of_seed(seed, mutants, gen)
    except Exception as exc:  # noqa: BLE001 - a generator that crashes is a finding too
        return {"seed": seed, "ok": False, "refused": False,
                "violations": [{"invariant": GENERATOR, "detail": f"{type(exc).__name__}: {exc}"}], "coverage": {}}
    v = run_scenario(sdict, trace=trace)
    return v.to_json() | {"seed": seed, "coverage": {"reached": v.coverage.to_json()["reached"]},
                          "abstract": {"reached": v.abstract.to_json()["reached"]}}
