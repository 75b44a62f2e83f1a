"""``cutcheck flink compare``: one job graph on the reference engine and on real Flink, side by side.

Both runs get the same graph, checkpoint mode, failure (after checkpoint N, in the slow vertex's
subtask 0 on the engine; in whichever subtask of it sees a record first on Flink) and rescale.
Time does not translate: the engine counts scheduler steps, Flink milliseconds. So Flink runs
first and the engine's checkpoint interval is then chosen to take about as many checkpoints over
the job as Flink did (the engine's job length in steps, measured by a checkpoint-free dry run,
divided by Flink's completed checkpoints). Bytes: "in-flight" is the engine's buffered bytes when the
checkpoint was triggered against the in-flight data Flink processed during alignment or persisted;
"persisted" is channel state on both sides (the engine's input plus output state, Flink's
persisted data). Alignment is steps against milliseconds.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flink_bridge.runner import RunOptions, prepare, slow_vertex
from model.graph import JobGraph

# The engine's network, set to what flink_bridge.env gives the TaskManager (4 KiB segments, 2 exclusive
# buffers per channel, 4 floating per gate), so that both build backpressure alike.
ENGINE_NETWORK = {"buffer_bytes": 4096, "record_bytes": 64, "exclusive": 2, "floating": 4}


@dataclass(slots=True)
class Side:
    name: str
    time_unit: str  # "steps" | "ms"
    completed: int
    aborted: int
    restarts: int
    exactly_once: dict[str, Any]
    inflight: list[tuple[int, int]] = field(default_factory=list)  # (checkpoint id, in-flight bytes) per completed checkpoint
    persisted: list[tuple[int, int]] = field(default_factory=list)  # (checkpoint id, channel-state bytes)
    alignment: list[tuple[int, int]] = field(default_factory=list)  # (checkpoint id, steps or ms)
    unaligned: int | None = None
    run_dir: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}


@dataclass(slots=True)
class Comparison:
    graph: str
    mode: str
    engine: Side
    flink: Side
    engine_interval: int

    @property
    def agree(self) -> bool:
        return bool(self.engine.exactly_once["ok"]) == bool(self.flink.exactly_once["ok"])

    def to_json(self) -> dict[str, Any]:
        return {"graph": self.graph, "mode": self.mode, "engine_interval_steps": self.engine_interval,
                "engine": self.engine.to_json(), "flink": self.flink.to_json(), "agree": self.agree}


def engine_scenario(graph: JobGraph, opts: RunOptions, interval: int, fail_vertex: str, slow: str) -> dict[str, Any]:
    checkpoint: dict[str, Any] = {"mode": opts.mode, "interval": interval, "retained": opts.retained}
    if opts.mode == "aligned_timeout":
        checkpoint["timeout"] = max(1, interval // 10)
    scenario: dict[str, Any] = {"graph": graph.to_json(), "seed": 0, "checkpoint": checkpoint, "network": ENGINE_NETWORK,
                                "schedule": {"policy": "backpressure", "slow": slow, "slowdown": 20}}
    if opts.fail_after is not None:
        scenario["failures"] = [{"after_checkpoint": opts.fail_after, "target": f"{fail_vertex}[0]"}]
        if opts.rescale:
            scenario["rescales"] = [{"on_failure": 0, "parallelism": dict(opts.rescale)}]
    return scenario


def engine_steps(graph: JobGraph, opts: RunOptions, slow: str) -> int:
    """How many scheduler steps the job takes on the engine without checkpoints or failures."""
    from reference import Scenario, simulate

    dry = RunOptions(mode="aligned")
    scenario = engine_scenario(graph, dry, 10**9, slow, slow)
    return max(1, simulate(Scenario.from_json(scenario)).steps)


def compare(graph: JobGraph | str | Path, opts: RunOptions, out: str | Path | None = None,
            progress: Any = None, *, force: bool = False) -> Comparison:
    from flink_bridge import run_to_dir
    from reference import Scenario, simulate

    graph, _ = prepare(graph, opts)
    slow = slow_vertex(graph, opts)
    fail_vertex = opts.fail_vertex or slow
    with tempfile.TemporaryDirectory(prefix="cutcheck-compare-") as tmp:
        run_dir = Path(out) if out is not None else Path(tmp) / "flink-run"
        outcome = run_to_dir(graph, run_dir, opts, progress, force=force)
        s = outcome.summary
        flink_done = [(cp.id, cp) for j in outcome.run.jobs if j.stats for cp in j.stats.checkpoints if cp.status == "COMPLETED"]
        flink = Side("flink", "ms", s["checkpoints_completed"], s["checkpoints_aborted"], s["restarts"], s["exactly_once"],
                     [(i, cp.inflight_bytes) for i, cp in flink_done], [(i, cp.persisted_bytes) for i, cp in flink_done],
                     [(i, cp.alignment_ms or 0) for i, cp in flink_done], s["unaligned_checkpoints"],
                     str(run_dir) if out is not None else None)
    if progress:
        progress("running the same graph on the reference engine")
    steps = engine_steps(graph, opts, slow)
    interval = max(10, steps // max(1, flink.completed))
    result = simulate(Scenario.from_json(engine_scenario(graph, opts, interval, fail_vertex, slow)))
    done = [c for c in result.checkpoints if c["status"] == "completed"]
    summ = result.summary()
    engine = Side("engine", "steps", len(done), summ["checkpoints_aborted"], summ["restarts"], summ["exactly_once"],
                  [(c["id"], c["inflight_bytes"]) for c in done], [(c["id"], c["state_bytes"]) for c in done],
                  [(c["id"], c["alignment_steps"]) for c in done])
    if result.violations:
        engine.exactly_once = {**engine.exactly_once, "ok": False, "violations": result.violations}
    return Comparison(graph.name, opts.mode, engine, flink, interval)
