"""validate reads header-less CSV with text columns (issue 26, item 7): --header/--no-header decide,
otherwise the guess is said; ids up to int64's maximum; a NaN, an overflow or a word in an integer
column is one sentence naming the file, the line and the column."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cutcheck.cli import app

pytestmark = pytest.mark.spark

INT64_MAX = 2**63 - 1
SINK = "rid,key,value,count,split,offset,subtask"


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def _error(result: Any) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def _sink(tmp_path: Path, rows: list[str]) -> tuple[Path, Path]:
    """An input CSV with a header (rids of ``rows``) and a header-less sink part file of ``rows``."""
    rids = [r.split(",")[0] for r in rows]
    (tmp_path / "in.csv").write_text("rid,key\n" + "".join(f"{r},0\n" for r in rids))
    (tmp_path / "sink").mkdir()
    (tmp_path / "sink" / "part-a-0").write_text("".join(r + "\n" for r in rows))
    return tmp_path / "in.csv", tmp_path / "sink"


def test_header_less_sink_with_text_columns_and_int64_ids(tmp_path: Path, spark: Any) -> None:
    # the value and subtask columns hold text, which made the first line look like a header
    rows = [f"{rid},7,order-{i},{i + 1},0,{i},sink-0" for i, rid in enumerate([1, 2, INT64_MAX])]
    inp, sink = _sink(tmp_path, rows)
    report = tmp_path / "r.json"
    result = _invoke("validate", "--input", str(inp), "--output", str(sink), "--columns", SINK.replace(
        "value", "text"), "--json", str(report))
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    assert (data["records_in"], data["records_out"], data["lost"], data["phantom"]) == (3, 3, 0, 0)
    assert data["examined"]["count_gaps"] == 3  # key and count were read
    notes = [ln for ln in result.stdout.splitlines() if ln.startswith("note: ")]
    assert len(notes) == 2, result.stdout
    assert "part-a-0: its first line (1,7,order-0," in notes[1] and "taken for data, not a header" in notes[1]
    assert "--header says otherwise" in notes[1]
    assert "in.csv" in notes[0] and "taken for a header" in notes[0] and "--no-input-header" in notes[0]
    assert data["notes"] == [n.removeprefix("note: ") for n in notes]


def test_header_and_no_header_override_the_guess(tmp_path: Path, spark: Any) -> None:
    rows = [f"{rid},7,1,{rid},0,{rid},s" for rid in (1, 2, 3)]
    inp, sink = _sink(tmp_path, rows)
    # --header: the first line is taken for a header (and skipped) although it holds data
    report = tmp_path / "r.json"
    result = _invoke("validate", "--input", str(inp), "--output", str(sink), "--columns", SINK, "--header",
                     "--json", str(report))
    assert result.exit_code == 1, result.output
    data = json.loads(report.read_text())
    assert (data["records_out"], data["lost"]) == (2, 1) and data["samples"]["lost"] == [1]
    assert data["notes"] == [json.loads(report.read_text())["notes"][0]] and "input" in data["notes"][0]
    assert not any("part-a-0" in ln for ln in result.stdout.splitlines() if ln.startswith("note: "))
    # --no-input-header on an input whose first line is a header: that line's rid is not an integer
    line = _error(_invoke("validate", "--input", str(inp), "--output", str(sink), "--columns", SINK,
                          "--input-columns", "rid,key", "--no-input-header"))
    assert "in.csv" in line and "'rid' on its first line, read as data as --no-input-header asks" in line


def test_no_header_refused_before_spark_when_the_first_line_is_a_header(tmp_path: Path) -> None:
    (tmp_path / "out.csv").write_text("rid,key\n1,2\n")
    (tmp_path / "in.csv").write_text("rid\n1\n")
    proc = subprocess.run([sys.executable, "-m", "cutcheck", "validate", "--input", "in.csv", "--output", "out.csv",
                           "--columns", "rid,key", "--no-header"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "out.csv" in lines[0] and "'rid' on its first line, read as data as --no-header asks" in lines[0]


@pytest.mark.parametrize(("cell", "column", "what"), [
    ("NaN", "count", "not a number (NaN)"),
    (str(INT64_MAX + 1), "offset", "beyond the int64 range"),
    ("1.5", "count", "a fraction or exponent"),
    ("user-3", "key", "text"),
])
def test_a_value_an_integer_column_cannot_hold_is_named_with_file_line_and_column(
        tmp_path: Path, spark: Any, cell: str, column: str, what: str) -> None:
    values = {"key": "7", "count": "1", "offset": "0"}
    rows = ["1,7,v,1,0,0,s", "2,7,v,2,0,1,s"]
    values[column] = cell
    rows.append(f"3,{values['key']},v,{values['count']},0,{values['offset']},s")
    inp, sink = _sink(tmp_path, rows)
    line = _error(_invoke("validate", "--input", str(inp), "--output", str(sink), "--columns", SINK))
    assert "part-a-0, line 3" in line and f"column `{column}`" in line and what in line, line
    assert line.endswith("."), line


def test_json_lines_nan_and_overflow_are_named(tmp_path: Path, spark: Any) -> None:
    (tmp_path / "in.csv").write_text("rid\n1\n2\n")
    (tmp_path / "out.json").write_text('{"rid": 1, "count": 1, "key": 0}\n{"rid": 2, "count": NaN, "key": 0}\n')
    line = _error(_invoke("validate", "--input", str(tmp_path / "in.csv"), "--output", str(tmp_path / "out.json")))
    assert "out.json, line 2, column `count`" in line and "NaN" in line, line
    (tmp_path / "out.json").write_text(f'{{"rid": 1}}\n{{"rid": {INT64_MAX + 1}}}\n')
    line = _error(_invoke("validate", "--input", str(tmp_path / "in.csv"), "--output", str(tmp_path / "out.json")))
    assert "line 2, column `rid`" in line and "beyond the int64 range" in line, line
