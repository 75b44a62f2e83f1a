"""Opt-in interleaving exploration (reference.runtime.scheduler) and the abstract-state coverage that
watches it (reference.fuzzing.abstract_coverage): defaults unchanged, schedules reproducible,
barriers held, PCT priorities, an observer that changes no choice, and the FLINK-21104 cells."""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import pytest

from cutcheck.model.errors import ScenarioError
from cutcheck.reference import Scenario, simulate
from cutcheck.reference.fuzzing.abstract_coverage import (
    ABSTRACT_UNIVERSE,
    AbstractCoverage,
    AbstractObserver,
    feature_pairs,
)
from cutcheck.reference.fuzzing.generate import scenario_from_seed
from cutcheck.reference.fuzzing.generate_interleaving import FOCUS_RECORDS, trip
from cutcheck.reference.fuzzing.swarm import Feature
from cutcheck.reference.runtime.network import Barrier, Buf
from cutcheck.reference.runtime.scheduler import (
    ChooserKind,
    InterleavingChooser,
    ScriptedChooser,
    SeededChooser,
    chooser_for,
)
from tests.reference.helpers import scenario, small_graph

STALE = ("stale", "meets-persisting", "")
BEHIND = ("stale", "records-behind", "")


def _run(sdict: dict[str, Any], chooser: Any = None) -> Any:
    return simulate(Scenario.from_json(sdict), chooser=chooser)


def _watched(sdict: dict[str, Any], observer: AbstractObserver) -> Any:
    return simulate(Scenario.from_json(sdict), watch=observer.attach)


def test_default_schedule_keeps_todays_chooser_and_json() -> None:
    sc = Scenario.from_json(scenario(small_graph(), seed=3))
    assert isinstance(chooser_for(sc.schedule, sc.seed), SeededChooser)
    assert set(sc.to_json()["schedule"]) == {"policy", "slow", "slowdown", "flush_weight"}
    scripted = Scenario.from_json(scenario(small_graph(), seed=3) | {"schedule": {"choices": [1, 0, 2]}})
    assert isinstance(chooser_for(scripted.schedule, scripted.seed), ScriptedChooser)


def test_interleaving_fields_round_trip_and_bad_values_name_the_field() -> None:
    sdict = scenario(small_graph(), seed=3)
    sdict["schedule"] |= {"chooser": "pct", "pct_depth": 2, "pct_horizon": 50, "barrier_delay": 30}
    sc = Scenario.from_json(sdict)
    assert isinstance(chooser_for(sc.schedule, sc.seed), InterleavingChooser)
    assert Scenario.from_json(sc.to_json()).schedule == sc.schedule
    sdict["schedule"]["chooser"] = "fifo"
    with pytest.raises(ScenarioError, match=r"schedule\.chooser 'fifo' is not one of weighted, pct"):
        Scenario.from_json(sdict)


@pytest.mark.parametrize("knobs", [{"chooser": "pct", "pct_depth": 2, "pct_horizon": 200},
                                   {"barrier_delay": 60}])
def test_an_interleaving_schedule_is_reproducible_and_changes_with_the_seed(knobs: dict[str, Any]) -> None:
    base = scenario(small_graph(200), seed=5, interval=20)
    base["schedule"] |= knobs
    first, again = _run(base), _run(base)
    assert first.ok, first.violations
    assert first.summary() == again.summary()
    plain = _run(scenario(small_graph(200), seed=5, interval=20))
    other = _run(base | {"seed": 6})
    assert first.summary() != plain.summary() or first.summary() != other.summary()


class _Sender:
    """Just enough of an OutputSubpartition for the chooser: a queue, a partition and a task."""

    def __init__(self, head: Any, task: Any = None):
        self.partition = object()
        self.queue = deque([head])
        self.task = task if task is not None else object()


class _Engine:
    def __init__(self, step: int):
        self.step = step


