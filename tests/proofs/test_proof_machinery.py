"""The machinery behind the labels: each test would fail if a label said more than the proof did.

Two concurrent slots must catch what one slot cannot; the frame check must catch a rule that reads
another slot; the replay proof must need its one assumption and its ghost updates; the recovery
search must go through a restore; the case split must not turn a valid query into a
counterexample, nor an unknown into "initiation fails"."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from cutcheck.model.protocol import ACTIONS, OUT, Protocol, can_send_buffer, do_process
from cutcheck.model.trace import ChannelChecker, Runs
from cutcheck.proofs import concurrent, cut, replay
from cutcheck.proofs.search import find_trace, z3_confirms
from cutcheck.proofs.z3ops import SEQ, Z3Ops


# ----------------------------------------------------------------------- several checkpoints
def first_slot_only(P: Protocol, o: Any, s: Any, p: Any) -> Any:
    """SendBuffer's guard looking at the oldest checkpoint's barrier only."""
    return can_send_buffer(P, o, replace(s, slots=s.slots[:1]), p)


def test_two_slots_catch_a_guard_that_one_slot_cannot() -> None:
    actions = tuple(replace(a, guard=first_slot_only) if a.name == "SendBuffer" else a for a in ACTIONS)
    protocol = Protocol("aligned", actions=actions)
    assert cut.check_induction(protocol, 1) == ("proved", None)  # with one checkpoint it is the same rule
    status, why = cut.check_induction(protocol, 2)
    assert status == "counterexample" and why and "SendBuffer" in why and "slot 1" in why


def test_two_slots_catch_completion_recording_the_oldest_checkpoint() -> None:
    protocol = Protocol("aligned", actions=concurrent.with_effect("CheckpointCompletes", concurrent.complete_records_oldest))
    assert cut.check_induction(protocol, 1) == ("proved", None)
    r = concurrent.concurrent_result(protocol)
    assert r.status == "counterexample" and "CheckpointCompletes on slot 1" in r.counterexample
    assert "snapshot_up 2" in r.counterexample  # the trace has two checkpoints in flight


def test_the_frame_check_catches_a_rule_that_reads_another_slot() -> None:
    assert concurrent.frame_check(Protocol("aligned")) is None
    oldest = Protocol("aligned", actions=concurrent.with_effect("CheckpointCompletes", concurrent.complete_records_oldest))
    why = concurrent.frame_check(oldest)
    assert why and "CheckpointCompletes on slot 1" in why and "last" in why

    def process_records_as_the_oldest(P: Protocol, o: Any, s: Any, p: Any) -> Any:  # every slot copies slot 0
        nxt = do_process(P, o, s, p)
        return replace(nxt, slots=tuple(replace(sl, recording=s.slots[0].recording) for sl in nxt.slots))

    why = concurrent.frame_check(Protocol("aligned", actions=concurrent.with_effect("DownstreamProcesses",
                                                                                     process_records_as_the_oldest)))
    assert why == "DownstreamProcesses: its effect on slot 1 reads another slot"


def test_the_search_finds_concurrent_and_recovery_traces_only_when_allowed() -> None:
    oldest = Protocol("aligned", actions=concurrent.with_effect("CheckpointCompletes", concurrent.complete_records_oldest))
    assert find_trace(oldest, 10, concurrent=1) is None
    trace = find_trace(oldest, 10, concurrent=2)
    assert trace is not None and z3_confirms(oldest, trace)
    early = Protocol("unaligned", "early-checkpoint-in-recovery")
    assert find_trace(early, 12, restore=False) is None
    trace = find_trace(early, 12)
    assert trace is not None and ("restore", 1) in trace and z3_confirms(early, trace)


def test_the_unmutated_rules_have_no_trace_through_a_restore() -> None:
    """A sanity check of the search (the proof is the induction): nothing up to 10 events."""
    assert find_trace(Protocol("unaligned"), 10) is None
    assert find_trace(Protocol("aligned"), 10, concurrent=2) is None


# -------------------------------------------------------------------------------------- replay
def test_replay_needs_deterministic_replay() -> None:
    r = replay.prove_replay(deterministic=False)
    assert r.status == "counterexample" and "re-emitted" in r.counterexample


def test_the_ghost_induction_fails_with_a_wrong_ghost_update() -> None:
    assert replay.prove_ghost() == ("proved", None)

    def restore_keeps_post(action: Any, o: Any, s: Any, p: Any, g: replay.Ghost) -> replay.Ghost:
        return g if action.name == "RestoreFromLatest" else replay.ghost_step(action, o, s, p, g)

    status, why = replay.prove_ghost(restore_keeps_post)
    assert status == "counterexample" and "RestoreFromLatest" in why

    def complete_keeps_post(action: Any, o: Any, s: Any, p: Any, g: replay.Ghost) -> replay.Ghost:
        return g if action.name == "CheckpointCompletes" else replay.ghost_step(action, o, s, p, g)

    assert replay.prove_ghost(complete_keeps_post)[0] == "counterexample"


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_the_concrete_model_replays_deterministically(data: Any) -> None:
    """The assumption of replay-exactly-once, on the concrete model: u's history is always the
    prefix of one fixed stream (0, 1, 2, …), across restores."""
    chk = ChannelChecker(data.draw(st.sampled_from(("aligned", "unaligned", "aligned_timeout"))))
    for _ in range(data.draw(st.integers(1, 40))):
        options = chk.candidates(max_n=3)
        assert chk.feed(options[data.draw(st.integers(0, len(options) - 1))])
        assert chk.state.sent == Runs(((0, len(chk.state.sent)),))


# ------------------------------------------------------------------------------- the case split
def test_the_case_split_substitutes_in_the_definitions_too() -> None:
    """Valid: with loc = OUT the split takes all of out. A case that substituted loc in the query
    but not in the split's definitions would leave loc free there and find a bogus model."""
    o = Z3Ops("t")
    out, loc = z3.Const("out", SEQ), z3.Int("s.slot0.loc")
    a = o.take(out, z3.If(loc == OUT, z3.Length(out), 0))
    split = [(loc, tuple(z3.IntVal(v) for v in range(5)))]
    assert cut._check(o, [loc == OUT], a == out, split, fast_ms=0) == z3.unsat
    assert cut._check(o, [loc != OUT, z3.Length(out) > 0], a == out, split, fast_ms=0) == z3.sat


def test_unknown_is_not_reported_as_initiation_failing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cut, "_solve", lambda assertions, timeout_ms: z3.unknown)
    status, why = cut.check_induction(Protocol("aligned"))
    assert status == "unknown" and why == "initiation: solver gave unknown"
    monkeypatch.undo()
    real = cut.invariant
    monkeypatch.setattr(cut, "invariant", lambda o, s: real(o, s) + [("false", z3.BoolVal(False))])
    assert cut.check_induction(Protocol("aligned")) == ("unknown", "initiation fails")
