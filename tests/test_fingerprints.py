"""The same scenarios give the same recovery logs: a move of code changed no behaviour.

``tests/fingerprints/fingerprints.json`` holds whole scenarios and the hash of their logs and summary;
rewrite it with ``python tests/fingerprints/make.py`` only when a change of behaviour is intended, and
say so in the commit.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "fingerprints"
_spec = importlib.util.spec_from_file_location("fingerprints_make", HERE / "make.py")
assert _spec is not None and _spec.loader is not None
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)

TABLE = json.loads((HERE / "fingerprints.json").read_text())


def test_the_table_covers_every_example_and_regression() -> None:
    assert sorted(TABLE) == sorted(make.scenarios())


@pytest.mark.parametrize("name", sorted(TABLE))
def test_logs_are_byte_identical(name: str) -> None:
    assert make.fingerprint(TABLE[name]["scenario"]) == TABLE[name]["sha256"]
