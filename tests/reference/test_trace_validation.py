"""Trace validation: the engine's channel traces replay through the proved protocol (model.trace).

Like TLA+ trace validation: every event the engine performs on a channel must be a step the
protocol allows, and at every completed checkpoint the channel state the engine persisted must be
the state the protocol derives. A mutated engine's traces are rejected.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from cutcheck.model.errors import RestoreRefused
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.checks.tracing import validate_run
from cutcheck.reference.fuzzing.generate import MODES, Feature, SeedDraw, scenario_dict
from cutcheck.reference.fuzzing.verdicts import restart_loop
from tests.strategies import HypothesisDraw


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.data())
def test_engine_traces_are_accepted_by_the_protocol(data: Any) -> None:
    # Streaming jobs with records: a batch job takes no checkpoints, and an empty job traces nothing.
    sdict = scenario_dict(HypothesisDraw(data.draw), modes=MODES, max_records=120, batch=False,
                          off=(Feature.EMPTY_SOURCE, Feature.RESUBMIT))  # traces model one job
    try:
        result = simulate(Scenario.from_json(sdict), trace=True)
    except RestoreRefused:
        reject()  # a restore Flink refuses: nothing to trace past it
    if not restart_loop(result, result.violations):  # a loop Flink would be in too: traced until it stopped
        assert result.ok, result.violations
    findings = validate_run(result.traces)
    assert findings == [], findings[:3]
    # Something was traced, unless every trace was closed before its first event: a pipelined region that
    # restarts from scratch has no restore in the protocol, so its channels stop recording (a failure at
    # step 1 of a job that is one region leaves nothing to validate, and says so by closing them).
    traces = [t for book in result.traces for t in book.values()]
    assert sum(map(len, traces)) > 0 or (traces and all(t.closed for t in traces)), "nothing was traced"


def test_at_least_once_traces_break_cut() -> None:
    """The control: barrier tracking without alignment is a legal protocol run whose cut is not consistent."""
    found = []
    for seed in range(20):
        sdict = scenario_dict(SeedDraw(seed), modes=("at_least_once",), max_records=150, batch=False,
                              off=(Feature.RESUBMIT,))
        sdict["schedule"] = {"policy": "backpressure", "slow": sdict["graph"]["vertices"][-1]["id"], "slowdown": 20}
        result = simulate(Scenario.from_json(sdict), trace=True)
        findings = validate_run(result.traces)
        assert all(f.kind == "cut" for f in findings), findings[:3]
        found += findings
    assert found


@pytest.mark.parametrize("mutant", ["no-output-state", "process-after-barrier", "partial-input-state",
                                     "early-checkpoint-in-recovery"])
def test_mutated_engine_traces_are_rejected(mutant: str) -> None:
    """With the engine's own CUT check off, trace validation alone rejects the faulty engine."""
    from cutcheck.model.errors import InvariantViolation
    from cutcheck.reference.batch import make_engine

    for seed in range(60):
        sdict = scenario_dict(SeedDraw(seed), modes=("unaligned",), max_records=150, rescale=False, batch=False)
        sdict["mutants"] = [mutant]
        engine = make_engine(Scenario.from_json(sdict), trace=True)
        engine.checks.cut = False
        # ORDER or EXACTLY_ONCE may notice later and stop the run; the traces up to there count.
        with contextlib.suppress(InvariantViolation):
            engine.run()
        if validate_run([*engine.trace_archive, engine.traces]):
            return
    pytest.fail(f"no trace of the {mutant} engine was rejected in 60 scenarios")