def test_a_held_barrier_waits_while_anything_else_can_run() -> None:
    chooser = InterleavingChooser(7, ChooserKind.WEIGHTED, barrier_delay=50)
    senders = [_Sender(Barrier(1, "checkpoint", "unaligned", trigger_step=0, priority=True)) for _ in range(64)]
    other = _Sender(Buf([1], 0, 0))
    picked_at: dict[int, list[int]] = {id(sp): [] for sp in senders}
    for step in range(60):
        for sp in senders:
            if chooser.choose_action(_Engine(step), [(1, print, sp), (1, print, other)]) == 0:
                picked_at[id(sp)].append(step)
    latency = {id(sp): chooser._latency[id(sp), 1][0] for sp in senders}
    assert all(step >= latency[key] for key, steps in picked_at.items() for step in steps)
    held = [key for key, n in latency.items() if n > 5]
    assert 0 < len(held) < len(senders) // 2  # about one barrier in SLOW_SHARE is held
    assert all(picked_at[key] for key in held)  # and crosses once its latency has passed
    # Nothing else enabled: a held barrier goes at once (no deadlock of the chooser's making).
    first = next(sp for sp in senders if id(sp) in held)
    assert chooser.choose_action(_Engine(1), [(1, print, first)]) == 0


def test_pct_runs_the_highest_priority_thread_until_a_change_point() -> None:
    a, b = _Sender(Buf([1], 0, 0)), _Sender(Buf([2], 0, 0))
    actions = [(1, print, a), (1, print, b)]
    steady = InterleavingChooser(1, ChooserKind.PCT, depth=0)
    picks = [steady.choose_action(_Engine(i), actions) for i in range(400)]
    top = max(set(picks), key=picks.count)
    assert 300 < picks.count(top) < 400  # the top thread, but for the fair steps (FAIR_SHARE)
    changed = InterleavingChooser(1, ChooserKind.PCT, depth=1, horizon=1)
    later = [changed.choose_action(_Engine(i), actions) for i in range(400)][1:]
    assert max(set(later), key=later.count) != top  # the running thread dropped below the other


def test_observing_changes_no_choice() -> None:
    for sdict in (scenario("union.json", seed=2, slow="count"),
                  scenario(small_graph(), seed=4) | {"schedule": {"chooser": "pct", "pct_depth": 1}}):
        observer = AbstractObserver()
        seen = _watched(sdict, observer)
        assert seen.summary() == _run(sdict).summary()
        assert observer.coverage.hits["channel", "idle/1", ""] > 0


def _flink_21104(seed: int) -> dict[str, Any]:
    """The catalogue's witness of obsolete-barrier-ends-persisting, without its failures: checkpoints that
    expire while their barriers still travel (tests/reference/test_catalogue_checkpointing.py). At a
    40-step timeout the cancel markers of the expired checkpoints slow the job so that too few complete."""
    sdict = scenario("union.json", mode="unaligned", seed=seed, slow="count")
    sdict["checkpoint"] |= {"checkpoint_timeout": 48, "tolerable_failed": 1000}
    return sdict


def test_the_flink_21104_cells_name_the_interleaving_the_fault_breaks() -> None:
    sdict = _flink_21104(1)
    observer = AbstractObserver()
    assert _watched(sdict, observer).ok
    assert observer.coverage.hits[STALE] > 0 and observer.coverage.hits[BEHIND] > 0
    broken = _run(sdict | {"mutants": ["obsolete-barrier-ends-persisting"]})
    assert [v["invariant"] for v in broken.violations][:1] == ["CUT"]
    quiet = AbstractObserver()  # aligned checkpoints never persist channels: no stale barrier meets one
    assert _watched(sdict | {"checkpoint": {"mode": "aligned", "interval": 40}}, quiet).ok
    assert quiet.coverage.hits[STALE] == quiet.coverage.hits[BEHIND] == 0


