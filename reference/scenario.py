"""Scenarios: a job graph plus everything the engine needs to run it reproducibly (docs/scenarios.md).

Everything is checked before a run starts, so a bad scenario ends in one sentence naming the field:
failure targets and rescales must name subtasks and vertices of the job, steps and counts are
positive, and the job must fit the engine's budgets: at most ``MAX_RECORDS`` records over all
sources, ``MAX_SPLITS`` splits, and ``model.execution.MAX_CHANNELS`` channels at every parallelism
the scenario runs at (the graph's and each rescale's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cutcheck.model.errors import GraphError, ScenarioError
from cutcheck.model.graph import JobGraph
from cutcheck.model.inflight import NetworkConfig
from cutcheck.model.jsontext import read_json
from cutcheck.model.kinds import CheckpointMode, FailoverStrategy, SchedulePolicy, values
from cutcheck.model.sections import Field, Section, int_fields
from cutcheck.reference.batch_config import BatchConfig
from cutcheck.reference.faults.catalogue import CATALOGUE
from cutcheck.reference.runtime.debloat import DebloatConfig
from cutcheck.reference.scenario_limits import check_budgets, check_channels, check_targets
from cutcheck.reference.storage.config import restore_section, resubmit_section, validate

MODES = values(CheckpointMode)
POLICIES = values(SchedulePolicy)

# The engine's size budgets (README "simulate"): the oracle keeps a byte per record and the verdict
# compares per source, so 10**8 records take about 300 MB; every split is a list entry of its source.


@dataclass(frozen=True, slots=True)
class CheckpointConfig:
    mode: CheckpointMode = CheckpointMode.ALIGNED
    interval: int = 200
    timeout: int | None = None  # aligned-checkpoint timeout in steps (aligned_timeout mode)
    max_concurrent: int = 1
    retained: int = 1
    incremental: bool = False
    checkpoint_timeout: int = 1_000_000  # a pending checkpoint older than this is aborted
    # execution.checkpointing.tolerable-failed-checkpoints: consecutive counted failures (expiries,
    # declines) tolerated before the job fails over (reference/failure_manager.py)
    tolerable_failed: int = 0
    # Steps the asynchronous part of a task's snapshot may take before its acknowledgement reaches the
    # coordinator: each one is delayed by a draw in [1, ack_delay] from the run's seed, so acks of
    # different checkpoints cross (reference/checkpointing/acks.py). 0: acknowledged at once.
    ack_delay: int = 0


@dataclass(frozen=True, slots=True)
class Schedule:
    policy: SchedulePolicy = SchedulePolicy.UNIFORM
    slow: str | None = None  # vertex slowed by the backpressure policy
    slowdown: int = 20  # the slow vertex's processing actions weigh 1, everything else this much
    flush_weight: int = 1  # weight of the output flusher; every other action weighs ``slowdown``
    # Records one processing or transmitting action may move, across buffers of one channel: a
    # per-record cost, which buffer debloating needs to matter (with one buffer per action, small
    # buffers only slow everything down). None: one buffer per action, whatever its size.
    records_per_action: int | None = None
    # A scripted prefix of scheduler choices (indexes into the enabled actions, taken modulo
    # their number), then the seeded chooser: how a shrunk fuzz schedule is replayed exactly.
    choices: tuple[int, ...] = ()
    # Opt-in interleaving exploration (reference.runtime.scheduler.InterleavingChooser); the defaults
    # are today's seeded weighted choice. ``chooser`` "pct": random thread priorities with
    # ``pct_depth`` change points in the first ``pct_horizon`` steps; ``barrier_delay``: steps a barrier
    # waits at the head of a slow sender's queue.
    chooser: str = "weighted"
    pct_depth: int = 0
    pct_horizon: int = 1000
    barrier_delay: int = 0


@dataclass(frozen=True, slots=True)
class Failure:
    target: str  # "vertex[i]" or "worker:K"
    at_step: int | None = None
    after_checkpoint: int | None = None
    delay: int = 0  # steps after the checkpoint completed


@dataclass(frozen=True, slots=True)
class SavepointTrigger:
    """A savepoint the user triggers: at a step, or ``delay`` steps after a checkpoint completed."""

    at_step: int | None = None
    after_checkpoint: int | None = None
    delay: int = 0


@dataclass(frozen=True, slots=True)
class Rescale:
    on_failure: int
    parallelism: dict[str, int]


# The sections of a scenario file (docs/scenarios.md). Checks across fields or against the graph
# are in Scenario.from_json and the helpers below; the debloat, batch, storage and restore
# sections are their subsystems' (validated here all the same, before a run starts).
TOP = Section("", {
    **{name: Field() for name in ("graph", "checkpoint", "network", "schedule", "failures", "rescales", "mutants",
                                  "savepoints", "debloat", "storage", "restore", "resubmit", "batch")},
    "seed": Field(int, low=0, default=0),
    "max_steps": Field(int, low=1, default=1_000_000),
    "workers": Field(int, low=1, nullable=True, says="a positive integer or absent"),
    "failover_strategy": Field(str, choices=values(FailoverStrategy)),
}, shape="a JSON object with at least a 'graph'")
CHECKPOINT = Section.of("checkpoint", CheckpointConfig, {
    "mode": Field(str, choices=MODES),
    **int_fields(("interval", "max_concurrent", "retained", "checkpoint_timeout"), low=1),
    "timeout": Field(int, low=0, nullable=True, says="a number of steps >= 0 or null"),
    "incremental": Field(bool),
    "tolerable_failed": Field(int, low=0),
    "ack_delay": Field(int, low=0, says="a number of steps >= 0 (0 acknowledges every snapshot at once)"),
})
SCHEDULE = Section.of("schedule", Schedule, {
    "policy": Field(str, choices=POLICIES),
    **int_fields(("slowdown", "flush_weight"), low=1, says="a positive integer (a scheduling weight)"),
    "records_per_action": Field(int, low=1, nullable=True),
    "chooser": Field(str, choices=("weighted", "pct")),
    **int_fields(("pct_depth", "barrier_delay"), low=0, says="a number of steps or change points >= 0"),
    "pct_horizon": Field(int, low=1),
})
FAILURE = Section.of("failure", Failure, {
    "at_step": Field(int, low=1, nullable=True),
    "after_checkpoint": Field(int, low=1, nullable=True),
    "delay": Field(int, low=0),
}, shape="an object with 'target' and 'at_step' or 'after_checkpoint'", optional=False)
SAVEPOINT = Section.of("savepoint", SavepointTrigger, {
    "at_step": Field(int, low=0, nullable=True),
    "after_checkpoint": Field(int, low=0, nullable=True),
    "delay": Field(int, low=0),
}, shape="an object with 'at_step' or 'after_checkpoint' (and optional 'delay')", optional=False)
RESCALE = Section.of("rescale", Rescale, shape="an object with 'on_failure' and 'parallelism'", optional=False)


@dataclass(frozen=True, slots=True)
class Scenario:
    graph: JobGraph
    graph_ref: str | dict[str, Any]  # as written: a path or the inline graph (for replay files)
    seed: int = 0
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    schedule: Schedule = field(default_factory=Schedule)
    failures: tuple[Failure, ...] = ()
    rescales: tuple[Rescale, ...] = ()
    mutants: tuple[str, ...] = ()
    max_steps: int = 1_000_000
    workers: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # debloat/storage/restore sections, read by their subsystems
    savepoints: tuple[SavepointTrigger, ...] = ()

    @classmethod
    def from_json(cls, path_or_dict: str | Path | Mapping[str, Any]) -> Scenario:
        base = Path(".")
        if isinstance(path_or_dict, Mapping):
            data, where = dict(path_or_dict), "scenario"
        else:
            path = Path(path_or_dict)
            where, base = str(path), path.parent
            data = read_json(path, ScenarioError, "scenario file")
        top = TOP.read(data, where)
        # In checkpoint, network and schedule any empty value ({}, null, [], false) means "all defaults" (docs/scenarios.md).
        graph_ref = _graph_ref(data.get("graph"), where)
        graph = _load_graph(graph_ref, base, where)
        check_budgets(graph, where)
        ck = CHECKPOINT.read(data.get("checkpoint") or None, where)
        checkpoint = CheckpointConfig(**ck | {"mode": CheckpointMode(ck.get("mode", CheckpointMode.ALIGNED))})
        if checkpoint.mode is CheckpointMode.ALIGNED_TIMEOUT and checkpoint.timeout is None:
            raise ScenarioError(f"{where}: aligned_timeout mode needs checkpoint.timeout, a number of steps >= 0.")
        if checkpoint.mode in (CheckpointMode.UNALIGNED, CheckpointMode.ALIGNED_TIMEOUT) and checkpoint.max_concurrent > 1:
            # CheckpointCoordinatorConfiguration: "maxConcurrentCheckpoints can't be > 1 if UnalignedCheckpoints enabled".
            raise ScenarioError(f"{where}: checkpoint.max_concurrent must be 1 with unaligned checkpoints (Flink allows one in flight).")
        if checkpoint.ack_delay >= checkpoint.checkpoint_timeout:
            raise ScenarioError(f"{where}: checkpoint.ack_delay {checkpoint.ack_delay} must be below checkpoint."
                                f"checkpoint_timeout {checkpoint.checkpoint_timeout}, or a checkpoint may expire "
                                "before any acknowledgement arrives; lower ack_delay or raise the timeout.")
        network = NetworkConfig.from_json(data.get("network") or None, where)
        sched = SCHEDULE.read(data.get("schedule") or None, where)
        choices = sched.pop("choices", []) or []
        if not isinstance(choices, list) or not all(isinstance(c, int) and c >= 0 for c in choices):
            raise ScenarioError(f"{where}: schedule.choices must be a list of non-negative integers.")
        schedule = Schedule(**sched | {"policy": SchedulePolicy(sched.get("policy", SchedulePolicy.UNIFORM))},
                            choices=tuple(choices))
        if schedule.slow is not None and schedule.slow not in {v.id for v in graph.vertices}:
            raise ScenarioError(f"{where}: schedule.slow names no vertex ({schedule.slow!r}).")
        failures = tuple(_failure(f, i, where, graph) for i, f in enumerate(_list(data, "failures", where)))
        rescales = tuple(_rescale(r, i, where, len(failures)) for i, r in enumerate(_list(data, "rescales", where)))
        for i, r in enumerate(rescales):  # the restore after a failure applies one rescale: two would hide one
            first = next(j for j, q in enumerate(rescales) if q.on_failure == r.on_failure)
            if first != i:
                raise ScenarioError(f"{where}: rescales[{i}] and rescales[{first}] both name failure {r.on_failure}; "
                                    "give one entry per failure with every vertex to rescale in its parallelism.")
        savepoints = tuple(_savepoint(r, i, where) for i, r in enumerate(_list(data, "savepoints", where)))
        check_rescales(graph, rescales, [f"{where}: rescales[{i}]" for i in range(len(rescales))])
        mutants = tuple(_list(data, "mutants", where))
        for m in mutants:
            if m not in CATALOGUE:
                raise ScenarioError(f"{where}: unknown mutant {m!r}; known: {', '.join(CATALOGUE)}.")
        seed, max_steps, workers = top["seed"], top["max_steps"], top.get("workers")
        check_targets(graph, failures, rescales, workers, max_steps, "restore" in data, where)
        extra: dict[str, Any] = {k: data[k] for k in ("debloat", "storage", "restore", "resubmit", "batch", "failover_strategy")
                 if k in data}

        DebloatConfig.from_json(extra.get("debloat"), network.buffer_bytes, where)  # validated here, read by the engine
        BatchConfig.from_json(extra.get("batch"), where)

        validate(extra.get("storage"), where)  # the storage and restore sections, read when the run opens storage
        restore_section(extra.get("restore"), where)
        resubmit_section(extra.get("resubmit"), where, storage="storage" in extra, restore="restore" in extra)
        if isinstance(graph_ref, str) and not Path(graph_ref).is_absolute():
            graph_ref = str(base / graph_ref)
        return cls(graph, graph_ref, seed, checkpoint, network, schedule, failures, rescales, mutants, max_steps,
                   workers, extra, savepoints)

    def to_json(self) -> dict[str, Any]:
        ck = self.checkpoint
        return {
            "graph": self.graph.to_json(),
            "seed": self.seed,
            "checkpoint": {"mode": ck.mode, "interval": ck.interval, "timeout": ck.timeout,
                           "max_concurrent": ck.max_concurrent, "retained": ck.retained,
                           "incremental": ck.incremental, "checkpoint_timeout": ck.checkpoint_timeout,
                           "tolerable_failed": ck.tolerable_failed,
                           **({"ack_delay": ck.ack_delay} if ck.ack_delay else {})},
            "network": {"buffer_bytes": self.network.buffer_bytes, "record_bytes": self.network.record_bytes,
                        "exclusive": self.network.exclusive, "floating": self.network.floating,
                        "output_pool": self.network.output_pool},
            "schedule": {"policy": self.schedule.policy, "slow": self.schedule.slow,
                         "slowdown": self.schedule.slowdown, "flush_weight": self.schedule.flush_weight,
                         **({"records_per_action": self.schedule.records_per_action}
                            if self.schedule.records_per_action is not None else {}),
                         **({"choices": list(self.schedule.choices)} if self.schedule.choices else {}),
                         **_interleaving_json(self.schedule)},
            "failures": [{k: v for k, v in (("target", f.target), ("at_step", f.at_step),
                                            ("after_checkpoint", f.after_checkpoint), ("delay", f.delay)) if v is not None}
                         for f in self.failures],
            "rescales": [{"on_failure": r.on_failure, "parallelism": dict(r.parallelism)} for r in self.rescales],
            **({"savepoints": [{k: v for k, v in (("at_step", t.at_step), ("after_checkpoint", t.after_checkpoint),
                                                  ("delay", t.delay)) if v is not None}
                               for t in self.savepoints]} if self.savepoints else {}),
            "mutants": list(self.mutants),
            "max_steps": self.max_steps,
            **({"workers": self.workers} if self.workers is not None else {}),
            **self.extra,
        }

    def with_overrides(self, *, seed: int | None = None, mode: str | None = None, mutants: tuple[str, ...] | None = None) -> Scenario:
        checkpoint = self.checkpoint
        if mode is not None:
            if mode not in MODES:
                raise ScenarioError(f"--mode {mode!r} is not one of {', '.join(MODES)}.")
            new_mode = CheckpointMode(mode)
            timeout = checkpoint.timeout if checkpoint.timeout is not None else (
                checkpoint.interval // 4 if new_mode is CheckpointMode.ALIGNED_TIMEOUT else None)
            one_in_flight = new_mode in (CheckpointMode.UNALIGNED, CheckpointMode.ALIGNED_TIMEOUT)
            checkpoint = replace(checkpoint, mode=new_mode, timeout=timeout,
                                 max_concurrent=1 if one_in_flight else checkpoint.max_concurrent)
        for m in mutants or ():
            if m not in CATALOGUE:
                raise ScenarioError(f"unknown mutant {m!r}; known: {', '.join(CATALOGUE)}.")
        return replace(self, seed=self.seed if seed is None else seed, checkpoint=checkpoint,
                       mutants=self.mutants if mutants is None else tuple(mutants))

    def with_rescale(self, parallelism: Mapping[str, int], on_failure: int = 0, label: str = "rescale") -> Scenario:
        """The scenario with ``parallelism`` applied at the restore after failure ``on_failure``, over
        what the scenario's own rescale of that failure says (``label`` names it in errors)."""
        if not 0 <= on_failure < len(self.failures):
            raise ScenarioError(f"{label}: the scenario has {len(self.failures)} failure(s), none with index {on_failure}.")
        merged = dict(parallelism)
        rescales = []
        for r in self.rescales:
            if r.on_failure == on_failure:
                merged = {**r.parallelism, **merged}
            else:
                rescales.append(r)
        rescales.append(Rescale(on_failure, merged))
        check_rescales(self.graph, tuple(rescales), [f"rescales[{i}]" for i in range(len(rescales) - 1)] + [label])
        return replace(self, rescales=tuple(rescales))


