"""TRIGGER: a checkpoint that some task can never take hangs, and that hang is a finding.

The trigger rules of finishing jobs (FLIP-147): a task whose producers have all finished is triggered
directly, at the trigger (``controller.predecessors_finished``) or when its last producer finishes
later (``arrival.trigger_when_predecessors_finish``, whatever its barrier handler is doing). The
check (``checks/hung_checkpoints.py``) holds on clean generated jobs and names the hang when either
rule is broken (FLINK-21067, FLINK-21081).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example as also_seed
from hypothesis import given, settings
from hypothesis import strategies as st

from cutcheck.model.errors import InvariantViolation
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.batch import make_engine
from cutcheck.reference.checks.hung_checkpoints import orphaned_by
from cutcheck.reference.events.stream import SnapshotTaken
from cutcheck.reference.fuzzing.generate import scenario_from_seed
from cutcheck.reference.fuzzing.verdicts import FOCI
from cutcheck.reference.simulate import RunResult
from tests.reference.helpers import scenario

REGRESSIONS = Path(__file__).resolve().parent / "regressions"
TRIGGER_FAULTS = ("predecessors-finished-not-triggered", "no-retrigger-after-predecessors-finish")


def _run(sdict: dict[str, Any]) -> RunResult:
    """As a campaign runs it: a scenario with storage (or a resubmitted job) in a fresh directory."""
    with tempfile.TemporaryDirectory(prefix="cutcheck-trigger-") as tmp:
        on_disk = "storage" in sdict or "resubmit" in sdict
        return simulate(Scenario.from_json(sdict), checkpoint_dir=Path(tmp) if on_disk else None)


def _names(result: RunResult) -> list[str]:
    return [v["invariant"] for v in result.violations]


def _hung(result: RunResult) -> bool:
    """Some checkpoint expired, or the run stopped (TRIGGER, LIVENESS) with checkpoints pending."""
    return any(c["reason"].startswith("expired") for c in result.checkpoints) or \
        bool({"TRIGGER", "LIVENESS"} & set(_names(result)))


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10**6))
@also_seed(seed=0)
@also_seed(seed=3)
def test_trigger_holds_on_finishing_jobs_and_names_every_hang_a_lost_trigger_causes(seed: int) -> None:
    """Generated finishing jobs (every source is bounded): clean, no checkpoint is ever orphaned. With
    either trigger rule broken, a run whose checkpoints hang where the clean run's did not stops on
    TRIGGER, and on nothing else first (the faults lose triggers; a lost trigger breaks no cut)."""
    sdict = scenario_from_seed(seed, **FOCI["swarm-small"])
    clean = _run(sdict)
    assert "TRIGGER" not in _names(clean), clean.violations
    if _hung(clean):
        return  # checkpoints that expire anyway: a hang is then not the fault's alone
    for fault in TRIGGER_FAULTS:
        faulty = _run(sdict | {"mutants": [fault]})
        if _hung(faulty):
            assert _names(faulty)[:1] == ["TRIGGER"], (fault, faulty.violations)
        else:
            assert faulty.violations == [], (fault, faulty.violations)


@pytest.mark.parametrize("fault", TRIGGER_FAULTS)
def test_each_trigger_fault_hangs_a_generated_job_that_holds_without_it(fault: str) -> None:
    """The property above is not vacuous: on seed 0 of the same focus each fault orphans a checkpoint."""
    sdict = scenario_from_seed(0, **FOCI["swarm-small"])
    assert _run(sdict).ok
    faulty = _run(sdict | {"mutants": [fault]})
    assert _names(faulty)[:1] == ["TRIGGER"], faulty.violations
    assert "no way to complete" in faulty.violations[0]["detail"]


def test_savepoint_triggered_while_an_unaligned_checkpoint_collects_reaches_the_task() -> None:
    """Seed 336 of the plain cycle (frozen): savepoint 4 is pending while sink[0] collects the barriers of
    unaligned checkpoint 3, and the last end of partition reaches it during that collection, so no
    barrier of the savepoint will come: the end of partition ends the collection and queues the
    savepoint as a direct trigger, which completes it. Without the re-trigger (the catalogue's
    FLINK-21081 fault) the checkpoints hang (TRIGGER). Seed 311's run, which had this moment before,
    takes its checkpoint 1 directly since a finished source sends no priority barrier once one of its
    ends of partition crossed."""
    raw: dict[str, Any] = json.loads((REGRESSIONS / "savepoint-while-unaligned-collects-seed-336.json").read_text())
    engine = make_engine(Scenario.from_json(raw))
    taken: dict[int, SnapshotTaken] = {}
    engine.bus.subscribe(SnapshotTaken, lambda s: taken.setdefault(s.cp, s) if str(s.sid) == "sink[0]" else None)
    engine.run()
    assert taken[3].unaligned and not taken[3].direct  # collected through barriers
    assert taken[4].direct and taken[4].step > taken[3].step  # the savepoint: a direct trigger, after
    stats = {s.cp: s for s in engine.coordinator.stats}
    assert stats[4].kind == "savepoint" and stats[4].status == "completed"
    lost = simulate(Scenario.from_json(dict(raw, mutants=["no-retrigger-after-predecessors-finish"])))
    assert _names(lost)[:1] == ["TRIGGER"], lost.violations


def test_a_task_whose_channels_ended_without_trigger_is_orphaned() -> None:
    """The decision itself, on a finished run's tasks: a checkpoint id none of them took, with no
    trigger queued, is orphaned at every task (their channels have ended); one they all took is not."""
    engine = make_engine(Scenario.from_json(scenario("keyed-pipeline.json", mode="aligned", seed=1)))
    engine.run()
    tasks = list(engine.tasks.values())
    assert all(t.finished for t in tasks)
    assert orphaned_by(tasks, engine.coordinator.next_id) == [t.sid for t in tasks]  # never triggered
    last = max(t.last_cp for t in tasks)
    assert orphaned_by(tasks, last) == []  # every task took it (or moved past it)


def test_a_lost_trigger_stops_the_run_at_the_expiry_not_at_the_step_limit() -> None:
    """With a checkpoint timeout, the hang is found when the checkpoint expires; without one, when the
    run stops at its step limit (TRIGGER instead of a bare LIVENESS)."""
    sdict = scenario("keyed-pipeline.json", mode="aligned", seed=1, max_steps=60_000,
                     mutants=["no-retrigger-after-predecessors-finish"])
    sdict["checkpoint"]["checkpoint_timeout"] = 300
    expiring = simulate(Scenario.from_json(sdict))
    assert _names(expiring)[:1] == ["TRIGGER"] and "expired at step" in expiring.violations[0]["detail"]
    assert expiring.steps < 60_000
    with pytest.raises(InvariantViolation, match="TRIGGER"):
        engine = make_engine(Scenario.from_json(sdict | {"checkpoint": {**sdict["checkpoint"], "checkpoint_timeout": 10**7},
                                                         "max_steps": 5_000}))
        engine.run()
