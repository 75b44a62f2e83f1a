"""Guided campaigns (reference.fuzzing.guided): draws that replay, mutations that keep what they should,
a campaign its seed reproduces, and a corpus that grows with new abstract states."""

from __future__ import annotations

import json
import random
from pathlib import Path

from cutcheck.reference.fuzzing.abstract_coverage import AbstractCoverage
from cutcheck.reference.fuzzing.generate import scenario_dict
from cutcheck.reference.fuzzing.guided import RecordingDraw, fresh_gen, guided_campaign, mutate
from cutcheck.reference.fuzzing.swarm import Feature


def test_recorded_draws_replay_the_same_scenario_and_fold_into_range() -> None:
    first = RecordingDraw(random.Random(1))
    sdict = scenario_dict(first, interleave=True)
    again = RecordingDraw(random.Random(99), first.draws)
    assert scenario_dict(again, interleave=True) == sdict
    folded = RecordingDraw(random.Random(0), [17])
    assert folded.integer(0, 4) == 2  # 17 folded into 0..4


def test_a_seed_mutation_keeps_the_job_and_changes_the_schedule_seed() -> None:
    draw = RecordingDraw(random.Random(4))
    sdict = scenario_dict(draw)
    rng = random.Random(0)
    for _ in range(20):
        child = mutate(rng, draw.draws, draw.seeds)
        if sum(a != b for a, b in zip(child, draw.draws, strict=False)) == 1 and len(child) == len(draw.draws):
            other = scenario_dict(RecordingDraw(random.Random(5), child))
            if other["seed"] != sdict["seed"]:
                assert {k: v for k, v in other.items() if k != "seed"} == {k: v for k, v in sdict.items() if k != "seed"}
                return
    raise AssertionError("no seed mutation in 20 tries (one in three expected)")


def test_fresh_scenarios_force_the_least_reached_feature_pair() -> None:
    reached = AbstractCoverage()
    gen = fresh_gen(random.Random(0), 0, reached)
    forced = set(gen["on"])
    assert len(forced) >= 2
    assert Feature.AT_LEAST_ONCE_SINK not in forced  # only its own focus asks for at-least-once sinks
    a, b = sorted(f.value for f in gen["on"][-2:])
    reached.hits["pair", a, b] += 5  # reached now: the next fresh scenario forces another pair
    assert set(fresh_gen(random.Random(0), 0, reached)["on"]) != forced


def test_a_guided_campaign_is_reproduced_by_its_seed_and_keeps_new_states() -> None:
    one = guided_campaign(seconds=None, examples=6, seed=2)
    two = guided_campaign(seconds=None, examples=6, seed=2)
    assert one.ok and one.examples == 6
    assert one.abstract.hits == two.abstract.hits and one.corpus == two.corpus
    assert 1 <= one.corpus <= 6 and one.mutated >= 1
    assert one.to_json()["abstract_coverage"]["reachable_cells"] == one.abstract.reachable()
    assert set(one.first_reached) == {name for name in one.to_json()["abstract_coverage"]["reached"]}


def test_a_guided_campaign_finds_a_catalogue_fault() -> None:
    found = guided_campaign(seconds=None, examples=30, seed=3, mutants=("broadcast-edge-unaligned",))
    assert found.failure is not None and found.failure.invariant == "ALIGNED_EDGE"


def test_fuzz_reports_abstract_coverage_in_its_output_and_json(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cutcheck.cli import app

    report = tmp_path / "fuzz.json"
    res = CliRunner().invoke(app, ["fuzz", "--seeds", "--examples", "3", "--seed", "7", "--json", str(report)])
    assert res.exit_code == 0, res.output
    assert "abstract coverage: " in res.output and "reachable abstract-state cells reached" in res.output
    data = json.loads(report.read_text())["abstract_coverage"]
    assert data["reached"] and data["missed"] and data["unreachable"]
    assert len(data["reached"]) + len(data["missed"]) >= data["reachable_cells"]
