"""`cutcheck flink run` on a real Flink MiniCluster: unaligned checkpoints, a failure, a 2 -> 3 rescale;
`cutcheck validate` reads the run directory unchanged and catches one flipped committed row."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from cutcheck.cli import app
from tests.flink.helpers import EXAMPLES, FLINK_MARKS

pytestmark = FLINK_MARKS

RECORDS = 3000


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def flink_run(shared_dir: Any) -> tuple[Path, dict[str, Any]]:
    def build(base: Path) -> None:
        result = _invoke("flink", "run", str(EXAMPLES / "keyed-pipeline.json"), "--out", str(base / "run"),
                         "--mode", "unaligned", "--fail-after-checkpoint", "2", "--rescale", "count=3",
                         "--records", str(RECORDS), "--json", str(base / "summary.json"))
        assert result.exit_code == 0, result.output + str(result.exception)

    base = shared_dir("flink-keyed-unaligned-rescale", build)
    return base / "run", json.loads((base / "summary.json").read_text())


def test_run_directory_is_whole(flink_run: tuple[Path, dict[str, Any]]) -> None:
    run_dir, _ = flink_run
    for name in ("input", "output", "checkpoints", "events", "run.json"):
        assert (run_dir / name).exists(), name
    leftovers = [*run_dir.parent.glob("run.tmp-*"), *run_dir.parent.glob(".run.tmp-*"), *run_dir.parent.glob(".run.old-*")]
    assert not leftovers, "nothing is left beside the run directory"
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["engine"] == "flink" and meta["step_unit"] == "ms"
    assert meta["flink"]["checkpoint_dir"] == str((run_dir / "flink" / "checkpoints").resolve())
    assert [j["parallelism"]["count"] for j in meta["flink"]["jobs"]] == [2, 3]


def test_retained_checkpoints_in_the_run_directory_are_restorable(flink_run: tuple[Path, dict[str, Any]]) -> None:
    """The run is written where it stays (Flink's _metadata may name files by absolute path), so the
    checkpoints it retained pass `storage ls` without re-rooting anything."""
    run_dir, _ = flink_run
    listed = _invoke("storage", "ls", str(run_dir / "flink" / "checkpoints"))
    assert listed.exit_code == 0, listed.output
    assert "NOT RESTORABLE" not in listed.output and "chk-" in listed.output


def test_unaligned_checkpoints_failure_and_rescale(flink_run: tuple[Path, dict[str, Any]]) -> None:
    run_dir, s = flink_run
    assert s["exactly_once"]["ok"] is True
    assert s["restarts"] == 1
    assert s["failure"]["vertex_subtask"].startswith("count[")
    assert s["checkpoints_completed"] >= 3
    assert s["unaligned_checkpoints"] >= 1
    assert s["persisted_bytes"] > 0, "backpressure made in-flight data that unaligned checkpoints persisted"
    (restore,) = s["restores"]
    assert restore["rescaled"] and restore["parallelism"]["count"] == 3 and restore["checkpoint"] >= 2
    cps = pq.read_table(run_dir / "checkpoints").to_pylist()
    assert {c["kind"] for c in cps} == {"checkpoint"} and {c["attempt"] for c in cps} == {0, 1}
    assert all(c["inflight_bytes"] >= 0 and c["end_step"] >= c["trigger_step"] for c in cps)
    kinds = [e["kind"] for e in pq.read_table(run_dir / "events").to_pylist()]
    for kind in ("submit", "arm", "failure", "restore", "rescale", "finished"):
        assert kind in kinds, kind
    assert kinds.index("arm") < kinds.index("failure") < kinds.index("restore")


def test_output_is_committed_files_only(flink_run: tuple[Path, dict[str, Any]]) -> None:
    run_dir, _ = flink_run
    out = pq.read_table(run_dir / "output").to_pylist()
    inp = pq.read_table(run_dir / "input").to_pylist()
    assert len(inp) == RECORDS and len(out) == RECORDS
    assert all(".inprogress" not in r["txn"] and not r["txn"].startswith(".") for r in out)
    assert {r["counter"] for r in out} == {"count/sink"}
    # rids, keys, splits and offsets are the engine's definition (reference.runtime.records.SourceLayout)
    by_rid = {r["rid"]: r for r in inp}
    assert all((by_rid[r["rid"]]["key"], by_rid[r["rid"]]["split"], by_rid[r["rid"]]["offset"]) ==
               (r["key"], r["split"], r["offset"]) for r in out)


def test_validate_finds_exactly_once(flink_run: tuple[Path, dict[str, Any]], spark_for_flink: Any, tmp_path: Path) -> None:
    run_dir, _ = flink_run
    result = _invoke("validate", str(run_dir), "--json", str(tmp_path / "report.json"))
    assert result.exit_code == 0, result.output
    assert "exactly-once holds" in result.output
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["records_in"] == RECORDS and report["records_out"] == RECORDS
    assert "count_gaps" in report["checks_run"], "the keyed counts were checked 1..n per key"


def test_validate_catches_one_flipped_row(flink_run: tuple[Path, dict[str, Any]], spark_for_flink: Any,
                                          tmp_path: Path) -> None:
    run_dir, _ = flink_run
    copy = tmp_path / "flipped"
    for name in ("input", "output", "run.json"):
        src = run_dir / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, copy / name)
    part = sorted((copy / "output").glob("*.parquet"))[0]
    table = pq.read_table(part)
    rows = table.to_pylist()
    victim, twin = rows[0]["rid"], rows[1]["rid"]
    rows[0]["rid"] = twin  # one committed row now claims another record: one lost, one duplicated
    pq.write_table(type(table).from_pylist(rows, schema=table.schema), part)
    result = _invoke("validate", str(copy), "--json", str(tmp_path / "report.json"))
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["lost"] == 1 and report["duplicated"] == 1
    assert report["samples"]["lost"] == [victim] and report["samples"]["duplicated"] == [twin]
