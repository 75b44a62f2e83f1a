"""``cutcheck flink hunt``: draw risky cases, predict each with the model, run it, compare, and make every
disagreement a finding (classed, shrunk, rerun k times, with a replay command and a standalone script).

Cases are drawn in the main process in seed order (``risk.draw(seed + i)``), so one --seed names one
sequence of cases whatever the number of workers; with workers > 1 they run in worker processes
(each its own JVM and, for real Flink, its own MiniCluster) and are compared in draw order. The
clock ends the drawing; a finding seen before it is still shrunk and rerun, within its own run budget.
"""

from __future__ import annotations

import multiprocessing
import re
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from cutcheck.flink_bridge.hunt import risk
from cutcheck.flink_bridge.hunt.case import HuntCase
from cutcheck.flink_bridge.hunt.classify import Disagreement, Kind, compare, signature
from cutcheck.flink_bridge.hunt.observe import Observation
from cutcheck.flink_bridge.hunt.runners import CaseRunner, Prediction, predict
from cutcheck.flink_bridge.hunt.shrink import ShrinkLog, shrink
from cutcheck.model.errors import CutcheckError

DEFAULT_RERUNS = 3
MAX_EMPTY_DRAWS = 20
PHASES = ("draw", "predict", "run", "compare", "shrink", "rerun")


@dataclass(slots=True)
class Evaluated:
    case: HuntCase
    prediction: Prediction
    observation: Observation
    found: list[Disagreement]
    seconds: dict[str, float]


def evaluate(runner: CaseRunner, case: HuntCase) -> Evaluated:
    """Predict, run, compare one case; seconds per phase."""
    t0 = time.monotonic()
    pred = predict(case)
    t1 = time.monotonic()
    # A case the model cannot judge is not run: nothing would be compared (on 2.3.0 such a case, broadcast
    # state under aligned checkpoints with a timeout, stalled in Flink as in the engine, for its whole timeout).
    obs = Observation(inconclusive=f"not run: {pred.inconclusive}") if pred.inconclusive else runner.run(case)
    t2 = time.monotonic()
    found = compare(case, pred, obs)
    parts = {f"run: {k}": v for k, v in obs.seconds.items() if k != "run"}  # where a Flink run's time went
    return Evaluated(case, pred, obs, found, {"predict": t1 - t0, "run": t2 - t1, "compare": time.monotonic() - t2, **parts})


def _evaluate_json(runner: CaseRunner, case: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, float]]:
    """A worker process's task: plain data in and out (Prediction and Observation as JSON-ready dicts)."""
    ev = evaluate(runner, HuntCase.from_json(case))
    p = ev.prediction
    return ({"refused": p.refused, "unaligned_edges": p.unaligned_edges, "exactly_once": p.exactly_once,
             "counts_hold": p.counts_hold, "engine": p.engine, "inconclusive": p.inconclusive},
            ev.observation.to_json(), ev.seconds)


def _key(d: Disagreement) -> str:
    """What makes two disagreements the same finding: the kind and the evidence's class without names and
    numbers (an engine invariant's name; a Java exception's class and message head; which of lost,
    duplicated, invented)."""
    text = re.sub(r"[0-9a-f]{32}", "", d.evidence)
    if text.startswith("invariant "):
        return f"{d.kind.value}: {text.split(':')[0]}"
    if d.kind is Kind.OUTPUT:
        eo = re.findall(r"(lost|duplicated|invented) ([0-9]+)", text)
        return f"{d.kind.value}: " + ", ".join(w for w, n in eo if n != "0")
    inner = re.search(r"(\w[\w.$]*(?:Exception|Error)[^;(]*)", text)
    head = inner.group(1) if inner else text
    return f"{d.kind.value}: {re.sub(r'[0-9]+', '', head)[:90]}"


