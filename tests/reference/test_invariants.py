"""The run-time invariants BROADCAST_STATE, ALIGNED_EDGE, NO_ORPHANS, SAVEPOINT_KEPT, RESTORE_JUDGED, CHECKPOINT_ID and BLOCKED.

Each one (a) holds on unmutated runs: the example graphs in every mode with failures, savepoints
and on-disk storage, and generated scenarios (on disk; rescaled); and (b) can fail: a test switches on
a catalogue fault (``reference.faults``; most are ``test_only``) that breaks one rule of the engine or
the storage, and the named violation is raised. One test deletes a file of the user's savepoint at job
end as something outside the job would; that is no rule of the job, so it stays a patch of ``close``.
Unmutated runs of tests/fingerprints keep byte-identical logs (tests/test_fingerprints.py), so no
new check fires there either: a violation would stop the run and log a violation event.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import example as also_seed
from hypothesis import strategies as st

from cutcheck.model.errors import RestoreRefused
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.checks.restore_judgement import flink_refusal
from cutcheck.reference.engine import Engine
from cutcheck.reference.fuzzing.campaigns import run_scenario
from cutcheck.reference.fuzzing.generate import scenario_from_seed
from cutcheck.reference.fuzzing.swarm import Feature
from cutcheck.reference.fuzzing.verdicts import FOCI, SMALL
from cutcheck.reference.simulate import RunResult
from cutcheck.reference.storage.fs import FsCheckpointStorage
from cutcheck.reference.storage.inspection import inspect
from tests.reference.helpers import EXAMPLE_GRAPHS, EXAMPLES, scenario
from tests.reference.rescale_helpers import flink_refuses, run

NEW = {"BROADCAST_STATE", "ALIGNED_EDGE", "NO_ORPHANS", "SAVEPOINT_KEPT", "RESTORE_JUDGED"}
MODES = ("aligned", "unaligned", "aligned_timeout", "at_least_once")
STREAMING = [g for g in EXAMPLE_GRAPHS if g != "batch.json"]

# scenario_from_seed(104, rescale="always") at the time of writing, frozen: sink 2 -> 1 with in-flight
# data next to src0, whose forward output Flink cannot remap, so Flink 1.19 refuses the restore.
REFUSED = json.loads("""{"graph": {"name": "generated", "max_parallelism": 128, "vertices": [
 {"id": "src0", "kind": "source", "parallelism": 2, "records": 108, "keys": 13, "splits": 3, "seed": 0},
 {"id": "map0", "kind": "map", "parallelism": 2}, {"id": "sink", "kind": "sink", "parallelism": 2, "delivery": "exactly_once"}],
 "edges": [{"from": "src0", "to": "map0", "partitioner": "forward", "exchange": "pipelined", "gate": 0},
 {"from": "map0", "to": "sink", "partitioner": "global", "exchange": "pipelined", "gate": 0},
 {"from": "src0", "to": "sink", "partitioner": "global", "exchange": "pipelined", "gate": 0}]},
 "seed": 1502778349, "checkpoint": {"mode": "aligned_timeout", "interval": 15, "timeout": 9, "checkpoint_timeout": 5000},
 "network": {"buffer_bytes": 448, "record_bytes": 64, "exclusive": 1, "floating": 4},
 "schedule": {"policy": "backpressure", "slow": "sink", "slowdown": 17},
 "failures": [{"after_checkpoint": 1, "delay": 1, "target": "src0[0]"}, {"after_checkpoint": 2, "delay": 8, "target": "sink[0]"}],
 "rescales": [{"on_failure": 1, "parallelism": {"sink": 1}}], "mutants": [], "max_steps": 200000}""")


def names(r: RunResult) -> list[str]:
    return [v["invariant"] for v in r.violations]


def example(name: str, records: int = 400) -> dict[str, Any]:
    """An example graph with at most ``records`` per source (the time of these runs goes into files)."""
    graph = json.loads((EXAMPLES / name).read_text())
    for v in graph["vertices"]:
        if v["kind"] == "source":
            v["records"] = min(v["records"], records)
    return graph


def on_disk(base: Path, graph: str = "keyed-pipeline.json", mode: str = "aligned", **kw: Any) -> dict[str, Any]:
    """A run on disk with files for everything (nothing inlined), one retained checkpoint and savepoints."""
    s = scenario(example(graph), mode=mode, interval=60, **kw)
    s["checkpoint"].update(retained=1, incremental=True)
    s["storage"] = {"dir": str(base), "inline_threshold": 0}
    s.setdefault("savepoints", [{"at_step": 60}, {"after_checkpoint": 3, "delay": 4}])
    return s


def keyed_rescale() -> dict[str, Any]:
    raw = json.loads((EXAMPLES / "scenarios" / "keyed-rescale.json").read_text())
    raw["graph"] = json.loads((EXAMPLES / "keyed-pipeline.json").read_text())
    return raw


def flink_refuses_a_restore(sdict: dict[str, Any]) -> bool:
    """Whether Flink 1.19 refuses one of the run's restores, by the rule stated apart from the engine
    (``rescale_helpers.flink_refuses``) on the checkpoint and parallelism of each restore the engine
    attempts; the run is repeated in memory to see them."""
    r = run(sdict)
    if r.refused is not None:
        done, new, message = r.refused
        assert flink_refuses(r.engine.graph, done, new), f"refused a restore Flink accepts: {message}"
        return True
    assert not any(flink_refuses(r.engine.graph, done, new) for done, new in r.restores), "accepted a restore Flink refuses"
    return False


# ------------------------------------------------------------------------------- (a) they hold
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("graph", STREAMING)
def test_the_examples_on_disk_with_savepoints_and_a_failure_keep_every_invariant(tmp_path: Path, graph: str, mode: str) -> None:
    last = json.loads((EXAMPLES / graph).read_text())["vertices"][-1]["id"]
    r = simulate(Scenario.from_json(on_disk(tmp_path, graph, mode, slow=last,
                                            failures=[{"after_checkpoint": 2, "target": f"{last}[0]"}])))
    assert not NEW & set(names(r)), r.violations
    if mode == "at_least_once":  # duplicates after a failure are its promise; a loss, a phantom or anything else is not
        eo = r.exactly_once
        assert set(names(r)) <= {"EXACTLY_ONCE"} and eo.lost == eo.phantom == 0, (r.violations, eo)
    else:
        assert r.ok, r.violations
    assert any(c["kind"] == "savepoint" and c["status"] == "completed" for c in r.checkpoints)
    assert inspect(tmp_path).orphans == []  # NO_ORPHANS agrees with the storage inspection


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6))
def test_generated_on_disk_runs_keep_every_invariant(seed: int) -> None:
    sdict = scenario_from_seed(seed, storage=True)
    v = run_scenario(sdict)
    refused = flink_refuses_a_restore(sdict)
    assert v.refused == refused, v.violations
    assert refused or v.ok, v.violations


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6))
@also_seed(seed=1)  # refused: Flink 1.19 cannot remap this checkpoint's in-flight data
@also_seed(seed=7)  # accepted: rescaled, with 58 in-flight records moved
def test_generated_rescaled_runs_keep_every_invariant(seed: int) -> None:
    sdict = scenario_from_seed(seed, rescale="always")
    v = run_scenario(sdict)
    refused = flink_refuses_a_restore(sdict)
    assert v.refused == refused, v.violations
    assert refused or v.ok, v.violations
    assert not NEW & {x["invariant"] for x in v.violations}


def test_a_restore_flink_refuses_is_refused_and_judged_so() -> None:
    with pytest.raises(RestoreRefused):
        simulate(Scenario.from_json(REFUSED))


def test_an_accepted_rescale_is_judged_accepted() -> None:
    r = simulate(Scenario.from_json(keyed_rescale()))
    assert r.ok, r.violations
    assert r.restores and r.restores[0]["rescaled"]


def _holds_in_flight(done: Any) -> bool:
    return any(bufs for snap in done.tasks.values() for bufs in [*snap.input_state.values(), *snap.output_state.values()])


def test_the_judgement_is_the_model_rule_on_known_restores() -> None:
    """Known values: src0 -forward-> map0 -global-> sink <-global- src0. In-flight data can only sit
    on the global edges into sink (forward is kept aligned); rescaling sink then remaps src0's
    partitions, forward's among them, which Flink refuses. At unchanged parallelism, or from a
    checkpoint without in-flight data, nothing is refused."""
    s = Scenario.from_json({**REFUSED, "failures": [], "rescales": []})
    engine = Engine(s)
    while not engine.finished and not (engine.storage.latest() is not None and _holds_in_flight(engine.storage.latest())):
        engine.tick()
    done = engine.storage.latest()
    assert done is not None and _holds_in_flight(done)
    same = dict(done.parallelism)
    assert flink_refusal(s.graph, done, same) is None
    why = flink_refusal(s.graph, done, {**same, "sink": 1})
    assert why is not None and "'src0'" in why and "forward" in why
    for snap in done.tasks.values():
        snap.input_state.clear()
        snap.output_state.clear()
    assert flink_refusal(s.graph, done, {**same, "sink": 1}) is None


# ------------------------------------------------------------------------------- (b) they can fail
def test_broadcast_state_catches_a_subtask_that_skips_an_update() -> None:
    s = scenario("broadcast-state.json", mode="aligned")
    assert simulate(Scenario.from_json(s)).ok
    r = simulate(Scenario.from_json(s | {"mutants": ["subtask-misses-broadcast-state"]}))  # its output stays right
    assert names(r) == ["BROADCAST_STATE"]


def test_aligned_edge_catches_channel_state_on_a_broadcast_edge() -> None:
    s = scenario("broadcast-state.json", mode="unaligned", slow="apply", buffer_bytes=128)
    assert simulate(Scenario.from_json(s)).ok
    r = simulate(Scenario.from_json(s | {"mutants": ["broadcast-edge-unaligned"]}))  # no edge into apply forced aligned
    assert names(r) == ["ALIGNED_EDGE"] and "kept aligned" in r.violations[0]["detail"]


def test_aligned_edge_catches_a_savepoint_taken_unaligned() -> None:
    s = scenario("keyed-pipeline.json", mode="unaligned", slow="count", buffer_bytes=128,
                 savepoints=[{"at_step": 30 * k} for k in range(1, 8)])
    assert simulate(Scenario.from_json(s)).ok
    r = simulate(Scenario.from_json(s | {"mutants": ["savepoint-as-priority-barrier"]}))
    assert names(r) == ["ALIGNED_EDGE"] and "savepoint" in r.violations[0]["detail"]


def with_entropy(s: dict[str, Any], base: Path) -> Path:
    """Entropy injection (facts §8.5): data files under random prefixes in place of the marker
    (not "_entropy_", which pytest's directory names for these tests contain)."""
    s["storage"].update(dir=str(base / "_rnd_" / "ckpts"), entropy="_rnd_")
    return base / "_rnd_" / "ckpts"


def test_an_entropy_injected_run_keeps_every_invariant(tmp_path: Path) -> None:
    s = on_disk(tmp_path, mode="unaligned", slow="count", failures=[{"after_checkpoint": 2, "target": "count[0]"}])
    given = with_entropy(s, tmp_path)
    r = simulate(Scenario.from_json(s))
    assert r.ok, r.violations
    assert len([p for p in tmp_path.iterdir() if p.name != "ckpts"]) > 1  # random prefixes were made
    assert inspect(given, entropy="_rnd_").orphans == []


@pytest.mark.parametrize("entropy", [False, True])
def test_no_orphans_catches_shared_files_the_storage_keeps(tmp_path: Path, entropy: bool) -> None:
    s = on_disk(tmp_path, savepoints=[]) | {"mutants": ["shared-files-never-discarded"]}  # the registry deletes nothing
    given = with_entropy(s, tmp_path) if entropy else tmp_path
    r = simulate(Scenario.from_json(s))
    assert names(r) == ["NO_ORPHANS"]
    orphans = inspect(given, entropy="_rnd_").orphans
    named = r.violations[0]["detail"].split("e.g. ")[1].split("; ")[0].split(", ")
    assert orphans and all(p in orphans for p in named)  # the inspection calls the same files orphans


def test_no_orphans_catches_a_subsumed_checkpoint_left_on_disk(tmp_path: Path) -> None:
    """Stricter than the inspection: a subsumed checkpoint's files are no retained checkpoint's, and
    the job retains only ``retained`` checkpoints, so they are the job's garbage."""
    r = simulate(Scenario.from_json(on_disk(tmp_path, savepoints=[]) | {"mutants": ["subsumed-checkpoint-left-on-disk"]}))
    assert names(r) == ["NO_ORPHANS"]


def test_savepoint_kept_catches_subsumption_deleting_a_savepoint(tmp_path: Path) -> None:
    r = simulate(Scenario.from_json(on_disk(tmp_path) | {"mutants": ["savepoint-owned-by-the-job"]}))
    assert names(r) == ["SAVEPOINT_KEPT"] and "subsumed" in r.violations[0]["detail"]


def test_savepoint_kept_catches_a_savepoint_file_deleted_at_job_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    close = FsCheckpointStorage.close

    def close_and_drop(self: FsCheckpointStorage) -> None:
        (sp,) = [p for p in tmp_path.glob("savepoint-*/*") if p.name != "_metadata"][:1]
        sp.unlink()  # the bug: something of the job removes a file of the user's savepoint
        close(self)

    monkeypatch.setattr(FsCheckpointStorage, "close", close_and_drop)
    r = simulate(Scenario.from_json(on_disk(tmp_path, savepoints=[{"at_step": 60}])))
    assert names(r) == ["SAVEPOINT_KEPT"] and "when the job ended" in r.violations[0]["detail"]


def test_restore_judged_catches_a_restore_flink_refuses_being_accepted() -> None:
    r = simulate(Scenario.from_json(REFUSED | {"mutants": ["restore-never-refused"]}))
    assert names(r) == ["RESTORE_JUDGED"] and "Flink 1.19 refuses it" in r.violations[0]["detail"]


def test_restore_judged_catches_a_restore_flink_accepts_being_refused() -> None:
    r = simulate(Scenario.from_json(keyed_rescale() | {"mutants": ["every-rescale-refused"]}))
    assert names(r) == ["RESTORE_JUDGED"] and "Flink 1.19 accepts" in r.violations[0]["detail"]


def test_overlapping_key_group_ranges_break_ownership_when_tasks_are_built() -> None:
    """OWNERSHIP of the ranges: a range that starts at floor(i·maxP/p) instead of the ceiling overlaps
    its neighbour's; nothing routes records there, so only the check of the ranges sees it."""
    sdict = scenario("keyed-pipeline.json", mode="aligned")
    sdict["graph"] = json.loads((EXAMPLES / "keyed-pipeline.json").read_text()) | {"max_parallelism": 128}
    for v in sdict["graph"]["vertices"]:
        if v["kind"] == "keyed_count":
            v["parallelism"] = 3  # 128 / 3 is no integer: ranges meet inside a key group
    assert run_scenario(sdict).ok
    v = run_scenario(sdict | {"mutants": ["key-group-range-starts-at-floor"]})
    assert v.invariant == "OWNERSHIP" and "in the ranges of subtasks" in v.violations[0]["detail"], v.violations


def test_waiting_for_a_barrier_on_an_ended_channel_is_found_when_it_happens() -> None:
    """LIVENESS without spending the step budget: eop-not-counted-in-alignment makes an aligned task
    wait for a barrier on a channel whose end of partition it has consumed."""
    sdict = scenario("keyed-pipeline.json", mode="aligned", seed=1, max_steps=60_000)
    assert run_scenario(sdict).ok
    broken = simulate(Scenario.from_json(dict(sdict, mutants=["eop-not-counted-in-alignment"])))
    assert [v["invariant"] for v in broken.violations] == ["LIVENESS"]
    assert "waits only on channels that have ended" in broken.violations[0]["detail"]
    assert broken.steps < 60_000 // 10


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10**6))
@also_seed(seed=3)
def test_checkpoint_id_holds_on_resubmitted_jobs_and_catches_ids_that_start_over(seed: int) -> None:
    """CHECKPOINT_ID: generated resubmitted jobs (the second restores the first one's checkpoint or
    savepoint) never take an id twice; with ``checkpoint-id-restarts-after-restore`` (apache/iceberg#18123)
    the second job's first trigger takes 1 again, whatever the mode, the graph or the snapshot."""
    sdict = scenario_from_seed(seed, **FOCI["resubmit"])
    with tempfile.TemporaryDirectory(prefix="cutcheck-ids-") as tmp:
        clean = simulate(Scenario.from_json(sdict), checkpoint_dir=Path(tmp) / "clean")
        faulty = simulate(Scenario.from_json(sdict | {"mutants": ["checkpoint-id-restarts-after-restore"]}),
                          checkpoint_dir=Path(tmp) / "faulty")
    assert "CHECKPOINT_ID" not in names(clean), clean.violations
    second_job_triggered = any(c["id"] > 0 for c in clean.checkpoints)
    restored = (clean.summary().get("resubmit") or {}).get("restored")
    if restored and second_job_triggered and clean.steps > 0:
        assert names(faulty)[:1] == ["CHECKPOINT_ID"], faulty.violations
        assert "restored" in faulty.violations[0]["detail"]


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10**6))
@also_seed(seed=43)
def test_blocked_holds_on_aligned_jobs_and_catches_an_abort_that_leaves_channels_blocked(seed: int) -> None:
    """BLOCKED: generated aligned jobs whose checkpoints expire under backpressure never leave a channel
    blocked outside an alignment; with ``abort-leaves-channels-blocked`` the first violation, whenever
    is one the clean run does not have, is BLOCKED, found at the task's next handler event (seed 43: a cancel marker
    ends an alignment that holds blocked channels; 6 of seeds 30-149 do, since a source always sends its barrier)."""
    sdict = scenario_from_seed(seed, modes=("aligned",), on=(Feature.EXPIRY, Feature.BACKPRESSURE), **SMALL)
    with tempfile.TemporaryDirectory(prefix="cutcheck-blocked-") as tmp:
        clean = simulate(Scenario.from_json(sdict), checkpoint_dir=Path(tmp) / "clean")
        faulty = simulate(Scenario.from_json(sdict | {"mutants": ["abort-leaves-channels-blocked"]}),
                          checkpoint_dir=Path(tmp) / "faulty")
    assert "BLOCKED" not in names(clean), clean.violations
    # The fault changes nothing but the blocked channels: a run that breaks anything else did so clean
    # too (a job whose expiring checkpoints fail it over for ever, Flink's restart loop).
    assert names(faulty)[:1] in ([], ["BLOCKED"], names(clean)[:1]), faulty.violations
    if seed == 43:
        assert names(faulty)[:1] == ["BLOCKED"], faulty.violations
