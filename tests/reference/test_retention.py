"""Retention as Flink's store keeps it (``reference.storage.retention``), and RETAINED, which checks it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cutcheck.reference import Scenario, simulate
from cutcheck.reference.core.seams import Rules
from cutcheck.reference.faults.catalogue import CATALOGUE
from cutcheck.reference.storage.retention import expected_retention, subsume
from tests.reference.helpers import scenario


@dataclass
class _Entry:
    cp: int
    kind: str


def _store(kinds: str, retained: int, rules: Rules | None = None) -> list[int]:
    """The ids a store holds after completions of ``kinds`` ('c' checkpoint, 's' savepoint), ids 1, 2, …"""
    held: list[_Entry] = []
    for cp, k in enumerate(kinds, 1):
        held.append(_Entry(cp, "savepoint" if k == "s" else "checkpoint"))
        subsume(held, retained, rules or Rules())
    return [e.cp for e in held]


@pytest.mark.parametrize(("kinds", "retained", "held"), [
    ("ccc", 1, [3]),
    ("cs", 1, [1, 2]),  # the savepoint does not subsume the checkpoint later ones build on (FLINK-21351)
    ("css", 1, [1, 3]),  # an older savepoint goes, the newest checkpoint stays
    ("csc", 1, [3]),
    ("csc", 2, [2, 3]),  # oldest first, whatever its kind
    ("cscs", 2, [3, 4]),
    ("csss", 2, [1, 4]),
    ("ssc", 1, [3]),
    ("s", 1, [1]),
    ("cccc", 3, [2, 3, 4]),
])
def test_the_store_keeps_what_flink_keeps(kinds: str, retained: int, held: list[int]) -> None:
    assert _store(kinds, retained) == held


@given(st.text(alphabet="cs", max_size=12), st.integers(1, 4))
def test_subsuming_step_by_step_keeps_what_the_whole_statement_says(kinds: str, retained: int) -> None:
    history = [(cp, "savepoint" if k == "s" else "checkpoint") for cp, k in enumerate(kinds, 1)]
    assert _store(kinds, retained) == expected_retention(history, retained)


def test_savepoint_subsumes_last_checkpoint_breaks_retention() -> None:
    faulty = Rules([CATALOGUE["savepoint-subsumes-last-checkpoint"]])
    assert _store("cs", 1, faulty) == [2]


@pytest.mark.parametrize("storage", [False, True])
def test_retained_catches_a_savepoint_that_subsumes_the_last_checkpoint(storage: bool, tmp_path: Path) -> None:
    extra = {"storage": {"incremental": True, "inline_threshold": 0}} if storage else {}
    sdict = scenario("keyed-pipeline.json", mode="aligned", savepoints=[{"after_checkpoint": 1, "delay": 0}],
                     checkpoint={"mode": "aligned", "interval": 30, "incremental": storage}, **extra)

    def run(mutants: list[str], where: str) -> object:
        return simulate(Scenario.from_json(dict(sdict, mutants=mutants)),
                        checkpoint_dir=tmp_path / where if storage else None)

    clean = run([], "clean")
    assert clean.ok, clean.violations
    faulty = run(["savepoint-subsumes-last-checkpoint"], "faulty")
    assert [v["invariant"] for v in faulty.violations] == ["RETAINED"], faulty.violations
