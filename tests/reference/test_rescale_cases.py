"""Rescaling, case by case: operator state, broadcast and multi-edge channel state, the engine's
refusals, the rescale mutants, scenario validation and the CLI (the generated properties are in test_rescale.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from typer.testing import CliRunner

from cutcheck.model.errors import RestoreRefused, ScenarioError
from cutcheck.model.execution import SubtaskId
from cutcheck.model.keygroups import key_group_range
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.engine import Engine
from cutcheck.reference.recovery.fanout import BroadcastFanout
from cutcheck.reference.recovery.rescale import assign_operator_state, split_distribute
from cutcheck.reference.runtime.network import Buf
from cutcheck.reference.runtime.tasks import TaskSnapshot
from cutcheck.reference.storage.memory import CompletedCheckpoint, InMemoryStorage
from tests.reference.helpers import scenario, small_graph
from tests.reference.rescale_helpers import flink_refuses, moved_records, parse_moves, run
from tests.strategies import job_graph_dicts

POINTWISE_OR_BROADCAST = ("forward", "rescale", "broadcast")
REFUSED_WITH_STATE = (*POINTWISE_OR_BROADCAST, "custom")  # Flink cannot rescale their in-flight data



# ------------------------------------------------------------------------------------ operator state
def test_split_distribute_is_flinks_contiguous_round_robin() -> None:
    assert split_distribute(list(range(5)), 3) == [[0, 1], [2, 3], [4]]
    assert split_distribute(["a", "b"], 3) == [["a"], ["b"], []]
    assert split_distribute(list(range(6)), 2) == [[0, 1, 2], [3, 4, 5]]
    assert split_distribute([], 2) == [[], []]


def keyed_broadcast_graph(apply: int) -> dict[str, Any]:
    return {"name": "kb", "max_parallelism": 16,
            "vertices": [{"id": "events", "kind": "source", "parallelism": 2, "records": 10, "keys": 8, "splits": 3},
                         {"id": "rules", "kind": "source", "parallelism": 1, "records": 4, "keys": 2},
                         {"id": "apply", "kind": "broadcast_state", "parallelism": apply},
                         {"id": "sink", "kind": "sink", "parallelism": 2}],
            "edges": [{"from": "events", "to": "apply", "partitioner": "hash", "gate": 0},
                      {"from": "rules", "to": "apply", "partitioner": "broadcast", "gate": 1},
                      {"from": "apply", "to": "sink", "partitioner": "rebalance"}]}


def test_operator_state_moves_by_key_group_list_round_robin_and_broadcast_copy() -> None:
    engine = Engine(Scenario.from_json(scenario(keyed_broadcast_graph(3))))
    old = dict(engine.parallelism)
    snaps = {sid: TaskSnapshot(1, sid, t.op.snapshot()) for sid, t in engine.tasks.items()}
    for i in range(3):  # each old keyed subtask holds its own key groups, and its broadcast copy
        r = key_group_range(16, 3, i)
        snaps[SubtaskId("apply", i)].operator = {
            "counts": {kg: {kg * 100: kg + 1} for kg in r},
            "order": {kg: {(kg * 100, 0, 0, i): 7} for kg in r},
            "broadcast": [1000 + i]}
    snaps[SubtaskId("events", 0)].operator = {"splits": [(0, 4), (2, 1)]}
    snaps[SubtaskId("events", 1)].operator = {"splits": [(1, 3)]}
    snaps[SubtaskId("sink", 0)].operator = {"pending": [[2, "s0-b"], [1, "s0-a"]], "next_txn": 5}
    snaps[SubtaskId("sink", 1)].operator = {"pending": [[1, "s1-a"]], "next_txn": 9}
    done = CompletedCheckpoint(2, "checkpoint", 0, old, snaps)
    engine._build(None, {"apply": 5, "events": 3, "sink": 1})
    states = assign_operator_state(engine, done)
    for i in range(5):
        mine = key_group_range(16, 5, i)
        st_ = states[SubtaskId("apply", i)]
        assert set(st_["counts"]) == set(mine) and set(st_["order"]) == set(mine)
        assert all(st_["counts"][kg] == {kg * 100: kg + 1} for kg in mine)
        assert st_["broadcast"] == [1000 + i % 3]  # Flink: new i reads old i % oldP's copy
    assert [states[SubtaskId("events", i)]["splits"] for i in range(3)] == [[(0, 4)], [(2, 1)], [(1, 3)]]
    sink = states[SubtaskId("sink", 0)]
    assert sink["pending"] == [[1, "s0-a"], [1, "s1-a"], [2, "s0-b"]] and sink["next_txn"] == 9
    assert states[SubtaskId("rules", 0)] is snaps[SubtaskId("rules", 0)].operator  # unchanged vertex: 1:1


def test_keyed_broadcast_rescale_up_and_down_is_exactly_once() -> None:
    """Broadcast state copied, keyed state split, and the broadcast's copies follow the parallelism
    at the time each element crossed the edge (reference.recovery.fanout)."""
    g = keyed_broadcast_graph(3)
    g["vertices"][0]["records"], g["vertices"][1]["records"] = 300, 40
    for seed in range(1, 4):
        s = scenario(g, seed=seed, slow="apply", failures=[{"after_checkpoint": 2, "target": "apply[0]"},
                                                           {"after_checkpoint": 4, "target": "sink[0]"}])
        s["rescales"] = [{"on_failure": 0, "parallelism": {"apply": 5}}, {"on_failure": 1, "parallelism": {"apply": 2}}]
        r = simulate(Scenario.from_json(s))
        assert r.ok, (seed, r.violations, r.exactly_once)
        assert sum(1 for x in r.restores if x.get("rescaled")) == 2


def test_nested_broadcast_copies_in_flight_between_the_broadcasts() -> None:
    """Copies of one record cross the second broadcast edge in different epochs when some were in
    flight (rebalance, unaligned) at the checkpoint and its consumer is rescaled."""
    g = {"name": "nested", "max_parallelism": 16,
         "vertices": [{"id": "src", "kind": "source", "parallelism": 1, "records": 120, "keys": 4, "splits": 2},
                      {"id": "m1", "kind": "map", "parallelism": 2}, {"id": "m2", "kind": "map", "parallelism": 3},
                      {"id": "m3", "kind": "map", "parallelism": 2}, {"id": "sink", "kind": "sink", "parallelism": 1}],
         "edges": [{"from": "src", "to": "m1", "partitioner": "broadcast"}, {"from": "m1", "to": "m2", "partitioner": "rebalance"},
                   {"from": "m2", "to": "m3", "partitioner": "broadcast"}, {"from": "m3", "to": "sink", "partitioner": "rebalance"}]}
    moved = 0
    for seed in range(1, 6):
        s = scenario(g, seed=seed, slow="m2", failures=[{"after_checkpoint": 2, "target": "m2[0]"}])
        s["rescales"] = [{"on_failure": 0, "parallelism": {"m3": 4, "m1": 1}}]
        r = simulate(Scenario.from_json(s))
        assert r.ok, (seed, r.violations, r.exactly_once)
        moved += moved_records(r.restores)
    assert moved > 0, "no copy was in flight between the broadcasts"


def test_restore_back_at_the_checkpoints_parallelism_after_a_failed_rescaled_attempt() -> None:
    """Restored at sink 2->1 from checkpoint 1, the job fails again before checkpoint 2 completes and
    is restored from checkpoint 1 at sink 1->2: a restore that is no rescale against the checkpoint
    (Flink compares the checkpoint's parallelism with the new one), yet the broadcast copies the oracle
    expects must follow parallelism 2 again, not the failed attempt's 1 (shrunk from seed 1903055927)."""
    g = {"name": "bc", "max_parallelism": 8,
         "vertices": [{"id": "src", "kind": "source", "parallelism": 1, "records": 2000, "keys": 4, "splits": 1},
                      {"id": "sink", "kind": "sink", "parallelism": 2, "delivery": "exactly_once"}],
         "edges": [{"from": "src", "to": "sink", "partitioner": "broadcast"}]}
    for target, delay in (("sink[0]", 0), ("src[0]", 5)):
        s = scenario(g, mode="aligned", interval=5, slow="sink", failures=[
            {"after_checkpoint": 1, "target": target}, {"after_checkpoint": 1, "delay": delay, "target": target}])
        s["rescales"] = [{"on_failure": 0, "parallelism": {"sink": 1}}, {"on_failure": 1, "parallelism": {"sink": 2}}]
        r = simulate(Scenario.from_json(s))
        assert [(x["checkpoint"], x["rescaled"]) for x in r.restores] == [(1, True), (1, False)]
        assert r.ok, (target, r.violations, r.exactly_once)
        assert r.exactly_once.duplicated == 0 and r.exactly_once.lost == 0


def test_counts_over_a_broadcast_into_a_rescaled_sink_are_no_one_copy_promise() -> None:
    """keyed_count -> broadcast -> sink at parallelism 1: one copy of each count, 1..n per key, until a
    restore gives the sink 2 or 3 subtasks and each count is committed once per subtask. The count
    check must not promise 1..n over such a route (reference.runtime.records.routes ``rescaled``);
    it reported count gaps on unmutated code (shrunk from the targeted campaign's seed 20226)."""
    g = {"name": "cb", "max_parallelism": 8,
         "vertices": [{"id": "src", "kind": "source", "parallelism": 2, "records": 200, "keys": 5, "splits": 2},
                      {"id": "count", "kind": "keyed_count", "parallelism": 1},
                      {"id": "sink", "kind": "sink", "parallelism": 1, "delivery": "exactly_once"}],
         "edges": [{"from": "src", "to": "count", "partitioner": "hash"},
                   {"from": "count", "to": "sink", "partitioner": "broadcast"}]}
    for p in (2, 3):
        s = scenario(g, mode="aligned", interval=10, failures=[{"after_checkpoint": 1, "target": "count[0]"}])
        s["rescales"] = [{"on_failure": 0, "parallelism": {"sink": p}}]
        r = simulate(Scenario.from_json(s))
        assert [(x["checkpoint"], x["rescaled"]) for x in r.restores] == [(1, True)]
        assert r.ok, (p, r.violations, r.exactly_once)
    # Without a rescale of the sink the promise stands, and the check still runs.
    r = simulate(Scenario.from_json(scenario(g, mode="aligned", interval=10)))
    assert r.ok and Engine(Scenario.from_json(scenario(g))).expect.count_groups == {"sink": "count"}


@given(job_graph_dicts(blocking=False, max_middle=4))
def test_broadcast_fanout_agrees_with_the_static_expectation_before_any_rescale(graph: dict[str, Any]) -> None:
    """reference.recovery.fanout counts copies by walking the graph; with no rescale it must give exactly the
    copies the oracle's static routes promise, for every record."""
    engine = Engine(Scenario.from_json({"graph": graph}))
    expect = engine.expect
    counted = BroadcastFanout(engine).expected()
    for name, layout in expect.layouts.items():
        for j in range(layout.records):
            assert counted[layout.rid_base + j] == expect.copies(name, layout.rid_base + j)


def test_two_edges_between_the_same_vertices_keep_their_channel_state_apart() -> None:
    """multi-edge.json joins src and both twice (rebalance on gate 0, shuffle on gate 1): each edge's
    in-flight records are redistributed on that edge (the edge key is part of every channel key)."""
    for seed in range(1, 4):
        s = scenario("multi-edge.json", seed=seed, slow="both", failures=[{"after_checkpoint": 2, "target": "both[0]"}])
        s["rescales"] = [{"on_failure": 0, "parallelism": {"both": 5, "src": 1}}]
        r = simulate(Scenario.from_json(s))
        assert r.ok, (seed, r.violations, r.exactly_once)
        edges = r.restores[0]["edges"]
        assert {0, 1} <= set(edges)
        assert all(edges[k]["input_records"] + edges[k]["output_records"] > 0 for k in (0, 1)), edges


def test_merged_in_flight_slices_end_the_order_promise_downstream_and_only_there() -> None:
    """map 3 -> 1 behind a rebalance: the new map replays the in-flight slices of a split that three
    old maps held, one after the other, so count (hash from map) may see that split's offsets out
    of order under one producer. Flink promises order per channel only; the restore says that the
    edge is no longer checked, and everything else still is."""
    merges = 0
    for seed in range(1, 6):
        g = small_graph(400)
        g["vertices"][0]["keys"], g["vertices"][1]["parallelism"] = 1, 3
        s = scenario(g, seed=seed, slow="count", failures=[{"after_checkpoint": 2, "target": "count[0]"}])
        s["rescales"] = [{"on_failure": 0, "parallelism": {"map": 1}}]
        r = run(s)
        assert r.violations == [] and r.verdict.ok, (seed, r.violations, r.verdict)
        merged = any(c != d for _, c, _, d, _ in parse_moves(r.engine.restore_reports[0]["edges"][0]["moves"]))
        assert r.engine.restore_reports[0].get("order_unchecked_edges", []) == ([1] if merged else [])
        assert r.engine.order_edges["count"] == (frozenset() if merged else frozenset({1}))
        merges += merged
    assert merges >= 3, "too few restores merged in-flight slices to show the rule"
    s["rescales"] = [{"on_failure": 0, "parallelism": {"map": 4}}]  # scale-up: no new subtask merges slices
    r = run(s)
    assert r.verdict.ok and "order_unchecked_edges" not in r.engine.restore_reports[0]
    assert r.engine.order_edges["count"] == frozenset({1})


# ------------------------------------------------------------------------------ refusals in the engine
class ForwardStateStorage(InMemoryStorage):
    """Stores each completed checkpoint with in-flight records on edge 0 (a forward edge), as a
    checkpoint of a job whose edge could hold channel state would have (Flink keeps forward edges
    aligned, so its own checkpoints never do)."""

    def complete(self, checkpoint: CompletedCheckpoint, retained: int) -> list[int]:
        snap = checkpoint.tasks[SubtaskId("map", 0)]
        snap.input_state.setdefault((0, 0, 0), []).append(Buf([(10_000, 1, 0, 0, 0, 0, -1)], 0))
        return super().complete(checkpoint, retained)


def forward_graph() -> dict[str, Any]:
    return {"name": "fwd", "max_parallelism": 16,
            "vertices": [{"id": "src", "kind": "source", "parallelism": 2, "records": 200, "keys": 8, "splits": 2},
                         {"id": "map", "kind": "map", "parallelism": 2},
                         {"id": "sink", "kind": "sink", "parallelism": 1}],
            "edges": [{"from": "src", "to": "map", "partitioner": "forward"},
                      {"from": "map", "to": "sink", "partitioner": "rebalance"}]}


def test_engine_refuses_a_restore_that_would_rescale_forward_channel_state() -> None:
    s = scenario(forward_graph(), failures=[{"after_checkpoint": 2, "target": "map[0]"}])
    s["rescales"] = [{"on_failure": 0, "parallelism": {"src": 3, "map": 3}}]
    with pytest.raises(RestoreRefused) as exc:
        simulate(Scenario.from_json(s), storage=ForwardStateStorage())
    message = str(exc.value)
    assert "edge #0 (src -> map), a forward edge" in message and "src 2 -> 3" in message
    assert "\n" not in message


@pytest.mark.parametrize("mode", ["aligned", "unaligned"])
def test_forward_edges_rescale_unless_their_checkpoint_holds_in_flight_data(mode: str) -> None:
    """Flink keeps forward edges aligned in unaligned mode too (facts §3.7), and a task triggered
    directly once its producers finished (FLIP-147) snapshots aligned when any input is forced
    aligned, so a forward edge never holds channel state and rescaling its ends always succeeds.
    A refusal would therefore be a fault; the test asserts Flink's rule whenever one happens."""
    outcomes = set()
    for seed in range(1, 9):
        graph = forward_graph()
        # the sources finish before or after the checkpoint (with 100 records, seed 1's job ended after
        # its first checkpoint once finishing tasks stopped snapshotting in Task.finish: no failure)
        graph["vertices"][0]["records"] = 100 * seed + 50
        s = scenario(graph, mode=mode, seed=seed, slow="map", failures=[{"after_checkpoint": 2, "target": "map[0]"}])
        s["rescales"] = [{"on_failure": 0, "parallelism": {"src": 3, "map": 3}}]
        r = run(s)
        if r.refused is not None:
            done, new, _ = r.refused
            assert mode == "unaligned" and flink_refuses(r.engine.graph, done, new)
            outcomes.add("refused")
            continue
        assert r.violations == [] and r.verdict.ok, (seed, r.violations, r.verdict)
        assert r.restores and all(not flink_refuses(r.engine.graph, d, n) for d, n in r.restores)
        outcomes.add("restored")
    assert outcomes == {"restored"}


# ------------------------------------------------------------------------------------------- mutants
MUTANT_RUNS: dict[str, tuple[dict[str, Any], dict[str, int]]] = {
    # a stateless map between two exchanges: its input and output state are both in flight
    "skip-stateless-reassignment": (small_graph(300), {"map": 3}),
    # hash into keyed_count 2 -> 3: RANGE is ambiguous, so old channels reach two new subtasks
    "no-rescale-filter": (small_graph(300), {"count": 3}),
}


def _mutant_scenario(mutant: str, seed: int, with_mutant: bool) -> dict[str, Any]:
    graph, parallelism = MUTANT_RUNS[mutant]
    s = scenario(graph, seed=seed, slow="count", mutants=[mutant] if with_mutant else [],
                 failures=[{"after_checkpoint": 2, "target": "count[0]"}])
    s["rescales"] = [{"on_failure": 0, "parallelism": parallelism}]
    return s


# What each mutant breaks: unfiltered ambiguous channel state reaches a subtask that does not own its
# key group; a stateless vertex that gets no channel state loses the records that were in flight.
KILLED_BY = {"no-rescale-filter": "OWNERSHIP", "skip-stateless-reassignment": "EXACTLY_ONCE"}


@pytest.mark.parametrize("mutant", sorted(MUTANT_RUNS))
@pytest.mark.parametrize("seed", [1, 2])
def test_rescale_mutant_is_killed(mutant: str, seed: int) -> None:
    """Killed by the invariant it breaks (not any failure: a LIVENESS stop would not show the bug); the
    same seed without it passes (test_rescale_mutant_runs_are_clean_without_it)."""
    r = simulate(Scenario.from_json(_mutant_scenario(mutant, seed, True)))
    assert [v["invariant"] for v in r.violations][:1] == [KILLED_BY[mutant]], r.violations
    if KILLED_BY[mutant] == "EXACTLY_ONCE":
        assert r.exactly_once.lost > 0 and r.exactly_once.duplicated == 0, r.exactly_once


@pytest.mark.parametrize("mutant", sorted(MUTANT_RUNS))
def test_rescale_mutant_runs_are_clean_without_it(mutant: str) -> None:
    for seed in range(1, 6):
        r = simulate(Scenario.from_json(_mutant_scenario(mutant, seed, False)))
        assert r.ok, (seed, r.violations, r.exactly_once)
        assert moved_records(r.restores) > 0, "the restore moved no in-flight data: the mutant would not matter"


# ------------------------------------------------------------------------------- scenario validation
@pytest.mark.parametrize(("parallelism", "message"), [
    ({"nope": 2}, "no vertex 'nope' to rescale"),
    ({"map": 0}, "positive integers"),
    ({"map": 17}, "outside 1..16"),
    ({"map": 3}, "edge #0 (src -> map) is forward"),
])
def test_scenario_rescales_are_validated(parallelism: dict[str, int], message: str) -> None:
    s = scenario(forward_graph(), failures=[{"after_checkpoint": 1, "target": "map[0]"}])
    s["rescales"] = [{"on_failure": 0, "parallelism": parallelism}]
    with pytest.raises(ScenarioError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Scenario.from_json(s)


def test_rescales_are_validated_in_failure_order() -> None:
    s = scenario(forward_graph(), failures=[{"after_checkpoint": 1, "target": "map[0]"}, {"after_checkpoint": 3, "target": "map[0]"}])
    s["rescales"] = [{"on_failure": 1, "parallelism": {"map": 4}}, {"on_failure": 0, "parallelism": {"src": 4}}]
    with pytest.raises(ScenarioError, match=r"rescales\[1\]: edge #0"):
        Scenario.from_json(s)  # failure 0 comes first and leaves the forward edge at 4 -> 2
    s["rescales"][0]["parallelism"] = {"map": 4, "src": 4}
    s["rescales"][1]["parallelism"] = {"src": 4, "map": 4}
    assert Scenario.from_json(s).rescales[0].parallelism == {"map": 4, "src": 4}


# ---------------------------------------------------------------------------------------------- CLI
def _write(tmp_path: Path, s: dict[str, Any]) -> Path:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(s))
    return path


def _cli(*args: str) -> Any:
    from cutcheck.cli import app

    return CliRunner().invoke(app, [*args], catch_exceptions=False)


def test_cli_simulate_rescale_prints_moves_and_filter_per_edge(tmp_path: Path) -> None:
    s = scenario(small_graph(300), seed=2, slow="count", failures=[{"after_checkpoint": 2, "target": "count[0]"}])
    r = _cli("simulate", str(_write(tmp_path, s)), "--rescale", "count=3", "--json", str(tmp_path / "out.json"))
    assert r.exit_code == 0, r.output
    assert "restore from checkpoint 2 (rescaled: count 2→3)" in r.output
    assert "#1 map -> count" in r.output and "RANGE / ARBITRARY" in r.output
    restore = json.loads((tmp_path / "out.json").read_text())["restores"][0]
    edge = restore["edges"]["1"]
    assert edge["filtered"] > 0 and str(edge["filtered"]) in r.output
    for move in edge["moves"]:  # e.g. "old 0→1 ⇒ new 0→2: 12"
        assert move in r.output
    kept = sum(n for *_, n in parse_moves(edge["moves"]))
    assert kept > 0 and edge["input_records"] + edge["output_records"] > 0


def test_cli_rescale_needs_a_failure(tmp_path: Path) -> None:
    r = _cli("simulate", str(_write(tmp_path, scenario(small_graph(50)))), "--rescale", "count=3")
    assert r.exit_code == 2
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "has no failures" in lines[0]


@pytest.mark.parametrize(("arg", "message"), [
    ("nope=3", "no vertex 'nope'"), ("map=0", "expected VERTEX=P"), ("map=99", "outside 1..16"), ("map=3", "is forward"),
])
def test_cli_rescale_is_validated(tmp_path: Path, arg: str, message: str) -> None:
    s = scenario(forward_graph(), failures=[{"after_checkpoint": 1, "target": "map[0]"}])
    r = _cli("simulate", str(_write(tmp_path, s)), "--rescale", arg)
    assert r.exit_code == 2 and message in r.output
    assert len([line for line in r.output.splitlines() if line.strip()]) == 1


def test_cli_reports_a_refused_restore_in_one_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cutcheck.reference import engine

    monkeypatch.setattr(engine, "InMemoryStorage", ForwardStateStorage)
    s = scenario(forward_graph(), failures=[{"after_checkpoint": 2, "target": "map[0]"}])
    r = _cli("simulate", str(_write(tmp_path, s)), "--rescale", "src=3", "--rescale", "map=3")
    assert r.exit_code == 2
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: restore refused as Flink refuses it")
