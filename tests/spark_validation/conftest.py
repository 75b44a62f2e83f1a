"""One SparkSession for the whole test session, and helpers that write tiny log datasets."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from cutcheck.model import logschema  # noqa: E402
from cutcheck.model.errors import EnvironmentProblem  # noqa: E402

_ARROW = {"int64": pa.int64(), "int32": pa.int32(), "string": pa.string()}

WriteLogs = Callable[..., Path]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from cutcheck.spark_validation.session import build_session, find_java

    try:
        find_java()
    except EnvironmentProblem as exc:
        pytest.skip(str(exc))
    # Two cores and tiny data: two shuffle partitions keep every stage a couple of tasks.
    session = build_session(
        master="local[2]", driver_memory="1g", app_name="cutcheck-tests", shuffle_partitions=2
    )
    yield session
    session.stop()


def arrow_table(dataset: str, rows: list[dict[str, Any]], columns: list[str] | None = None) -> pa.Table:
    """A table with logschema types; ``columns`` defaults to the keys used by ``rows`` (schema order)."""
    if columns is None:
        used = {k for r in rows for k in r}
        columns = [c for c in logschema.column_names(dataset) if c in used] or ["rid"]
    types = {name: _ARROW[t] for name, t, _ in logschema.DATASETS[dataset]}
    return pa.table({c: pa.array([r.get(c) for r in rows], type=types[c]) for c in columns})


@pytest.fixture
def write_logs(tmp_path: Path) -> WriteLogs:
    """write_logs(input_rows, output_rows, input_columns=None, output_columns=None) -> run dir (Parquet)."""
    counter = iter(range(10_000))

    def write(
        inp: list[dict[str, Any]],
        out: list[dict[str, Any]],
        input_columns: list[str] | None = None,
        output_columns: list[str] | None = None,
    ) -> Path:
        run = tmp_path / f"run{next(counter)}"
        for name, rows, cols in (("input", inp, input_columns), ("output", out, output_columns)):
            (run / name).mkdir(parents=True)
            pq.write_table(arrow_table(name, rows, cols), run / name / "part-0.parquet")
        (run / "run.json").write_text(json.dumps({"kind": "test"}))
        return run

    return write


@pytest.fixture(scope="session")
def planted_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Small synthetic logs with every kind of planted fault (see spark_validation.synth)."""
    from cutcheck.spark_validation import synthesize

    out = tmp_path_factory.mktemp("synth") / "planted"
    synthesize(
        out,
        3000,
        keys=12,
        splits=3,
        dup_rate=0.02,
        loss_rate=0.02,
        reorder_rate=0.02,
        phantoms=4,
        count_gaps=3,
        double_commits=2,
        seed=11,
    )
    return out


@pytest.fixture(scope="session")
def clean_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from cutcheck.spark_validation import synthesize

    out = tmp_path_factory.mktemp("synth") / "clean"
    synthesize(out, 1500, keys=10, splits=2, seed=5)
    return out
