"""Spark and the engine's own oracle give the same figures on the engine's recovery logs, not only the
same verdict: at-least-once runs with a failure and a rescale duplicate records and break keyed
counts, and both count the same duplicated rows and the same (counter, key) groups with count gaps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cutcheck.reference import Scenario, simulate
from cutcheck.spark_validation import validate

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("seed", [1, 2])
def test_engine_and_spark_agree_on_every_figure(seed: int, tmp_path: Path, spark: Any) -> None:
    raw = json.loads((ROOT / "examples/scenarios/keyed-rescale.json").read_text())
    raw["graph"] = str(ROOT / "examples/keyed-pipeline.json")
    raw["checkpoint"]["mode"] = "at_least_once"
    raw["seed"] = seed
    result = simulate(Scenario.from_json(raw), out_dir=tmp_path / "run")
    eo = result.exactly_once
    assert eo.duplicated > 0 and eo.count_gaps > 0, "the control should break exactly-once"
    report = validate(run_dir=result.run_dir)
    assert (report.lost, report.duplicated, report.phantom, report.count_gaps) == (
        eo.lost, eo.duplicated, eo.phantom, eo.count_gaps)
    assert report.ok == eo.ok is False