def test_records_behind_is_the_moment_a_stale_barrier_that_ends_the_persisting_breaks_cut(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``records-behind`` counts records crossing after the receiver's handler handled the stale barrier,
    in a checkpoint that then completes. A handler that ends the persisting there (FLINK-21104's class,
    planted below) breaks CUT in exactly those runs; the catalogue's fault, which ends it as the stale
    barrier arrives, in those and a few more (records that crossed between arrival and handling)."""
    from cutcheck.reference.checkpointing import barriers
    from cutcheck.reference.fuzzing.verdicts import FOCI, run_scenario

    sdicts = [scenario_from_seed(seed, **FOCI["expiry-unaligned"]) for seed in range(60)]
    reached = [seed for seed, sdict in enumerate(sdicts) if run_scenario(sdict).abstract.hits[BEHIND]]
    at_arrival = [seed for seed, sdict in enumerate(sdicts)
                  if not run_scenario(sdict | {"mutants": ["obsolete-barrier-ends-persisting"]}).ok]
    on_barrier = barriers.CollectingBarriersUnaligned.on_barrier

    def handler_ends_persisting(self: Any, task: Any, ch: Any, b: Any) -> Any:
        if b.cp < self.cp:
            ch.persisting = None
        return on_barrier(self, task, ch, b)

    monkeypatch.setattr(barriers.CollectingBarriersUnaligned, "on_barrier", handler_ends_persisting)
    at_handling = [seed for seed, sdict in enumerate(sdicts) if not run_scenario(sdict).ok]
    assert reached == at_handling == [43, 59]
    assert set(reached) < set(at_arrival)


def test_every_unreachable_cell_says_why_and_reports_count_reached_and_missed() -> None:
    assert all(why is None or len(why) > 20 for why in ABSTRACT_UNIVERSE.values())
    cov = AbstractCoverage()
    cov.hits[STALE] += 3
    cov.hits["pair", "blocking", "unaligned"] += 1  # ruled out: counted as hit, never as reachable
    report = cov.to_json()
    assert report["reached"]["stale barrier meets-persisting"] == 3
    assert "stale barrier meets-persisting" not in report["missed"]
    assert "pair blocking + unaligned" in report["unreachable"]
    assert report["reachable_cells"] == len(report["missed"]) + 1
    assert AbstractCoverage.from_json(report).hits == cov.hits
    assert ("pair", "failure", "rescale") in feature_pairs({Feature.FAILURE, Feature.RESCALE, Feature.HASH})


def test_interleave_draws_only_schedule_and_expiry_knobs_after_everything_else() -> None:
    changed = 0
    for seed in range(30):
        plain, knobs = scenario_from_seed(seed), scenario_from_seed(seed, interleave=True)
        assert {k: v for k, v in plain.items() if k not in ("schedule", "checkpoint", "max_steps")} == \
               {k: v for k, v in knobs.items() if k not in ("schedule", "checkpoint", "max_steps")}
        extra = set(knobs["schedule"]) - set(plain["schedule"])
        assert extra <= {"chooser", "pct_depth", "pct_horizon", "barrier_delay"}
        changed += bool(extra)
        if "barrier_delay" in knobs["schedule"]:
            assert knobs["checkpoint"]["checkpoint_timeout"] < knobs["schedule"]["barrier_delay"]
    assert changed > 10


def test_interleaving_scenarios_run_clean() -> None:
    from cutcheck.reference.fuzzing.verdicts import run_scenario
    rng = random.Random(0)
    for seed in rng.sample(range(10_000), 12):
        v = run_scenario(scenario_from_seed(seed, interleave=True, max_records=40, max_parallelism=3))
        assert v.ok, (seed, v.violations[:1])


def test_a_recorded_interleaving_schedule_replays_exactly() -> None:
    from cutcheck.reference.runtime.scheduler import RecordingChooser, interleaving_of
    sdict = scenario(small_graph(120), seed=8, interval=15)
    sdict["schedule"] |= {"chooser": "pct", "pct_depth": 2, "pct_horizon": 100, "barrier_delay": 40}
    rng = random.Random(3)
    recorder = RecordingChooser(lambda n: rng.randrange(n), 30, sdict["seed"], fallback=interleaving_of(sdict))
    recorded = _run(sdict, recorder)
    replayed = _run(sdict | {"schedule": sdict["schedule"] | {"choices": recorder.choices}})
    assert len(recorder.choices) == 30 and recorded.summary() == replayed.summary()
    assert interleaving_of(scenario(small_graph(), seed=8)) is None  # nothing asked: the seeded fallback


class _Partition:
    def __init__(self, *senders: Any):
        self.subpartitions = list(senders)


class _Source:
    """Just enough of a source task for the chooser: its senders and its pending checkpoint triggers."""

    def __init__(self, sender: Any, trigger: Barrier):
        self.partitions = [_Partition(sender)]
        self.direct_triggers = [trigger]
        sender.task = self


def _do_direct_checkpoint(task: Any) -> None:  # named as the engine's trigger action is
    pass


def test_a_slow_task_takes_the_next_checkpoint_only_after_records_crossed_behind_a_stale_barrier() -> None:
    stale = Barrier(1, "checkpoint", "unaligned", trigger_step=0, priority=True)
    sender = _Sender(stale)
    sender.queue.extend([Buf([1], 0, 0), Buf([2], 1, 0)])
    sender.transmitted = 0
    task = _Source(sender, Barrier(2, "checkpoint", "unaligned", trigger_step=5))
    chooser = InterleavingChooser(7, ChooserKind.WEIGHTED, barrier_delay=50)
    chooser._slow[id(task)] = (True, task)  # this task is the slow one (drawn one in SLOW_TASK_SHARE)
    other = _Sender(Buf([9], 0, 0))
    actions = [(1, _do_direct_checkpoint, task), (1, print, other)]

    def takes_trigger(step: int) -> bool:
        return any(chooser.choose_action(_Engine(step), actions) == 0 for _ in range(40))

    assert not takes_trigger(10)  # checkpoint 1's barrier is still queued at the task's sender
    sender.queue.popleft()  # it crossed; the records it overtook are still queued
    assert not takes_trigger(11)
    sender.queue.popleft()
    sender.transmitted += 1  # one of them crossed behind it: the task may take checkpoint 2 now
    assert takes_trigger(12)
    sender.queue.appendleft(stale)  # nothing else can run: a held trigger goes (no deadlock of ours)
    assert chooser.choose_action(_Engine(13), actions[:1]) == 0


def test_slow_tasks_make_the_flink_21104_order_reachable_in_the_expiry_focus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seed 7006 of the expiry-unaligned focus: a slow task's stale barrier crosses after the next
    checkpoint reached the receiver's other channels, and records follow it; CUT catches the fault.
    Without slow tasks the same scenario holds with the fault on: no stale barrier meets persisting."""
    from cutcheck.reference.fuzzing.verdicts import FOCI, run_scenario
    from cutcheck.reference.runtime import scheduler
    sdict = scenario_from_seed(7006, mutants=("obsolete-barrier-ends-persisting",), **FOCI["expiry-unaligned"])
    assert sdict["schedule"].get("barrier_delay", 0) > sdict["checkpoint"]["checkpoint_timeout"]
    assert run_scenario(sdict).invariant == "CUT"
    assert run_scenario(sdict | {"mutants": []}).ok
    monkeypatch.setattr(scheduler, "SLOW_TASK_SHARE", 10**9)
    assert run_scenario(sdict).ok


class _Coordinator:
    """Just enough of the coordinator for the chooser: what is pending, completed and triggered."""

    def __init__(self, pending: set[int], completed: list[int], next_id: int):
        self.pending = dict.fromkeys(pending)
        self.completed_ids = completed
        self.next_id = next_id


def _engine_after_an_abort(step: int) -> Any:
    """Checkpoint 1 was aborted (expired), checkpoint 2 is pending."""
    engine = _Engine(step)
    engine.coordinator = _Coordinator({2}, [], 3)  # type: ignore[attr-defined]
    return engine


def test_a_stale_barrier_waits_until_its_receiver_took_the_newer_checkpoint() -> None:
    from types import SimpleNamespace
    receiver = SimpleNamespace(last_cp=1, channels=[])
    sender = _Sender(Barrier(1, "checkpoint", "unaligned", trigger_step=0, priority=True))
    sender.channel = SimpleNamespace(task=receiver)  # type: ignore[attr-defined]
    other_input = SimpleNamespace(ended=False, eop_arrived=False)  # how checkpoint 2 can reach the receiver
    receiver.channels = [sender.channel, other_input]
    chooser = InterleavingChooser(7, ChooserKind.WEIGHTED, barrier_delay=50)
    actions = [(1, print, sender), (1, print, _Sender(Buf([9], 0, 0)))]

    def crosses(step: int) -> bool:
        return any(chooser.choose_action(_engine_after_an_abort(step), actions) == 0 for _ in range(40))

    # Past any drawn latency, yet held: checkpoint 2 has not reached the receiver (by its other channels).
    assert not crosses(60)
    receiver.last_cp = 2  # it has: the stale barrier now meets a task persisting checkpoint 2 here
    assert crosses(61)
    receiver.last_cp = 1
    assert crosses(150)  # never longer than STALE_WAIT delays after its trigger
    # A receiver whose only live input is this channel can take checkpoint 2 only behind this barrier:
    # it crosses as soon as its latency allows (waiting made every checkpoint of seed 2092 expire).
    other_input.eop_arrived = True
    assert crosses(60)


def test_the_checkpoint_after_an_aborted_one_is_never_held() -> None:
    chooser = InterleavingChooser(7, ChooserKind.WEIGHTED, barrier_delay=50)
    senders = [_Sender(Barrier(2, "checkpoint", "unaligned", trigger_step=0, priority=True)) for _ in range(64)]
    other = _Sender(Buf([1], 0, 0))
    assert all(any(chooser.choose_action(_engine_after_an_abort(1), [(1, print, sp), (1, print, other)]) == 0
                   for _ in range(40)) for sp in senders)
    # Without the abort, the same draws hold some of them (one in SLOW_SHARE, or a slow task's).
    fresh = InterleavingChooser(7, ChooserKind.WEIGHTED, barrier_delay=50)
    assert not all(any(fresh.choose_action(_Engine(1), [(1, print, sp), (1, print, other)]) == 0 for _ in range(40))
                   for sp in [_Sender(Barrier(2, "checkpoint", "unaligned", trigger_step=0, priority=True))
                              for _ in range(64)])


def test_the_checkpoint_after_an_aborted_one_moves_first() -> None:
    """Its barriers go ahead of other work in most steps (RUSH_SHARE), so it completes within the
    timeout while the aborted checkpoint's barriers are still around; without an abort, no preference."""
    def barrier_picks(engine_at: Any) -> int:
        chooser = InterleavingChooser(3, ChooserKind.WEIGHTED, barrier_delay=50)
        picks = 0
        for step in range(200):
            sender = _Sender(Barrier(2, "checkpoint", "unaligned", trigger_step=step, priority=True))
            chooser._latency[id(sender), 2] = (0, sender)  # drawn: crosses at once
            picks += chooser.choose_action(engine_at(step), [(1, print, sender), (1, print, _Sender(Buf([1], 0, 0)))]) == 0
        return picks

    assert barrier_picks(_engine_after_an_abort) > 130  # about three in four
    assert barrier_picks(_Engine) < 120  # about one in two


def test_every_expiry_focus_scenario_holds_barriers_and_draws_alike_otherwise() -> None:
    """The expiry-unaligned focus never leaves a scenario to the priorities alone (none of those met a
    newer checkpoint with a stale barrier), and its sources carry FOCUS_RECORDS times the records (more
    checkpoint cycles while records flow); the draws stay aligned, so the rest is the same scenario."""
    from cutcheck.reference.fuzzing.verdicts import FOCI
    focus = dict(FOCI["expiry-unaligned"])
    mutants = ("obsolete-barrier-ends-persisting",)
    unheld = 0
    for seed in range(40):
        held = scenario_from_seed(seed, mutants=mutants, **focus)
        plain = scenario_from_seed(seed, mutants=mutants, **(focus | {"held_barriers": False}))
        assert held["schedule"]["barrier_delay"] > held["checkpoint"]["checkpoint_timeout"]
        unheld += "barrier_delay" not in plain["schedule"]
        scaled = [v | {"records": v["records"] * FOCUS_RECORDS} if "records" in v else v
                  for v in plain["graph"]["vertices"]]
        assert held["graph"] == plain["graph"] | {"vertices": scaled} and held["failures"] == plain["failures"]
        assert held["schedule"].get("chooser") == plain["schedule"].get("chooser")
    assert unheld > 4  # without it, about one in four


@pytest.mark.parametrize("seed", [2092, 5276, 10506, 10636])
def test_expiry_focus_seeds_whose_every_checkpoint_expired_now_complete_and_end(seed: int) -> None:
    """Seed 2092 of the expiry-unaligned focus ran to its step limit on clean code: its timeout (22) was
    below the 23 steps a checkpoint of its 11 channels takes with nothing held, stale priority barriers
    piled up at a receiver and all 870 checkpoints expired. Seed 5276 hung under an earlier fix (no
    holds after three aborts) for the same reason (timeout 9, trip 12). 10506 and 10636 did with the
    timeout above the trip, triggered at each expiry: the stale barriers piled up faster than they
    drained (12 730 and 2 909 aborts). All now end well within 20 000 steps (9 906 at most)."""
    from cutcheck.reference.fuzzing.verdicts import FOCI, run_scenario
    sdict = scenario_from_seed(seed, **FOCI["expiry-unaligned"])
    timeout, least = sdict["checkpoint"]["checkpoint_timeout"], trip(sdict["graph"], _channels(sdict))
    assert timeout >= least and sdict["checkpoint"]["interval"] >= timeout + least
    verdict = run_scenario(sdict | {"max_steps": 20_000})
    assert verdict.ok, verdict.violations[:1]


def _channels(sdict: dict[str, Any]) -> int:
    from cutcheck.model.execution import ExecutionGraph
    from cutcheck.model.graph import JobGraph
    return len(ExecutionGraph(JobGraph.from_json(sdict["graph"])).channels)


def test_after_a_streak_of_aborted_checkpoints_nothing_is_held_until_one_completes() -> None:
    """Holds must never keep a job from completing checkpoints for good: once STALL_STREAK checkpoints
    in a row ended without completing, barriers and triggers go at once until one completes."""
    from cutcheck.reference.runtime.scheduler import STALL_STREAK

    def engine_after(aborted: int, step: int) -> Any:
        engine = _Engine(step)
        engine.coordinator = _Coordinator({aborted + 2}, [1], aborted + 3)  # type: ignore[attr-defined]
        return engine

    def held_share(aborted: int) -> int:
        chooser = InterleavingChooser(7, ChooserKind.WEIGHTED, barrier_delay=50)
        senders = [_Sender(Barrier(aborted + 2, "checkpoint", "unaligned", trigger_step=0, priority=True))
                   for _ in range(64)]
        for sp in senders:
            chooser._latency[id(sp), aborted + 2] = (40, sp)  # drawn: held 40 steps after its trigger
        other = _Sender(Buf([1], 0, 0))
        return sum(all(chooser.choose_action(engine_after(aborted, 1), [(1, print, sp), (1, print, other)]) == 1
                       for _ in range(20)) for sp in senders)

    assert held_share(STALL_STREAK - 1) == 64  # checkpoint 1 completed, then fewer aborts: still held
    assert held_share(STALL_STREAK) < 8  # the streak: crosses like any action (one in two each step)
