"""Scenarios that fuzzing found to break the engine, kept as they were found (tests/reference/regressions)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from reference import Scenario, simulate
from reference.batch import make_engine
from reference.operators import InvariantViolation
from reference.tracing import validate_run

HERE = Path(__file__).resolve().parent / "regressions"


def test_stale_priority_barrier_keeps_the_newer_checkpoint_persisting() -> None:
    """scenario_from_seed(76, storage=True) with a 192-step checkpoint timeout, in memory.

    Checkpoint 6 expired while its unaligned (priority) barrier was still queued at co_map1[1];
    co_map1_out[0] then snapshotted checkpoint 7 and persisted that channel until its barrier; the
    stale barrier of 6 arrived first and ended the persisting, so 7 records crossed the cut of 7
    uncaptured. The engine's CUT check and trace validation both caught it.
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
