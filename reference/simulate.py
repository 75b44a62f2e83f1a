"""Running a scenario end to end: the engine, the invariant checks, the oracle and the logs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reference.batch import BatchEngine, make_engine
from reference.logs import RunLogWriter
from reference.operators import InvariantViolation
from reference.oracle import ExactlyOnce
from reference.scenario import Scenario
from reference.scheduler import Chooser

VERSION = "0.1.0"


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
    traces: list[dict[tuple[int, int, int], list]] = field(default_factory=list)
    sections: dict[str, Any] = field(default_factory=dict)  # "debloat", "batch": reports of those subsystems

    @property
    def ok(self) -> bool:
        return not self.violations and self.exactly_once.ok

    def summary(self) -> dict[str, Any]:
        done = [c for c in self.checkpoints if c["status"] == "completed"]
        return {
            "seed": self.seed,
            "mode": self.scenario.checkpoint.mode,
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
            **self.sections,
        }


def replay_command(scenario_path: str | Path, seed: int, out: str | Path | None = None) -> str:
    cmd = f"cutcheck simulate {scenario_path} --seed {seed}"
    return cmd + (f" --out {out}" if out else "")


def simulate(scenario: Scenario | str | Path | dict[str, Any], out_dir: str | Path | None = None, seed: int | None = None,
             *, chooser: Chooser | None = None, trace: bool = False, storage: Any = None,
             max_steps: int | None = None, checkpoint_dir: str | Path | None = None,
             restore: str | Path | None = None, restore_mode: str | None = None) -> RunResult:
    if not isinstance(scenario, Scenario):
        scenario = Scenario.from_json(scenario)
    if seed is not None:
        scenario = scenario.with_overrides(seed=seed)
    restored = None
    if storage is None:
        from reference.storage_run import open_storage

        storage, restored = open_storage(scenario, checkpoint_dir=checkpoint_dir, restore=restore, restore_mode=restore_mode)
    logs = RunLogWriter(out_dir) if out_dir is not None else None
    engine = make_engine(scenario, chooser=chooser, storage=storage, trace=trace, log_sink=logs, max_steps=max_steps,
                         restore=restored)
    violations: list[dict[str, str]] = []
    try:
        engine.run()
        close = getattr(engine.storage, "close", None)
        if close is not None:
            close()  # the job ended: the on-disk storage deletes what no retained checkpoint uses (REF)
    except InvariantViolation as exc:
        violations.append({"invariant": exc.name, "detail": exc.detail, "step": str(engine.step)})
        engine.event("violation", f"{exc.name}: {exc.detail}")
    verdict = engine.oracle.verdict() if not violations else engine.oracle.verdict()
    if not violations and not verdict.ok:
        violations.append({"invariant": "EXACTLY_ONCE", "step": str(engine.step),
                           "detail": f"lost {verdict.lost}, duplicated {verdict.duplicated}, phantom {verdict.phantom}, "
                                     f"count gaps {verdict.count_gaps}; samples {verdict.samples}"})
    checkpoints = [
        {"id": s.cp, "attempt": s.attempt, "kind": s.kind, "status": s.status, "trigger_step": s.trigger_step,
         "end_step": s.end_step, "alignment_steps": s.alignment_steps, "input_state_records": s.input_state_records,
         "output_state_records": s.output_state_records, "state_bytes": s.state_bytes,
         "inflight_bytes": s.inflight_bytes, "buffer_size": s.buffer_size, "reason": s.reason}
        for s in engine.coordinator.stats
    ]
    run_dir = None
    result = RunResult(scenario, scenario.seed, verdict, checkpoints, violations, None, engine.step, engine.restarts,
                       engine.restore_reports)
    if engine.tracing:
        result.traces = [*engine.trace_archive, engine.traces]
    if engine.debloat is not None:
        result.sections["debloat"] = engine.debloat.summary(engine)
    if isinstance(engine, BatchEngine):
        result.sections["batch"] = engine.batch_summary()
    if logs is not None:
        for s in engine.coordinator.stats:
            logs.checkpoint(s)
        logs.write_input(engine.expect, engine.oracle.expected_copies)
        scen_json = scenario.to_json()
        if engine.tracing:
            from reference.tracing import write_traces

            write_traces(logs.tmp / "trace.jsonl", result.traces)
        run_dir = logs.finalize({"version": VERSION, "seed": scenario.seed, "scenario": scen_json, "summary": result.summary()})
        (run_dir / "scenario.json").write_text(json.dumps(scen_json, indent=2) + "\n")
        result.run_dir = run_dir
    result.replay = replay_command((run_dir / "scenario.json") if run_dir else "SCENARIO.json", scenario.seed,
                                   run_dir.parent / f"{run_dir.name}-replay" if run_dir else None)
    return result
