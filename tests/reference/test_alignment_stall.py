"""Alignment stalls (reference.checks.stall): a job whose data flow waits on itself through a barrier
alignment, as Flink's protocol does when an unaligned node feeds a forced-aligned one that also reads
the unaligned node's own producer. The engine stops such a run at the second expiry that finds it,
and the judge classes it as the protocol's stall (a finding against Flink, not the engine)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cutcheck.model.errors import InvariantViolation
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.batch import make_engine
from cutcheck.reference.checks.stall import alignment_stall
from cutcheck.reference.fuzzing.verdicts import run_scenario
from cutcheck.reference.judge import ALIGNMENT_STALL, Outcome

REGRESSIONS = Path(__file__).resolve().parent / "regressions"


def _triangle(**change: Any) -> dict[str, Any]:
    """s1 -rescale-> a -rebalance-> b(co_map) <-rebalance- s2; b -rescale-> c(sink) <-rescale- a: c and a
    align (a pointwise input forces it), b is unaligned; c is slow."""
    raw: dict[str, Any] = json.loads((REGRESSIONS / "alignment-stall-triangle.json").read_text())
    raw.update(change)
    return raw


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_triangle_stalls_on_every_seed_and_is_stopped_early(seed: int) -> None:
    result = simulate(Scenario.from_json(_triangle(seed=seed)))
    assert [v["invariant"] for v in result.violations] == ["LIVENESS"]
    detail = result.violations[0]["detail"]
    assert detail.startswith("alignment stall:"), detail
    for task in ("c[0] aligns", "a[0] cannot emit", "b[0] cannot emit"):
        assert task in detail
    assert result.steps < 2_000  # stopped at the second expiry, not at the 20 000-step budget


def test_the_judge_classes_the_stall_as_the_protocol_s_not_the_engine_s() -> None:
    v = run_scenario(_triangle())
    assert v.judgement.outcome is Outcome.ALIGNMENT_STALL
    assert v.ok and v.stalled and not v.looped
    assert v.violations[0]["invariant"] == ALIGNMENT_STALL


def test_aligned_checkpoints_do_not_stall_the_same_job() -> None:
    raw = _triangle()
    raw["checkpoint"] = {**raw["checkpoint"], "mode": "aligned"}
    raw["max_steps"] = 400_000
    v = run_scenario(raw)
    assert v.judgement.outcome is Outcome.HOLDS, v.violations


def test_an_unaligned_consumer_does_not_stall_the_same_job() -> None:
    # Both of c's inputs non-pointwise: c is unaligned too, and blocks no channel.
    raw = _triangle()
    for e in raw["graph"]["edges"]:
        if e["to"] == "c":
            e["partitioner"] = "rebalance"
    raw["max_steps"] = 400_000
    v = run_scenario(raw)
    assert v.judgement.outcome is Outcome.HOLDS, v.violations


def test_a_guided_campaign_s_stall_is_found_in_its_state() -> None:
    """Drawn by the ci guided campaign at seed 2: six vertices, the same three-task ring through the sink."""
    raw = json.loads((REGRESSIONS / "alignment-stall-guided-seed-2.json").read_text())
    engine = make_engine(Scenario.from_json(raw), max_steps=raw["max_steps"])
    with pytest.raises(InvariantViolation) as stopped:
        engine.run()
    assert stopped.value.detail.startswith("alignment stall:")
    assert engine.step < 20_000  # its budget was 532 160 steps, about 100 s, before the stall was named
    ring = alignment_stall(engine.tasks.values())
    assert {w.waiter.split("[")[0] for w in ring} == {"sink", "co_map1", "co_map2"}


def test_a_slow_receiver_is_no_stall() -> None:
    """Once a false stall: a slow sink aligning and holding every buffer of a producer's channel. The
    sink reads them (it is slow, not stuck), so the producer is not stuck."""
    raw = json.loads((REGRESSIONS / "starved-storage-seed-75.json").read_text())
    v = run_scenario(raw)
    assert v.judgement.outcome is Outcome.HOLDS, v.violations


def test_simulate_exits_1_on_a_stalled_job_with_its_cycle_and_replay(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cutcheck.cli import app

    stalled = tmp_path / "stalled.json"
    stalled.write_text(json.dumps(_triangle()))
    r = CliRunner().invoke(app, ["simulate", str(stalled)])
    assert r.exit_code == 1, r.output
    assert "alignment stall: c[0] aligns" in r.output
    assert f"replay: cutcheck simulate {stalled} --seed 1" in r.output
