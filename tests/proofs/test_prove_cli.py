"""``cutcheck prove``: the table, the negative controls' traces, JSON, and the exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cutcheck import cli, proofs
from cutcheck.proofs.registry import ProofResult


def test_prove_prints_the_table_and_the_control_traces(tmp_path: Path) -> None:
    report = tmp_path / "proofs.json"
    res = CliRunner().invoke(cli.app, ["prove", "cut-aligned", "cut-unaligned[no-output-state]", "--json", str(report)])
    assert res.exit_code == 0, res.output
    assert "cut-unaligned[no-output-state]" in res.output and "CUT violated" in res.output
    data = json.loads(report.read_text())
    assert data["ok"] and [r["status"] for r in data["results"]] == ["proved", "counterexample"]
    assert [r["label"] for r in data["results"]] == ["proved (unbounded induction)", "counterexample (bounded search)"]
    assert "proved (unbounded induction)" in res.output and "result" in res.output


def test_prove_prints_the_labels_and_the_assumptions(tmp_path: Path) -> None:
    report = tmp_path / "proofs.json"
    res = CliRunner().invoke(cli.app, ["prove", "replay-exactly-once", "keygroup-ownership", "--json", str(report)])
    assert res.exit_code == 0, res.output
    assert "proved under assumptions" in res.output and "proved for all values up to 32768" in res.output
    assert "replay-exactly-once assumes: u replays deterministically" in res.output
    replay, keygroups = json.loads(report.read_text())["results"]
    assert replay["method"] == "assumptions" and replay["assumptions"] and not keygroups["assumptions"]
    assert keygroups["label"] == "proved for all values up to 32768" and keygroups["limit"] == 32768


def test_unknown_name_exits_2() -> None:
    res = CliRunner().invoke(cli.app, ["prove", "nope"])
    assert res.exit_code == 2 and "known proofs" in res.output


def test_exit_1_when_a_result_is_not_as_expected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proofs, "run", lambda names=None: [ProofResult("cut-aligned", "unknown", "unbounded", 0.1, "timeout")])
    res = CliRunner().invoke(cli.app, ["prove", "cut-aligned"])
    assert res.exit_code == 1 and "not as expected: cut-aligned" in res.output
