"""The channel protocol, concretely: the trace vocabulary, random walks in every mode accepted by
the checker with CUT at every completion, and Hypothesis-found rejections for every mutant."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

from cutcheck.model.errors import CutcheckError
from cutcheck.model.invariants import cut_holds
from cutcheck.model.protocol import MODES, PROTOCOL_MUTANTS
from cutcheck.model.tasktrace import TaskChecker, check_task_trace
from cutcheck.model.trace import EMPTY, ChannelChecker, PyOps, Runs, check_channel_trace, observation

# ------------------------------------------------------------------------------------- basics


def test_cut_holds_is_order_sensitive() -> None:
    assert cut_holds([0, 1], [2], [3], range(4))
    assert not cut_holds([0, 1], [3], [2], range(4))
    assert not cut_holds([0, 1], [2], [], range(4))
    assert not cut_holds([0, 1, 1], [2], [3], range(4))
    assert cut_holds([], [], [], [])


@given(st.lists(st.integers(0, 30)), st.lists(st.integers(0, 30)), st.integers(-3, 40))
def test_runs_behave_like_lists(a: list[int], b: list[int], n: int) -> None:
    ra, rb, o = Runs.of(a), Runs.of(b), PyOps()
    assert list(o.concat(ra, rb)) == a + b
    assert list(o.take(ra, n)) == (a[:n] if n > 0 else [])
    assert list(o.drop(ra, n)) == (a[n:] if n > 0 else a)
    assert len(ra) == len(a)
    assert (ra == Runs.of(list(a))) and (Runs.of([]) == EMPTY)


def test_unknown_mode_and_mutant_are_user_errors() -> None:
    with pytest.raises(CutcheckError, match="unknown checkpoint mode"):
        check_channel_trace("eventually", [])
    with pytest.raises(CutcheckError, match="unknown mutant"):
        check_channel_trace("aligned", [], mutant="typo")
    assert check_channel_trace("aligned_timeout:500", [("emit", 1)]).ok  # "mode:T" names the timeout


# ------------------------------------------------------------------------------ the vocabulary
ALIGNED = [("emit", 3), ("transmit", 1), ("snapshot_up", 1, "aligned"), ("transmit", 2), ("transmit_barrier", 1),
           ("emit", 1), ("transmit", 1), ("process", 3), ("barrier_processed", 1), ("snapshot_down", 1),
           ("complete", 1, {"processed": 3, "input_state": 0, "output_state": 0, "sent": 3}), ("process", 1)]
UNALIGNED = [("emit", 4), ("transmit", 2), ("snapshot_up", 7, "unaligned"), ("priority_arrival", 7),
             ("snapshot_down", 7), ("transmit", 2), ("process", 4), ("emit", 1),
             ("complete", 7, {"processed": (), "input_state": (0, 1), "output_state": (2, 3), "sent": 4}),
             ("transmit", 1), ("process", 1), ("restore", 7), ("process", 2), ("emit", 1), ("transmit", 3),
             ("process", 3)]


def test_aligned_and_unaligned_traces_are_accepted() -> None:
    assert check_channel_trace("aligned", ALIGNED).ok
    assert check_channel_trace("unaligned", UNALIGNED).ok


def test_restore_replays_input_state_then_output_state_then_new_output() -> None:
    chk = ChannelChecker("unaligned")
    for ev in UNALIGNED:
        assert chk.feed(ev), chk.verdict()
    assert list(chk.state.done) == [0, 1, 2, 3, 4]  # every record once, in order, across the failure


@pytest.mark.parametrize(("events", "reason"), [
    ([("process", 1)], "input queue holds n records"),
    ([("emit", 2), ("snapshot_up", 1, "aligned"), ("emit", 1), ("transmit", 3)], "no in-order barrier 1 among"),
    ([("snapshot_up", 1, "unaligned")], "aligned barriers are in-order"),
    ([("emit", 1), ("snapshot_up", 1, "aligned"), ("transmit_barrier", 1)], "head of the output queue"),
    ([("snapshot_down", 1)], "after taking this channel's barrier"),
    ([("snapshot_up", 1, "aligned"), ("transmit_barrier", 1), ("barrier_processed", 1), ("emit", 1),
      ("transmit", 1), ("process", 1)], "channel not blocked"),
    ([("complete", 3)], "has not started"),
    ([("restore", 1)], "a checkpoint has completed"),
    ([("snapshot_up", 1, "aligned"), ("snapshot_up", 1, "aligned")], "u has not snapshotted"),
    ([("timeout_switch", 1)], "has not started"),
    ([("teleport", 1)], "unknown event"),
    ([("emit", "two")], "needs a record count"),
    ([("snapshot_up", 1, "sideways")], "kind must be"),
])
def test_aligned_rejections_name_the_rule(events: list[tuple[Any, ...]], reason: str) -> None:
    v = check_channel_trace("aligned", events)
    assert not v.accepted and v.index == len(events) - 1
    assert reason in v.reason, v.reason


def test_nothing_is_sent_while_a_priority_barrier_is_pending() -> None:
    v = check_channel_trace("unaligned", [("emit", 2), ("snapshot_up", 1, "unaligned"), ("transmit", 1)])
    assert "no priority barrier 1 pending" in v.reason and v.index == 2


def test_timeout_switch_in_either_queue() -> None:
    # Barrier still in u's queue: the records ahead of it become output state.
    ev = [("emit", 3), ("snapshot_up", 1, "aligned"), ("timeout_switch", 1), ("priority_arrival", 1),
          ("snapshot_down", 1), ("complete", 1, {"output_state": 3, "input_state": 0})]
    assert check_channel_trace("aligned_timeout", ev).ok
    # Already in d's queue: the records ahead of it become input state; d snapshots next.
    ev = [("emit", 3), ("snapshot_up", 1, "aligned"), ("transmit", 3), ("transmit_barrier", 1), ("emit", 2),
          ("transmit", 2), ("timeout_switch", 1), ("snapshot_down", 1),
          ("complete", 1, {"output_state": 0, "input_state": 3}), ("process", 5)]
    assert check_channel_trace("aligned_timeout", ev).ok
    assert "mode is aligned_timeout" in check_channel_trace("aligned", ev).reason


def test_abort_releases_the_channel_and_late_barriers_are_ignored() -> None:
    ev = [("snapshot_up", 1, "aligned"), ("transmit_barrier", 1), ("barrier_processed", 1), ("abort", 1),
          ("emit", 1), ("transmit", 1), ("process", 1), ("snapshot_up", 2, "aligned"), ("transmit_barrier", 2)]
    assert check_channel_trace("aligned", ev).ok
    ev = [("emit", 1), ("snapshot_up", 1, "unaligned"), ("abort", 1), ("transmit", 1), ("priority_arrival", 1)]
    assert check_channel_trace("unaligned", ev).ok


def test_observations_are_compared_with_the_derived_state() -> None:
    ev = [("emit", 2), ("snapshot_up", 1, "unaligned"), ("priority_arrival", 1), ("snapshot_down", 1),
          ("complete", 1, {"output_state": 0})]
    v = check_channel_trace("unaligned", ev)
    assert not v.accepted and v.first.kind == "observation" and "output_state" in v.reason
    assert check_channel_trace("unaligned", ev[:-1] + [("complete", 1, {"output_state": (0, 1)})]).ok


def test_at_least_once_accepts_the_trace_and_reports_the_cut_failure() -> None:
    ev = [("snapshot_up", 1, "aligned"), ("emit", 1), ("transmit_barrier", 1), ("transmit", 1),
          ("barrier_processed", 1), ("process", 1), ("snapshot_down", 1), ("complete", 1)]
    v = check_channel_trace("at_least_once", ev)
    assert v.accepted and not v.ok and v.first.kind == "cut" and v.index == 7
    assert "channel not blocked" in check_channel_trace("aligned", ev).reason


# ------------------------------------------------------------------------------ random walks
def pick(data: Any, options: list) -> Any:
    """An event kind first, then one of its events: rare kinds (complete, restore) get their share."""
    def kind(o: Any) -> str:  # ("emit", 2) on a channel, or ("a", ("emit", 2)) in a task
        return o[1][0] if isinstance(o[1], tuple) else o[0]

    kinds = sorted({kind(o) for o in options})
    chosen = kinds[data.draw(st.integers(0, len(kinds) - 1))]
    mine = [o for o in options if kind(o) == chosen]
    return mine[data.draw(st.integers(0, len(mine) - 1))]


def walk(data: Any, mode: str, mutant: str | None = None, steps: int = 40, gate: int = 0,
         min_steps: int = 1) -> tuple[list, ChannelChecker]:
    """A random run of the protocol (``mutant`` switched on), recorded as an engine would: each
    ``complete`` carries what was persisted. Also checks two facts at every step."""
    chk, events = ChannelChecker(mode, mutant, gate), []
    for _ in range(data.draw(st.integers(min_steps, steps))):
        ev = pick(data, chk.candidates(max_n=3))
        assert chk.feed(ev), chk.verdict()
        if ev[0] == "complete":
            ev = (*ev, {k: len(v) for k, v in observation(chk.state).items()})
        events.append(ev)
        s = chk.state
        if mutant is not None:
            continue
        assert list(s.done) + list(s.inq) + list(s.out) == list(s.sent)  # the channel conserves records
        if s.last.valid:  # what replay-exactly-once assumes: u's history extends its cut point
            assert list(s.sent)[: len(s.last.sent)] == list(s.last.sent)
    return events, chk


@pytest.mark.parametrize("mode", MODES)
@given(data=st.data())
def test_random_walks_are_accepted_and_keep_cut(mode: str, data: Any) -> None:
    events, chk = walk(data, mode)
    v = check_channel_trace(mode, events)
    assert v.accepted, v
    if mode != "at_least_once":
        assert v.ok, v  # CUT at every completion
    else:  # the control: CUT fails exactly when d applied records behind the barrier first
        assert all(f.kind == "cut" for f in v.failures)


@pytest.mark.parametrize("mode", MODES)
@given(data=st.data())
def test_random_task_walks_are_accepted(mode: str, data: Any) -> None:
    task = TaskChecker(mode, {"a": 0, "b": 1})
    log = []
    for _ in range(data.draw(st.integers(1, 60))):
        options = task.candidates(max_n=2)
        if not options:
            break
        ch, ev = pick(data, options)
        assert task.feed_all(ch, ev), task.verdict()
        log += [(c, ev) for c in (["a", "b"] if ch == "*" else [ch])]
    v = check_task_trace(mode, log, {"a": 0, "b": 1})
    assert v.accepted, v
    assert mode == "at_least_once" or v.ok, v


def test_task_rules() -> None:
    base = [("a", ("emit", 2)), ("b", ("emit", 2)), ("a", ("snapshot_up", 1, "unaligned")),
            ("b", ("snapshot_up", 1, "unaligned")), ("a", ("priority_arrival", 1))]
    v = check_task_trace("unaligned", base + [("b", ("process", 1))])
    assert "its snapshot must come first" in v.reason
    v = check_task_trace("unaligned", base + [("a", ("snapshot_down", 1)), ("b", ("priority_arrival", 1))])
    assert "cover all its channels in one step" in v.reason
    ok = base + [("a", ("snapshot_down", 1)), ("b", ("snapshot_down", 1)), ("b", ("priority_arrival", 1))]
    assert check_task_trace("unaligned", ok).ok
    aligned = [("a", ("snapshot_up", 1, "aligned")), ("a", ("transmit_barrier", 1)),
               ("a", ("barrier_processed", 1)), ("b", ("emit", 1)), ("a", ("snapshot_down", 1))]
    assert "every channel's barrier was taken" in check_task_trace("aligned", aligned).reason
    # A forced-aligned input makes the unaligned job's task align too.
    assert "forced-aligned input aligns" in check_task_trace("unaligned", aligned).reason


# ------------------------------------------------------------------- mutants, found by Hypothesis
# Hypothesis generates runs of the mutated protocol, recorded as the engine records them; the
# correct checker must reject one (or find CUT broken). Hypothesis' own shrinking of these long
# walks takes minutes, so it only generates, and a greedy pass then drops events while the trace
# stays a valid run of the mutant that the correct checker rejects.
FIND = settings(max_examples=3000, database=None, phases=[Phase.generate])


def _shrink(events: list, bad: Any) -> list:
    k = len(events) // 2
    while k >= 1:
        i = 0
        while i < len(events):
            cand = events[:i] + events[i + k:]
            if cand and bad(cand):
                events = cand
            else:
                i += 1
        k //= 2
    return events


@pytest.mark.parametrize(("mutant", "mode"), [
    ("no-output-state", "unaligned"),
    ("process-after-barrier", "unaligned"),
    ("early-checkpoint-in-recovery", "unaligned"),
    ("no-output-state", "aligned_timeout"),
])
def test_hypothesis_finds_a_rejected_trace_for_each_mutant(mutant: str, mode: str) -> None:
    @st.composite
    def traces(draw: Any) -> list:
        return [ev[:2] if ev[0] == "complete" else ev for ev in walk(_Data(draw), mode, mutant, steps=80, min_steps=30)[0]]

    def record(events: list) -> list | None:
        """Replay on the mutant and record each completion's persisted state, as the engine would."""
        chk, out = ChannelChecker(mode, mutant), []
        for ev in events:
            if not chk.feed(ev):
                return None
            out.append((*ev, {k: len(v) for k, v in observation(chk.state).items()}) if ev[0] == "complete" else ev)
        return out

    def bad(events: list) -> bool:  # a run of the mutant that the correct protocol rejects
        recorded = record(events)
        return recorded is not None and not check_channel_trace(mode, recorded).ok

    found = record(_shrink(find(traces(), bad, settings=FIND), bad))
    v = check_channel_trace(mode, found)
    assert not v.ok and v.first.kind in ("protocol", "observation", "cut"), v
    assert len(found) <= 12, found  # short enough to read


def test_hypothesis_finds_a_rejected_trace_for_partial_input_state() -> None:
    gates = {"a": 0, "b": 1}

    @st.composite
    def traces(draw: Any) -> list:
        task, log = TaskChecker("unaligned", gates, "partial-input-state"), []
        for _ in range(draw(st.integers(1, 60))):
            ch, ev = pick(_Data(draw), task.candidates(max_n=2))
            task.feed_all(ch, ev)
            if ev[0] == "complete":
                ev = (*ev, {k: len(v) for k, v in observation(task.checkers[ch].state).items()})
            log += [(c, ev) for c in (list(gates) if ch == "*" else [ch])]
        return log

    def bad(log: list) -> bool:
        mutated = check_task_trace("unaligned", log, gates, "partial-input-state")
        return mutated.accepted and not check_task_trace("unaligned", log, gates).ok

    found = _shrink(find(traces(), bad, settings=FIND), bad)
    v = check_task_trace("unaligned", found, gates)
    assert not v.ok and "channel b" in v.reason, v  # the channel on gate 1 lost its input state
    assert "partial-input-state" in PROTOCOL_MUTANTS


class _Data:
    """Adapts ``draw`` of a composite strategy to the ``data.draw`` interface ``walk`` uses."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw
