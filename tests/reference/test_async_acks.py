"""Asynchronous acknowledgements (``checkpoint.ack_delay``, reference.checkpointing.acks): acks cross,
a newer checkpoint completes first and subsumes the older pending ones (never a savepoint), late and
wrong-attempt acks are dropped, the store's latest is the last added but never a late savepoint, and
the fault that drops the subsumption is caught (RESTORE_POINT)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cutcheck.model.errors import InvariantViolation, ScenarioError
from cutcheck.model.execution import SubtaskId
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.checkpointing.acks import AckOutcome, AckPipe
from cutcheck.reference.checkpointing.coordinator import Coordinator
from cutcheck.reference.checks.storage_invariants import RetentionWatch
from cutcheck.reference.engine import Engine
from cutcheck.reference.events.stream import (
    AcknowledgementArrived,
    CheckpointAborted,
    CheckpointCompleted,
    Logged,
)
from cutcheck.reference.faults.catalogue import Mutants
from cutcheck.reference.fuzzing.abstract_coverage import AbstractObserver
from cutcheck.reference.fuzzing.generate import scenario_dict
from cutcheck.reference.fuzzing.swarm import Feature, features_of
from cutcheck.reference.judge import Outcome, judge
from cutcheck.reference.runtime.tasks import TaskSnapshot
from cutcheck.reference.storage.memory import InMemoryStorage, latest_index
from tests.reference.helpers import scenario
from tests.strategies import HypothesisDraw

FAULT = "older-checkpoint-completes-after-newer"
A, B = SubtaskId("src", 0), SubtaskId("sink", 0)


class Listener:
    """What the coordinator told the run: completed ids, and aborted ids with their cause."""

    def __init__(self) -> None:
        self.done: list[int] = []
        self.gone: list[tuple[int, str]] = []

    def completing(self, done: Any) -> None:
        pass

    def completed(self, done: Any, subsumed: list[int]) -> None:
        self.done.append(done.cp)

    def aborted(self, cp: int, kind: str, reason: str, cause: str) -> None:
        self.gone.append((cp, cause))


def _coordinator(mutants: tuple[str, ...] = ()) -> tuple[Coordinator, Listener, InMemoryStorage, SimpleNamespace]:
    """A coordinator over a stand-in run of two subtasks, max 2 concurrent checkpoints, driven by hand."""
    checkpoint = SimpleNamespace(max_concurrent=2, tolerable_failed=0, retained=1, mode="aligned", timeout=None,
                                 checkpoint_timeout=1_000, interval=10, ack_delay=5)
    run = SimpleNamespace(scenario=SimpleNamespace(savepoints=(), checkpoint=checkpoint, network=SimpleNamespace(record_bytes=64)),
                          tasks={A: SimpleNamespace(sid=A), B: SimpleNamespace(sid=B)}, step=0, attempt=0, parallelism={"src": 1, "sink": 1},
                          rules=Mutants.of(list(mutants)).rules())
    listener = Listener()
    storage = InMemoryStorage(run.rules)
    return Coordinator(run, storage, listener, lambda reason: None), listener, storage, run  # type: ignore[arg-type]


def _ack(c: Coordinator, run: SimpleNamespace, cp: int, sid: SubtaskId) -> AckOutcome:
    snap = TaskSnapshot(cp, sid, {})
    outcome = c.outcome_of(snap, run.tasks[sid])
    if outcome is AckOutcome.ACCEPTED:
        c.acknowledge(snap)
    return outcome


def test_checkpoint_2_completes_before_1_and_subsumes_it() -> None:
    c, listener, storage, run = _coordinator()
    assert (c.trigger(), c.trigger()) == (1, 2)
    _ack(c, run, 1, A)  # checkpoint 1 waits for B's ack, which is still on its way
    assert _ack(c, run, 2, A) is AckOutcome.ACCEPTED and _ack(c, run, 2, B) is AckOutcome.ACCEPTED
    assert listener.done == [2] and listener.gone == [(1, "CHECKPOINT_SUBSUMED")]
    assert _ack(c, run, 1, B) is AckOutcome.LATE  # arrives after its checkpoint was subsumed: dropped
    assert listener.done == [2] and storage.latest() is not None and storage.latest().cp == 2  # type: ignore[union-attr]


def test_without_subsumption_the_older_checkpoint_becomes_the_restore_point_and_restore_point_catches_it() -> None:
    c, listener, storage, run = _coordinator((FAULT,))
    c.trigger(), c.trigger()
    watch = RetentionWatch(storage, 1)
    for cp, sid in ((1, A), (2, A), (2, B)):
        _ack(c, run, cp, sid)
    watch.on_complete(SimpleNamespace(cp=2, kind="checkpoint"))
    assert _ack(c, run, 1, B) is AckOutcome.ACCEPTED and listener.done == [2, 1]
    assert storage.latest().cp == 1  # type: ignore[union-attr]  # the last added, as Flink's store
    with pytest.raises(InvariantViolation, match="RESTORE_POINT"):
        watch.on_complete(SimpleNamespace(cp=1, kind="checkpoint"))


def test_a_savepoint_is_never_subsumed_and_completing_late_is_kept_but_not_restored() -> None:
    c, listener, storage, run = _coordinator()
    assert c.trigger("savepoint") == 1 and c.trigger() == 2
    for cp, sid in ((2, A), (2, B), (1, A), (1, B)):
        assert _ack(c, run, cp, sid) is AckOutcome.ACCEPTED
    assert listener.done == [2, 1] and listener.gone == []
    assert storage.retained() == [(2, "checkpoint"), (1, "savepoint")]
    assert storage.latest().cp == 2  # type: ignore[union-attr]
    RetentionWatch(storage, 1).check_restore_point(SimpleNamespace(cp=1, kind="savepoint"))  # holds


def test_an_ack_from_an_execution_a_failover_replaced_is_dropped() -> None:
    c, _, _, run = _coordinator()
    c.trigger()
    assert c.outcome_of(TaskSnapshot(1, A, {}), object()) is AckOutcome.WRONG_ATTEMPT
    assert c.outcome_of(TaskSnapshot(1, A, {}), run.tasks[A]) is AckOutcome.ACCEPTED


def test_latest_is_the_last_added_except_a_savepoint_after_a_newer_checkpoint() -> None:
    assert latest_index([]) is None
    assert latest_index([(1, "checkpoint"), (2, "savepoint")]) == 1
    assert latest_index([(2, "checkpoint"), (1, "savepoint")]) == 0
    assert latest_index([(2, "checkpoint"), (1, "checkpoint")]) == 1  # never by id: Flink's store is ordered by addition
    assert latest_index([(2, "checkpoint"), (1, "savepoint"), (3, "savepoint")]) == 2


def test_the_pipe_delivers_in_due_order_and_draws_from_the_seed() -> None:
    def run(seed: int) -> list[tuple[int, int]]:
        pipe = AckPipe(10, seed)
        for step in range(6):
            pipe.send(object(), TaskSnapshot(step, A, {}), step)  # type: ignore[arg-type]
        out = []
        for step in range(20):
            out += [(a.snap.cp, a.due_step) for a in pipe.take_due(step)]
        assert len(pipe) == 0 and pipe.timers() == []
        return out

    first = run(7)
    assert first == run(7) and [d for _, d in first] == sorted(d for _, d in first)
    assert [cp for cp, _ in first] != sorted(cp for cp, _ in first)  # acks crossed
    assert first != run(8)


def _crossing(seed: int = 7) -> dict[str, Any]:
    sdict = scenario("keyed-pipeline.json", mode="aligned", seed=seed, interval=15)
    sdict["checkpoint"].update({"max_concurrent": 2, "ack_delay": 30})
    return sdict


def test_acks_cross_in_a_run_which_stays_clean_and_logs_them() -> None:
    engine = Engine(Scenario.from_json(_crossing()))
    seen: dict[str, list[Any]] = {"subsumed": [], "arrived": [], "logged": []}
    engine.bus.subscribe(CheckpointAborted, lambda e: seen["subsumed"].append(e.cp) if e.cause == "CHECKPOINT_SUBSUMED" else None)
    engine.bus.subscribe(AcknowledgementArrived, seen["arrived"].append)
    engine.bus.subscribe(Logged, lambda e: seen["logged"].append(e) if e.kind == "ack" else None)
    engine.run()
    assert seen["subsumed"], "no checkpoint completed while an older one was pending"
    assert "accepted" in {e.outcome for e in seen["arrived"]} <= {"accepted", "late"}  # never a wrong attempt here
    assert len(seen["logged"]) == len(seen["arrived"]) and all(e.step >= e.sent_step for e in seen["arrived"])
    assert simulate(Scenario.from_json(_crossing())).ok


def test_the_fault_is_caught_where_acks_cross_and_absent_without_a_delay() -> None:
    broken = simulate(Scenario.from_json({**_crossing(), "mutants": [FAULT]}))
    assert [v["invariant"] for v in broken.violations][:1] == ["RESTORE_POINT"], broken.violations
    synchronous = _crossing()
    del synchronous["checkpoint"]["ack_delay"]
    assert simulate(Scenario.from_json({**synchronous, "mutants": [FAULT]})).ok  # acks never cross: no effect


def test_same_seed_same_run_with_delayed_acks() -> None:
    def log(sdict: dict[str, Any]) -> list[tuple[int, str, str]]:
        engine = Engine(Scenario.from_json(sdict))
        out: list[tuple[int, str, str]] = []
        engine.bus.subscribe(Logged, lambda e: out.append((e.step, e.kind, e.detail)))
        engine.run()
        return out

    assert log(_crossing()) == log(_crossing())


@pytest.mark.parametrize(("value", "message"), [
    (-1, r"checkpoint\.ack_delay must be a number of steps >= 0"),
    ("5", r"checkpoint\.ack_delay must be a number of steps >= 0"),
    (40, r"checkpoint\.ack_delay 40 must be below checkpoint\.checkpoint_timeout 40"),
])
def test_bad_ack_delays_are_refused_in_one_sentence(value: Any, message: str) -> None:
    sdict = _crossing()
    sdict["checkpoint"].update({"ack_delay": value, "checkpoint_timeout": 40})
    with pytest.raises(ScenarioError, match=message):
        Scenario.from_json(sdict)


def test_the_knob_round_trips_and_zero_writes_nothing() -> None:
    sc = Scenario.from_json(_crossing())
    assert sc.to_json()["checkpoint"]["ack_delay"] == 30
    assert Scenario.from_json(sc.to_json()).checkpoint == sc.checkpoint
    zero = _crossing()
    zero["checkpoint"]["ack_delay"] = 0
    assert "ack_delay" not in Scenario.from_json(zero).to_json()["checkpoint"]


def _watched(sdict: dict[str, Any]) -> tuple[Any, AbstractObserver, list[int], list[tuple[int, str]]]:
    """The run, its abstract coverage, the checkpoints subsumed, and the completions in order."""
    observer = AbstractObserver()
    subsumed: list[int] = []
    completions: list[tuple[int, str]] = []

    def watch(engine: Any) -> None:
        observer.attach(engine)
        engine.bus.subscribe(CheckpointAborted, lambda e: subsumed.append(e.cp) if e.cause == "CHECKPOINT_SUBSUMED" else None)
        engine.bus.subscribe(CheckpointCompleted, lambda e: completions.append((e.done.cp, e.done.kind)))

    return simulate(Scenario.from_json(sdict), watch=watch), observer, subsumed, completions


def _out_of_order(completions: list[tuple[int, str]]) -> bool:
    """Whether a checkpoint (not a savepoint) completed after a newer checkpoint had."""
    newest = 0
    for cp, kind in completions:
        if kind == "checkpoint":
            if cp < newest:
                return True
            newest = cp
    return False


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_crossing_acks_never_break_an_invariant_and_the_fault_is_caught(data: st.DataObject) -> None:
    sdict = scenario_dict(HypothesisDraw(data.draw), modes=("aligned",), batch=False, storage=False,
                          on=(Feature.ACK_DELAY, Feature.CONCURRENT), max_records=80)
    assert Feature.ACK_DELAY in features_of(sdict) and sdict["checkpoint"]["ack_delay"] > 0
    clean, observer, subsumed, completions = _watched(sdict)
    # Held, or failed checkpoints (expiries with acks in flight) restart the job for ever, as in Flink.
    assert judge(clean).outcome in (Outcome.HOLDS, Outcome.RESTART_LOOP), (clean.violations, clean.exactly_once)
    assert not _out_of_order(completions)  # checkpoints complete in id order, however acks cross
    if subsumed:
        assert observer.coverage.hits["order", "newer-first", ""]
    # With the fault, every checkpoint completing after a newer one is caught where it happens.
    broken, _, _, broken_completions = _watched({**sdict, "mutants": [FAULT]})
    assert not _out_of_order(broken_completions) or [v["invariant"] for v in broken.violations][:1] == ["RESTORE_POINT"]
