"""`cutcheck validate` and `cutcheck logs synth`: exit codes 0/1/2, one sentence on errors, Java missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cutcheck.cli import app

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def _no_traceback(result: Any) -> None:
    text = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert "Traceback" not in text
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_validate_exit_0_on_clean_logs(clean_run: Path, tmp_path: Path) -> None:
    result = _invoke("validate", str(clean_run), "--json", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    assert "exactly-once holds" in result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["ok"] is True and report["records_in"] == 1500
    _no_traceback(result)


def test_validate_exit_1_on_faults(planted_run: Path, tmp_path: Path) -> None:
    planted = json.loads((planted_run / "planted.json").read_text())
    result = _invoke(
        "validate",
        "--input",
        str(planted_run / "input"),
        "--output",
        str(planted_run / "output"),
        "--json",
        str(tmp_path / "r.json"),
        "--sample",
        "3",
    )
    assert result.exit_code == 1, result.output
    assert "VIOLATED" in result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["lost"] == planted["lost"] and report["phantom"] == planted["phantom"]
    assert all(len(v) <= 3 for v in report["samples"].values())
    _no_traceback(result)


def test_validate_exit_2_on_bad_input(tmp_path: Path, spark: Any) -> None:
    result = _invoke("validate", str(tmp_path / "missing"))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "does not exist" in result.stderr
    _no_traceback(result)
    (tmp_path / "in.csv").write_text("key\n1\n")
    (tmp_path / "out.csv").write_text("rid\n1\n")
    result = _invoke("validate", "--input", str(tmp_path / "in.csv"), "--output", str(tmp_path / "out.csv"))
    assert result.exit_code == 2 and "`rid`" in result.stderr
    _no_traceback(result)
    result = _invoke("validate", "--input", str(tmp_path / "in.csv"))
    assert result.exit_code == 2 and "--output" in result.stderr
    _no_traceback(result)


def test_logs_synth_writes_planted_json_and_refuses_to_overwrite(tmp_path: Path, spark: Any) -> None:
    out = tmp_path / "logs"
    args = ["logs", "synth", str(out), "--records", "400", "--keys", "5", "--splits", "2", "--phantoms", "3",
            "--count-gaps", "2", "--seed", "9"]  # fmt: skip
    result = _invoke(*args)
    assert result.exit_code == 0, result.output
    planted = json.loads((out / "planted.json").read_text())
    assert planted["phantom"] == 3 and planted["count_gaps"] == 2 and planted["records"] == 400
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing half-written left
    again = _invoke(*args)
    assert again.exit_code == 2 and "pass --force" in again.stderr
    _no_traceback(again)
    bad = _invoke("logs", "synth", str(tmp_path / "x"), "--records", "10", "--count-gaps", "50")
    assert bad.exit_code == 2 and "--count-gaps" in bad.stderr
    _no_traceback(bad)


def _run_cli_without_java(
    env_changes: dict[str, str | None], run_dir: Path
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    for k, v in env_changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return subprocess.run(
        [sys.executable, "-m", "cutcheck", "validate", str(run_dir)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


@pytest.mark.parametrize("java_home", [None, "/nonexistent/jdk"])
def test_java_missing_is_one_sentence_and_exit_2(java_home: str | None, tmp_path: Path) -> None:
    for name in ("input", "output"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "a.csv").write_text("rid\n1\n")  # data: empty logs are refused before Java
    # A PATH without java (and, in the second case, a JAVA_HOME without bin/java).
    proc = _run_cli_without_java({"PATH": str(tmp_path), "JAVA_HOME": java_home}, tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines and lines[0].startswith("error: ")
    assert "Java 17" in proc.stderr and "openjdk-17-jre-headless" in proc.stderr


def test_old_java_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cutcheck.model.errors import EnvironmentProblem
    from cutcheck.spark_validation.session import find_java

    fake = tmp_path / "java"
    fake.write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    fake.chmod(0o755)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentProblem, match="is Java 11"):
        find_java()
