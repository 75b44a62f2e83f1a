"""Real Flink on the topologies of issue 23, each run tiny (a few hundred records, parallelism <= 2):
two-input and broadcast operators, a keyed broadcast, several edges between one pair, a vertex whose
outputs mix exchange types, a custom edge under unaligned checkpoints, explicit max parallelism,
chaining off, and restores from canonical and native savepoints in claim and no_claim mode."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from cutcheck.flink_bridge import runlog, runner
from cutcheck.flink_bridge.runner import RunOptions
from tests.flink.helpers import FLINK_MARKS

pytestmark = FLINK_MARKS

GRAPH: dict[str, Any] = {
    "name": "topologies",
    "vertices": [
        {"id": "a", "kind": "source", "parallelism": 2, "records": 300, "keys": 8, "splits": 2},
        {"id": "b", "kind": "source", "parallelism": 1, "records": 200, "keys": 8, "seed": 3},
        {"id": "cm", "kind": "co_map", "parallelism": 2},
        {"id": "bs", "kind": "broadcast_state", "parallelism": 2},
        {"id": "bk", "kind": "broadcast_state", "parallelism": 2, "max_parallelism": 64},
        {"id": "m", "kind": "map", "parallelism": 2},
        {"id": "c", "kind": "keyed_count", "parallelism": 2},
        {"id": "k", "kind": "sink", "parallelism": 2},
        {"id": "k2", "kind": "sink", "parallelism": 1}],
    "edges": [
        {"from": "a", "to": "cm", "partitioner": "rebalance"},   # a's outputs: rebalance and hash (mixed)
        {"from": "b", "to": "cm", "partitioner": "rescale"},
        {"from": "cm", "to": "bs", "partitioner": "custom"},     # custom under unaligned checkpoints
        {"from": "b", "to": "bs", "partitioner": "broadcast"},
        {"from": "bs", "to": "m", "partitioner": "forward"},
        {"from": "m", "to": "c", "partitioner": "hash"},         # two edges between m and c
        {"from": "m", "to": "c", "partitioner": "hash"},
        {"from": "c", "to": "k", "partitioner": "rebalance"},
        {"from": "a", "to": "bk", "partitioner": "hash"},        # keyed broadcast
        {"from": "b", "to": "bk", "partitioner": "broadcast"},
        {"from": "bk", "to": "k2", "partitioner": "rebalance"}]}


@pytest.mark.parametrize(("fmt", "claim", "incremental", "chaining"), [
    ("native", "claim", True, False),
    ("canonical", "no_claim", False, True),
])
def test_savepoint_restore_rescaled_is_exactly_once(fmt: str, claim: str, incremental: bool, chaining: bool,
                                                     tmp_path: Path) -> None:
    opts = RunOptions(mode="unaligned", savepoint=fmt, stop_after=1, rescale={"c": 1}, claim_mode=claim,
                      incremental=incremental, chaining=chaining, delay_ms=1.0, retained=1)
    run = runner.run(GRAPH, tmp_path / "flink", opts)
    eo, rows = runlog.verdict(run.graph, run)
    assert eo.ok and rows > 0, eo.to_json()
    assert [j.stats.state for j in run.jobs] == ["FINISHED", "FINISHED"]
    assert run.savepoint and run.jobs[1].restored_from and "savepoint" in run.jobs[1].restored_from
    assert run.jobs[1].graph.vertex("c").parallelism == 1
    assert any(cp.is_savepoint for cp in run.jobs[0].stats.checkpoints)
    assert any(cp.unaligned for j in run.jobs for cp in j.stats.checkpoints), "the custom edge did not stop UC elsewhere"
    later = [cp for cp in run.jobs[1].stats.checkpoints if cp.status == "COMPLETED"]
    metadata = os.path.join(run.savepoint, "_metadata")
    if later and claim == "claim":  # one retained: the restored savepoint is subsumed, and Flink owns it
        assert not os.path.exists(metadata), "claim: Flink discards the subsumed savepoint"
    if claim == "no_claim":
        assert os.path.exists(metadata), "no_claim: Flink never deletes the restored snapshot"


def test_taskmanager_killed_mid_checkpoint_recovers_exactly_once(tmp_path: Path) -> None:
    graph = {"name": "kill", "vertices": [
        {"id": "src", "kind": "source", "parallelism": 2, "records": 800, "keys": 8, "splits": 2},
        {"id": "count", "kind": "keyed_count", "parallelism": 2},
        {"id": "sink", "kind": "sink", "parallelism": 1}],
        "edges": [{"from": "src", "to": "count", "partitioner": "hash"},
                  {"from": "count", "to": "sink", "partitioner": "rebalance"}]}
    run = runner.run(graph, tmp_path / "flink", RunOptions(mode="unaligned", kill_after=1, delay_ms=2.0))
    assert run.fired and run.fired.startswith("TaskManager JVM") and "during checkpoint" in run.fired
    killed_during = int(run.fired.rsplit(" ", 1)[1])
    assert killed_during > 1
    stats = run.jobs[0].stats
    assert stats.state == "FINISHED" and stats.restored, "Flink restored the job in place on the new TaskManager"
    # The checkpoint in progress when the kill was sent may still complete: its acknowledgements can reach
    # the JobManager before the JVM dies (seen under load). Flink then restores it, rightly; never a newer one.
    assert int(stats.restored["id"]) <= killed_during, "from a checkpoint completed by the kill"
    eo, rows = runlog.verdict(run.graph, run)
    assert eo.ok and rows == 800, eo.to_json()


@pytest.mark.parametrize("claim", ["claim", "no_claim"])
def test_rescaled_restore_from_a_retained_checkpoint_in_each_claim_mode(claim: str, tmp_path: Path) -> None:
    opts = RunOptions(mode="unaligned", fail_after=1, rescale={"c": 1}, claim_mode=claim, delay_ms=1.0, retained=1)
    run = runner.run(GRAPH, tmp_path / "flink", opts)
    eo, _ = runlog.verdict(run.graph, run)
    assert eo.ok, eo.to_json()
    restored = run.jobs[1].restored_from
    assert restored and "/chk-" in restored
    metadata = os.path.join(restored.removeprefix("file://"), "_metadata")
    if [cp for cp in run.jobs[1].stats.checkpoints if cp.status == "COMPLETED"]:
        # one retained: the restored checkpoint is subsumed; only a claimed one is Flink's to delete
        assert os.path.exists(metadata) == (claim == "no_claim"), claim
