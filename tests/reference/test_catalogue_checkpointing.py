"""The faults of the barrier, savepoint and recovery layers, each on a frozen scenario: clean without
the fault, caught with it (a named violation, or a rescaled restore that Flink refuses)."""

from __future__ import annotations

from typing import Any

import pytest

from cutcheck.reference import Scenario, simulate
from cutcheck.reference.core.seams import Layer
from cutcheck.reference.faults.catalogue import CATALOGUE
from tests.reference.helpers import scenario

# Fail count[0] after checkpoint 1, then count[1] after checkpoint 3: the second failure restores a
# checkpoint taken while the first failure's recovered channel state was still being replayed.
TWICE = [{"after_checkpoint": 1, "delay": 0, "target": "count[0]"},
         {"after_checkpoint": 3, "delay": 0, "target": "count[1]"}]
TWICE_JOIN = [{**f, "target": f["target"].replace("count", "join")} for f in TWICE]
# Checkpoints that expire while their barriers are still queued upstream (a failed one does not fail the job).
EXPIRING = {"checkpoint_timeout": 40, "tolerable_failed": 1000}

# An idle source (no records) beside a busy one: finished at every trigger.
EMPTY_SOURCE = {"name": "empty-source", "max_parallelism": 128,
                "vertices": [{"id": "idle", "kind": "source", "parallelism": 1, "records": 0, "keys": 4, "splits": 1},
                             {"id": "src", "kind": "source", "parallelism": 2, "records": 300, "keys": 8, "splits": 4},
                             {"id": "map", "kind": "map", "parallelism": 2},
                             {"id": "sink", "kind": "sink", "parallelism": 1, "delivery": "exactly_once"}],
                "edges": [{"from": "idle", "to": "map", "partitioner": "rebalance"},
                          {"from": "src", "to": "map", "partitioner": "rebalance"},
                          {"from": "map", "to": "sink", "partitioner": "rebalance"}]}
# A source whose four splits a rescale from 2 to 3 subtasks redistributes: split 3 moves from old subtask 1
# to new subtask 2, while its in-flight records restore on the channel of new subtask 1 (ARBITRARY maps old
# 1 to new 1). The split's restored records and its new ones then sit on two channels of count's one gate.
HANDOVER = {"name": "handover", "max_parallelism": 128,
            "vertices": [{"id": "src", "kind": "source", "parallelism": 2, "records": 600, "keys": 3, "splits": 4},
                         {"id": "count", "kind": "keyed_count", "parallelism": 1},
                         {"id": "sink", "kind": "sink", "parallelism": 1, "delivery": "exactly_once"}],
            "edges": [{"from": "src", "to": "count", "partitioner": "hash"},
                      {"from": "count", "to": "sink", "partitioner": "forward"}]}
RESCALE_SOURCE = {"failures": [{"after_checkpoint": 1, "delay": 0, "target": "count[0]"}],
                  "rescales": [{"on_failure": 0, "parallelism": {"src": 3}}]}

# fault -> (scenario, the invariant that catches it)
VIOLATIONS: dict[str, tuple[dict[str, Any], str]] = {
    "savepoint-subsumes-last-checkpoint": (  # RETAINED: the store keeps the checkpoint a savepoint follows
        scenario("keyed-pipeline.json", mode="aligned", savepoints=[{"after_checkpoint": 1, "delay": 0}]), "RETAINED"),
    "eop-not-counted-in-alignment": (
        scenario("keyed-pipeline.json", mode="aligned", seed=1, max_steps=60_000), "LIVENESS"),
    "obsolete-barrier-ends-persisting": (
        scenario("union.json", mode="unaligned", seed=1, slow="count", failures=TWICE), "CUT"),
    "recovered-buffers-persisted-twice": (
        scenario("co-map.json", mode="unaligned", seed=1, slow="join", interval=15, failures=TWICE_JOIN), "CUT"),
    "recovering-channel-misses-checkpoint-start": (
        scenario("keyed-pipeline.json", mode="unaligned", seed=1, slow="count", interval=15, failures=TWICE), "CUT"),
    "terminal-counts-as-finished": (  # the empty source is finished at every trigger; its ack comes late
        scenario(EMPTY_SOURCE, mode="unaligned", seed=1), "CUT"),
    # TRIGGER: a checkpoint that some task can never take (no trigger, no barrier on its way) hangs
    "trigger-lost-on-finished-task": (
        scenario("keyed-pipeline.json", mode="aligned", seed=1, max_steps=60_000), "TRIGGER"),
    "predecessors-finished-not-triggered": (
        scenario("keyed-pipeline.json", mode="aligned", seed=1, max_steps=60_000), "TRIGGER"),
    "no-retrigger-after-predecessors-finish": (
        scenario("keyed-pipeline.json", mode="aligned", seed=1, max_steps=60_000), "TRIGGER"),
    "channel-overtakes-gate-recovery": (
        scenario(HANDOVER, mode="unaligned", seed=1, slow="count", buffer_bytes=256, floating=4,
                 **RESCALE_SOURCE), "ORDER"),
    "savepoint-as-priority-barrier": (
        scenario("keyed-pipeline.json", mode="unaligned", seed=1, slow="count",
                 savepoints=[{"after_checkpoint": 1, "delay": 0}]), "ALIGNED_EDGE"),
}
# Cancel markers of the expired checkpoints slow the job down (facts §4.10): at 40 steps too few complete.
VIOLATIONS["obsolete-barrier-ends-persisting"][0]["checkpoint"].update(EXPIRING, checkpoint_timeout=48)
VIOLATIONS["terminal-counts-as-finished"][0]["checkpoint"]["ack_delay"] = 30
# Faults of a bug class no single report names (no key): the same test, apart.
GENERIC: dict[str, tuple[dict[str, Any], str]] = {
    # BLOCKED: an aligned checkpoint expires while its alignment holds channels blocked.
    "abort-leaves-channels-blocked": (
        scenario("keyed-pipeline.json", mode="aligned", seed=1, slow="count"), "BLOCKED"),
}
GENERIC["abort-leaves-channels-blocked"][0]["checkpoint"].update(EXPIRING)
# CANCEL: a task that comes to an expired checkpoint sends no cancel marker to a consumer aligning on it.
GENERIC["cancel-marker-not-sent"] = (
    scenario("keyed-pipeline.json", mode="aligned", seed=1, slow="count"), "CANCEL")
