"""`cutcheck flink conform`: generated graphs within what Flink runs, each on the engine and on Flink with
a failure (and a rescale where Flink allows one); the verdicts and refusals agree. CI runs two graphs
(issue 16's acceptance, five, is the same command with --graphs 5)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.model.graph import JobGraph
from tests.flink.helpers import FLINK_MARKS

pytestmark = FLINK_MARKS


def test_conform_two_generated_graphs_agree(tmp_path: Path) -> None:
    out = tmp_path / "conform"
    result = CliRunner().invoke(app, ["flink", "conform", "--graphs", "2", "--seed", "0", "--out", str(out),
                                      "--json", str(tmp_path / "c.json")])
    report = json.loads((tmp_path / "c.json").read_text())
    assert result.exit_code == 0, result.output + json.dumps(report["rows"], indent=1)
    assert report["graphs"] == 2 and report["agreed"] == 2 and report["all_agree"]
    assert "flink conform: 2 graphs from seed 0, 2 agree" in result.output
    for row in report["rows"]:
        assert row["engine_verdict"] == row["flink_verdict"] and row["error"] is None and row["replay"] is None
        assert JobGraph.from_json(Path(row["graph_file"])).name == row["graph"]  # replayable
        engine, flink = row["checkpoints"]
        assert engine >= 1 and flink >= 1
    assert report["graphs_per_minute"] > 0
    assert json.loads((out / "run.json").read_text())["agreed"] == 2
