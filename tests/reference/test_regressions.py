"""Scenarios that fuzzing found to break the engine, kept as they were found (tests/reference/regressions)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from cutcheck.reference import Scenario, simulate
from cutcheck.reference.batch import make_engine
from cutcheck.reference.checks.tracing import validate_run
from cutcheck.reference.runtime.operators import InvariantViolation

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
    engine.cut_checks = False  # the traces alone must agree with the protocol
    with contextlib.suppress(InvariantViolation):
        engine.run()
    assert validate_run([*engine.trace_archive, engine.traces]) == []


def test_seeds_that_starved_or_deadlocked_now_finish_clean() -> None:
    """On-disk storage seeds whose expiring checkpoints flooded the job with stale barriers (19, 60,
    75, 85, 236 of the generator as it was then, with ``storage=True``: LIVENESS at 200 000 steps,
    when the slow vertex was also slow at handling barriers), and seed 577, a forced-aligned join
    under backpressure that only expiry ends; with Flink's default tolerance of no failed checkpoint
    each such expiry fails the job over, and it still finishes (checkpoints complete between the
    stalls). The scenarios are frozen as the generator drew them, since the generator has changed
    (in regressions/seeds/, outside the fingerprint table of tests/test_fingerprints.py)."""
    from cutcheck.reference.fuzzing.campaigns import run_scenario

    starved = json.loads((HERE / "seeds" / "storage-expiry-starvation.json").read_text())
    for seed, raw in starved.items():
        v = run_scenario(raw)  # on-disk storage in a temporary directory, as the campaign ran it
        assert v.ok, (seed, v.violations)
    raw = json.loads((HERE / "seeds" / "forced-aligned-join-expiry.json").read_text())
    assert run_scenario(raw).ok
    result = simulate(Scenario.from_json(raw))
    expired = [c for c in result.checkpoints if c.get("reason", "").startswith("expired")]
    assert expired, "577 should need an expiry"
    assert "tolerable_failed" not in raw["checkpoint"]  # Flink's default: no failed checkpoint tolerated
    assert result.restarts == len(raw["failures"]) + len(expired), "each expiry should fail 577 over"
