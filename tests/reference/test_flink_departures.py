"""Departures from Flink closed in the engine (issue 16), each test citing the Flink behaviour it mirrors."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from cutcheck.model.errors import CutcheckError, RestoreRefused
from cutcheck.model.execution import SubtaskId
from cutcheck.model.graph import JobGraph
from cutcheck.reference import Scenario
from cutcheck.reference.checkpointing.barriers import (
    CollectingBarriers,
    CollectingBarriersUnaligned,
    WaitingForFirstBarrier,
)
from cutcheck.reference.engine import Engine
from cutcheck.reference.recovery.rescale_refusal import refuse_if_flink_would
from cutcheck.reference.runtime.network import Barrier, Buf
from cutcheck.reference.runtime.tasks import TaskSnapshot
from cutcheck.reference.storage.memory import CompletedCheckpoint
from tests.reference.helpers import scenario


def _chain(src_parallelism: int, records: int = 400) -> dict[str, Any]:
    return {"name": "chain", "max_parallelism": 128,
            "vertices": [{"id": "src", "kind": "source", "parallelism": src_parallelism, "records": records,
                          "keys": 8, "splits": 2},
                         {"id": "map", "kind": "map", "parallelism": 1},
                         {"id": "sink", "kind": "sink", "parallelism": 1}],
            "edges": [{"from": "src", "to": "map", "partitioner": "rebalance"},
                      {"from": "map", "to": "sink", "partitioner": "rebalance"}]}


def _map_with_queued_barrier(src_parallelism: int, timeout: int) -> tuple[Engine, Any, Barrier]:
    """Run until an aligned (timeoutable) barrier is queued at ``map[0]``, which has not yet seen one."""
    engine = Engine(Scenario.from_json(scenario(_chain(src_parallelism), mode="aligned_timeout", timeout=timeout,
                                                interval=30)))
    task = next(t for t in engine.tasks.values() if t.sid.vertex == "map")
    for _ in range(20_000):
        engine.tick()
        for ch in task.channels:
            if ch.queue and isinstance(ch.queue[0], Barrier) and isinstance(task.handler, WaitingForFirstBarrier):
                return engine, ch, ch.queue[0]
    raise AssertionError("no barrier reached map[0]")


# ---------------------------------------------------------------- departure 2: aligned timeout
def test_the_last_barrier_completes_aligned_even_after_the_timeout() -> None:
    """AbstractAlternatingAlignedBarrierHandlerState.barrierReceived asks ``allBarriersReceived()``
    before ``isTimedOut(barrier)``: an aligned barrier that is the last one a task waits for triggers
    an aligned checkpoint, however late (here: a single-channel task whose barrier is processed after
    the timeout, before the timeout timer ran)."""
    engine, ch, barrier = _map_with_queued_barrier(1, timeout=100_000)
    task = ch.task
    assert not barrier.priority and barrier.options == "timeoutable"
    engine.step = barrier.trigger_step + engine.scenario.checkpoint.timeout + 1
    assert task.timed_out(barrier)
    task.process(ch)
    snap = task.snapshots[barrier.cp]
    assert not snap.unaligned and snap.input_state == {}
    assert isinstance(task.handler, WaitingForFirstBarrier)
    assert not ch.blocked


def test_a_late_barrier_that_leaves_others_outstanding_switches_to_unaligned() -> None:
    """The same handler, not all barriers received and timed out: ``alignmentTimeout`` — the
    checkpoint continues unaligned, and the channel that delivered the barrier stays blocked until
    the checkpoint ends at the task (it is re-blocked by AlternatingCollectingBarriersUnaligned)."""
    engine, ch, barrier = _map_with_queued_barrier(2, timeout=100_000)
    task = ch.task
    other = next(c for c in task.channels if c is not ch)
    assert not any(isinstance(x, Barrier) for x in other.queue)
    engine.step = barrier.trigger_step + engine.scenario.checkpoint.timeout + 1
    task.process(ch)
    assert isinstance(task.handler, CollectingBarriersUnaligned)
    assert task.snapshots[barrier.cp].unaligned
    assert ch.blocked


def test_before_the_timeout_a_barrier_aligns() -> None:
    engine, ch, barrier = _map_with_queued_barrier(2, timeout=100_000)
    ch.task.process(ch)
    assert isinstance(ch.task.handler, CollectingBarriers) and ch.blocked


# ---------------------------------------------------------------- departure 5: at-least-once tracking
def _tracking_map(max_concurrent: int) -> tuple[Engine, Any, list[int]]:
    """A fresh at-least-once engine whose ``map[0]`` reads two channels, with checkpoints pending."""
    raw = scenario(_chain(2), mode="at_least_once")
    raw["checkpoint"]["max_concurrent"] = max_concurrent
    engine = Engine(Scenario.from_json(raw))
    cps = [engine.coordinator.trigger() for _ in range(max_concurrent)]
    task = next(t for t in engine.tasks.values() if t.sid.vertex == "map")
    return engine, task, cps


def _barrier(task: Any, channel: int, cp: int) -> None:
    b = Barrier(cp, "checkpoint", "at_least_once", 0)
    task.handler = task.handler.barrier_received(task.control, task.channels[channel], b)


def test_at_least_once_a_newer_barrier_declines_nothing() -> None:
    """CheckpointBarrierTracker.processBarrier: the first barrier of a newer checkpoint adds it to the
    pending checkpoints; the older one stays pending (no decline) and completes when its last
    barrier arrives."""
    engine, task, (one, two) = _tracking_map(2)
    _barrier(task, 0, one)
    _barrier(task, 0, two)
    assert set(engine.coordinator.pending) == {one, two}
    assert not task.snapshots
    _barrier(task, 1, one)
    assert one in task.snapshots and two not in task.snapshots
    _barrier(task, 1, two)
    assert two in task.snapshots
    assert all(s.status != "aborted" for s in engine.coordinator.stats)


def test_at_least_once_completing_a_newer_checkpoint_drops_older_ones_silently() -> None:
    """CheckpointBarrierTracker: when a checkpoint completes, it "and all prior pending checkpoints
    (which are now subsumed)" leave the queue; the task declines nothing, so the coordinator keeps
    the older one pending until a newer one completes (CheckpointCoordinator.dropSubsumedCheckpoints)."""
    engine, task, (one, two) = _tracking_map(2)
    _barrier(task, 0, one)
    _barrier(task, 0, two)
    _barrier(task, 1, two)  # channel 1's producer never sent the barrier of ``one``
    assert two in task.snapshots and one not in task.snapshots
    assert one in engine.coordinator.pending
    _barrier(task, 1, one)  # a late barrier of a dropped checkpoint is ignored
    assert one not in task.snapshots
    assert isinstance(task.handler, WaitingForFirstBarrier)


def test_at_least_once_tracks_at_most_50_checkpoints() -> None:
    """CheckpointBarrierTracker.MAX_CHECKPOINTS_TO_TRACK = 50: the 51st partly aligned checkpoint
    pushes the oldest out of the queue; its barriers can no longer complete it."""
    engine, task, cps = _tracking_map(51)
    for cp in cps:
        _barrier(task, 0, cp)
    assert [c.barrier.cp for c in task.handler.pending] == cps[1:]  # type: ignore[attr-defined]
    _barrier(task, 1, cps[0])
    assert cps[0] not in task.snapshots
    _barrier(task, 1, cps[1])
    assert cps[1] in task.snapshots
    assert set(engine.coordinator.pending) == set(cps)


# ---------------------------------------------------------------- departure 4: savepoints
def _ack_all(engine: Engine, cp: int) -> None:
    from cutcheck.reference.runtime.tasks import TaskSnapshot

    for sid in sorted(engine.coordinator.pending[cp].expected, key=lambda s: (s.vertex, s.index)):
        engine.coordinator.acknowledge(TaskSnapshot(cp=cp, sid=sid, operator={}))


def _coordinator_only(max_concurrent: int = 2, src_parallelism: int = 1) -> Engine:
    raw = scenario(_chain(src_parallelism), mode="aligned")
    raw["checkpoint"]["max_concurrent"] = max_concurrent
    engine = Engine(Scenario.from_json(raw))
    engine.checks.cut = False  # the acknowledgements below carry no channel data
    return engine


def test_a_completed_checkpoint_never_subsumes_a_pending_savepoint() -> None:
    """PendingCheckpoint.canBeSubsumed() is ``!props.isSavepoint()``, and
    CheckpointCoordinator.dropSubsumedCheckpoints aborts only pending checkpoints that can be subsumed."""
    engine = _coordinator_only()
    c = engine.coordinator
    savepoint, older, newer = c.trigger("savepoint"), c.trigger(), c.trigger()
    _ack_all(engine, newer)
    assert savepoint in c.pending and older not in c.pending
    assert [(s.cp, s.status) for s in c.stats] == [(older, "aborted"), (newer, "completed")]
    _ack_all(engine, savepoint)
    assert c.stats[-1].cp == savepoint and c.stats[-1].status == "completed"


def test_a_completed_savepoint_subsumes_nothing_and_notifies_no_task() -> None:
    """CheckpointCoordinator.cleanupAfterCompletedCheckpoint drops subsumed pending checkpoints and
    sends notifyCheckpointComplete only ``if (!props.isSavepoint() || props.isSynchronous())``."""
    engine = _coordinator_only()
    c = engine.coordinator
    older, savepoint = c.trigger(), c.trigger("savepoint")
    _ack_all(engine, savepoint)
    assert older in c.pending
    assert engine.notifications == []
    _ack_all(engine, older)
    assert {cp for _, cp in engine.notifications} == {older}


def test_the_scenario_savepoints_are_triggered() -> None:
    """The ``savepoints`` section triggers savepoints (at a step, or after a checkpoint), aligned as
    Flink's always are (CheckpointOptions.forConfig), even while a checkpoint is pending (a savepoint
    is a forced request: CheckpointRequestDecider runs it beyond max-concurrent-checkpoints)."""
    from cutcheck.reference import simulate

    raw = scenario("keyed-pipeline.json", mode="unaligned", seed=3, slow="count",
                   savepoints=[{"at_step": 90}, {"after_checkpoint": 3, "delay": 5}])
    result = simulate(Scenario.from_json(raw))
    assert result.ok, result.violations
    savepoints = [c for c in result.checkpoints if c["kind"] == "savepoint"]
    assert len(savepoints) == 2 and all(c["status"] == "completed" for c in savepoints), savepoints
    assert Scenario.from_json(Scenario.from_json(raw).to_json()).savepoints == Scenario.from_json(raw).savepoints


def test_a_savepoints_section_is_validated() -> None:
    import pytest

    from cutcheck.model.errors import ScenarioError

    for bad in ([{"at_step": 5, "after_checkpoint": 1}], [{}], [{"at_step": -1}], [{"step": 4}], {"at_step": 3}):
        with pytest.raises(ScenarioError):
            Scenario.from_json(scenario(_chain(1), savepoints=bad))


# ---------------------------------------------------------------- departure 1: failed checkpoints fail the job
def test_checkpoint_failure_manager_counts_as_flink_does() -> None:
    """CheckpointFailureManager.checkFailureCounter: CHECKPOINT_EXPIRED and CHECKPOINT_DECLINED count,
    each checkpoint once; CHECKPOINT_SUBSUMED, CHECKPOINT_DECLINED_SUBSUMED and JOB_FAILURE do not;
    failures of checkpoints not newer than the last success are ignored; the job fails when the count
    exceeds the tolerance, which clears it; a success clears it too."""
    from cutcheck.reference.checkpointing.failure_manager import CheckpointFailureManager

    m = CheckpointFailureManager(tolerable=1)
    for cp, reason in ((1, "CHECKPOINT_SUBSUMED"), (2, "CHECKPOINT_DECLINED_SUBSUMED"), (3, "JOB_FAILURE")):
        assert not m.on_failure(cp, "checkpoint", reason, task_side=False)
    assert not m.on_failure(4, "checkpoint", "CHECKPOINT_EXPIRED", task_side=False)
    assert not m.on_failure(4, "checkpoint", "CHECKPOINT_DECLINED", task_side=True)  # the same checkpoint: once
    assert m.on_failure(5, "checkpoint", "CHECKPOINT_DECLINED", task_side=True)  # 2 > 1: fail the job
    assert m.failures == 0  # cleared when the job fails
    assert not m.on_failure(6, "checkpoint", "CHECKPOINT_EXPIRED", task_side=False)
    m.on_success(7)
    assert m.failures == 0
    assert not m.on_failure(6, "checkpoint", "CHECKPOINT_EXPIRED", task_side=False)  # older than the success
    assert not m.on_failure(5, "checkpoint", "CHECKPOINT_EXPIRED", task_side=False)
    assert m.failures == 0


def test_a_savepoint_expiry_never_counts_but_its_decline_does() -> None:
    """handleJobLevelCheckpointException skips savepoints; handleTaskLevelCheckpointException counts a
    (non-synchronous) savepoint's task-side failure like a checkpoint's."""
    from cutcheck.reference.checkpointing.failure_manager import CheckpointFailureManager

    m = CheckpointFailureManager(tolerable=0)
    assert not m.on_failure(1, "savepoint", "CHECKPOINT_EXPIRED", task_side=False)
    assert m.on_failure(2, "savepoint", "CHECKPOINT_DECLINED", task_side=True)


def _expiring(tolerable: int | None) -> dict[str, Any]:
    raw = scenario("keyed-pipeline.json", mode="aligned", seed=1, slow="count", interval=40)
    raw["checkpoint"]["checkpoint_timeout"] = 400  # some aligned checkpoints under backpressure take longer
    if tolerable is not None:
        raw["checkpoint"]["tolerable_failed"] = tolerable
    return raw


def test_an_expired_checkpoint_fails_the_job_over_by_default() -> None:
    """execution.checkpointing.tolerable-failed-checkpoints defaults to 0: the first expired checkpoint
    fails the job (a global failover from the latest completed checkpoint); the job still ends exactly
    once. Tolerating the failures, the same job only aborts them."""
    from cutcheck.reference import simulate

    strict = simulate(Scenario.from_json(_expiring(None)))
    assert strict.ok, strict.violations
    expired = [c for c in strict.checkpoints if c.get("reason", "").startswith("expired")]
    assert expired and strict.restarts == len(expired)
    tolerant = simulate(Scenario.from_json(_expiring(2**31 - 1)))
    assert tolerant.ok and tolerant.restarts == 0
    assert any(c.get("reason", "").startswith("expired") for c in tolerant.checkpoints)
    some = simulate(Scenario.from_json(_expiring(1)))
    assert some.ok and 0 < some.restarts < strict.restarts


def test_a_checkpoint_declined_because_a_newer_barrier_arrived_does_not_fail_the_job() -> None:
    """SingleCheckpointBarrierHandler declines the older checkpoint with CHECKPOINT_DECLINED_SUBSUMED,
    which CheckpointFailureManager ignores, even with no failed checkpoint tolerated."""
    engine = _coordinator_only(max_concurrent=2, src_parallelism=2)
    older, newer = engine.coordinator.trigger(), engine.coordinator.trigger()
    task = next(t for t in engine.tasks.values() if t.sid.vertex == "map")
    for cp in (older, newer):
        task.handler = task.handler.barrier_received(task.control, task.channels[0], Barrier(cp, "checkpoint", "aligned", 0))
        assert isinstance(task.handler, CollectingBarriers) and task.handler.cp == cp
    assert older not in engine.coordinator.pending and engine.job_failover is None
    assert engine.coordinator.stats[-1].reason.endswith("a newer barrier arrived (subsumed)")


def test_tolerable_failed_is_validated() -> None:
    import pytest

    from cutcheck.model.errors import ScenarioError

    for bad in (-1, "3", True, 1.5):
        raw = scenario(_chain(1))
        raw["checkpoint"]["tolerable_failed"] = bad
        with pytest.raises(ScenarioError):
            Scenario.from_json(raw)
    assert Scenario.from_json(scenario(_chain(1))).checkpoint.tolerable_failed == 0


def test_failovers_from_failed_checkpoints_satisfy_the_protocol() -> None:
    """The proved protocol needs no new rule: an expiry is an abort, the failover a restore from the
    latest completed checkpoint, and trace validation accepts every channel's trace."""
    from cutcheck.reference.batch import make_engine
    from cutcheck.reference.checks.tracing import validate_run

    engine = make_engine(Scenario.from_json(_expiring(None)), trace=True)
    engine.run()
    assert engine.restarts > 0
    assert validate_run([*engine.trace_archive, engine.traces]) == []


