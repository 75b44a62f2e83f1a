"""`cutcheck flink compare`: the same graph on the engine and on Flink. With a failure and a rescale
(issue 16's acceptance), the engine's interval is calibrated on its real run until both sides complete
checkpoints within 20 % of each other; with a failure Flink's restart strategy recovers in place (no
rescale), under aligned checkpoints with a timeout."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from cutcheck.cli import app
from tests.flink.helpers import EXAMPLES, FLINK_MARKS

pytestmark = FLINK_MARKS


def test_compare_keyed_pipeline_failure_and_rescale_within_twenty_percent(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["flink", "compare", str(EXAMPLES / "keyed-pipeline.json"),
                                      "--fail-after-checkpoint", "2", "--rescale", "count=3", "--records", "2000",
                                      "--json", str(tmp_path / "cmp.json")])
    assert result.exit_code == 0, result.output + str(result.exception)
    for words in ("comparable", "within 20%", "no: steps against milliseconds", "share of in-flight data persisted"):
        assert words in result.output
    cmp = json.loads((tmp_path / "cmp.json").read_text())
    engine, flink = cmp["engine"], cmp["flink"]
    assert cmp["agree"] and engine["verdict"] == flink["verdict"] == "holds"
    assert engine["restarts"] == 1 and flink["restarts"] == 1
    assert cmp["calibrated"], cmp["calibration"]
    lo, hi = sorted((engine["completed"], flink["completed"]))
    assert lo >= 0.8 * hi and 0.8 <= cmp["checkpoint_ratio"] <= 1.25
    assert cmp["calibration"][-1]["interval_steps"] >= 2 and len(cmp["calibration"]) <= 24
    assert any(c["interval_steps"] == cmp["engine_interval_steps"] and c["completed"] == engine["completed"]
               for c in cmp["calibration"]), "the reported run is one of the calibration runs"


def test_compare_union_aligned_timeout_with_in_place_restart(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["flink", "compare", str(EXAMPLES / "union.json"), "--mode", "aligned_timeout",
                                      "--fail-after-checkpoint", "1", "--records", "3000",
                                      "--json", str(tmp_path / "cmp.json")])
    assert result.exit_code == 0, result.output + str(result.exception)
    for words in ("checkpoints completed", "exactly-once", "per completed checkpoint", "engine", "Flink"):
        assert words in result.output
    cmp = json.loads((tmp_path / "cmp.json").read_text())
    engine, flink = cmp["engine"], cmp["flink"]
    assert cmp["agree"] and engine["exactly_once"]["ok"] and flink["exactly_once"]["ok"]
    assert engine["restarts"] == 1 and flink["restarts"] == 1
    assert engine["completed"] >= 1 and flink["completed"] >= 1
    assert cmp["calibrated"], cmp["calibration"]
    assert len(flink["inflight"]) == len(flink["persisted"]) == len(flink["alignment"]) == flink["completed"]
    assert flink["run_dir"] is None, "without --out the Flink run directory is temporary"
