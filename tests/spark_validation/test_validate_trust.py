"""validate never passes vacuously, and logs synth never replaces what cutcheck did not write (issue 14).

The bad-input cases run the real command in a subprocess: they are refused before Spark starts, so
each costs an interpreter start, not a JVM. Two subprocesses do start Spark: one checks that a real
run prints nothing on stderr (Spark's JVM warnings go to a log file), one sends Ctrl-C mid-job.
The cases that need Spark's answers run in this process on the shared session.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from cutcheck.cli import app
from tests.interrupts import interruptible

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
FLINK_COLUMNS = "rid,key,value,count,split,offset,subtask"


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> Any:
    return subprocess.run([sys.executable, "-m", "cutcheck", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout)


def _one_sentence(proc: Any, code: int = 2, *words: str) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == code, proc.stderr + proc.stdout
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def _parquet(path: Path, **cols: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols), path)
    return path


def _ints(values: list[int | None], t: Any = None) -> Any:
    return pa.array(values, type=t or pa.int64())


# --- refused before Spark starts: real CLI runs -------------------------------------------------


def test_empty_input_or_output_is_nothing_to_check(tmp_path: Path) -> None:
    (tmp_path / "run" / "input").mkdir(parents=True)  # no files at all
    _parquet(tmp_path / "run" / "output" / "a.parquet", rid=_ints([1]))
    _one_sentence(_cli("validate", "run", cwd=tmp_path), 2, "nothing to check", "input", "run/input")
    _parquet(tmp_path / "in.parquet", rid=_ints([1, 2]))
    _parquet(tmp_path / "out.parquet", rid=_ints([]))  # a file without rows
    _one_sentence(_cli("validate", "--input", "in.parquet", "--output", "out.parquet", cwd=tmp_path), 2,
                  "nothing to check", "output", "out.parquet")
    (tmp_path / "out.csv").write_text("rid,key\n")  # a header and nothing else
    _one_sentence(_cli("validate", "--input", "in.parquet", "--output", "out.csv", cwd=tmp_path), 2,
                  "nothing to check", "out.csv")


@pytest.mark.parametrize(
    ("name", "content", "kind"),
    [
        ("in.parquet", None, "string"),
        ("in.json", '{"rid": "1"}\n{"rid": "2"}\n', "JSON strings"),
        ("in.csv", "rid,key\nr-1,1\n", "text"),
        ("in.parquet", 1.5, "double"),
    ],
)
def test_rid_that_is_not_an_integer(tmp_path: Path, name: str, content: Any, kind: str) -> None:
    if name.endswith(".parquet"):
        values = ["1", "2"] if content is None else [1.0, content]
        _parquet(tmp_path / name, rid=pa.array(values))
    else:
        (tmp_path / name).write_text(content)
    _parquet(tmp_path / "out.parquet", rid=_ints([1]))
    _one_sentence(_cli("validate", "--input", name, "--output", "out.parquet", cwd=tmp_path), 2,
                  "`rid`", kind, name)


def test_headerless_csv_needs_column_names(tmp_path: Path) -> None:
    (tmp_path / "sink").mkdir()
    (tmp_path / "sink" / "part-0-0.csv").write_text("1,4,1,1,0,0,0\n2,4,2,2,0,1,0\n")  # Flink's csv format
    (tmp_path / "in.csv").write_text("rid\n1\n2\n")
    line = _one_sentence(_cli("validate", "--input", "in.csv", "--output", "sink", cwd=tmp_path), 2,
                         "no header row", "part-0-0.csv", f"--columns {FLINK_COLUMNS}")
    assert "--input-columns" not in line
    _one_sentence(_cli("validate", "--input", "sink", "--output", "in.csv", cwd=tmp_path), 2,
                  "no header row", "--input-columns")
    _one_sentence(_cli("validate", "--input", "in.csv", "--output", "sink", "--columns", "rid,key", cwd=tmp_path),
                  2, "7 columns", "names 2")
    # --no-header overrides the guess: the header's "rid" is then a data line's rid, which is text
    no_header = _cli("validate", "--input", "in.csv", "--output", "in.csv", "--columns", "rid", "--no-header",
                     cwd=tmp_path)
    assert no_header.returncode == 2 and "'rid' on its first line" in no_header.stderr, no_header.stderr
    _one_sentence(_cli("validate", "--input", "in.csv", "--output", "sink", "--columns", "a,b", cwd=tmp_path),
                  2, "`rid`")


# --- answers that need Spark: this process, the shared session ----------------------------------


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def _row(result: Any, check: str) -> str:
    return next(ln for ln in result.output.splitlines() if ln.strip("│ ").startswith(check + " "))


def test_headerless_csv_read_with_columns_on_both_sides(tmp_path: Path, spark: Any) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "part-0.csv").write_text("".join(f"{r},{r % 2}\n" for r in range(1, 7)))
    (tmp_path / "sink").mkdir()
    rows = [(1, 1), (2, 1), (2, 2), (3, 1), (5, 2), (99, 3)]  # 4 and 6 lost, 2 twice, 99 invented
    (tmp_path / "sink" / "part-a-0.csv").write_text("".join(f"{r},{r % 2},{r},{c},0,{r},0\n" for r, c in rows))
    (tmp_path / "sink" / ".part-a-1.inprogress.x").write_text("garbage\n")  # hidden: not committed
    report = tmp_path / "r.json"
    result = _invoke("validate", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "sink"),
                     "--input-columns", "rid,key", "--columns", FLINK_COLUMNS, "--json", str(report))
    assert result.exit_code == 1, result.output
    data = json.loads(report.read_text())
    assert (data["lost"], data["duplicated"], data["phantom"], data["null_rid"]) == (2, 1, 1, 0)
    assert data["records_in"] == 6 and data["records_out"] == 6
    assert data["examined"]["lost"] == 6 and data["examined"]["phantom"] == 6
    # count runs 1..n per key: key 1 has 1,1,2 (a repeat), key 0 has 1,2 (fine)
    assert data["count_gaps"] == 1 and data["examined"]["count_gaps"] == 6
    assert data["checks"]["reordered"]["status"] == "skipped"  # no commit_seq in Flink's sink rows
    assert data["written_by"] == "cutcheck"


def test_null_rids_are_their_own_fault(write_logs: Any, tmp_path: Path) -> None:
    inp = [{"rid": r} for r in (1, 2, 3, None, None)]
    out = [{"rid": r} for r in (1, 2, 3, None, None, None)]
    run = write_logs(inp, out)
    report = tmp_path / "r.json"
    result = _invoke("validate", str(run), "--json", str(report))
    assert result.exit_code == 1, result.output
    data = json.loads(report.read_text())
    assert data["null_rid"] == 5 and data["checks"]["null_rid"]["status"] == "FAULT"
    assert data["details"]["null_rid_input_rows"] == 2 and data["details"]["null_rid_output_rows"] == 3
    assert (data["lost"], data["phantom"], data["duplicated"]) == (0, 0, 0)
    assert data["examined"] == {"lost": 3, "duplicated": 3, "phantom": 3, "null_rid": 11,
                                "count_gaps": 0, "reordered": 0, "double_commits": 0}
    assert "FAULT: 5" in _row(result, "null_rid") and "input 2, output 3" in _row(result, "null_rid")
    assert "VIOLATED" in result.output


def test_check_on_zero_rows_is_skipped_not_ok(write_logs: Any, tmp_path: Path) -> None:
    # Like a Flink run: no lane (order is no promise there), and a counter column that is all null.
    out = [{"rid": r, "key": r % 3, "split": 0, "offset": r, "commit_seq": r, "lane": None, "counter": None,
            "count": 1, "txn": f"t{r}", "sink_subtask": "0"} for r in range(1, 10)]
    run = write_logs([{"rid": r} for r in range(1, 10)], out)
    report = tmp_path / "r.json"
    result = _invoke("validate", str(run), "--json", str(report))
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    for check, column in (("reordered", "`lane`"), ("count_gaps", "`counter`")):
        entry = data["checks"][check]
        assert entry["status"] == "skipped" and entry["examined"] == 0 and column in entry["reason"], entry
        assert check in data["checks_skipped"] and check not in data["checks_run"]
        assert "skipped (" in _row(result, check) and " ok " not in _row(result, check)
    assert data["checks"]["double_commits"] == {
        "status": "ok", "count": 0, "examined": 9, "examines": "output rows with txn and commit_seq"}
    assert data["examined"]["lost"] == 9 and "rows examined" in result.output


def _prefix_run(tmp_path: Path, run_json: dict[str, Any]) -> tuple[Path, int, int, int]:
    """100 input records; the output holds the first 60, 3 of them twice, and 2 phantoms."""
    run = tmp_path / "run"
    _parquet(run / "input" / "a.parquet", rid=_ints(list(range(100))))
    delivered = list(range(60)) + [5, 17, 42] + [1000, 1001]
    _parquet(run / "output" / "a.parquet", rid=_ints(delivered))
    (run / "run.json").write_text(json.dumps(run_json))
    return run, 40, 3, 2


@pytest.mark.parametrize("run_json", [{"engine": "flink", "summary": {"complete": False}}, {"complete": False}])
def test_incomplete_run_is_judged_as_a_prefix(tmp_path: Path, spark: Any, run_json: dict[str, Any]) -> None:
    run, pending, dups, phantoms = _prefix_run(tmp_path, run_json)
    report = tmp_path / "r.json"
    result = _invoke("validate", str(run), "--json", str(report))
    assert result.exit_code == 1, result.output
    data = json.loads(report.read_text())
    assert data["prefix"] is True and data["pending"] == pending and data["lost"] == 0
    assert (data["duplicated"], data["phantom"]) == (dups, phantoms)
    assert data["checks"]["lost"]["status"] == "pending" and data["checks"]["lost"]["pending"] == pending
    assert data["samples"]["pending"][:3] == [60, 61, 62]
    assert "judged as a prefix" in data["verdict"] and "judged as a prefix" in result.output
    assert f"pending: {pending}" in _row(result, "lost")
    # --complete judges the same logs as a finished run: the undelivered records are lost.
    result = _invoke("validate", str(run), "--complete", "--json", str(report))
    data = json.loads(report.read_text())
    assert result.exit_code == 1 and data["lost"] == pending and data["pending"] == 0 and not data["prefix"]


def test_clean_prefix_holds_and_says_so(tmp_path: Path, spark: Any) -> None:
    run = tmp_path / "run"
    _parquet(run / "input" / "a.parquet", rid=_ints(list(range(10))))
    _parquet(run / "output" / "a.parquet", rid=_ints(list(range(4))))
    (run / "run.json").write_text(json.dumps({"summary": {"complete": False}}))
    result = _invoke("validate", str(run))
    assert result.exit_code == 0, result.output
    assert "holds for the delivered prefix" in result.output and "6 undelivered" in result.output


# --- logs synth: where it may write --------------------------------------------------------------


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_logs_synth_refuses_what_cutcheck_did_not_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "work" / "data"
    mine.mkdir(parents=True)
    (mine / "keep.txt").write_text("precious")
    (tmp_path / "work" / "file.txt").write_text("also precious")
    before = _tree(tmp_path)
    monkeypatch.chdir(tmp_path / "work")
    synth = ["logs", "synth", "--records", "10", "--force"]
    for target, words in ((".", "working directory"), ("..", "working directory"), ("data", "not a run directory"),
                          ("file.txt", "a file")):
        result = CliRunner().invoke(app, [*synth[:2], target, *synth[2:]])
        assert result.exit_code == 2, result.output
        assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert _tree(tmp_path) == before


def test_validate_json_never_overwrites_a_file_cutcheck_did_not_write(tmp_path: Path) -> None:
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": true}')
    _parquet(tmp_path / "run" / "input" / "a.parquet", rid=_ints([1]))
    _parquet(tmp_path / "run" / "output" / "a.parquet", rid=_ints([1]))
    result = CliRunner().invoke(app, ["validate", str(tmp_path / "run"), "--json", str(notes)])
    assert result.exit_code == 2 and "cutcheck did not write it" in result.stderr  # refused before Spark
    assert notes.read_text() == '{"mine": true}'


def test_logs_synth_replaces_only_its_own_run_with_force(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "logs"
    args = ["logs", "synth", str(out), "--records", "60", "--keys", "3", "--splits", "2", "--seed", "1"]
    assert _invoke(*args).exit_code == 0
    run = json.loads((out / "run.json").read_text())
    assert run["written_by"] == "cutcheck" and run["complete"] is True
    again = _invoke(*args)
    assert again.exit_code == 2 and "--force" in again.stderr
    assert _invoke(*args, "--force", "--phantoms", "2").exit_code == 0
    assert json.loads((out / "planted.json").read_text())["phantom"] == 2
    # A failure half-way leaves the previous run in place and no temporary sibling.
    from cutcheck.spark_validation import synth

    def broken(df: Any, path: Path, fmt: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(synth, "_write", broken)
    before = _tree(out)
    failed = _invoke(*args, "--force")
    assert failed.exit_code == 2 and "No space left" in failed.stderr
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]


# --- two real runs that start Spark: stderr stays clean, Ctrl-C is one line -----------------------


def _spark_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, SPARK_LOCAL_DIRS=str(tmp_path / "local"), TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "local").mkdir()
    (tmp_path / "tmp").mkdir()
    return env


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


@pytest.mark.slow
def test_real_run_prints_nothing_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text("rid\n1\n2\n3\n")
    (tmp_path / "out.csv").write_text("1,1,1,1,0,0,0\n2,1,2,2,0,1,0\n3,1,3,3,0,2,0\n")
    proc = _cli("validate", "--input", "in.csv", "--output", "out.csv", "--columns", FLINK_COLUMNS,
                "--master", "local[1]", cwd=tmp_path, env=_spark_env(tmp_path))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert proc.stderr == ""  # no JVM warning, no log4j line, no Py4J chatter
    assert "exactly-once holds" in proc.stdout and "rows examined" in proc.stdout
    assert list((tmp_path / "local").iterdir()) == []  # Spark's scratch space went with the JVM


@pytest.mark.slow
def test_ctrl_c_is_one_line_and_exit_130(tmp_path: Path) -> None:
    n = 2_000_000
    _parquet(tmp_path / "run" / "input" / "a.parquet", rid=pa.array(range(n), pa.int64()))
    _parquet(tmp_path / "run" / "output" / "a.parquet", rid=pa.array(range(n), pa.int64()),
             key=pa.array([r % 1000 for r in range(n)], pa.int64()))
    env = _spark_env(tmp_path)
    proc = interruptible([sys.executable, "-m", "cutcheck", "validate", "run", "--master", "local[2]"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    # Spark has started and the job runs once shuffle files appear in its local directory.
    while time.monotonic() < deadline and proc.poll() is None:
        if any("shuffle" in p.name for p in (tmp_path / "local").rglob("*")):
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the job ended before it could be interrupted"
    jvms = _children(proc.pid)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert stderr.strip() == "interrupted" and "Traceback" not in stdout
    time.sleep(0.5)
    assert not [p for p in jvms if Path(f"/proc/{p}").exists()], "Spark's JVM outlived the command"
    assert list((tmp_path / "local").iterdir()) == []  # no blockmgr-* left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local", "run", "tmp"]
    assert not [p for p in (tmp_path / "tmp").iterdir() if p.name.startswith("cutcheck-spark-")]


# --- Spark's and Py4J's failures: one sentence -------------------------------------------------


def test_spark_analysis_error_is_one_sentence(tmp_path: Path, spark: Any) -> None:
    (tmp_path / "in.csv").write_text("rid,rid\n1,1\n")  # Spark refuses duplicate column names
    (tmp_path / "out.csv").write_text("rid\n1\n")
    result = _invoke("validate", "--input", str(tmp_path / "in.csv"), "--output", str(tmp_path / "out.csv"))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr


def test_py4j_failures_translate_to_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    from py4j.protocol import Py4JError, Py4JNetworkError
    from pyspark.errors import AnalysisException

    from cutcheck.model.errors import EnvironmentProblem, LogDataError
    from cutcheck.spark_validation import session
    from cutcheck.spark_validation.guard import spark_guard

    monkeypatch.setattr(session, "_KEEP_LOG", False)  # the messages keep the JVM's log; not this one's

    cases = [
        (Py4JNetworkError("Answer from Java side is empty"), EnvironmentProblem, "stopped answering"),
        (Py4JError("An error occurred while calling o42.collect"), EnvironmentProblem, "--driver-memory"),
        (AnalysisException(message="[UNRESOLVED_COLUMN] `lane` cannot be resolved.\nplan..."), LogDataError,
         "UNRESOLVED_COLUMN"),
    ]
    for raised, kind, words in cases:
        with pytest.raises(kind) as info, spark_guard():
            raise raised
        text = str(info.value)
        assert words in text and "\n" not in text and info.value.__cause__ is None

