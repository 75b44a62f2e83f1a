"""The type checker (issue #24): mypy --strict, configured in pyproject's [tool.mypy], run through
.ci/typecheck (which makes the ``cutcheck`` package name the repository's root has, from any checkout)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[1]
TYPECHECK = ROOT / ".ci" / "typecheck"


def _typecheck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TYPECHECK), *args], capture_output=True, text=True, timeout=900,
                          check=False)


@pytest.mark.slow
def test_the_rooms_pyproject_lists_are_strict_clean() -> None:
    done = _typecheck()
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Success: no issues found"), done.stdout


def test_a_type_error_in_a_checked_room_fails_the_check(tmp_path: Path) -> None:
    """A checkout under another directory name, this repository's configuration, one planted error."""
    checkout = tmp_path / "some-clone"
    (checkout / "model").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (checkout / "__init__.py").write_text("")
    (checkout / "model" / "__init__.py").write_text("")
    (checkout / "model" / "planted.py").write_text("def width(x):\n    return x\n")
    done = _typecheck("--root", str(checkout), "cutcheck.model")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cutcheck/model/planted.py:1: error: Function is missing a type annotation" in done.stdout, done.stdout


def test_a_package_named_without_cutcheck_is_refused_in_one_sentence() -> None:
    done = _typecheck("model")
    assert done.returncode == 2
    assert done.stderr == (".ci/typecheck: 'model' is not a cutcheck package; name it as imported, "
                           "e.g. cutcheck.model.\n")
