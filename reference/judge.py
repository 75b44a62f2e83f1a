"""One judge: a finished run of the reference engine turned into its verdict.

``simulate``, ``fuzz``, ``verify`` (its fuzz stage, the mutation check and the example scenarios),
``tests/reference/test_mutants.py`` and the Flink bridge's prediction all ask ``judge(run)``; none
of them decides "is this run ok?" on its own. A verdict names its outcome, the findings behind it,
and each check: whether it ran (and held or failed) or was skipped, and why.

The checks:

- ``INVARIANTS``: the engine's own checks at every step (CUT, ORDER, OWNERSHIP, COMMIT, BOUND, REF,
  LIVENESS, ...). They always run, up to where the run stopped.
- ``EXACTLY_ONCE``: the oracle over the committed output; over the whole output when the job ended,
  over a prefix when a violation stopped it (``checks.oracle``). In at-least-once checkpointing
  duplicates and per-key count gaps are what Flink promises (``delivered``); a lost or invented
  record is still a finding.
- ``TRACE``: every channel trace replayed through the protocol's rule table (``checks.tracing``).
  It runs only when the run was traced, and only when its job started empty: the trace model starts
  every channel before any checkpoint, so a job that started from a restored snapshot (the second
  job of a resubmit, ``simulate --restore``) is outside it and is skipped, the same in every caller.
  At-least-once checkpoints promise no consistent cut, so the checker's cut findings are dropped there.

The outcomes (``Outcome``): the run holds; a check found a violation; a restore Flink refuses ended
it (Flink's own ending); its checkpoints kept failing past a finite tolerance so the job restarts for
ever, as a Flink job would (``RESTART_LOOP``, Flink's own ending); its data flow stalled on a barrier
alignment that no step breaks, as Flink's protocol does (``ALIGNMENT_STALL``: a finding against the
protocol, which the engine follows as Flink does, not against the engine; ``checks.stall``); or it
stopped at its step limit
with nothing broken up to there (``UNJUDGED``: whether it would have finished is not decided, so it
is no kill of a mutant by itself, and a campaign reports it as a job that does not finish).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from cutcheck.reference.checks.oracle import ExactlyOnce
from cutcheck.reference.checks.tracing import TraceFinding, validate_traces
from cutcheck.reference.core.coverage import Coverage

if TYPE_CHECKING:
    from cutcheck.reference.simulate import RunResult

ENGINE_FAULT = "ENGINE_FAULT"  # the engine raised an exception
GENERATOR = "GENERATOR"  # the generator made a scenario the engine rejects as invalid
TRACE = "TRACE"  # a channel trace the protocol rejects
REFUSED = "REFUSED"  # a restore Flink refuses too
RESTART_LOOP = "RESTART_LOOP"  # not a finding: failed checkpoints restart the job for ever, as in Flink
ALIGNMENT_STALL = "ALIGNMENT_STALL"  # the protocol's own stall (checks.stall): a finding against Flink, not the engine
STALL = "alignment stall:"  # how the LIVENESS of a stall begins (checks.stall.describe)
LOOP_FAILOVERS = 3  # checkpoint-failure failovers in a row, each back at the same point, that make a loop
STEP_LIMIT = "the job did not finish within"  # how the engine's LIVENESS at its step limit begins


class Outcome(Enum):
    HOLDS = "holds"  # every check that ran held and the job ended
    VIOLATED = "violated"  # a check found a violation, or the engine raised
    REFUSED = "refused"  # a restore Flink refuses too ended the run
    RESTART_LOOP = "restart_loop"  # failed checkpoints restart the job for ever, as they would in Flink
    ALIGNMENT_STALL = "alignment_stall"  # the data flow waits on a barrier alignment for ever, as in Flink's protocol
    UNJUDGED = "unjudged"  # the run stopped at its step limit, nothing broken up to there


class Check(Enum):
    INVARIANTS = "invariants"
    EXACTLY_ONCE = "exactly_once"
    TRACE = "trace"


class State(Enum):
    HELD = "held"
    FAILED = "failed"
    SKIPPED = "skipped"


class Skip(Enum):
    """Why a check did not run (campaigns count runs by it)."""

    NOT_TRACED = "the run was not traced"
    STARTED_RESTORED = ("the job started from a restored snapshot (a resubmit's second job, a --restore), and the "
                        "trace model starts every channel before any checkpoint")
    RESTARTS_FOR_EVER = "the job restarts for ever, so its output never ends"


@dataclass(frozen=True, slots=True)
class CheckResult:
    check: Check
    state: State
    note: str = ""  # why it was skipped, or how it was judged ("as a prefix", "at least once")
    skip: Skip | None = None

    def describe(self) -> str:
        return f"{self.check.value} {self.state.value}" + (f" ({self.note})" if self.note else "")

    def to_json(self) -> dict[str, str]:
        return {"check": self.check.value, "state": self.state.value, "note": self.note,
                "skip": self.skip.name if self.skip is not None else ""}


def skip_key(check: str, skip: str) -> str:
    """How campaigns count skipped checks: "<check>: <why>" (``check`` and ``skip`` as ``to_json`` names them)."""
    return f"{check}: {Skip[skip].value}"


@dataclass(frozen=True, slots=True)
class Judgement:
    """The verdict of one run: its outcome, the findings behind it and what each check did."""

    outcome: Outcome
    findings: tuple[dict[str, str], ...] = ()  # for VIOLATED and UNJUDGED; the first names the outcome
    checks: tuple[CheckResult, ...] = ()
    reason: str = ""  # why the run was refused, looped or is unjudged
    trace_findings: tuple[TraceFinding, ...] = field(default=(), repr=False)

    @property
    def ok(self) -> bool:
        """Nothing to report: the run holds, or ended the way Flink's own job would."""
        return self.outcome in (Outcome.HOLDS, Outcome.REFUSED, Outcome.RESTART_LOOP, Outcome.ALIGNMENT_STALL)

    @property
    def invariant(self) -> str:
        """The first finding's invariant ("" when nothing is to be reported)."""
        return self.findings[0]["invariant"] if self.findings and not self.ok else ""

    def check(self, which: Check) -> CheckResult | None:
        return next((c for c in self.checks if c.check is which), None)

    def skipped(self) -> list[CheckResult]:
        return [c for c in self.checks if c.state is State.SKIPPED]

    def describe(self) -> str:
        """One line: the outcome, then every check with its state."""
        head = {Outcome.HOLDS: "holds", Outcome.VIOLATED: f"VIOLATED ({self.invariant})",
                Outcome.REFUSED: "restore refused, as Flink refuses it",
                Outcome.RESTART_LOOP: "restart loop, as a Flink job would be in (not a finding)",
                Outcome.ALIGNMENT_STALL: "alignment stall, as Flink's protocol stalls (a finding against Flink, not the engine)",
                Outcome.UNJUDGED: "UNJUDGED (the run stopped at its step limit)"}[self.outcome]
        return f"verdict: {head}; " + "; ".join(c.describe() for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome.value, "checks": [c.to_json() for c in self.checks], "reason": self.reason}


