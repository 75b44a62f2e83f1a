"""Where verify finds its example scenarios: the working directory's, the repository's, else the copy
`pip install` puts under <prefix>/share/cutcheck, so verify runs from any directory."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from commands.fuzz import _example_scenarios
from model.errors import CutcheckError

ROOT = Path(__file__).resolve().parents[1]


def test_the_installed_copy_is_found_from_any_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import commands.fuzz as fuzz_module

    prefix = tmp_path / "prefix"
    shutil.copytree(ROOT / "examples", prefix / "share" / "cutcheck" / "examples")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(sys, "prefix", str(prefix))
    monkeypatch.setattr(fuzz_module, "__file__", str(tmp_path / "site-packages" / "commands" / "fuzz.py"))
    found = _example_scenarios(None)
    assert [p.name for p in found] == sorted(p.name for p in (ROOT / "examples" / "scenarios").glob("*.json"))
    assert all(p.is_relative_to(prefix) for p in found)


def test_none_found_is_one_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import commands.fuzz as fuzz_module

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "empty-prefix"))
    monkeypatch.setattr(fuzz_module, "__file__", str(tmp_path / "site-packages" / "commands" / "fuzz.py"))
    with pytest.raises(CutcheckError, match="no example scenarios"):
        _example_scenarios(None)


def test_the_distribution_installs_the_examples() -> None:
    import tomllib

    data_files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    listed = {Path(p).name for patterns in data_files.values() for pattern in patterns for p in ROOT.glob(pattern)}
    assert {p.name for p in (ROOT / "examples" / "scenarios").glob("*.json")} <= listed
    assert "keyed-pipeline.json" in listed  # the scenarios' graph, at ../ from them
