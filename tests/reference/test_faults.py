"""Faults are typed values at seams: the catalogue lists them, the seams are handles, protocol code is free of mutants."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from cutcheck.reference.core.seams import Fault, Layer, Rules, Seam, seam
from cutcheck.reference.faults.catalogue import CATALOGUE, FAULTS, MUTANTS, Mutants

REFERENCE = Path(__file__).resolve().parents[2] / "reference"


def _declared_seams() -> dict[str, Seam[..., object]]:
    """Every ``@seam`` in the reference engine's source, found by reading it (not by what was imported)."""
    found: dict[str, Seam[..., object]] = {}
    for path in sorted(REFERENCE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)
                 and any(isinstance(d, ast.Name) and d.id == "seam" for d in n.decorator_list)]
        if names:
            module = importlib.import_module(".".join(["cutcheck", *path.relative_to(REFERENCE.parent).with_suffix("").parts]))
            for name in names:
                assert name not in found, f"two seams are named {name!r}"
                found[name] = getattr(module, name)
    return found


SEAMS = _declared_seams()


def test_every_seam_is_a_typed_handle_and_every_one_has_a_fault() -> None:
    assert len(SEAMS) > 30 and all(isinstance(s, Seam) for s in SEAMS.values())
    used = {f.seam for f in FAULTS}
    assert used == set(SEAMS.values()), sorted(s.name for s in set(SEAMS.values()) ^ used)  # no seam exists only to exist


def test_every_fault_says_what_it_recreates() -> None:
    for name, fault in CATALOGUE.items():
        assert type(name) is str and fault.name == name
        assert isinstance(fault.layer, Layer)
        assert fault.mechanism and fault.mechanism[0].isupper(), name
        assert re.fullmatch(r"(FLINK-\d+|KAFKA-\d+|apache/iceberg#\d+|)", fault.key), (name, fault.key)


def test_the_catalogue_is_exactly_the_list_of_faults() -> None:
    assert list(CATALOGUE.values()) == list(FAULTS)
    assert set(MUTANTS) == {f.name for f in FAULTS if not f.test_only}


def test_without_faults_the_rules_are_the_correct_ones() -> None:
    rules = Rules()
    for at in SEAMS.values():
        assert rules[at] is at.rule


def test_a_fault_replaces_its_seam_and_nothing_else() -> None:
    for name in MUTANTS:
        rules = Mutants.of([name]).rules()
        fault = CATALOGUE[name]
        for at in SEAMS.values():
            assert (rules[at] is at.rule) == (at is not fault.seam), (name, at.name)


def test_a_fault_receives_the_correct_rule_and_may_defer_to_it() -> None:
    @seam
    def double(n: int) -> int:
        """The correct rule of this test's seam."""
        return 2 * n

    def wrong_for_odd(correct: object, n: int) -> int:
        """Odd numbers are tripled."""
        assert correct is double.rule
        return 3 * n if n % 2 else double.rule(n)

    rules = Rules([Fault("odd-tripled", double, Layer.BARRIERS, wrong_for_odd)])
    assert [rules[double](n) for n in (1, 2, 3)] == [3, 4, 9] and [Rules()[double](n) for n in (1, 2)] == [2, 4]
    assert rules.names == frozenset({"odd-tripled"}) and "odd-tripled" in rules


def test_a_fault_without_a_mechanism_is_refused() -> None:
    @seam
    def rule() -> bool:
        return True

    with pytest.raises(TypeError, match="needs a docstring"):
        Fault("silent", rule, Layer.BARRIERS, lambda correct: False)


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


def test_protocol_code_applies_seams_only_through_their_handles() -> None:
    """``rules.<name>`` was the string-named way; a seam is applied as ``rules[handle]`` now."""
    offenders = [f"{p.relative_to(REFERENCE)}:{i}" for p in REFERENCE.rglob("*.py")
                 for i, line in enumerate(p.read_text().splitlines(), 1)
                 if re.search(r"\brules\.(?!names\b|faults\b)[a-z_]+\(", line) and "seams.py" not in p.name]
    assert offenders == []