def judge(run: RunResult, *, coverage: Coverage | None = None) -> Judgement:
    """The verdict of a run that ended, by its end or by a violation. ``coverage`` counts the
    protocol rule each accepted trace event fired (campaigns collect it)."""
    at_least_once = run.scenario.checkpoint.mode == "at_least_once"
    delivered = _delivered(run.exactly_once, at_least_once)
    # A run's EXACTLY_ONCE violation is kept only when at-least-once does not accept what it found.
    findings = [v for v in run.violations if not (delivered and v["invariant"] == "EXACTLY_ONCE")]
    stepwise = [v for v in run.violations if v["invariant"] != "EXACTLY_ONCE"]
    checks = [CheckResult(Check.INVARIANTS, State.FAILED if stepwise else State.HELD,
                          f"{stepwise[0]['invariant']} stopped the run" if stepwise else "")]
    trace_found: list[TraceFinding] = []
    trace_check = _trace_skip(run)
    if trace_check is None:
        trace_found = [f for f in validate_traces(run.traces, coverage) if not (at_least_once and f.kind == "cut")]
        findings += [{"invariant": TRACE, "detail": f"channel edge {f.key[0]} {f.key[1]}->{f.key[2]}, event {f.index} "
                      f"{list(f.event)}: {f.reason} ({f.kind})"} for f in trace_found]
        trace_check = CheckResult(Check.TRACE, State.FAILED if trace_found else State.HELD,
                                  "cut findings dropped: at-least-once promises no consistent cut" if at_least_once
                                  else "")
    loop = restart_loop(run, findings)
    eo = _exactly_once_check(run.exactly_once, delivered, at_least_once, looped=bool(loop))
    checks += [eo, trace_check]
    if loop:
        return Judgement(Outcome.RESTART_LOOP, ({"invariant": RESTART_LOOP, "detail": loop},), tuple(checks), loop)
    if not findings and delivered:
        return Judgement(Outcome.HOLDS, (), tuple(checks))
    if not delivered and not any(v["invariant"] == "EXACTLY_ONCE" for v in findings):
        # The run stopped on another check, and the output up to there is already wrong (a duplicate or an
        # invented record is wrong in any prefix): a finding of its own, after the one that stopped the run.
        eo_run = run.exactly_once
        findings.append({"invariant": "EXACTLY_ONCE", "detail": f"in the output up to the stop: duplicated "
                         f"{eo_run.duplicated}, phantom {eo_run.phantom}, count gaps {eo_run.count_gaps}"})
    if len(findings) == 1 and findings[0]["invariant"] == "LIVENESS" and findings[0]["detail"].startswith(STALL):
        detail = findings[0]["detail"]
        return Judgement(Outcome.ALIGNMENT_STALL, ({"invariant": ALIGNMENT_STALL, "detail": detail},), tuple(checks), detail)
    if len(findings) == 1 and findings[0]["invariant"] == "LIVENESS" and findings[0]["detail"].startswith(STEP_LIMIT):
        return Judgement(Outcome.UNJUDGED, tuple(findings), tuple(checks), findings[0]["detail"], tuple(trace_found))
    return Judgement(Outcome.VIOLATED, tuple(findings), tuple(checks), trace_findings=tuple(trace_found))