# ---------------------------------------------------------------- departure 3: rescale refusal per vertex
def _mixed_exchanges() -> dict[str, Any]:
    """FLINK-38267's reproducer: a source feeding a keyBy (unaligned, holds in-flight data) and a
    forward edge (always aligned, never holds any)."""
    return {"name": "mixed", "max_parallelism": 128,
            "vertices": [{"id": "src", "kind": "source", "parallelism": 2, "records": 400, "keys": 8, "splits": 4},
                         {"id": "count", "kind": "keyed_count", "parallelism": 2},
                         {"id": "map", "kind": "map", "parallelism": 2},
                         {"id": "sink", "kind": "sink", "parallelism": 1},
                         {"id": "sink2", "kind": "sink", "parallelism": 1}],
            "edges": [{"from": "src", "to": "count", "partitioner": "hash"},
                      {"from": "src", "to": "map", "partitioner": "forward"},
                      {"from": "count", "to": "sink", "partitioner": "rebalance"},
                      {"from": "map", "to": "sink2", "partitioner": "rebalance"}]}


def _rescaled(parallelism: dict[str, int]) -> Any:
    from tests.reference.rescale_helpers import run

    s = scenario(_mixed_exchanges(), slow="count", seed=3, failures=[{"after_checkpoint": 2, "target": "count[0]"}])
    s["rescales"] = [{"on_failure": 0, "parallelism": parallelism}]
    return run(s)


