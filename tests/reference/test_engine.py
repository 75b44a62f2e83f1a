"""The reference engine over every example graph, mode and failure point; controls and determinism."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest

from cutcheck.reference import Scenario, simulate
from tests.reference.helpers import EXAMPLE_GRAPHS, scenario, small_graph

MODES = ["aligned", "unaligned", "aligned_timeout"]
FAILURES = [
    [],
    [{"after_checkpoint": 1, "target": "sink[0]"}],
    [{"after_checkpoint": 2, "delay": 7, "target": "worker:0"}],
    [{"at_step": 150, "target": "worker:1"}, {"after_checkpoint": 4, "target": "sink[0]"}],
]


@pytest.mark.parametrize("graph", EXAMPLE_GRAPHS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("failures", range(len(FAILURES)))
def test_examples_are_exactly_once(graph: str, mode: str, failures: int) -> None:
    chosen = FAILURES[failures]
    if graph == "batch.json":  # a batch job takes no checkpoints: fail it at steps instead
        chosen = [{"at_step": 120 + 90 * i, "target": f["target"]} for i, f in enumerate(chosen)]
    result = simulate(Scenario.from_json(scenario(graph, mode=mode, failures=chosen, seed=failures + 3)))
    assert result.violations == [], result.violations
    assert result.exactly_once.ok, result.exactly_once
    if any(e.exchange == "blocking" for e in result.scenario.graph.edges):
        return  # a batch job: regions, no checkpoints (facts §6); tests/reference/test_batch.py covers it
    assert any(c["status"] == "completed" for c in result.checkpoints)
    if FAILURES[failures]:
        assert result.restarts >= 1


def test_at_least_once_shows_duplicates_after_a_failure() -> None:
    """The control: barrier tracking without alignment replays records that were already applied."""
    found = []
    for seed in range(40):
        s = scenario(small_graph(400), mode="at_least_once", seed=seed, slow="count",
                     failures=[{"after_checkpoint": 2, "delay": 3, "target": "count[0]"}])
        r = simulate(Scenario.from_json(s))
        if r.exactly_once.duplicated:
            found.append(seed)
            break
    assert found, "at-least-once never duplicated a record across 40 seeds"


def test_unaligned_beats_aligned_under_backpressure() -> None:
    """Unaligned checkpoints persist in-flight data and align (almost) nothing; aligned ones wait."""
    base = scenario("keyed-pipeline.json", slow="count", seed=11, interval=60)
    aligned = simulate(Scenario.from_json({**base, "checkpoint": {"mode": "aligned", "interval": 60}}))
    unaligned = simulate(Scenario.from_json(base))
    sa, su = aligned.summary(), unaligned.summary()
    assert aligned.ok and unaligned.ok
    assert su["checkpoints_completed"] > 0
    assert su["input_state_records"] + su["output_state_records"] > 0
    per_a = sa["alignment_steps"] / max(1, sa["checkpoints_completed"])
    per_u = su["alignment_steps"] / max(1, su["checkpoints_completed"])
    assert per_u < per_a, (per_u, per_a)


def test_same_seed_same_logs(tmp_path: Path) -> None:
    s = scenario("keyed-pipeline.json", slow="count", failures=[{"after_checkpoint": 2, "target": "count[0]"}])
    a = simulate(Scenario.from_json(s), out_dir=tmp_path / "a")
    b = simulate(Scenario.from_json(s), out_dir=tmp_path / "b")
    assert a.ok and b.ok
    for sub in ("input", "output", "checkpoints", "events"):
        files = sorted(p.name for p in (tmp_path / "a" / sub).iterdir())
        assert files
        match, mismatch, errors = filecmp.cmpfiles(tmp_path / "a" / sub, tmp_path / "b" / sub, files, shallow=False)
        assert not mismatch and not errors, (sub, mismatch, errors)
