"""The state-side faults of the catalogue (storage, sinks, rescale, key groups, batch): each is caught.

Every case is a small frozen scenario on which the engine's checks are clean without the fault and
report the named violation with it (reference/faults: storage, sinks, rescale, keygroups, batch).
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

import pytest

from cutcheck.reference import Scenario, simulate
from cutcheck.reference.faults.catalogue import MUTANTS
from tests.reference.helpers import scenario

FAIL = [{"after_checkpoint": 2, "delay": 0, "target": "count[0]"}]
ON_DISK = {"storage": {"incremental": True, "inline_threshold": 0}}
INCREMENTAL = {"mode": "aligned", "interval": 40, "incremental": True}

TWO_HASH_EDGES = {  # two edges between one pair of vertices, one gate each
    "name": "two-hash-edges", "max_parallelism": 128,
    "vertices": [{"id": "src", "kind": "source", "parallelism": 2, "records": 800, "keys": 16, "splits": 2},
                 {"id": "count", "kind": "keyed_count", "parallelism": 2},
                 {"id": "sink", "kind": "sink", "parallelism": 1, "delivery": "exactly_once"}],
    "edges": [{"from": "src", "to": "count", "partitioner": "hash", "gate": 0},
              {"from": "src", "to": "count", "partitioner": "hash", "gate": 1},
              {"from": "count", "to": "sink", "partitioner": "rebalance"}]}

WIDE_SINK = {  # a committer at parallelism 3, downscaled to 1
    "name": "wide-sink", "max_parallelism": 128,
    "vertices": [{"id": "src", "kind": "source", "parallelism": 2, "records": 600, "keys": 16, "splits": 2},
                 {"id": "count", "kind": "keyed_count", "parallelism": 2},
                 {"id": "sink", "kind": "sink", "parallelism": 3, "delivery": "exactly_once"}],
    "edges": [{"from": "src", "to": "count", "partitioner": "hash"},
              {"from": "count", "to": "sink", "partitioner": "rebalance"}]}

# scenario_from_seed(1, storage=True): checkpoints expire under a slow sink after some subtasks wrote files
SEED_1_ON_DISK: dict[str, Any] = {"graph": {"name": "generated", "max_parallelism": 128, "vertices": [{"id": "src0", "kind": "source", "parallelism": 1, "records": 115, "keys": 4, "splits": 4, "seed": 97}, {"id": "union0", "kind": "union", "parallelism": 1}, {"id": "filter1", "kind": "filter", "parallelism": 1, "drop_every": 2}, {"id": "co_map2", "kind": "co_map", "parallelism": 1}, {"id": "sink", "kind": "sink", "parallelism": 4, "delivery": "exactly_once"}, {"id": "co_map2_out", "kind": "sink", "parallelism": 1, "delivery": "exactly_once"}], "edges": [{"from": "src0", "to": "union0", "partitioner": "custom", "exchange": "pipelined", "gate": 0}, {"from": "src0", "to": "union0", "partitioner": "custom", "exchange": "pipelined", "gate": 0}, {"from": "src0", "to": "union0", "partitioner": "custom", "exchange": "pipelined", "gate": 0}, {"from": "src0", "to": "filter1", "partitioner": "broadcast", "exchange": "pipelined", "gate": 0}, {"from": "union0", "to": "co_map2", "partitioner": "rescale", "exchange": "pipelined", "gate": 0}, {"from": "filter1", "to": "co_map2", "partitioner": "custom", "exchange": "pipelined", "gate": 1}, {"from": "union0", "to": "sink", "partitioner": "custom", "exchange": "pipelined", "gate": 0}, {"from": "co_map2", "to": "co_map2_out", "partitioner": "global", "exchange": "pipelined", "gate": 0}]}, "seed": 1272987056, "checkpoint": {"mode": "aligned_timeout", "interval": 19, "timeout": 14, "checkpoint_timeout": 133, "incremental": True, "retained": 1, "tolerable_failed": 2147483647}, "network": {"buffer_bytes": 320, "record_bytes": 64, "exclusive": 1, "floating": 4}, "schedule": {"policy": "backpressure", "slow": "co_map2_out", "slowdown": 8}, "failures": [], "rescales": [], "mutants": [], "max_steps": 200000, "storage": {"incremental": True, "inline_threshold": 0}}

SHORT_JOB = {
    "name": "short", "max_parallelism": 128,
    "vertices": [{"id": "src", "kind": "source", "parallelism": 2, "records": 60, "keys": 8, "splits": 4},
                 {"id": "count", "kind": "keyed_count", "parallelism": 2},
                 {"id": "sink", "kind": "sink", "parallelism": 1, "delivery": "exactly_once"}],
    "edges": [{"from": "src", "to": "count", "partitioner": "hash"},
              {"from": "count", "to": "sink", "partitioner": "rebalance"}]}

# fault -> (scenario, the invariant it breaks)
CASES: dict[str, tuple[dict[str, Any], str]] = {
    "committables-not-flushed-at-end-of-input": (  # the job ends before its first checkpoint
        scenario(SHORT_JOB, mode="aligned", interval=200), "EXACTLY_ONCE"),
    "txn-id-pool-reuse": (scenario("keyed-pipeline.json", mode="aligned"), "EXACTLY_ONCE"),
    "notify-commits-only-exact-checkpoint": (
        scenario("keyed-pipeline.json", seed=14, mode="aligned", slow="map", max_steps=60_000,
                 checkpoint={"mode": "aligned", "interval": 16, "max_concurrent": 2}), "COMMIT"),
    "committable-restamped-on-restore": (scenario("keyed-pipeline.json", mode="aligned", failures=FAIL), "COMMIT"),
    "channel-state-by-vertex-pair": (
        scenario(TWO_HASH_EDGES, slow="count", failures=FAIL, rescales=[{"on_failure": 0, "parallelism": {"count": 3}}]),
        "ORDER"),
    "rescale-filter-wrong-channel-count": (
        scenario("keyed-pipeline.json", slow="count", failures=FAIL,
                 rescales=[{"on_failure": 0, "parallelism": {"count": 3}}]), "OWNERSHIP"),
    "sink-committables-lost-on-rescale": (
        scenario(WIDE_SINK, mode="aligned", failures=FAIL, rescales=[{"on_failure": 0, "parallelism": {"sink": 1}}]),
        "EXACTLY_ONCE"),
    "registry-key-without-content": (
        scenario("keyed-pipeline.json", mode="aligned", failures=FAIL, checkpoint=INCREMENTAL, **ON_DISK), "REF"),
    "orphan-after-failed-upload": (SEED_1_ON_DISK, "NO_ORPHANS"),
    "blocking-partition-leak": (  # count[1] fails mid-run; its old partition must be released
        scenario("batch.json", seed=3, failures=[{"at_step": 1414, "target": "count[1]"}]), "REF"),
    "state-filed-under-stale-key-group": (
        scenario("keyed-pipeline.json", mode="aligned", failures=FAIL,
                 rescales=[{"on_failure": 0, "parallelism": {"count": 3}}]), "EXACTLY_ONCE"),
}


def _run(sdict: dict[str, Any], mutants: list[str], directory: Path) -> Any:
    s = dict(sdict, mutants=mutants)
    return simulate(Scenario.from_json(s), checkpoint_dir=directory if "storage" in s else None)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_fault_breaks_its_invariant_on_a_run_that_is_clean_without_it(name: str, tmp_path: Path) -> None:
    sdict, invariant = CASES[name]
    clean = _run(sdict, [], tmp_path / "clean")
    assert clean.ok, clean.violations
    faulty = _run(sdict, [name], tmp_path / "faulty")
    assert not faulty.ok
    assert invariant in {v["invariant"] for v in faulty.violations}, faulty.violations


def _restore_no_claim(tmp_path: Path, mutants: list[str], mode: str = "no_claim") -> Any:
    """Run 1 leaves incremental checkpoints; run 2 restores its latest (no_claim) and retains one."""
    first = scenario("keyed-pipeline.json", mode="aligned", checkpoint={**INCREMENTAL, "retained": 2}, **ON_DISK)
    assert _run(first, [], tmp_path / "one").ok
    latest = max(glob.glob(str(tmp_path / "one" / "*" / "chk-*")), key=lambda p: int(p.rsplit("-", 1)[1]))
    second = scenario("keyed-pipeline.json", mode="aligned", checkpoint={**INCREMENTAL, "retained": 1},
                      restore={"path": latest, "mode": mode}, **ON_DISK)
    return _run(second, mutants, tmp_path / "two")


@pytest.mark.parametrize("name", ["restored-shared-state-discarded", "no-claim-first-checkpoint-incremental"])
def test_a_no_claim_restore_never_deletes_the_restored_files(tmp_path: Path, name: str) -> None:
    assert _restore_no_claim(tmp_path / "clean", []).ok
    faulty = _restore_no_claim(tmp_path / "faulty", [name])
    assert [v["invariant"] for v in faulty.violations][:1] == ["REF"], faulty.violations
    assert "restored with no_claim" in faulty.violations[0]["detail"]


def test_every_state_fault_has_a_case() -> None:
    layers = {"storage", "sinks", "rescale", "keygroups", "batch"}
    from cutcheck.reference.faults.catalogue import CATALOGUE

    mine = {n for n, f in CATALOGUE.items() if f.layer in layers and f.key and n in MUTANTS}
    older = {"discard-on-abort", "committer-drops-late", "skip-stateless-reassignment", "no-rescale-filter"}
    covered = set(CASES) | {"restored-shared-state-discarded", "no-claim-first-checkpoint-incremental",
                           "checkpoint-id-restarts-after-restore"}
    assert mine - older <= covered, sorted(mine - older - covered)



@pytest.mark.parametrize("mode", ["no_claim", "claim"])
def test_checkpoint_id_restarts_after_restore_is_caught(tmp_path: Path, mode: str) -> None:
    assert _restore_no_claim(tmp_path / "clean", [], mode).ok
    faulty = _restore_no_claim(tmp_path / "faulty", ["checkpoint-id-restarts-after-restore"], mode)
    # Checkpoint 1 again is not above the restored one: CHECKPOINT_ID stops the run at that trigger.
    # (Before that check the run went on: the coordinator never completed a checkpoint again, the
    # committers' last committables waited forever, and only LIVENESS found it.)
    assert [v["invariant"] for v in faulty.violations] == ["CHECKPOINT_ID"], faulty.violations
    assert "checkpoint 1 was triggered after the restored checkpoint" in faulty.violations[0]["detail"]