def test_one_forward_edge_refuses_the_whole_vertex_restore() -> None:
    """Flink 1.19 ``StateAssignmentOperation.reDistributeResultSubpartitionStates``: once a vertex
    whose parallelism changes holds output state on any partition, ``TaskStateAssignment.getOutputMapping``
    is computed for every partition, and the forward edge's UNSUPPORTED ``SubtaskStateMapper`` throws
    ("Cannot rescale the given pointwise partitioner") although that edge holds no in-flight data
    (FLINK-38267, fixed only after 1.19, made this per exchange, as the engine used to decide)."""
    r = _rescaled({"src": 3, "map": 3})
    assert r.refused is not None, "Flink 1.19 refuses this restore"
    done, _, message = r.refused
    held = {e for snap in done.tasks.values() for states in (snap.input_state, snap.output_state)
            for (e, _, _), bufs in states.items() if any(b.recs for b in bufs)}
    assert 0 in held and 1 not in held, held  # in-flight data on the hash edge only
    assert "edge #1 (src -> map), a forward edge" in message and "'src' changes parallelism 2 -> 3" in message
    assert "\n" not in message


def test_a_neighbour_rescale_refuses_through_the_rescaling_descriptors() -> None:
    """``TaskStateAssignment.createRescalingDescriptor``: when a consumer's gates were remapped (here
    ``count`` changes parallelism), its producer ``src`` — unchanged, but restored with state — builds
    the descriptor of every partition, which asks the forward edge's mapper again and throws."""
    r = _rescaled({"count": 3})
    assert r.refused is not None
    assert "edge #1 (src -> map), a forward edge" in r.refused[2] and "its consumer 'count'" in r.refused[2]


