"""Departures from Flink closed in the engine (issue 16), each test citing the Flink behaviour it mirrors."""

from __future__ import annotations

from typing import Any

from reference import Scenario
from reference.barriers import CollectingBarriers, CollectingBarriersUnaligned, WaitingForFirstBarrier
from reference.engine import Engine
from reference.network import Barrier
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
