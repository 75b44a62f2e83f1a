"""The documents that describe generated facts say what the code says."""

from __future__ import annotations

from pathlib import Path

from cutcheck.reference.faults.catalogue import catalogue_table

ROOT = Path(__file__).resolve().parents[1]


def test_the_design_lists_the_mutant_catalogue_as_it_is() -> None:
    design = (ROOT / "docs" / "design.md").read_text()
    missing = [row for row in catalogue_table() if row not in design]
    assert missing == [], "docs/design.md section 7 is stale; paste catalogue_table():\n" + "\n".join(missing)
