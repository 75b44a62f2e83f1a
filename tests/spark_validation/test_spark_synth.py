"""Synthetic logs: deterministic from the seed, faults exactly as planted.json says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.spark


def _rows(path: Path) -> list[tuple[Any, ...]]:
    table = pq.read_table(path)
    return sorted(zip(*[table.column(c).to_pylist() for c in table.column_names], strict=True), key=repr)


def test_same_seed_same_logs(tmp_path: Path, spark: Any) -> None:
    from cutcheck.spark_validation import synthesize

    kw = dict(keys=4, splits=2, loss_rate=0.05, dup_rate=0.05, reorder_rate=0.05, phantoms=1, count_gaps=1,
              double_commits=1)  # fmt: skip
    a = synthesize(tmp_path / "a", 300, seed=4, **kw)
    b = synthesize(tmp_path / "b", 300, seed=4, **kw)
    synthesize(tmp_path / "c", 300, seed=5, **kw)
    assert a.faults() == b.faults()
    for name in ("input", "output"):
        assert _rows(tmp_path / "a" / name) == _rows(tmp_path / "b" / name)
    assert _rows(tmp_path / "a" / "output") != _rows(tmp_path / "c" / "output")
    planted = json.loads((tmp_path / "a" / "planted.json").read_text())
    assert {k: planted[k] for k in a.faults()} == a.faults()
    out = pq.read_table(tmp_path / "a" / "output")
    assert out.num_rows == a.output_rows
    from cutcheck.model import logschema

    assert out.column_names == logschema.column_names("output")
    assert pq.read_table(tmp_path / "a" / "input").column_names == [
        c for c in logschema.column_names("input") if c != "copies"
    ]
