"""The cancel cells (reference.fuzzing.cancelling): a cancel marker ending a collection that holds what
the abort must release, and the aligned-timeout-expiry focus and cancel shape that make the rarest of them,
an unaligned collection holding channels blocked before its alignment timeout, common; and the
sender-side timeout cell (a queued timeoutable barrier converted at its sender) with its shape."""

from __future__ import annotations

import json
from pathlib import Path

from cutcheck.reference.fuzzing.abstract_cells import ABSTRACT_UNIVERSE, CELL_BY_NAME, cell_name
from cutcheck.reference.fuzzing.abstract_coverage import TIMEOUT_AT_SENDER
from cutcheck.reference.fuzzing.cancelling import (
    CANCEL,
    ENDS_ALIGNED,
    ENDS_UNALIGNED_BLOCKED,
    ENDS_UNALIGNED_PERSISTING,
)
from cutcheck.reference.fuzzing.shapes import WARM_UP, wanted
from cutcheck.reference.fuzzing.verdicts import FOCI, run_scenario, scenario_from_seed
from tests.reference.helpers import all_reached_but

REGRESSIONS = Path(__file__).resolve().parent / "regressions"
# Seed 28 of the aligned-timeout-expiry focus: an alignment times out into unaligned with channels blocked,
# the checkpoint expires before its last barrier comes, and the late producer's cancel marker ends
# the unaligned collection. No aligned collection is ended by a marker in this run.
WITNESS = "cancel-ends-unaligned-blocked-seed-28.json"


def _witness() -> dict[str, object]:
    raw: dict[str, object] = json.loads((REGRESSIONS / WITNESS).read_text())
    return raw


def test_the_cancel_cells_are_reachable_cells_with_names() -> None:
    for cell in (ENDS_ALIGNED, ENDS_UNALIGNED_BLOCKED, ENDS_UNALIGNED_PERSISTING):
        assert cell[1] in CANCEL
        assert ABSTRACT_UNIVERSE[cell] is None
        assert CELL_BY_NAME[cell_name(cell)] == cell


def test_the_witness_reaches_the_unaligned_blocked_cell_alone_on_clean_code() -> None:
    v = run_scenario(_witness())
    assert v.ok, v.violations
    assert v.abstract.hits[ENDS_UNALIGNED_BLOCKED]
    assert not v.abstract.hits[ENDS_ALIGNED]


def test_an_abort_that_leaves_blocked_channels_blocked_breaks_the_witness() -> None:
    # Only the unaligned collection's abort path can leave a channel blocked here (no aligned one is
    # ended by a marker), so this is the cell at work, not the aligned handler's abort.
    raw = {**_witness(), "mutants": ["abort-leaves-channels-blocked"]}
    v = run_scenario(raw)
    assert not v.ok
    assert v.violations[0]["invariant"] == "BLOCKED", v.violations


def test_the_aligned_timeout_focus_reaches_the_unaligned_blocked_cell_often() -> None:
    # 30 of its seeds 1000-1299 reach it (4 of 0-39); with failures alone, the focus before, 2 of 150.
    reached = [seed for seed in range(40)
               if run_scenario(scenario_from_seed(seed, **FOCI["aligned-timeout-expiry"])).abstract.hits[ENDS_UNALIGNED_BLOCKED]]
    assert len(reached) >= 2, reached


def test_the_cancel_shape_is_wanted_while_the_unaligned_blocked_cell_is_unreached() -> None:
    reached = all_reached_but(ENDS_UNALIGNED_BLOCKED)
    assert wanted(reached, [], WARM_UP - 1) == []
    assert wanted(reached, [], WARM_UP) == [("cancel", FOCI["aligned-timeout-expiry"])]
    reached.hits[ENDS_UNALIGNED_BLOCKED] += 1
    assert wanted(reached, [], WARM_UP) == []
    # The other two cells come with the cycle's expiry foci; they want no shape.
    assert wanted(all_reached_but(ENDS_ALIGNED, ENDS_UNALIGNED_PERSISTING), [], WARM_UP) == []


def test_the_aligned_timeout_focus_reaches_the_sender_side_timeout_cell() -> None:
    # Seed 3 of the focus: a timeoutable barrier waits behind buffers at a sender when the alignment
    # timeout fires, and becomes a priority barrier there (16 of the focus's seeds 0-299 do).
    v = run_scenario(scenario_from_seed(3, **FOCI["aligned-timeout"]))
    assert v.ok, v.violations
    assert v.abstract.hits[TIMEOUT_AT_SENDER]
    # Unaligned checkpoints never queue a timeoutable barrier.
    assert not any(run_scenario(scenario_from_seed(s, **FOCI["unaligned"])).abstract.hits[TIMEOUT_AT_SENDER]
                   for s in range(5))


def test_the_timeout_shape_is_wanted_while_the_sender_side_cell_is_unreached() -> None:
    reached = all_reached_but(TIMEOUT_AT_SENDER)
    assert wanted(reached, [], WARM_UP) == [("timeout", FOCI["aligned-timeout"])]
    reached.hits[TIMEOUT_AT_SENDER] += 1
    assert wanted(reached, [], WARM_UP) == []
