"""The one scenario generator (reference.fuzzing.generate): every feature drawn often, every scenario
valid, a seed names one scenario, swarm masks that mean what they say, and step budgets that fit."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cutcheck.model.errors import RestoreRefused
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.fuzzing.generate import (
    STORAGE_FEATURES,
    Feature,
    features_of,
    final_checkpoint_room,
    scenario_from_seed,
)
from cutcheck.reference.fuzzing.swarm import MASKABLE, REPORTED, UNLIMITED_TOLERABLE_FAILURES
from cutcheck.reference.fuzzing.verdicts import FOCI, restart_loop
from tests.strategies import scenario_dicts

SEEDS = range(300)
# Over SEEDS every feature is used by at least this many scenarios (the fewest, refusable rescales,
# were 40 when this was written; each maskable feature is on in about half the masks).
AT_LEAST = 20
# Controls, drawn only when asked for by name (an at-least-once sink duplicates after a failure).
ON_REQUEST = {Feature.AT_LEAST_ONCE_SINK}

# The keywords the campaigns and the tests pass (reference.fuzzing.campaigns.KILL_GEN and others).
GEN_OPTIONS: list[dict[str, Any]] = [
    {}, {"storage": True}, {"rescale": "always", "modes": ("unaligned",)}, {"modes": ("aligned",)},
    {"modes": ("at_least_once",), "batch": False}, {"rescale": False, "max_records": 120},
    {"mutants": ("no-output-state",)}, {"batch": True}, {"max_parallelism": 8},
    {"on": (Feature.AT_LEAST_ONCE_SINK,)},
]


def test_every_feature_is_used_by_many_seeds() -> None:
    counts = Counter(f for s in SEEDS for f in features_of(scenario_from_seed(s)))
    rare = {f.value: counts[f] for f in Feature if f not in ON_REQUEST and counts[f] < AT_LEAST}
    assert not rare, rare
    assert all(counts[f] == 0 for f in ON_REQUEST)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(GEN_OPTIONS).flatmap(lambda gen: scenario_dicts(**gen)))
def test_every_generated_scenario_is_valid(sdict: dict[str, Any]) -> None:
    scenario = Scenario.from_json(sdict)
    assert json.loads(json.dumps(sdict)) == sdict  # plain JSON: a counterexample file replays it
    if scenario.rescales or scenario.savepoints or "storage" in sdict:
        assert not any(e.exchange == "blocking" for e in scenario.graph.edges), "a batch job takes no checkpoints"


def test_a_seed_names_one_scenario() -> None:
    for seed in (0, 17, 299):
        assert scenario_from_seed(seed) == scenario_from_seed(seed)
        assert scenario_from_seed(seed, storage=True) == scenario_from_seed(seed, storage=True)
    assert len({json.dumps(scenario_from_seed(s), sort_keys=True) for s in range(50)}) == 50


# Features that, switched off, are absent from the scenario (the others can also arise by chance:
# a second failure drawn close to the first, say).
EXACT_OFF = [f for f in MASKABLE if f not in (Feature.FAILURE_IN_RECOVERY,)]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_feature_switched_off_is_not_used(data: Any) -> None:
    feature = data.draw(st.sampled_from(EXACT_OFF))
    sdict = data.draw(scenario_dicts(off=(feature,)))
    assert feature not in features_of(sdict)


# Features that, switched on in a streaming job checkpointing aligned, always show in its scenario.
EXACT_ON = [Feature.CONCURRENT, Feature.EXPIRY, Feature.RETAINED, Feature.SAVEPOINT, Feature.STORAGE,
            Feature.INCREMENTAL, Feature.INLINE_ZERO, Feature.CLAIM, Feature.BACKPRESSURE, Feature.RECORDS_PER_ACTION,
            Feature.DEBLOAT, Feature.OUTPUT_POOL, Feature.FAILURE, Feature.FULL_FAILOVER, Feature.MAX_PARALLELISM,
            Feature.EMPTY_SOURCE]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_feature_switched_on_is_used(data: Any) -> None:
    feature = data.draw(st.sampled_from(EXACT_ON))
    on = (feature, Feature.STORAGE) if feature in (Feature.INCREMENTAL, Feature.INLINE_ZERO, Feature.CLAIM) else (feature,)
    sdict = data.draw(scenario_dicts(on=on, batch=False, modes=("aligned",)))
    assert feature in features_of(sdict)
    batch = data.draw(scenario_dicts(batch=True))
    assert Feature.BLOCKING in features_of(batch)


def test_keywords_the_campaigns_pass_keep_their_meaning() -> None:
    for seed in range(40):
        stored = features_of(scenario_from_seed(seed, storage=True))
        assert set(STORAGE_FEATURES) <= stored and Feature.BLOCKING not in stored
        rescaling = scenario_from_seed(seed, rescale="always", modes=("unaligned",))
        assert rescaling["failures"] and rescaling["checkpoint"]["mode"] == "unaligned"
        assert Feature.REFUSABLE_RESCALE not in features_of(rescaling)
        assert not scenario_from_seed(seed, rescale=False)["rescales"]
        assert Feature.BLOCKING not in features_of(scenario_from_seed(seed, mutants=("no-output-state",)))
    # "always" rescales whenever the graph has a vertex Flink rescales: most seeds.
    assert sum(bool(scenario_from_seed(s, rescale="always")["rescales"]) for s in range(40)) >= 20


def test_features_of_a_written_scenario() -> None:
    graph = {"name": "g", "max_parallelism": 7,
             "vertices": [{"id": "src", "kind": "source", "parallelism": 2, "records": 10},
                          {"id": "count", "kind": "keyed_count", "parallelism": 2},
                          {"id": "sink", "kind": "sink", "parallelism": 1}],
             "edges": [{"from": "src", "to": "count", "partitioner": "hash", "gate": 0},
                       {"from": "src", "to": "count", "partitioner": "hash", "gate": 1},
                       {"from": "count", "to": "sink", "partitioner": "forward"}]}
    sdict = {"graph": graph, "checkpoint": {"mode": "unaligned", "interval": 20},
             "schedule": {"policy": "backpressure", "slow": "count", "slowdown": 5},
             "failures": [{"target": "count[1]", "at_step": 50}, {"target": "worker:0", "at_step": 60}],
             "rescales": [{"on_failure": 0, "parallelism": {"count": 1, "sink": 1}}],
             "savepoints": [{"at_step": 30}]}
    assert features_of(sdict) == {
        Feature.KEYED_COUNT, Feature.HASH, Feature.FORWARD, Feature.MULTI_EDGE, Feature.MAX_PARALLELISM,
        Feature.UNALIGNED, Feature.BACKPRESSURE, Feature.FAILURE, Feature.NONZERO_SUBTASK, Feature.WORKER_FAILURE,
        Feature.FAILURE_IN_RECOVERY, Feature.RESCALE, Feature.RESCALE_SEVERAL, Feature.REFUSABLE_RESCALE,
        Feature.SAVEPOINT}
    assert REPORTED.isdisjoint(MASKABLE)


@pytest.mark.parametrize("seed", range(0, 60, 3))
def test_clean_runs_finish_well_within_their_step_budget(seed: int) -> None:
    """LIVENESS must fire on a stuck job, not on a slow one: an unmutated run passes and uses at most
    half its budget (checkpoints kept in memory: the budget counts steps, not disk), unless it is a
    job Flink too would restart for ever on failed checkpoints (``restart_loop``)."""
    sdict = scenario_from_seed(seed)
    sdict.pop("storage", None)
    sdict.pop("resubmit", None)  # a second job needs the on-disk checkpoints of the first
    try:
        result = simulate(Scenario.from_json(sdict))
    except RestoreRefused:
        return  # a restore Flink refuses: a correct outcome, with no run to measure
    if restart_loop(result, result.violations):
        assert sdict["checkpoint"]["tolerable_failed"] < UNLIMITED_TOLERABLE_FAILURES
        return
    assert result.ok, result.violations
    assert result.summary()["steps"] <= sdict["max_steps"] // 2


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(sorted(FOCI)).flatmap(lambda focus: scenario_dicts(**FOCI[focus])))
def test_clean_runs_of_every_focus_finish_within_their_step_budget(sdict: dict[str, Any]) -> None:
    """The step budget bounds what a clean run needs, in every focus of the campaigns: records per
    action, slow vertices, short checkpoint timeouts and concurrent checkpoints included. A job that
    cannot end is a LIVENESS finding, so an expiry timeout no final checkpoint fits is one too."""
    sdict.pop("storage", None)
    sdict.pop("resubmit", None)  # a second job needs the on-disk checkpoints of the first
    try:
        result = simulate(Scenario.from_json(sdict))
    except RestoreRefused:
        return
    if restart_loop(result, result.violations):
        assert sdict["checkpoint"]["tolerable_failed"] < UNLIMITED_TOLERABLE_FAILURES
        return
    assert "LIVENESS" not in {v["invariant"] for v in result.violations}, result.summary()


# Drawn by a Hypothesis campaign on unmutated code (its expiry draws, before the timeouts had a floor):
# an aligned job of 2 subtasks, 3 concurrent checkpoints, a 3-step timeout and unlimited tolerance.
# Every checkpoint expired, even once the source had finished, so the exactly-once sink never got the
# final checkpoint it needs to finish: the job waited for ever, as a Flink job would.
NEVER_COMPLETES: dict[str, Any] = {
    "graph": {"name": "generated", "max_parallelism": 128, "vertices": [
        {"id": "src0", "kind": "source", "parallelism": 1, "records": 50, "keys": 1, "splits": 1, "seed": 2},
        {"id": "sink", "kind": "sink", "parallelism": 1, "delivery": "exactly_once"}],
        "edges": [{"from": "src0", "to": "sink", "partitioner": "custom", "exchange": "pipelined", "gate": 0}]},
    "seed": 21, "checkpoint": {"mode": "aligned", "interval": 1, "max_concurrent": 3, "checkpoint_timeout": 3,
                               "tolerable_failed": UNLIMITED_TOLERABLE_FAILURES},
    "network": {"buffer_bytes": 64, "record_bytes": 64, "exclusive": 2, "floating": 1},
    "schedule": {"policy": "backpressure", "slow": "src0", "slowdown": 2, "records_per_action": 2},
    "failures": [], "rescales": [], "mutants": [], "max_steps": 20_000}


def test_the_shortest_drawn_expiry_timeout_lets_the_final_checkpoint_complete() -> None:
    # Since aborts reach tasks as Flink's do (notified; cancel markers instead of barriers, facts §4.10),
    # the 3-step timeout above no longer hangs this job: its tasks all end, and the checkpoint triggered
    # then is taken by every task at once. The drawn room must still be enough on its own.
    room = final_checkpoint_room(subtasks=2, concurrent=3)
    ends = simulate(Scenario.from_json(dict(NEVER_COMPLETES, checkpoint=dict(NEVER_COMPLETES["checkpoint"],
                                                                            checkpoint_timeout=room))))
    assert ends.ok and ends.summary()["checkpoints_completed"] > 0, ends.violations


def test_expiry_timeouts_leave_room_for_the_final_checkpoint() -> None:
    """Every drawn expiry timeout is at least ``final_checkpoint_room`` of its job (checked above to be
    enough): checkpoints expire while records flow, never for good."""
    short = []
    for seed in range(300):
        sdict = scenario_from_seed(seed, on=(Feature.EXPIRY, Feature.CONCURRENT), modes=("aligned",),
                                   max_parallelism=1, max_records=40)
        ck = sdict["checkpoint"]
        subtasks = sum(v["parallelism"] for v in sdict["graph"]["vertices"])
        if ck["checkpoint_timeout"] < final_checkpoint_room(subtasks, ck.get("max_concurrent", 1)):
            short.append((seed, ck))
    assert not short, short[:3]