def test_a_rescale_away_from_unsupported_edges_is_accepted() -> None:
    """Rescaling the sink only: ``count``'s partitions are all rebalance, so every mapping Flink
    computes is supported; the restore goes ahead and exactly-once holds."""
    r = _rescaled({"sink": 2})
    assert r.refused is None and r.violations == [] and r.verdict.ok
    assert r.restores and r.restores[0][1]["sink"] == 2


@st.composite
def _restores(draw: Any) -> tuple[JobGraph, CompletedCheckpoint, dict[str, int]]:
    """A small DAG (v0 .. vn-1, edges forward in index order), old and new parallelisms (equal at
    both ends of a forward edge), and a synthetic checkpoint with in-flight data on some edges' input
    or output side and operator state on some vertices."""
    n = draw(st.integers(3, 5))
    old = [draw(st.integers(1, 3)) for _ in range(n)]
    new = [draw(st.integers(1, 3)) for _ in range(n)]
    pairs = draw(st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda p: p[0] < p[1]),
                         min_size=2, max_size=6))
    edges: list[dict[str, Any]] = []
    for a, b in sorted(pairs):
        part = draw(st.sampled_from(["rebalance", "shuffle", "rescale", "broadcast", "forward"]))
        if part == "forward":
            old[b], new[b] = old[a], new[a]
        gate = sum(e["to"] == f"v{b}" for e in edges)  # a co_map reads each input through its own gate
        edges.append({"from": f"v{a}", "to": f"v{b}", "partitioner": part, "gate": gate})
    used = sorted({e[k] for e in edges for k in ("from", "to")})
    inputs = {v: sum(e["to"] == v for e in edges) for v in used}
    kinds = {v: "source" if not inputs[v] else "co_map" if inputs[v] > 1 else "map" for v in used}
    try:
        graph = JobGraph.from_json({"name": "g", "max_parallelism": 16, "edges": edges, "vertices": [
            {"id": v, "kind": kinds[v], "parallelism": old[int(v[1:])], **({"records": 1} if kinds[v] == "source" else {})}
            for v in used]})
    except CutcheckError:
        assume(False)
    stateful = draw(st.sets(st.sampled_from(sorted(used))))
    snaps = {SubtaskId(v.id, i): TaskSnapshot(1, SubtaskId(v.id, i), {"x": 1} if v.id in stateful else {})
             for v in graph.vertices for i in range(v.parallelism)}
    for e in graph.edges:
        for side in draw(st.sets(st.sampled_from(["input", "output"]))):
            owner = SubtaskId(e.target if side == "input" else e.source, 0)
            getattr(snaps[owner], f"{side}_state")[(e.key, 0, 0)] = [Buf([(0, 1, 0, 0, 0, 0, -1)], 0)]
    now = {v.id: new[int(v.id[1:])] for v in graph.vertices}
    return graph, CompletedCheckpoint(1, "checkpoint", 0, {v.id: v.parallelism for v in graph.vertices}, snaps), now


@settings(max_examples=300, deadline=None)
@given(_restores())
def test_the_engine_refuses_exactly_where_the_independent_statement_of_flinks_rule_does(
        restore: tuple[JobGraph, CompletedCheckpoint, dict[str, int]]) -> None:
    """``reference.recovery.rescale_refusal`` against ``rescale_helpers.flink_refuses`` (written separately,
    edge by edge) on random graphs with several edges per vertex and pointwise or broadcast edges."""
    from tests.reference.rescale_helpers import flink_refuses

    graph, done, new = restore
    try:
        refuse_if_flink_would(graph, done, new)
        refused = False
    except RestoreRefused:
        refused = True
    assert refused == flink_refuses(graph, done, new)
    event("refused" if refused else "accepted")
