"""`cutcheck flink compare`: the same graph on the engine and on Flink, with a failure that Flink's
restart strategy recovers in place (no rescale), under aligned checkpoints with a timeout."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from cli import app
from tests.flink.helpers import EXAMPLES, FLINK_MARKS

pytestmark = FLINK_MARKS


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
    assert len(flink["inflight"]) == len(flink["persisted"]) == len(flink["alignment"]) == flink["completed"]
    assert flink["run_dir"] is None, "without --out the Flink run directory is temporary"