def _list(data: Mapping[str, Any], name: str, where: str) -> list[Any]:
    value = data.get(name, []) or []
    if not isinstance(value, list):
        raise ScenarioError(f"{where}: '{name}' must be a list.")
    return value


def _graph_ref(ref: object, where: str) -> str | dict[str, Any]:
    """The scenario's ``graph`` as written: a path or an inline graph object."""
    if ref is None:
        raise ScenarioError(f"{where}: missing 'graph' (a path to a job-graph JSON file, or the graph inline).")
    if isinstance(ref, str | dict):
        return ref
    raise ScenarioError(f"{where}: 'graph' must be a path or an inline job graph object.")


def _load_graph(ref: str | dict[str, Any], base: Path, where: str) -> JobGraph:
    try:
        if isinstance(ref, dict):
            return JobGraph.from_json(ref)
        path = Path(ref)
        if not path.is_absolute() and not path.exists():
            path = base / ref
        return JobGraph.from_json(path)
    except GraphError as exc:
        raise ScenarioError(f"{where}: graph: {exc}") from None


def _failure(raw: Any, i: int, where: str, graph: JobGraph) -> Failure:
    w = f"{where}: failures[{i}]"
    raw = FAILURE.read(raw, where, name=f"failures[{i}]")
    f = Failure(target=str(raw.get("target", "")), at_step=raw.get("at_step"),
                after_checkpoint=raw.get("after_checkpoint"), delay=raw.get("delay", 0))
    if (f.at_step is None) == (f.after_checkpoint is None):
        raise ScenarioError(f"{w}: give exactly one of 'at_step' and 'after_checkpoint'.")
    if f.at_step is not None and raw.get("delay") not in (None, 0):
        raise ScenarioError(f"{w}: 'delay' counts steps after a checkpoint completed, so it applies only with "
                            "'after_checkpoint'; add it to at_step instead.")
    target = f.target
    if target.startswith("worker:"):
        if not target[7:].isdigit():
            raise ScenarioError(f"{w}: target {target!r} should be worker:K with K a number.")
    else:
        vid, _, rest = target.partition("[")
        if vid not in {v.id for v in graph.vertices} or not rest.endswith("]") or not rest[:-1].isdigit():
            raise ScenarioError(f"{w}.target {target!r} should be VERTEX[INDEX] of the graph or worker:K; the "
                                f"vertices are {', '.join(v.id for v in graph.vertices)}.")
    return f


