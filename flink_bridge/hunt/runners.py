"""The two sides of a hunt: the model's prediction and a runner that stands for "a Flink".

* ``predict(case)``: the reference engine under Flink's documented rules (rescale refusals per
  exchange, reference.recovery.rescale_refusal.RefusalRule.PER_EXCHANGE).
* ``CaseRunner``: what the hunt runs a case on. ``FlinkCaseRunner(version)`` is real Flink;
  ``EngineCaseRunner(fault=..., rule=...)`` is the engine with a planted catalogue fault (or Flink
  1.19's per-vertex refusal rule) standing in for a Flink with a bug, so that the hunt's own logic
  is tested without Flink.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from cutcheck.flink_bridge.compare import ENGINE_NETWORK, engine_scenario
from cutcheck.flink_bridge.hunt.case import HuntCase
from cutcheck.flink_bridge.hunt.observe import Observation, observe_json
from cutcheck.flink_bridge.hunt.risk import slow_of
from cutcheck.model.errors import CutcheckError, RestoreRefused
from cutcheck.model.execution import edge_supports_unaligned
from cutcheck.model.graph import JobGraph
from cutcheck.reference.judge import Outcome, judge
from cutcheck.reference.recovery.rescale_refusal import RefusalRule, refusal_rule

ENGINE_CHECKPOINTS = 4  # the engine's interval: its checkpoint-free run split so that about this many complete
# Flink's buffer counts (compare.ENGINE_NETWORK) with buffers of four records: the engine's jobs are a few
# hundred records, Flink's thousands, and both must fill their channels to hold in-flight data.
HUNT_NETWORK = {**ENGINE_NETWORK, "buffer_bytes": 4 * ENGINE_NETWORK["record_bytes"]}


@dataclass(slots=True)
class Prediction:
    """What the model says a correct Flink does with the case."""

    refused: str | None  # the restore is refused (and why), or None: accepted
    unaligned_edges: list[str]  # exchanges that carry unaligned barriers and may persist in-flight data
    exactly_once: bool
    counts_hold: bool  # every key's committed counts run 1..n once, where the graph promises it
    engine: dict[str, Any] = field(default_factory=dict)  # the engine's exactly-once summary and violations
    inconclusive: str | None = None

    @property
    def unaligned(self) -> bool:
        return bool(self.unaligned_edges)

    def to_json(self) -> dict[str, Any]:
        return {"restore": "refused" if self.refused else "accepted", "refused": self.refused,
                "unaligned_edges": self.unaligned_edges, "exactly_once": self.exactly_once,
                "per_key_counts": "1..n once per key" if self.counts_hold else "not promised",
                "retained_files_present": True, "engine": self.engine, "inconclusive": self.inconclusive}


def unaligned_edges(graph: JobGraph, mode: str) -> list[str]:
    if mode == "aligned":
        return []
    return [e.describe() for e in graph.edges if edge_supports_unaligned(graph, e.key)]


def engine_run(case: HuntCase, mutants: tuple[str, ...] = (), rule: RefusalRule = RefusalRule.PER_EXCHANGE) -> Any:
    """One engine run of the case (a SimResult), or the RestoreRefused it raised."""
    from cutcheck.flink_bridge.compare import engine_steps
    from cutcheck.reference import Scenario, simulate

    graph, opts = case.job_graph(), case.options()
    slow = slow_of(graph)
    before = case.fail_after + (1 + (case.fail_restored or 0) if case.savepoint else 0)  # snapshots before the last failure
    interval = max(2, engine_steps(graph, opts, slow) // (before + ENGINE_CHECKPOINTS))
    scenario = engine_scenario(graph, opts, interval, slow, slow)
    scenario["network"] = dict(HUNT_NETWORK)
    if case.savepoint is not None:
        # Flink stops the job with a savepoint once checkpoint N completed and resubmits it (rescaled) from
        # that savepoint; to the model that is a savepoint triggered right after checkpoint N (so it is
        # snapshot N + 1), a failure once it completed, and the (rescaled) restore from it, the newest
        # snapshot. A failure after the restore comes once the restored job completed its own checkpoints.
        point = case.fail_after + 1
        scenario["savepoints"] = [{"after_checkpoint": case.fail_after}]
        scenario["failures"] = [{"after_checkpoint": point, "target": f"{slow}[0]"}]
        if case.fail_restored:
            scenario["failures"].append({"after_checkpoint": point + case.fail_restored, "target": f"{slow}[0]"})
        scenario["rescales"] = [{"on_failure": 0, "parallelism": dict(case.rescale)}] if case.rescale else []
    scenario["mutants"] = list(mutants)
    with refusal_rule(rule):
        try:
            return simulate(Scenario.from_json(scenario))
        except RestoreRefused as exc:
            return exc


def max_parallelism_refusal(case: HuntCase) -> str | None:
    """Flink's documented rule (StateAssignmentOperation's preconditions): a task with state whose max
    parallelism was set explicitly cannot restore a snapshot taken at another max parallelism. Every
    operator's max parallelism is set explicitly by the translation, and the hunt changes it only on keyed
    vertices, whose task always has state; so a change there is refused, whatever else the case does."""
    graph = case.job_graph()
    changed = sorted(v for v, m in case.max_parallelism_after.items()
                     if graph.vertex(v).kind == "keyed_count" and m != graph.max_parallelism(v))
    if not changed:
        return None
    return ("the restore changes the max parallelism of keyed vertex " + ", ".join(
        f"{v} ({graph.max_parallelism(v)} -> {case.max_parallelism_after[v]})" for v in changed)
        + ", which Flink refuses for state whose max parallelism was set explicitly")


def predict(case: HuntCase) -> Prediction:
    graph = case.job_graph()
    edges = unaligned_edges(graph, case.mode)
    refusal = max_parallelism_refusal(case)
    if refusal is not None:
        return Prediction(refusal, edges, True, True)
    result = engine_run(case)
    if isinstance(result, RestoreRefused):
        return Prediction(str(result), edges, True, True)
    eo = result.exactly_once
    verdict = judge(result)  # the judgement simulate, fuzz and verify make of an engine run
    pred = Prediction(None, edges, verdict.outcome is Outcome.HOLDS, eo.count_gaps == 0,
                      {"exactly_once": eo.to_json(), "violations": result.violations, "verdict": verdict.to_json()})
    if result.never_fired["failures"]:
        pred.inconclusive = "the engine's run ended before its failure fired"
    if verdict.outcome in (Outcome.VIOLATED, Outcome.UNJUDGED) and verdict.invariant != "EXACTLY_ONCE":
        # the model's own run broke an invariant or did not finish: no prediction, and a problem of the model
        broken = verdict.findings[0]
        pred.inconclusive = f"model problem: the engine's run broke {broken['invariant']} ({broken.get('detail', '')[:160]})"
    elif verdict.outcome is Outcome.RESTART_LOOP:  # the engine's job never ends, as Flink's would not: nothing to compare
        pred.inconclusive = f"the engine's run is a restart loop: {verdict.reason[:160]}"
    elif verdict.outcome is Outcome.ALIGNMENT_STALL:  # the model predicts a stall: Flink's run is to show it
        pred.inconclusive = f"the engine's run stalls on a barrier alignment: {verdict.reason[:160]}"
    return pred


class CaseRunner(Protocol):
    """A Flink (or a stand-in) the hunt runs cases on."""

    name: str

    def accepts(self, case: HuntCase) -> bool:
        """Whether this runner can run the case at all (translation, options)."""
        ...

    def records(self, graph: JobGraph, slow: str) -> int:
        """Records per source that make a run of ``graph`` long enough for its failure and restore."""
        ...

    def run(self, case: HuntCase) -> Observation:
        ...


@dataclass(slots=True)
class EngineCaseRunner:
    """The engine with a planted fault (and/or another refusal rule): "a Flink with a bug", offline."""

    fault: str | None = None
    rule: RefusalRule = RefusalRule.PER_EXCHANGE
    per_source: int = 120
    keeps_max_parallelism: bool = False  # a "Flink" that restores keyed state at a changed max parallelism

    @property
    def name(self) -> str:
        parts = [f"fault {self.fault}"] if self.fault else []
        if self.rule is not RefusalRule.PER_EXCHANGE:
            parts.append(f"{self.rule.value} refusals")
        if self.keeps_max_parallelism:
            parts.append("restores at a changed max parallelism")
        return "engine" + (f" ({', '.join(parts)})" if parts else "")

    def accepts(self, case: HuntCase) -> bool:
        return case.builds()

    def records(self, graph: JobGraph, slow: str) -> int:
        return self.per_source

    def run(self, case: HuntCase) -> Observation:
        t0 = time.monotonic()
        refusal = None if self.keeps_max_parallelism else max_parallelism_refusal(case)
        result = RestoreRefused(refusal) if refusal else engine_run(case, (self.fault,) if self.fault else (), self.rule)
        obs = Observation(seconds={"run": time.monotonic() - t0}, version=self.name)
        if isinstance(result, RestoreRefused):
            obs.restore_failed = str(result)
            return obs
        obs.exactly_once = result.exactly_once.to_json()
        done = [c for c in result.checkpoints if c["status"] == "completed"]
        obs.completed = len(done)
        obs.persisted_bytes = sum(c["state_bytes"] for c in done)
        obs.violations = list(result.violations)
        if result.never_fired["failures"] and not [v for v in result.violations if v.get("invariant") != "EXACTLY_ONCE"]:
            obs.inconclusive = "the run ended before its failure fired"  # (a run an invariant stopped early tells)
        return obs


@dataclass(slots=True)
class FlinkCaseRunner:
    """Real Flink: ``version`` None (or the installed release) runs in this process; another release
    runs through flink_bridge.worker in that release's environment (``cutcheck flink env VERSION``)."""

    version: str | None = None
    reuse: bool = False  # keep one MiniCluster (and the machine lock) from case to case, until close()
    installed: str | None = field(default=None, init=False)
    _held: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        try:
            from pyflink.version import __version__ as installed
            self.installed = str(installed)
        except ImportError:
            self.installed = None
        if self.version is None or self.version == self.installed:
            from cutcheck.flink_bridge.env import require_flink

            require_flink()
        else:
            self._foreign()  # fails now, in one sentence, if that release cannot run here

    @property
    def name(self) -> str:
        return f"Flink {self.version or self.installed}"

    def accepts(self, case: HuntCase) -> bool:
        from cutcheck.flink_bridge.runner import prepare

        try:
            prepare(case.graph, case.options())
        except CutcheckError:
            return False
        return True

    def records(self, graph: JobGraph, slow: str) -> int:
        from cutcheck.flink_bridge.conform import records_for

        return records_for(graph, slow)

    def run(self, case: HuntCase) -> Observation:
        payload = {"graph": case.graph, "options": _options_json(case)}
        if self.version is None or self.version == self.installed:
            t0 = time.monotonic()
            self._hold(case)
            obs = Observation.from_json(observe_json(payload))
            obs.seconds["cluster"] = obs.seconds.get("cluster", 0.0) + time.monotonic() - t0 - sum(obs.seconds.values())
            return obs
        return Observation.from_json(self._foreign()(payload))

    def _hold(self, case: HuntCase) -> None:
        """With ``reuse``: a MiniCluster with the slots this case needs, kept open for the next cases."""
        from contextlib import ExitStack

        from cutcheck.flink_bridge import env

        if not self.reuse:
            return
        graph = case.job_graph()
        after = graph.with_parallelism(case.rescale) if case.rescale else graph
        slots = max(v.parallelism for g in (graph, after) for v in g.vertices)
        if self._held is not None and env.held_slots() >= slots:
            return
        self.close()
        self._held = ExitStack()
        retained = {"execution.checkpointing.num-retained": str(case.options().retained)}  # as runner.run asks
        self._held.enter_context(env.held_cluster(max(slots, 3), retained))

    def close(self) -> None:
        """Stop the MiniCluster kept open for reuse (and release the machine lock)."""
        if self._held is not None:
            held, self._held = self._held, None
            held.close()

    def __getstate__(self) -> dict[str, Any]:  # a worker process gets the settings, never an open cluster
        return {"version": self.version, "reuse": self.reuse, "installed": self.installed, "_held": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)

    def _foreign(self) -> Any:
        """Another release: its prepared environment runs the job (flink_bridge.launch); checked once, here."""
        from cutcheck.flink_bridge.hunt.observe import release_runner

        assert self.version is not None
        release_runner(self.version)  # one sentence now if it cannot run here
        version = self.version
        return lambda payload: observe_json(payload, version)


def _options_json(case: HuntCase) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(case.options())