def refused(reason: str) -> Judgement:
    """A restore Flink refuses too: the run ended there, with nothing after it to judge."""
    return Judgement(Outcome.REFUSED, ({"invariant": REFUSED, "detail": reason},), reason=reason)


def finding(invariant: str, detail: str) -> Judgement:
    """A run that produced no result to judge: the engine (or the generator) failed while building or
    running it (``ENGINE_FAULT``, ``GENERATOR``, or an invariant broken while the job was built)."""
    return Judgement(Outcome.VIOLATED, ({"invariant": invariant, "detail": detail},))


def _trace_skip(run: RunResult) -> CheckResult | None:
    """The TRACE check's skip, with its reason; None when the traces are to be validated."""
    if not run.traces:
        return CheckResult(Check.TRACE, State.SKIPPED, Skip.NOT_TRACED.value, Skip.NOT_TRACED)
    if run.started_from is not None:
        return CheckResult(Check.TRACE, State.SKIPPED, f"the job started from {run.started_from}, and the trace "
                           "model starts every channel before any checkpoint", Skip.STARTED_RESTORED)
    return None


def _exactly_once_check(eo: ExactlyOnce, delivered: bool, at_least_once: bool, *, looped: bool) -> CheckResult:
    if looped:
        return CheckResult(Check.EXACTLY_ONCE, State.SKIPPED, Skip.RESTARTS_FOR_EVER.value, Skip.RESTARTS_FOR_EVER)
    notes = ["as the prefix the run stopped at"] if eo.prefix else []
    if at_least_once and not eo.ok and delivered:
        notes.append("at least once: duplicates and count gaps are what AT_LEAST_ONCE promises")
    return CheckResult(Check.EXACTLY_ONCE, State.HELD if delivered else State.FAILED, "; ".join(notes))


def restart_loop(result: Any, violations: Sequence[dict[str, str]]) -> str:
    """Why the run is a restart loop Flink would be in too ("" when it is not one).

    A job that tolerates ``n`` failed checkpoints fails over on the next one
    (``CheckpointFailureManager``) and restarts from its latest checkpoint; when its checkpoints take
    longer than their timeout whenever data flows, every attempt fails the same way, and Flink's
    default restart strategy restarts it for ever. The engine then stops it (LIVENESS, after
    ``failure_manager.RESTART_LOOP_FAILOVERS`` such failovers in a row) or reaches its step budget. That is the
    outcome Flink promises, not a finding, when LIVENESS is the only violation and the last
    ``LOOP_FAILOVERS`` failovers were the failure manager's, each restarting the job from the same
    point (sources' positions and in-flight records: ``failure_manager``), with no
    progress since. Checkpoints that complete between them do not break the loop when they hold that
    same point (they complete while the restarted sources are still idle). A job the tolerance does
    not end (unlimited, or never exceeded) that does not finish is still a finding.
    """
    if len(violations) != 1 or violations[0]["invariant"] != "LIVENESS" or violations[0]["detail"].startswith("deadlock"):
        return ""
    looped = result.failovers_without_progress
    if looped < LOOP_FAILOVERS:
        return ""
    return (f"the job failed over {looped} times in a row on more failed checkpoints than it tolerates "
            f"({result.scenario.checkpoint.tolerable_failed}), each time back at the same sources' positions "
            f"and in-flight records: it restarts for ever, as a Flink job would")


def _delivered(verdict: ExactlyOnce, at_least_once: bool) -> bool:
    """Exactly once, or in at-least-once checkpointing (Flink's ``CheckpointingMode.AT_LEAST_ONCE``)
    at least once: a failover there replays records past the restored checkpoint into the sinks, so
    duplicates are what Flink promises. So are gaps in per-key counts: a keyed subtask may apply
    records past a barrier before its snapshot, so the restored count already holds a record whose
    output went into a transaction the failover aborted, and its replay counts it again (count k is
    never committed). A lost or invented record is still a finding."""
    if verdict.ok:
        return True
    return at_least_once and verdict.lost == 0 and verdict.phantom == 0