def _savepoint(raw: Any, i: int, where: str) -> SavepointTrigger:
    w = f"{where}: savepoints[{i}]"
    raw = SAVEPOINT.read(raw, where, name=f"savepoints[{i}]")
    t = SavepointTrigger(raw.get("at_step"), raw.get("after_checkpoint"), raw.get("delay", 0))
    if (t.at_step is None) == (t.after_checkpoint is None):
        raise ScenarioError(f"{w}: give exactly one of 'at_step' and 'after_checkpoint'.")
    return t


def _rescale(raw: Any, i: int, where: str, failures: int) -> Rescale:
    w = f"{where}: rescales[{i}]"
    raw = RESCALE.read(raw, where, name=f"rescales[{i}]")
    on = raw.get("on_failure")
    par = raw.get("parallelism")
    if not isinstance(on, int) or not 0 <= on < max(failures, 1) or failures == 0:
        raise ScenarioError(f"{w}: on_failure must index one of the {failures} failures.")
    if not isinstance(par, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in par.values()):
        raise ScenarioError(f"{w}: parallelism must map vertex ids to positive integers.")
    return Rescale(on, dict(par))


def check_rescales(graph: JobGraph, rescales: tuple[Rescale, ...], labels: list[str]) -> None:
    """Each rescale, applied in failure order over the earlier ones, must give a job Flink runs: named
    vertices, parallelism within 1..max parallelism, and equal parallelism across forward edges."""
    current = {v.id: v.parallelism for v in graph.vertices}
    for i in sorted(range(len(rescales)), key=lambda i: rescales[i].on_failure):
        w = labels[i]
        for vid, p in rescales[i].parallelism.items():
            if vid not in current:
                raise ScenarioError(f"{w}: no vertex {vid!r} to rescale; the vertices are {', '.join(current)}.")
            limit = graph.max_parallelism(vid)
            if not 1 <= p <= limit:
                raise ScenarioError(f"{w}: parallelism {p} of '{vid}' is outside 1..{limit}, its max parallelism "
                                    f"(which fixes its key groups); choose at most {limit}.")
            current[vid] = p
        check_channels(graph, current, w, "parallelism")
        for e in graph.edges:
            if e.partitioner == "forward" and current[e.source] != current[e.target]:
                raise ScenarioError(f"{w}: {e.describe()} is forward, which keeps equal parallelism on both ends, but the "
                                    f"rescale gives {e.source} {current[e.source]} and {e.target} {current[e.target]}; "
                                    "rescale both ends alike or use rebalance.")


def _interleaving_json(schedule: Schedule) -> dict[str, Any]:
    """The opt-in interleaving fields, only where they differ from the defaults (a scenario that does
    not use them writes the same JSON as before they existed)."""
    default = Schedule()
    return {name: getattr(schedule, name) for name in ("chooser", "pct_depth", "pct_horizon", "barrier_delay")
            if getattr(schedule, name) != getattr(default, name)}
