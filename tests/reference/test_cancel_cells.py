"""The cancel cells (reference.fuzzing.cancelling): a cancel marker ending a collection that holds what
the abort must release, and the aligned-timeout-expiry focus and cancel shape that make the rarest of them,
an unaligned collection holding channels blocked before its alignment timeout, common; and the
sender-side timeout cells (a queued timeoutable barrier converted at its sender, and the receiver's
snapshot with buffers it overtook queued) with their shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cutcheck.model.kinds import BarrierOption
from cutcheck.reference.checkpointing import controller
from cutcheck.reference.fuzzing.abstract_cells import ABSTRACT_UNIVERSE, CELL_BY_NAME, cell_name
from cutcheck.reference.fuzzing.cancelling import (
    CANCEL,
    ENDS_ALIGNED,
    ENDS_UNALIGNED_BLOCKED,
    ENDS_UNALIGNED_PERSISTING,
)
from cutcheck.reference.fuzzing.converting import TIMEOUT_AT_SENDER, TIMEOUT_AT_SNAPSHOT
from cutcheck.reference.fuzzing.shapes import TIMEOUT_CONVERSION, WARM_UP, wanted
from cutcheck.reference.fuzzing.verdicts import FOCI, run_scenario, scenario_from_seed
from cutcheck.reference.runtime.network import Barrier
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


def test_the_timeout_shape_is_wanted_while_no_snapshot_followed_a_conversion() -> None:
    reached = all_reached_but(TIMEOUT_AT_SENDER, TIMEOUT_AT_SNAPSHOT)
    assert wanted(reached, [], WARM_UP) == [("timeout", TIMEOUT_CONVERSION)]
    reached.hits[TIMEOUT_AT_SENDER] += 1  # a conversion alone is not the moment
    assert wanted(reached, [], WARM_UP) == [("timeout", TIMEOUT_CONVERSION)]
    reached.hits[TIMEOUT_AT_SNAPSHOT] += 1
    assert wanted(reached, [], WARM_UP) == []


def _conversion_keeps_its_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant a fault in the sender side of the alignment timeout: the converted barrier keeps the cut
    of its old place in the queue, so the buffers it overtakes count as before it twice, in the
    sender's output state and, if they wait in the receiver's channel at its snapshot, in its input
    state."""
    convert = controller.convert_timed_out_barrier

    def keeps_cut(task: Any, cp: int) -> None:
        queued = [(item, item.cut) for p in task.partitions for sp in p.subpartitions for item in sp.queue
                  if isinstance(item, Barrier) and item.cp == cp and not item.priority
                  and item.options == BarrierOption.TIMEOUTABLE]
        convert(task, cp)
        for item, cut in queued:
            item.cut = cut

    monkeypatch.setattr(controller, "convert_timed_out_barrier", keeps_cut)


def test_the_snapshot_cell_is_the_moment_a_wrong_conversion_cut_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    # Seeds 3 and 7 of the aligned-timeout focus convert a barrier and snapshot with what it overtook
    # queued; seed 45 converts one too, but its receiver snapshots before any of that crosses.
    runs = {s: run_scenario(scenario_from_seed(s, **FOCI["aligned-timeout"])) for s in (3, 7, 45)}
    assert all(v.ok for v in runs.values())
    assert all(v.abstract.hits[TIMEOUT_AT_SENDER] for v in runs.values())
    assert [s for s, v in runs.items() if v.abstract.hits[TIMEOUT_AT_SNAPSHOT]] == [3, 7]
    _conversion_keeps_its_cut(monkeypatch)
    faulty = {s: run_scenario(scenario_from_seed(s, **FOCI["aligned-timeout"])) for s in (3, 7, 45)}
    assert [s for s, v in faulty.items() if not v.ok] == [3, 7]
    assert all(v.violations[0]["invariant"] == "CUT" for s, v in faulty.items() if s != 45)
    # The planted fault leaves the cells as they were: the observer remembers the cut a barrier had
    # while it was queued, not the one the code under test gives it.
    assert all(v.abstract.hits[TIMEOUT_AT_SNAPSHOT] for s, v in faulty.items() if s != 45)


def test_the_timeout_shape_makes_the_snapshot_after_a_conversion_common() -> None:
    # 82 of its seeds 0-499 reach it (the aligned-timeout focus: 7 of 300), 5 of 0-29.
    reached = [s for s in range(30)
               if run_scenario(scenario_from_seed(s, **TIMEOUT_CONVERSION)).abstract.hits[TIMEOUT_AT_SNAPSHOT]]
    assert len(reached) >= 3, reached
