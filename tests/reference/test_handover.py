"""Split handovers (reference.fuzzing.handover): a rescale hands a source split to another producer, its
restored records wait on one channel of a keyed gate while its new records come over another. The cells
that name it, the focus and shape that reach it, and the ORDER check that sees a new record overtake."""

from __future__ import annotations

from cutcheck.reference import Scenario, simulate
from cutcheck.reference.fuzzing.abstract_cells import ABSTRACT_UNIVERSE
from cutcheck.reference.fuzzing.abstract_coverage import AbstractCoverage
from cutcheck.reference.fuzzing.generate import scenario_from_seed
from cutcheck.reference.fuzzing.handover import INPUT, OUTPUT
from cutcheck.reference.fuzzing.shapes import WARM_UP, wanted
from cutcheck.reference.fuzzing.verdicts import FEATURE_CYCLE, FOCI, run_scenario, verdict_of_seed
from tests.reference.helpers import scenario
from tests.reference.test_catalogue_checkpointing import HANDOVER, RESCALE_SOURCE

FAULT = "channel-overtakes-gate-recovery"
WITNESS = scenario(HANDOVER, mode="unaligned", seed=1, slow="count", buffer_bytes=256, floating=4, **RESCALE_SOURCE)


def test_both_handover_cells_are_reachable_cells_of_the_universe() -> None:
    assert ABSTRACT_UNIVERSE[INPUT] is None and ABSTRACT_UNIVERSE[OUTPUT] is None


def test_a_hand_made_handover_reaches_both_cells_and_keeps_order_on_clean_code() -> None:
    v = run_scenario(dict(WITNESS))
    assert v.ok, v.violations
    assert v.rescaled and v.abstract.hits[INPUT] == 1 and v.abstract.hits[OUTPUT] == 1


def test_a_restore_that_keeps_the_producers_hands_nothing_over() -> None:
    """The same job rescaling its keyed vertex instead: each split's restored and new records share a
    channel, so neither cell is reached."""
    keyed = dict(WITNESS, rescales=[{"on_failure": 0, "parallelism": {"count": 2, "sink": 2}}],
                 failures=[{"after_checkpoint": 1, "delay": 0, "target": "count[0]"}])
    v = run_scenario(keyed)
    assert v.ok and v.rescaled, v.violations
    assert not v.abstract.hits[INPUT] and not v.abstract.hits[OUTPUT]


def test_a_new_record_overtaking_restored_ones_of_its_key_and_split_breaks_order() -> None:
    broken = simulate(Scenario.from_json({**WITNESS, "mutants": [FAULT]}))
    [first] = broken.violations[:1]
    assert first["invariant"] == "ORDER" and "restored record(s) of that key and split" in first["detail"]


def test_the_handover_focus_is_in_the_cycle_and_reaches_both_cells_within_ten_seeds() -> None:
    assert FEATURE_CYCLE.count("handover") == 1
    reached: set[str] = set()
    for seed in range(10):
        v = verdict_of_seed(seed, (), dict(FOCI["handover"]))
        assert v["ok"], (seed, v["violations"])
        reached |= {n for n in v["abstract"]["reached"] if n.startswith("split handover")}
    assert reached == {"split handover on restored input state", "split handover on restored output state"}


def test_the_handover_focus_grows_the_source_its_slow_keyed_vertex_reads() -> None:
    grown = 0
    for seed in range(20):
        sd = scenario_from_seed(seed, **FOCI["handover"])
        kinds = {v["id"]: v for v in sd["graph"]["vertices"]}
        slow = sd["schedule"]["slow"]
        assert kinds[slow]["kind"] == "keyed_count"
        sources = [e["from"] for e in sd["graph"]["edges"] if e["to"] == slow and kinds[e["from"]]["kind"] == "source"]
        first = sd["rescales"][0]["parallelism"] if sd["rescales"] else {}
        grown += any(s in first and first[s] > kinds[s]["parallelism"] for s in sources)
        assert all(kinds[s]["splits"] >= 3 and kinds[s]["keys"] <= 2 and kinds[s]["records"] > 0 for s in sources)
    assert grown >= 10, grown


def test_the_handover_shape_is_wanted_while_its_cells_are_unreached() -> None:
    reached = AbstractCoverage()
    for cell, why in ABSTRACT_UNIVERSE.items():
        if why is None and cell not in (INPUT, OUTPUT):
            reached.hits[cell] += 1
    from cutcheck.reference.fuzzing.timed import TIMED_FOR

    reached.hits[TIMED_FOR["crowded"]] += 1
    assert wanted(reached, [], WARM_UP - 1) == []
    assert wanted(reached, [], WARM_UP) == [("handover", FOCI["handover"])]
    reached.hits[INPUT] += 1
    assert wanted(reached, [], WARM_UP) == [("handover", FOCI["handover"])]  # one side still unreached
    reached.hits[OUTPUT] += 1
    assert wanted(reached, [], WARM_UP) == []
