"""The coverage collector: merging adds hits, the report partitions the universe by name, and the
engine fills it without writing it anywhere."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cutcheck.reference.core.coverage import UNIVERSE, Coverage, cell_name
from cutcheck.reference.fuzzing.verdicts import FOCI, run_scenario, scenario_of_seed

CELLS = st.sampled_from(sorted(UNIVERSE))


@given(st.lists(CELLS), st.lists(CELLS))
def test_merge_adds_hits_and_the_report_partitions_the_universe(a: list, b: list) -> None:
    x, y = Coverage(), Coverage()
    for c in a:
        x.hit(*c)
    for c in b:
        y.hit(*c)
    x.merge(y)
    assert all(x.hits[c] == a.count(c) + b.count(c) for c in UNIVERSE)
    report = x.to_json()
    names = set(report["reached"]) | set(report["missed"]) | set(report["unreachable"])
    assert names == {cell_name(c) for c in UNIVERSE}
    assert not set(report["reached"]) & set(report["missed"])
    assert Coverage.from_json(report).hits == +x.hits


def test_unreachable_cells_say_why_and_are_never_missed() -> None:
    reasons = {c: why for c, why in UNIVERSE.items() if why is not None}
    assert reasons and all(len(why) > 20 for why in reasons.values())
    assert not set(Coverage().missed()) & set(reasons)
    assert ("mapper", "UNSUPPORTED", "input") in reasons and ("rule", "aligned", "AlignmentTimesOut") in reasons


def test_a_run_fills_handler_rule_and_failure_cells() -> None:
    """The cycle's storage focus is an on-disk job: its run reaches storage transitions as well (seed 21
    of that focus, named so that a change of the cycle's order keeps the scenario)."""
    v = run_scenario(scenario_of_seed(21, gen=FOCI["storage"]))
    families = {c[0] for c in v.coverage.reached()}
    assert {"handler", "rule", "storage"} <= families, v.coverage.to_json()["reached"]
