"""``cutcheck flink compare``: one job graph on the reference engine and on real Flink, side by side.

Both runs get the same graph, checkpoint mode, failure (after checkpoint N, in the slow vertex's
subtask 0 on the engine; in whichever subtask of it sees a record first on Flink) and rescale.
Time does not translate: the engine counts scheduler steps, Flink milliseconds. So Flink runs
first, and the engine's checkpoint interval is then calibrated on the engine's real run (with its
checkpoints, failure and rescale) until both sides complete about as many checkpoints: a first
guess from a checkpoint-free dry run, then the interval scaled by completed/wanted, bisecting
(geometrically) once two runs bracket the target, then the intervals nearest the closest one (the count is not
monotonic in the interval: a job's length in steps changes with its checkpoints), for at most
``CALIBRATION_ROUNDS`` runs (the engine is fast).
The run closest to Flink's count is the one reported; ``ratio`` is engine/Flink.

Comparable, once calibrated: the verdicts, the checkpoints completed, the restarts, restores
refused, and the share of the in-flight data a checkpoint met that it persisted. Not comparable:
anything in time (alignment, intervals: steps against milliseconds) and absolute amounts, which
follow how long each side ran and when it was backpressured. Bytes, the same on both sides: "in-flight"
is the data a checkpoint's barriers met, processed during alignment or persisted (Flink's
processed_data plus persisted_data), "persisted" the channel state, so the share is at most 1. (It
once divided the engine's channel state by the bytes buffered at the trigger: data sent after the
trigger and caught as channel state was counted above but not below, and shares above 100 % came out.)
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cutcheck.flink_bridge.runner import RunOptions, prepare, slow_vertex
from cutcheck.model.errors import CutcheckError, RestoreRefused
from cutcheck.model.graph import JobGraph
from cutcheck.model.partitioning import UNSUPPORTED_MESSAGE

T = TypeVar("T")

# The engine's network, set to what flink_bridge.env gives the TaskManager (4 KiB segments, 2 exclusive
# buffers per channel, 4 floating per gate), so that both build backpressure alike.
ENGINE_NETWORK = {"buffer_bytes": 4096, "record_bytes": 64, "exclusive": 2, "floating": 4}
TOLERANCE = 0.2  # completed checkpoints on the two sides within 20 % of each other
CALIBRATION_ROUNDS = 24  # engine runs at most
SEARCH_ROUNDS = 8  # of which scaled or bisected
MIN_INTERVAL = 2  # steps
# What Flink says when it refuses to rescale channel state (SubtaskStateMapper.UNSUPPORTED).
FLINK_REFUSAL = UNSUPPORTED_MESSAGE.split(".")[0]
COMPARABLE = ("verdict", "refused", "completed", "restarts", "persisted_share")
NOT_COMPARABLE = {"aborted": "when a checkpoint is cut short depends on timing",
                  "inflight": "absolute bytes follow run length and backpressure",
                  "persisted": "absolute bytes follow run length and backpressure",
                  "alignment": "steps against milliseconds", "interval": "steps against milliseconds"}


def within(a: int, b: int, tolerance: float = TOLERANCE) -> bool:
    """True when a and b are within ``tolerance`` of each other (of the larger one)."""
    return min(a, b) >= (1 - tolerance) * max(a, b)


def next_interval(interval: int, got: int, want: int, tried: dict[int, int]) -> int:
    """The next interval to try: once an interval that gave too many checkpoints and a longer one that
    gave too few bracket the target, their geometric midpoint; before that ``interval`` scaled by
    got/want. (Bisecting, not scaling, inside a bracket: each checkpoint costs the engine steps, so
    a job lengthens with its checkpoints and the count climbs far faster than 1/interval when short.)"""
    low = max((i for i, c in tried.items() if c > want), default=None)  # too many checkpoints: too short
    high = min((i for i, c in tried.items() if c < want), default=None)  # too few: too long
    if low is not None and high is not None and low + 1 < high:
        return min(high - 1, max(low + 1, round(math.sqrt(low * high))))
    return max(MIN_INTERVAL, round(interval * max(got, 1) / max(want, 1)))


def calibrate(run: Callable[[int], T], count: Callable[[T], int], want: int, first: int,
              rounds: int = CALIBRATION_ROUNDS) -> tuple[int, T, list[tuple[int, int]]]:
    """Run with intervals until ``count`` is within TOLERANCE of ``want``; (interval, its result, trials).

    First the interval scaled by got/want (bisecting once two runs bracket the target), for at
    most SEARCH_ROUNDS runs; then, since a job's length in steps changes with its checkpoints and the
    count is not monotonic in the interval, the intervals nearest the closest one so far, one by one.
    The result returned is the closest run (ties: the shorter interval); trials are (interval, count)."""
    tried: dict[int, int] = {}
    results: dict[int, T] = {}

    def closest() -> int:
        return min(tried, key=lambda i: (abs(tried[i] - want), i))

    def attempt(interval: int) -> bool:
        results[interval] = result = run(interval)
        tried[interval] = count(result)
        return within(tried[interval], want)

    interval = max(MIN_INTERVAL, first)
    while len(tried) < min(rounds, SEARCH_ROUNDS) and not attempt(interval):
        interval = next_interval(interval, tried[interval], want, tried)
        if interval in tried:
            break
    if not within(tried[closest()], want):
        centre = closest()
        near = sorted(range(max(MIN_INTERVAL, centre // 2), 2 * centre + 1), key=lambda i: (abs(i - centre), i))
        for interval in (i for i in near if i not in tried):
            if len(tried) >= rounds or attempt(interval):
                break
    best = closest()
    return best, results[best], list(tried.items())


@dataclass(slots=True)
class Side:
    name: str
    time_unit: str  # "steps" | "ms"
    completed: int
    aborted: int
    restarts: int
    exactly_once: dict[str, Any]
    # (checkpoint id, in-flight bytes the checkpoint met: processed during alignment + persisted) per completed checkpoint
    inflight: list[tuple[int, int]] = field(default_factory=list)
    persisted: list[tuple[int, int]] = field(default_factory=list)  # (checkpoint id, channel-state bytes)
    alignment: list[tuple[int, int]] = field(default_factory=list)  # (checkpoint id, steps or ms)
    unaligned: int | None = None
    run_dir: str | None = None
    refused: str | None = None  # the restore was refused (as Flink refuses it): why

    @property
    def verdict(self) -> str:
        """"refused", "holds" or "violated"."""
        if self.refused is not None:
            return "refused"
        return "holds" if self.exactly_once.get("ok") else "violated"

    @property
    def persisted_share(self) -> float | None:
        """Channel state persisted over the in-flight data the completed checkpoints met."""
        met = sum(b for _, b in self.inflight)
        return round(sum(b for _, b in self.persisted) / met, 3) if met else None

    def to_json(self) -> dict[str, Any]:
        return {**{f: getattr(self, f) for f in self.__slots__}, "verdict": self.verdict,
                "persisted_share": self.persisted_share}


def refused_side(name: str, unit: str, why: str) -> Side:
    return Side(name, unit, 0, 0, 0, {}, refused=why)


@dataclass(slots=True)
class Comparison:
    graph: str
    mode: str
    engine: Side
    flink: Side
    engine_interval: int
    calibration: list[tuple[int, int]] = field(default_factory=list)  # (engine interval, completed) per engine run
    flink_interval: int = 0  # ms

    @property
    def ratio(self) -> float | None:
        """Completed checkpoints, engine over Flink."""
        return round(self.engine.completed / self.flink.completed, 3) if self.flink.completed else None

    @property
    def calibrated(self) -> bool:
        """Both sides completed checkpoints within TOLERANCE of each other (a refused side has nothing to match)."""
        return self.engine.refused is not None or self.flink.refused is not None or within(self.engine.completed,
                                                                                           self.flink.completed)

    @property
    def agree(self) -> bool:
        """Same verdict: both refuse the restore, or both run and agree on exactly-once."""
        return self.engine.verdict == self.flink.verdict

    @property
    def ok(self) -> bool:
        """No side violated exactly-once and the sides agree."""
        return self.agree and "violated" not in (self.engine.verdict, self.flink.verdict)

    def to_json(self) -> dict[str, Any]:
        return {"graph": self.graph, "mode": self.mode, "engine_interval_steps": self.engine_interval,
                "flink_interval_ms": self.flink_interval,
                "engine": self.engine.to_json(), "flink": self.flink.to_json(), "agree": self.agree,
                "checkpoint_ratio": self.ratio, "tolerance": TOLERANCE, "calibrated": self.calibrated,
                "calibration": [{"interval_steps": i, "completed": c} for i, c in self.calibration],
                "comparable": list(COMPARABLE), "not_comparable": NOT_COMPARABLE}


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
    """How many scheduler steps the job takes on the engine without checkpoints or failures (the first guess)."""
    from cutcheck.reference import Scenario, simulate

    dry = RunOptions(mode="aligned")
    scenario = engine_scenario(graph, dry, 10**9, slow, slow)
    return max(1, simulate(Scenario.from_json(scenario)).steps)


def run_engine(graph: JobGraph, opts: RunOptions, interval: int, fail_vertex: str, slow: str) -> Side:
    """One engine run at ``interval`` steps, as a Side (refused when the engine refuses the restore as Flink would)."""
    from cutcheck.reference import Scenario, simulate
    from cutcheck.reference.judge import Outcome, judge

    try:
        result = simulate(Scenario.from_json(engine_scenario(graph, opts, interval, fail_vertex, slow)))
    except RestoreRefused as exc:
        return refused_side("engine", "steps", str(exc))
    done = [c for c in result.checkpoints if c["status"] == "completed"]
    summ = result.summary()
    side = Side("engine", "steps", len(done), summ["checkpoints_aborted"], summ["restarts"], summ["exactly_once"],
                [(c["id"], c["state_bytes"] + c["processed_bytes"]) for c in done],
                [(c["id"], c["state_bytes"]) for c in done],
                [(c["id"], c["alignment_steps"]) for c in done])
    verdict = judge(result)  # the judgement simulate, fuzz and verify make of an engine run
    if verdict.outcome is not Outcome.HOLDS:
        side.exactly_once = {**side.exactly_once, "ok": False, "violations": list(verdict.findings),
                             "outcome": verdict.outcome.value}
    return side


def run_flink(graph: JobGraph, opts: RunOptions, out: str | Path | None, progress: Any, force: bool) -> Side:
    """The job on Flink as a Side; a restore Flink refuses (it cannot rescale the channel state) is a refused Side."""
    from cutcheck.flink_bridge import run_to_dir

    with tempfile.TemporaryDirectory(prefix="cutcheck-compare-") as tmp:
        run_dir = Path(out) if out is not None else Path(tmp) / "flink-run"
        try:
            outcome = run_to_dir(graph, run_dir, opts, progress, force=force)
        except CutcheckError as exc:
            if FLINK_REFUSAL in str(exc):
                return refused_side("flink", "ms", str(exc))
            raise
    s = outcome.summary
    done = [cp for j in outcome.run.jobs if j.stats for cp in j.stats.checkpoints if cp.status == "COMPLETED"]
    return Side("flink", "ms", s["checkpoints_completed"], s["checkpoints_aborted"], s["restarts"], s["exactly_once"],
                [(cp.id, cp.inflight_bytes) for cp in done], [(cp.id, cp.persisted_bytes) for cp in done],
                [(cp.id, cp.alignment_ms or 0) for cp in done], s["unaligned_checkpoints"],
                str(run_dir) if out is not None else None)


def compare(graph: JobGraph | str | Path, opts: RunOptions, out: str | Path | None = None,
            progress: Any = None, *, force: bool = False) -> Comparison:
    graph, _ = prepare(graph, opts)
    slow = slow_vertex(graph, opts)
    fail_vertex = opts.fail_vertex or slow
    flink = run_flink(graph, opts, out, progress, force)
    if progress:
        progress(f"calibrating the engine to Flink's {flink.completed} completed checkpoints")
    want = max(1, flink.completed)
    first = engine_steps(graph, opts, slow) // want
    # A refusal ends the calibration: there is no count to match, and the refusal is the verdict.
    interval, engine, trials = calibrate(lambda i: run_engine(graph, opts, i, fail_vertex, slow),
                                         lambda side: want if side.refused else side.completed, want, first)
    return Comparison(graph.name, opts.mode, engine, flink, interval, trials, opts.interval_ms)