@dataclass(slots=True)
class Finding:
    key: str
    case: HuntCase  # the case that first showed it
    found: list[Disagreement]
    shrunk: HuntCase | None = None
    shrink_log: ShrinkLog | None = None
    reproduced: int = 0
    reruns: int = 0
    occurrences: int = 1
    rerun_evidence: list[str] = field(default_factory=list)
    case_file: str | None = None
    script_file: str | None = None
    script_note: str | None = None
    replay: str | None = None

    @property
    def kinds(self) -> list[str]:
        return sorted(signature(self.found))

    @property
    def departure(self) -> bool:
        return all(d.kind is Kind.MODEL_DEPARTURE for d in self.found)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "kinds": self.kinds, "departure": self.departure,
                "disagreements": [d.to_json() for d in self.found], "case": self.case.to_json(),
                "summary": self.case.summary(), "shrunk": self.shrunk.to_json() if self.shrunk else None,
                "shrunk_summary": self.shrunk.summary() if self.shrunk else None,
                "shrink": self.shrink_log.to_json() if self.shrink_log else None,
                "rate": f"{self.reproduced}/{self.reruns}", "reproduced": self.reproduced, "reruns": self.reruns,
                "rerun_evidence": self.rerun_evidence, "occurrences": self.occurrences, "case_file": self.case_file,
                "replay": self.replay, "standalone_script": self.script_file, "standalone_note": self.script_note}


@dataclass(slots=True)
class HuntReport:
    runner: str
    seed: int
    minutes: float
    workers: int
    cases: int = 0  # run and compared
    conclusive: int = 0
    inconclusive: list[str] = field(default_factory=list)
    unsupported_draws: int = 0
    findings: list[Finding] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    seconds: float = 0.0
    risk_total: float = 0.0

    @property
    def graphs_per_minute(self) -> float:
        return round(60.0 * self.cases / self.seconds, 2) if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"command": "flink hunt", "runner": self.runner, "seed": self.seed, "minutes": self.minutes,
                "workers": self.workers, "cases": self.cases, "conclusive": self.conclusive,
                "inconclusive": len(self.inconclusive), "inconclusive_reasons": self.inconclusive[:20],
                "unsupported_draws": self.unsupported_draws, "seconds": round(self.seconds, 1),
                "graphs_per_minute": self.graphs_per_minute,
                "mean_risk": round(self.risk_total / self.cases, 2) if self.cases else None,
                "time": {k: round(v, 2) for k, v in self.phases.items()},
                "findings": [f.to_json() for f in self.findings]}