GENERIC["cancel-marker-not-sent"][0]["checkpoint"].update(EXPIRING)
# TRIGGER: the unaligned snapshot whose collection a stale cancel marker ended is never acknowledged.
GENERIC["stale-cancel-marker-ends-alignment"] = (
    scenario("union.json", mode="unaligned", seed=1, slow="count", failures=TWICE), "TRIGGER")
GENERIC["stale-cancel-marker-ends-alignment"][0]["checkpoint"].update(EXPIRING)

FORWARD = {"name": "forward", "max_parallelism": 128,
           "vertices": [{"id": "src", "kind": "source", "parallelism": 2, "records": 600, "keys": 8, "splits": 4},
                        {"id": "map", "kind": "map", "parallelism": 2},
                        {"id": "sink", "kind": "sink", "parallelism": 1, "delivery": "exactly_once"}],
           "edges": [{"from": "src", "to": "map", "partitioner": "forward"},
                     {"from": "map", "to": "sink", "partitioner": "rebalance"}]}
RESCALE_FORWARD = {"failures": [{"after_checkpoint": 2, "delay": 0, "target": "map[0]"}],
                   "rescales": [{"on_failure": 0, "parallelism": {"src": 3, "map": 3}}]}
RESCALE_APPLY = {"failures": [{"after_checkpoint": 2, "delay": 0, "target": "apply[0]"}],
                 "rescales": [{"on_failure": 0, "parallelism": {"apply": 2}}]}

# fault -> a scenario whose rescaled restore Flink accepts; the fault puts channel state on an edge
# Flink keeps aligned, which ALIGNED_EDGE catches at the checkpoint (before the restore, which Flink
# would refuse: that in-flight data cannot be redistributed)
REFUSALS: dict[str, dict[str, Any]] = {
    "pointwise-edge-unaligned": scenario(FORWARD, mode="unaligned", seed=1, slow="map", **RESCALE_FORWARD),
    "timeoutable-bypasses-forced-alignment": scenario(FORWARD, mode="aligned_timeout", timeout=3, seed=1, slow="map",
                                                      **RESCALE_FORWARD),
    "broadcast-edge-unaligned": scenario("broadcast-state.json", mode="unaligned", seed=1, slow="apply",
                                         **RESCALE_APPLY),
}

MINE = {Layer.BARRIERS, Layer.SAVEPOINTS, Layer.RECOVERY}


def _with(sdict: dict[str, Any], *mutants: str) -> Scenario:
    return Scenario.from_json({**sdict, "mutants": list(mutants)})


@pytest.mark.parametrize("fault", sorted(VIOLATIONS) + sorted(GENERIC))
def test_fault_is_caught_by_its_invariant(fault: str) -> None:
    sdict, invariant = VIOLATIONS[fault] if fault in VIOLATIONS else GENERIC[fault]
    clean = simulate(_with(sdict))
    assert clean.ok, (clean.violations, clean.exactly_once)
    broken = simulate(_with(sdict, fault))
    assert [v["invariant"] for v in broken.violations][:1] == [invariant], broken.violations


@pytest.mark.parametrize("fault", sorted(REFUSALS))
def test_fault_puts_channel_state_on_an_edge_flink_keeps_aligned(fault: str) -> None:
    sdict = REFUSALS[fault]
    clean = simulate(_with(sdict))
    assert clean.ok and any(r.get("rescaled") for r in clean.restores), (clean.violations, clean.restores)
    broken = simulate(_with(sdict, fault))
    assert [v["invariant"] for v in broken.violations][:1] == ["ALIGNED_EDGE"], broken.violations


def test_every_fault_of_these_layers_has_a_frozen_scenario() -> None:
    covered = set(VIOLATIONS) | set(REFUSALS)
    ours = {n for n, f in CATALOGUE.items() if f.layer in MINE and f.key and n != "restart-failed-task-only"}
    older = {"early-checkpoint-in-recovery", "partial-input-state"}  # tests/reference/test_mutants.py
    assert ours - older == covered


def test_each_fault_names_a_distinct_mechanism() -> None:
    mechanisms = [CATALOGUE[n].mechanism for n in (*VIOLATIONS, *REFUSALS)]
    assert len(set(mechanisms)) == len(mechanisms)
    assert all(CATALOGUE[n].key.startswith("FLINK-") for n in (*VIOLATIONS, *REFUSALS))
