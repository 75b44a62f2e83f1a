"""`cutcheck flink hunt` on the installed Flink: one replay and a one-case campaign (each one MiniCluster run)."""

from __future__ import annotations

import json
from pathlib import Path

from cutcheck.flink_bridge.hunt import FlinkCaseRunner, HuntCase, Kind
from cutcheck.flink_bridge.hunt.campaign import evaluate
from tests.flink.helpers import FLINK_MARKS

pytestmark = FLINK_MARKS


def reproducer() -> HuntCase:
    """What `flink hunt` shrank FLINK-38267 to on 2.1.0 (seed 0): a map whose outputs are a rebalance and a
    rescale exchange, rescaled from 1 to 2 on the restore from an unaligned checkpoint."""
    graph = {"name": "flink-38267", "vertices": [
        {"id": "src0", "kind": "source", "parallelism": 1, "records": 1000, "keys": 12, "splits": 3, "seed": 18},
        {"id": "map0", "kind": "map", "parallelism": 1}, {"id": "sink", "kind": "sink", "parallelism": 1},
        {"id": "branch_out", "kind": "sink", "parallelism": 1}],
        "edges": [{"from": "src0", "to": "map0", "partitioner": "global"},
                  {"from": "map0", "to": "sink", "partitioner": "rebalance"},
                  {"from": "map0", "to": "branch_out", "partitioner": "rescale"}]}
    return HuntCase(graph, "unaligned", 1, {"map0": 2})


def test_the_mixed_exchange_rescale_is_judged_on_the_installed_release() -> None:
    """FLINK-38267's shape: a release with the fix restores it (no disagreement); one without fails the
    restore with the pointwise-partitioner exception, classed as a restore the model accepts."""
    runner = FlinkCaseRunner(None)
    ev = evaluate(runner, reproducer())
    assert ev.observation.inconclusive is None, ev.observation.inconclusive
    assert ev.prediction.refused is None and ev.prediction.exactly_once
    assert ev.observation.completed >= 1 and ev.observation.missing_files == []
    if ev.found:
        assert [d.kind for d in ev.found] == [Kind.RESTORE_FAILED]
        assert "Cannot rescale the given pointwise partitioner" in ev.found[0].evidence
    else:
        assert ev.observation.exactly_once["ok"] and ev.observation.unaligned_checkpoints


def test_a_one_case_hunt_writes_its_report(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cutcheck.cli import app

    report = tmp_path / "hunt.json"
    result = CliRunner().invoke(app, ["flink", "hunt", "--cases", "1", "--minutes", "5", "--seed", "1",
                                      "--json", str(report)])
    assert result.exit_code in (0, 1, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    data = json.loads(report.read_text()) if report.exists() else None
    assert data is not None and data["cases"] == 1, result.output
    if result.exit_code == 2:  # the one case could not be judged: said in one sentence, no finding claimed
        assert "could be judged" in result.output and data["conclusive"] == 0 and data["findings"] == []
        return
    assert data["conclusive"] == 1
    assert data["time"]["run"] > 0 and data["time"]["predict"] > 0 and "graphs per minute" in result.output
    assert (result.exit_code == 1) == any(not f["departure"] for f in data["findings"])


def keyed(**dims: object) -> HuntCase:
    """A keyed count behind a hash exchange, rescaled on the restore: the restore's dimensions on a tiny job."""
    graph = {"name": "keyed-restore", "vertices": [
        {"id": "src", "kind": "source", "parallelism": 2, "records": 1500, "keys": 8, "splits": 4},
        {"id": "count", "kind": "keyed_count", "parallelism": 2}, {"id": "map", "kind": "map", "parallelism": 2},
        {"id": "sink", "kind": "sink", "parallelism": 1}],
        "edges": [{"from": "src", "to": "count", "partitioner": "hash"}, {"from": "count", "to": "map", "partitioner": "forward"},
                  {"from": "map", "to": "sink", "partitioner": "rebalance"}]}
    return HuntCase(graph, "unaligned", 1, {"count": 3, "map": 3}, **dims)  # type: ignore[arg-type]


def test_a_claimed_native_savepoint_with_rocksdb_and_a_later_failure_agrees_with_the_model() -> None:
    """Stop with a native savepoint, resubmit it rescaled in claim mode with RocksDB incremental and chaining
    off, fail once the restored job completed a checkpoint: the model predicts an accepted restore,
    exactly-once output, counts 1..n and every retained file present; a fixed release agrees."""
    case = keyed(savepoint="native", claim_mode="claim", fail_restored=1, incremental=True, chaining=False)
    ev = evaluate(FlinkCaseRunner(None), case)
    assert ev.observation.inconclusive is None, ev.observation.inconclusive
    assert ev.prediction.refused is None and ev.prediction.exactly_once and ev.prediction.counts_hold
    assert ev.found == [], [d.to_json() for d in ev.found]


def test_a_changed_max_parallelism_of_keyed_state_is_refused_as_predicted() -> None:
    ev = evaluate(FlinkCaseRunner(None), keyed(max_parallelism_after={"count": 64}))
    assert ev.prediction.refused is not None
    assert ev.observation.restore_failed is not None, ev.observation.inconclusive
    assert "max" in ev.observation.restore_failed.lower() or "parallelism" in ev.observation.restore_failed.lower()
    assert ev.found == []