@dataclass(slots=True)
class Hunt:
    runner: CaseRunner
    seed: int = 0
    minutes: float = 5.0
    reruns: int = DEFAULT_RERUNS
    workers: int = 1
    max_cases: int | None = None  # stop after this many cases even before the clock (tests, benchmarks)
    shrink_runs: int = 40
    progress: Callable[[str], None] = lambda _m: None

    def run(self) -> HuntReport:
        report = HuntReport(self.runner.name, self.seed, self.minutes, self.workers)
        start = time.monotonic()
        deadline = start + 60.0 * self.minutes
        if self.workers > 1 and getattr(self.runner, "reuse", False):
            # A cluster kept open holds the machine lock: the workers would wait for the parent's, and the
            # parent (shrinking, rerunning) for the workers' results.
            self.runner.reuse = False  # type: ignore[attr-defined]
        # spawn, not fork: a worker must not inherit a half-started JVM gateway or the parent's threads.
        pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn")) if self.workers > 1 else None
        pending: list[tuple[HuntCase, Future[Any]]] = []
        draw_index = 0
        try:
            while True:
                more = time.monotonic() < deadline and (self.max_cases is None or draw_index < self.max_cases)
                while more and len(pending) < max(1, self.workers):
                    case = self._draw(report, draw_index)
                    draw_index += 1
                    if pool is not None:
                        pending.append((case, pool.submit(_evaluate_json, self.runner, case.to_json())))
                    else:
                        pending.append((case, _done(evaluate(self.runner, case))))
                    more = time.monotonic() < deadline and (self.max_cases is None or draw_index < self.max_cases)
                if not pending:
                    break
                case, fut = pending.pop(0)
                self._take(report, case, fut.result(), deadline)
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
            close = getattr(self.runner, "close", None)
            if close is not None:
                close()  # a MiniCluster kept open from case to case
        report.seconds = time.monotonic() - start
        return report

    def _draw(self, report: HuntReport, index: int) -> HuntCase:
        t0 = time.monotonic()
        for attempt in range(MAX_EMPTY_DRAWS):
            case = risk.draw(self.seed * 1_000_003 + index + attempt * 7_919_000_003, self.runner.records,
                             self.runner.accepts)
            if case is not None:
                report.phases["draw"] += time.monotonic() - t0
                return case
            report.unsupported_draws += 1
        raise CutcheckError(f"none of {MAX_EMPTY_DRAWS} drawn pools of {risk.POOL} cases is within what "
                            f"{self.runner.name} runs; nothing to hunt with this runner.")

    def _take(self, report: HuntReport, case: HuntCase, result: Any, deadline: float) -> None:
        if isinstance(result, Evaluated):
            ev = result
        else:
            p, o, secs = result
            ev = Evaluated(case, Prediction(**p), Observation.from_json(o), [], secs)
            ev.found = compare(case, ev.prediction, ev.observation)
        for k, v in ev.seconds.items():
            report.phases[k] = report.phases.get(k, 0.0) + v
        report.cases += 1
        report.risk_total += case.risk
        why = ev.observation.inconclusive or ev.prediction.inconclusive
        if why:
            report.inconclusive.append(f"{case.name}: {why}")
            self.progress(f"case {report.cases} ({case.summary()}): inconclusive ({why.rstrip('.')})")
            return
        report.conclusive += 1
        if not ev.found:
            self.progress(f"case {report.cases} (risk {case.risk:.1f}; {case.summary()}): agrees")
            return
        key = " | ".join(sorted(_key(d) for d in ev.found))
        known = next((f for f in report.findings if f.key == key), None)
        if known is not None:
            known.occurrences += 1
            self.progress(f"case {report.cases}: again {key}")
            return
        finding = Finding(key, case, ev.found)
        report.findings.append(finding)
        self.progress(f"case {report.cases} (risk {case.risk:.1f}; {case.summary()}): FINDING {key}")
        self._settle(report, finding, deadline)

    def _still(self, kinds: frozenset[str]) -> Callable[[HuntCase], bool]:
        def check(case: HuntCase) -> bool:
            ev = evaluate(self.runner, case)
            return kinds <= signature(ev.found)
        return check

    def _settle(self, report: HuntReport, finding: Finding, deadline: float) -> None:
        """Shrink the finding's case, then rerun the shrunk case k times."""
        kinds = signature(finding.found)
        t0 = time.monotonic()
        # Shrinking may run past the drawing deadline by its own budget, never unboundedly.
        finding.shrunk, finding.shrink_log = shrink(finding.case, self._still(kinds), self.runner.accepts,
                                                    max_runs=self.shrink_runs,
                                                    deadline=max(deadline, time.monotonic() + 60.0 * self.minutes / 4))
        report.phases["shrink"] += time.monotonic() - t0
        self.progress(f"shrunk in {finding.shrink_log.runs} runs to {finding.shrunk.summary()}")
        t1 = time.monotonic()
        pred = predict(finding.shrunk)
        for _ in range(self.reruns):
            obs = self.runner.run(finding.shrunk)
            again = compare(finding.shrunk, pred, obs)
            finding.reruns += 1
            if kinds <= signature(again):
                finding.reproduced += 1
            finding.rerun_evidence.append("; ".join(d.evidence[:200] for d in again) or
                                          (f"inconclusive: {obs.inconclusive}" if obs.inconclusive else "agrees"))
        report.phases["rerun"] += time.monotonic() - t1
        self.progress(f"reproduced {finding.reproduced}/{finding.reruns}")


class _done:
    """An already computed result with the Future interface the loop reads."""

    __slots__ = ("_value",)

    def __init__(self, value: Any):
        self._value = value

    def result(self) -> Any:
        return self._value


def replay(runner: CaseRunner, case: HuntCase, reruns: int) -> tuple[Prediction, list[tuple[Observation, list[Disagreement]]]]:
    """Run one case ``reruns`` times against one prediction: what ``flink hunt --replay`` does."""
    pred = predict(case)
    runs = []
    for _ in range(max(1, reruns)):
        obs = runner.run(case)
        runs.append((obs, compare(case, pred, obs)))
    return pred, runs
