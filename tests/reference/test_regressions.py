"""Scenarios that fuzzing found to break the engine, frozen as JSON as they were found (tests/reference/regressions)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from cutcheck.model.errors import InvariantViolation
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.batch import make_engine
from cutcheck.reference.checks.tracing import validate_run
from cutcheck.reference.fuzzing.verdicts import run_scenario

HERE = Path(__file__).resolve().parent / "regressions"


def test_stale_priority_barrier_keeps_the_newer_checkpoint_persisting() -> None:
    """scenario_from_seed(76, storage=True) with a 192-step checkpoint timeout, in memory.

    Checkpoint 6 expired while its unaligned (priority) barrier was still queued at co_map1[1];
    co_map1_out[0] then snapshotted checkpoint 7 and persisted that channel until its barrier; the
    stale barrier of 6 arrived first and ended the persisting, so 7 records crossed the cut of 7
    uncaptured. The engine's CUT check and trace validation both caught it. The job tolerates its
    failed checkpoints (``tolerable_failed`` unlimited, as the generator now gives every scenario with
    a drawn expiry): under Flink's default of none, the first expiry would fail it over instead.
    """
    raw = json.loads((HERE / "stale-priority-barrier.json").read_text())
    result = simulate(Scenario.from_json(raw))
    assert result.violations == [], result.violations
    assert result.exactly_once.ok
    summary = result.summary()
    assert summary["checkpoints_aborted"] >= 6 and summary["checkpoints_completed"] >= 1

    engine = make_engine(Scenario.from_json(raw), trace=True)
    engine.checks.cut = False  # the traces alone must agree with the protocol
    with contextlib.suppress(InvariantViolation):
        engine.run()
    assert validate_run([*engine.trace_archive, engine.traces]) == []


@pytest.mark.parametrize("seed", [19, 60, 75, 85, 236])
def test_storage_scenarios_that_starved_now_finish_clean(seed: int) -> None:
    """On-disk storage scenarios (once scenario_from_seed(seed, storage=True), frozen here as JSON so a
    new generator cannot change them) whose expiring checkpoints flooded the job with stale barriers:
    LIVENESS at 200 000 steps, when the slow vertex was also slow at handling barriers. They run as a
    fuzz verdict does: traced, traces validated, on-disk storage in a fresh directory."""
    raw = json.loads((HERE / f"starved-storage-seed-{seed}.json").read_text())
    assert "storage" in raw and raw["checkpoint"]["tolerable_failed"] > 0
    v = run_scenario(raw)
    assert v.ok, v.violations


def test_forced_aligned_join_fails_over_on_each_expiry_and_finishes() -> None:
    """Once scenario_from_seed(577): a forced-aligned join under backpressure that only expiry ends;
    with Flink's default tolerance of no failed checkpoint each such expiry fails the job over, and
    it still finishes (checkpoints complete between the stalls)."""
    raw = json.loads((HERE / "forced-aligned-join-seed-577.json").read_text())
    v = run_scenario(raw)
    assert v.ok, v.violations
    result = simulate(Scenario.from_json(raw))
    expired = [c for c in result.checkpoints if c.get("reason", "").startswith("expired")]
    assert expired, "577 should need an expiry"
    assert "tolerable_failed" not in raw["checkpoint"]  # Flink's default: no failed checkpoint tolerated
    assert result.restarts == len(raw["failures"]) + len(expired), "each expiry should fail 577 over"


def test_at_least_once_count_gaps_after_a_failover_are_delivered(tmp_path: Path) -> None:
    """Once seed 100186 of the mutation stage (at-least-once focus): a keyed count applied records past
    a barrier before its at-least-once snapshot; their outputs went into a transaction the failover
    aborted, and the replay counted them again, so two per-key counts were never committed. Flink's
    AT_LEAST_ONCE mode allows exactly this: the verdict accepts it (duplicates and count gaps, no
    loss), while the same outcome in an exactly-once mode would be a finding."""
    raw = json.loads((HERE / "at-least-once-count-gaps-seed-100186.json").read_text())
    result = simulate(Scenario.from_json(raw), checkpoint_dir=tmp_path)
    assert result.exactly_once.count_gaps > 0 and result.exactly_once.lost == 0
    v = run_scenario(raw)
    assert v.ok, v.violations


def test_a_savepoint_completing_before_an_older_pending_checkpoint_keeps_its_shared_files(tmp_path: Path) -> None:
    """Found by the Hypothesis campaign at seed 0 (its hunts for five catalogue faults, as an engine finding).

    With crossing acknowledgements (``checkpoint.ack_delay`` 52), savepoint 2 completed at step 355 while
    checkpoint 1 was still pending; checkpoint 1's acknowledged tasks had already registered their shared
    files. A completed savepoint subsumes nothing, but it set the shared-state registry's bound: with no
    checkpoint retained yet, the lowest retained id was the savepoint's, 2, which passed checkpoint 1, so
    its files were deleted, and REF found checkpoint 1 broken when it completed at step 368. The bound now
    never passes a pending checkpoint.
    """
    raw = json.loads((HERE / "savepoint-completes-before-pending-checkpoint.json").read_text())
    result = simulate(Scenario.from_json(raw), checkpoint_dir=tmp_path / "ckpts")
    assert result.violations == [], result.violations
    completed = {c["id"]: c for c in result.checkpoints if c["status"] == "completed"}
    assert completed[2]["kind"] == "savepoint" and 1 in completed  # the savepoint completed first, then 1


def test_a_late_barrier_does_not_resume_a_sender_held_by_its_gates_recovery() -> None:
    """Once scenario_of_seed(100028) (the handover focus; kill's seed campaign at campaign seed 1): a
    restore from 2 and 1 source subtasks to 3 handed split 4 to producer 2 while its restored output
    record (offset 8) still waited at producer 1. A priority barrier of an expired checkpoint reached
    producer 2's channel, whose sender EndOfChannelState held; the handler's ``resume`` of that channel
    released the sender, and offset 9 overtook offset 8 (ORDER, the check that restored records of a key
    and split come first). ``resume`` now leaves a sender held while its gate recovers."""
    raw = json.loads((HERE / "late-barrier-resumes-recovering-sender-seed-100028.json").read_text())
    v = run_scenario(raw)
    assert v.ok, v.violations
    assert v.rescaled and v.restarts == 2


def test_a_finished_source_sends_no_priority_barrier_ahead_of_its_end_of_channel_state() -> None:
    """Seed-campaign scenario 100932 (frozen): a finished source, restored with output state still to
    replay, put a priority barrier ahead of its queued end of channel state; the receiving gate holds
    priority barriers until it has seen every end of channel state, so neither could cross, and the
    downstream tasks, which no abort ends any more (facts §4.10), waited for that checkpoint for ever
    (LIVENESS at the step limit). Now the end of partition stands in for the barrier."""
    raw = json.loads((HERE / "finished-source-ahead-of-recovery-seed-100932.json").read_text())
    result = simulate(Scenario.from_json(raw))
    assert result.ok and result.complete, result.violations
