"""Faults are strategy objects at named seams: the catalogue, the seams, and protocol code free of mutants."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import cutcheck.reference.engine  # noqa: F401 (imports the rooms, which register their seams)
from cutcheck.reference.batch import BatchEngine  # noqa: F401
from cutcheck.reference.core.seams import Layer, Rules, seams
from cutcheck.reference.faults.catalogue import CATALOGUE, MUTANTS, Mutants
from cutcheck.reference.recovery import (
    region_failover,  # noqa: F401
    rescale,  # noqa: F401
)
from cutcheck.reference.storage import fs  # noqa: F401

REFERENCE = Path(__file__).resolve().parents[2] / "reference"


def test_every_fault_replaces_a_registered_seam_and_says_what_it_recreates() -> None:
    known = seams()
    for name, fault in CATALOGUE.items():
        assert fault.seam in known, f"{name}: no seam {fault.seam!r}"
        assert isinstance(fault.layer, Layer)
        assert fault.mechanism and fault.mechanism[0].isupper(), name
        assert re.fullmatch(r"(FLINK-\d+|KAFKA-\d+|apache/iceberg#\d+|)", fault.key), (name, fault.key)


def test_without_faults_the_rules_are_the_correct_ones() -> None:
    rules = Rules()
    for name, rule in seams().items():
        assert getattr(rules, name) is rule


def test_a_fault_replaces_its_seam_and_nothing_else() -> None:
    for name in MUTANTS:
        rules = Mutants.of([name]).rules()
        fault = CATALOGUE[name]
        for seam_name, rule in seams().items():
            assert (getattr(rules, seam_name) is rule) == (seam_name != fault.seam), (name, seam_name)


def test_two_faults_at_one_seam_are_refused() -> None:
    fault = CATALOGUE["no-output-state"]
    with pytest.raises(ValueError, match="replace the same seam"):
        Rules([fault, fault])


def test_protocol_code_never_asks_which_mutants_are_on() -> None:
    offenders = []
    for path in REFERENCE.rglob("*.py"):
        if "faults" in path.parts:
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"""["'][a-z-]+["']\s+(not\s+)?in\s+[\w.]*mutants""", line):
                offenders.append(f"{path.relative_to(REFERENCE)}:{i}: {line.strip()}")
    assert offenders == []
