"""The distribution is one import package, ``cutcheck``, whose example graphs and scenarios are package
data: verify finds them from any directory, installed or editable."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from house_files import package_module_paths

from cutcheck.commands.verify import _example_scenarios
from cutcheck.model.errors import CutcheckError

ROOT = Path(__file__).resolve().parents[1]


def test_the_packaged_examples_are_found_from_any_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "examples" / "scenarios").mkdir(parents=True)  # a user's own folder of that name is not ours
    (tmp_path / "examples" / "scenarios" / "theirs.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    found = _example_scenarios(None)
    assert [p.name for p in found] == sorted(p.name for p in (ROOT / "examples" / "scenarios").glob("*.json"))
    assert all(not p.is_relative_to(tmp_path) for p in found)
    for p in found:  # each scenario's graph ships beside it
        assert (p.parent / "../keyed-pipeline.json").resolve().is_file()


def test_an_empty_examples_directory_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(CutcheckError, match="no example scenarios"):
        _example_scenarios(tmp_path)


@pytest.mark.slow
def test_the_wheel_holds_one_import_package_with_its_examples(tmp_path: Path) -> None:
    # A copy of the checkout without build products: setuptools builds in-tree and would reuse ./build.
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".venv"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(src)],
                   check=True, capture_output=True, timeout=600)
    (wheel,) = tmp_path.glob("cutcheck-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"cutcheck"}, top
    assert "cutcheck/cli.py" in names and "cutcheck/__main__.py" in names
    assert {f"cutcheck/examples/scenarios/{p.name}" for p in (ROOT / "examples" / "scenarios").glob("*.json")} <= set(names)
    assert not [n for n in names if "/tests/" in n or "/benchmarks/" in n or n.endswith(".pyc")]
    # every module of the checkout is in the wheel (a subpackage missing from pyproject's list would
    # import in an editable install and fail once installed)
    modules = {"cutcheck/" + str(p.relative_to(ROOT)) for p in package_module_paths()}
    assert modules - set(names) == set()
    entry = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "cutcheck = cutcheck.cli:main" in entry
