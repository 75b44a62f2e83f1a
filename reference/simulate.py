"""Running a scenario end to end: the engine, the invariant checks, the oracle and the logs.

``simulate(..., out_dir=DIR)`` writes the run directory through ``reference.logs.RunLogWriter``:
``DIR`` is checked before anything runs (``model.outputs.check_output_dir``), and an existing
``DIR`` is replaced only when cutcheck wrote it and ``force=True`` (library callers pass it
explicitly). A run stopped by a violation is judged as a prefix (``complete`` false: records not
committed yet are pending, not lost). Failures and rescales the scenario scheduled that never
happened are listed under ``never_fired``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cutcheck.model.errors import InvariantViolation, ScenarioError
from cutcheck.model.outputs import check_output_dir
from cutcheck.reference.batch import BatchEngine, make_engine
from cutcheck.reference.checks.oracle import ExactlyOnce
from cutcheck.reference.checks.tracing import ChannelKey, ChannelTrace, write_traces
from cutcheck.reference.logs import RunLogWriter
from cutcheck.reference.resubmit import ResubmitPlan
from cutcheck.reference.run_storage import open_storage
from cutcheck.reference.runtime.scheduler import Chooser
from cutcheck.reference.scenario import Scenario
from cutcheck.reference.scenario_limits import check_budgets
from cutcheck.reference.storage.config import resubmit_section

VERSION = "0.1.0"
PROGRESS_EVERY = 20_000  # chosen actions between two progress reports

Progress = Callable[[int, int], None]  # (steps so far, max_steps)


@dataclass(slots=True)
class RunResult:
    scenario: Scenario
    seed: int
    exactly_once: ExactlyOnce
    checkpoints: list[dict[str, Any]]
    violations: list[dict[str, str]]
    run_dir: Path | None
    steps: int
    restarts: int
    restores: list[dict[str, Any]] = field(default_factory=list)
    replay: str = ""
    traces: list[dict[ChannelKey, ChannelTrace]] = field(default_factory=list)
    sections: dict[str, Any] = field(default_factory=dict)  # "debloat", "batch": reports of those subsystems
    complete: bool = True  # False: a violation stopped the run, the output is a prefix
    never_fired: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {"failures": [], "rescales": []})
    coverage: Any = None  # the engine's reference.core.coverage.Coverage (never written into the logs)
    checkpoint_failovers: list[int] = field(default_factory=list)  # steps where failed checkpoints failed the job
    # Of those, the last ones in a row that each restarted the job from the same point, with no progress
    # since (``failure_manager.failovers_without_progress``): what makes a restart loop (``judge``).
    failovers_without_progress: int = 0
    # The snapshot this job started from (a resubmit's second job, ``--restore``), None when it started
    # empty: the trace model cannot follow such a job (reference.judge), so it says which one it was.
    started_from: str | None = None

    @property
    def ok(self) -> bool:
        return not self.violations and self.exactly_once.ok

    @property
    def all_fired(self) -> bool:
        return not (self.never_fired["failures"] or self.never_fired["rescales"])

    def summary(self) -> dict[str, Any]:
        done = [c for c in self.checkpoints if c["status"] == "completed"]
        return {
            "seed": self.seed,
            "mode": self.scenario.checkpoint.mode,
            "complete": self.complete,
            "steps": self.steps,
            "checkpoints_completed": len(done),
            "checkpoints_aborted": sum(1 for c in self.checkpoints if c["status"] == "aborted"),
            "alignment_steps": sum(c["alignment_steps"] for c in done),
            "input_state_records": sum(c["input_state_records"] for c in done),
            "output_state_records": sum(c["output_state_records"] for c in done),
            "restarts": self.restarts,
            "exactly_once": self.exactly_once.to_json(),
            "violations": self.violations,
            "restores": self.restores,
            "never_fired": self.never_fired,
            **self.sections,
        }


class _Reporting:
    """A chooser that reports progress every ``every`` choices and otherwise changes nothing."""

    __slots__ = ("_inner", "_engine", "_report", "_every", "_count")

    def __init__(self, inner: Chooser, engine: Any, report: Progress, every: int):
        self._inner, self._engine, self._report, self._every, self._count = inner, engine, report, every, 0

    def choose(self, weights: Sequence[int]) -> int:
        self._count += 1
        if self._count >= self._every:
            self._count = 0
            self._report(self._engine.step, self._engine.max_steps)
        return self._inner.choose(weights)


def describe_failure(i: int, f: Any) -> str:
    when = f"at step {f.at_step}" if f.at_step is not None else f"after checkpoint {f.after_checkpoint}"
    return f"failures[{i}] ({f.target} {when}" + (f" + {f.delay} steps" if f.delay else "") + ")"


def never_fired(scenario: Scenario, fired: set[int]) -> dict[str, list[dict[str, Any]]]:
    """The scheduled failures that did not fire, and the rescales tied to them."""
    failures = [{"index": i, "target": f.target, "at_step": f.at_step, "after_checkpoint": f.after_checkpoint,
                 "delay": f.delay, "what": describe_failure(i, f)}
                for i, f in enumerate(scenario.failures) if i not in fired]
    rescales = [{"index": j, "on_failure": r.on_failure, "parallelism": dict(r.parallelism),
                 "what": f"rescales[{j}] (on failures[{r.on_failure}]: "
                         + ", ".join(f"{v}={p}" for v, p in sorted(r.parallelism.items())) + ")"}
                for j, r in enumerate(scenario.rescales) if r.on_failure not in fired]
    return {"failures": failures, "rescales": rescales}


def replay_command(scenario_path: str | Path, seed: int, out: str | Path | None = None) -> str:
    cmd = f"cutcheck simulate {scenario_path} --seed {seed}"
    return cmd + (f" --out {out}" if out else "")


def simulate(scenario: Scenario | str | Path | dict[str, Any], out_dir: str | Path | None = None, seed: int | None = None,
             *, chooser: Chooser | None = None, trace: bool = False, storage: Any = None,
             max_steps: int | None = None, checkpoint_dir: str | Path | None = None,
             restore: str | Path | None = None, restore_mode: str | None = None, force: bool = False,
             progress: Progress | None = None, watch: Callable[[Any], None] | None = None) -> RunResult:
    """Run ``scenario``; with ``out_dir``, write its run directory (``force``: replace an earlier
    cutcheck run there). ``progress(step, max_steps)`` is called every ``PROGRESS_EVERY`` actions;
    ``watch(engine)`` with each engine of the run before it runs, for read-only observers to
    subscribe to its bus (a resubmitted scenario runs two)."""
    if out_dir is not None:
        check_output_dir(out_dir, force=force)  # before any work: a refusal costs nothing
    if not isinstance(scenario, Scenario):
        scenario = Scenario.from_json(scenario)
    if seed is not None:
        scenario = scenario.with_overrides(seed=seed)
    check_budgets(scenario.graph, "scenario")  # again: a Scenario may have been built in code
    if max_steps is not None and max_steps < 1:
        raise ScenarioError(f"max_steps must be at least 1, got {max_steps}.")
    resubmit = resubmit_section(scenario.extra.get("resubmit"), storage="storage" in scenario.extra,
                                restore="restore" in scenario.extra or restore is not None)
    restored = None
    if storage is None:

        storage, restored = open_storage(scenario, checkpoint_dir=checkpoint_dir, restore=restore, restore_mode=restore_mode)
    elif resubmit is not None:
        raise ScenarioError("resubmit opens the storage of both jobs itself; call simulate without storage=.")
    if resubmit is not None and storage is None:
        raise ScenarioError("resubmit needs on-disk checkpoints, but the storage section has no dir; give storage.dir "
                            "or --checkpoint-dir.")
    run = _Job(chooser=chooser, trace=trace, max_steps=max_steps, progress=progress, watch=watch)
    plan = None
    if resubmit is not None:

        plan = ResubmitPlan(resubmit, storage)
    logs = RunLogWriter(out_dir, force=force) if out_dir is not None else None
    try:
        result = run(scenario, logs, storage, restored, keep_logs=plan.decide if plan is not None else None)
    except BaseException:
        if logs is not None:
            logs.discard()  # never a half-written run directory left behind (failure or Ctrl-C)
        raise
    if restored is not None:
        result.started_from = f"the {restored.kind} {restored.cp} it restored"
    if plan is not None and plan.target is not None:  # the first job's logs were discarded: the directory is the second's
        result = plan.second_job(scenario, result, run, checkpoint_dir=checkpoint_dir, out_dir=out_dir, force=force)
        result.started_from = f"the first job's {Path(plan.target).name} (the job was resubmitted from it)"
    run_dir = result.run_dir
    result.replay = replay_command((run_dir / "scenario.json") if run_dir else "SCENARIO.json", scenario.seed,
                                   run_dir.parent / f"{run_dir.name}-replay" if run_dir else None)
    if resubmit is not None and checkpoint_dir is not None:  # both jobs need a fresh on-disk base to replay
        result.replay += f" --checkpoint-dir {Path(checkpoint_dir).parent / (Path(checkpoint_dir).name + '-replay')}"
    return result


@dataclass(frozen=True, slots=True)
class _Job:
    """How each job of a simulate call runs (a resubmitted scenario runs two)."""

    chooser: Chooser | None
    trace: bool
    max_steps: int | None
    progress: Progress | None
    watch: Callable[[Any], None] | None = None

    def __call__(self, scenario: Scenario, logs: RunLogWriter | None, storage: Any, restored: Any, *,
                 sections: dict[str, Any] | None = None, keep_logs: Callable[[RunResult], bool] | None = None,
                 as_written: Scenario | None = None) -> RunResult:
        return _run(scenario, logs, chooser=self.chooser, storage=storage, trace=self.trace, max_steps=self.max_steps,
                    restored=restored, progress=self.progress, sections=sections or {}, keep_logs=keep_logs,
                    as_written=as_written or scenario, watch=self.watch)


def _run(scenario: Scenario, logs: RunLogWriter | None, *, chooser: Chooser | None, storage: Any, trace: bool,
         max_steps: int | None, restored: Any, progress: Progress | None, sections: dict[str, Any],
         keep_logs: Callable[[RunResult], bool] | None, as_written: Scenario,
         watch: Callable[[Any], None] | None = None) -> RunResult:
    """One job. ``keep_logs(result)``, asked before the logs are written, may discard them (the run
    directory then belongs to a later job); ``as_written`` is the scenario the run directory replays."""
    engine = make_engine(scenario, chooser=chooser, storage=storage, trace=trace, log_sink=logs, max_steps=max_steps,
                         restore=restored)
    if watch is not None:
        watch(engine)
    if progress is not None:
        engine.chooser = _Reporting(engine.chooser, engine, progress, PROGRESS_EVERY)
    violations: list[dict[str, str]] = []
    try:
        engine.run()
        close = getattr(engine.storage, "close", None)
        if close is not None:
            close()  # the job ended: the on-disk storage deletes what no retained checkpoint uses (REF)
    except InvariantViolation as exc:
        violations.append({"invariant": exc.name, "detail": exc.detail, "step": str(engine.step)})
        engine.event("violation", f"{exc.name}: {exc.detail}")
    stopped = bool(violations)  # the run ended early: its output is a prefix (nothing is "lost" yet)
    verdict = engine.oracle.verdict(prefix=stopped)
    if not violations and not verdict.ok:
        violations.append({"invariant": "EXACTLY_ONCE", "step": str(engine.step),
                           "detail": f"lost {verdict.lost}, duplicated {verdict.duplicated}, phantom {verdict.phantom}, "
                                     f"count gaps {verdict.count_gaps}; samples {verdict.samples}"})
    checkpoints = [
        {"id": s.cp, "attempt": s.attempt, "kind": s.kind, "status": s.status, "trigger_step": s.trigger_step,
         "end_step": s.end_step, "alignment_steps": s.alignment_steps, "input_state_records": s.input_state_records,
         "output_state_records": s.output_state_records, "state_bytes": s.state_bytes,
         "inflight_bytes": s.inflight_bytes, "processed_bytes": s.processed_bytes, "buffer_size": s.buffer_size,
         "reason": s.reason}
        for s in engine.coordinator.stats
    ]
    result = RunResult(scenario, scenario.seed, verdict, checkpoints, violations, None, engine.step, engine.restarts,
                       engine.restore_reports, complete=not stopped,
                       never_fired=never_fired(scenario, engine.fired_failures), coverage=engine.coverage,
                       sections=dict(sections), checkpoint_failovers=list(engine.checkpoint_failovers),
                       failovers_without_progress=engine.coordinator.failure_manager.failovers_without_progress(
                           engine.coordinator.restart_point))
    if engine.tracing:
        result.traces = [*engine.trace_archive, engine.traces]
    if engine.debloat is not None:
        result.sections["debloat"] = engine.debloat.summary(engine)
    if isinstance(engine, BatchEngine):
        result.sections["batch"] = engine.batch_summary()
    keep = keep_logs(result) if keep_logs is not None else True
    if logs is not None and not keep:
        logs.discard()
    elif logs is not None:
        for s in engine.coordinator.stats:
            logs.checkpoint(s)
        logs.write_input(engine.expect, engine.oracle.expected_copies)
        scen_json = as_written.to_json()
        if engine.tracing:

            write_traces(logs.tmp / "trace.jsonl", result.traces)
        (logs.tmp / "scenario.json").write_text(json.dumps(scen_json, indent=2) + "\n")
        result.run_dir = logs.finalize({"version": VERSION, "seed": scenario.seed, "complete": not stopped,
                                        "scenario": scen_json, "summary": result.summary()})
    return result
