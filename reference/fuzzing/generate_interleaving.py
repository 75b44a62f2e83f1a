"""The scheduling knobs of a scenario that explores interleavings on purpose (``scenario_dict(interleave=True)``).

Rare interleavings are rare under the weighted chooser because every action is drawn afresh each
step: a barrier queued at its sender crosses within a few steps, so a checkpoint almost never
expires while its barrier still waits, and the next checkpoint almost never meets that stale barrier
(FLINK-21104 came up in about one of 500 expiry-focused seeds). These knobs make such orders common
while staying inside what Flink allows (any network delay, any thread scheduling):

* ``schedule.chooser`` "pct" with a few priority change points (``reference.runtime.scheduler``):
  one task or sender may run far ahead of, or far behind, the rest of the job;
* ``schedule.barrier_delay``: barriers wait that long at the head of a slow link's sender;
* slow tasks (``scheduler.SLOW_TASK_SHARE``): their barriers wait that long or not at all, and they
  take a newer checkpoint only after records crossed behind an older one's stale barrier;
* a checkpoint timeout timed against that delay: shorter than it, so a checkpoint expires while its
  barrier is held, and the next trigger one to two trips later, while that stale barrier still waits
  for the newer checkpoint (``scheduler.STALE_WAIT``) and the rest have drained.

``acknowledgement_delay`` draws the other kind of crossing: acknowledgements of different checkpoints
reaching the coordinator out of order (``checkpoint.ack_delay``).
"""

from __future__ import annotations

from typing import Any

from cutcheck.reference.fuzzing.swarm import UNLIMITED_TOLERABLE_FAILURES, Draw, chance

# Steps per channel a checkpoint timeout keeps at least (generate.BACK_TO_BACK's lower end, which
# this module cannot import: generate imports it).
STEPS_PER_CHANNEL = 2
# The expiry-unaligned focus's jobs (``always_held``) carry this many times the records drawn: a
# 40-record job finished after about five checkpoint cycles, so few expired checkpoints were followed
# by a newer one while records still flowed. Over its seeds 7000-7199 with the fault on,
# obsolete-barrier-ends-persisting was found in 20 at 6 (0.14 s a seed, untraced) and 31 at 12 (0.25 s);
# at 12, seed 11182 (aligned barriers behind a slow sink, timeout 17) expired every checkpoint to its limit.
FOCUS_RECORDS = 6
MAX_DEPTH = 3  # PCT's bugs of depth d need d - 1 change points; the ones we hunt need one or two


def trip(graph: dict[str, Any], channels: int) -> int:
    """The fewest steps a checkpoint takes with nothing held: a trigger per source subtask, then each
    channel's barrier sent and taken, an action each; and at the end of input, when every subtask is
    triggered on its own, two actions per subtask (``generate.final_checkpoint_room``, which this
    module cannot import). A timeout below it expires every checkpoint whatever the schedule: seed 2092
    of the expiry-unaligned focus (11 channels, one source: 23 steps against a timeout of 22) never
    completed one, so its exactly-once sinks never finished."""
    sources: int = sum(v["parallelism"] for v in graph["vertices"] if v["kind"] == "source")
    subtasks: int = sum(v["parallelism"] for v in graph["vertices"])
    return max(sources + STEPS_PER_CHANNEL * channels, 2 * subtasks + 2) + 1


def interleaving(d: Draw, scenario: dict[str, Any], work: int, channels: int, *, always_held: bool = False) -> bool:
    """Draw the knobs into ``scenario`` (its schedule and, with a delay, its checkpoint timing); return
    whether the job now tolerates every failed checkpoint (which ``step_budget`` needs to know).
    ``always_held``: never the priorities alone (the expiry-unaligned focus: of its 100 seeds from 1000,
    none of the 31 without held barriers had a stale barrier meet a newer checkpoint)."""
    sched = scenario["schedule"]
    ck = scenario["checkpoint"]
    if chance(d, 2):
        sched["chooser"] = "pct"
        sched["pct_depth"] = d.integer(1, MAX_DEPTH)
        # Change points within the steps a clean run takes (``work`` is mostly 8 times those).
        sched["pct_horizon"] = d.integer(max(10, work // 16), max(20, work // 4))
    # Draws are read so that their smallest values, which Hypothesis favours and shrinks towards, give
    # the interleaving hunted: held barriers, and the longest delay the timeout allows.
    priorities_alone = d.integer(0, 7) >= 6 and not always_held  # drawn either way: the draws stay aligned
    if priorities_alone or ck.get("mode") == "at_least_once":
        return False  # one in four: no held barriers, the priorities alone
    # Expiry while the barrier is held: the newer checkpoint's barriers overtake the stale one's on the
    # fast links and meet it on the slow one. The timeout stays at a checkpoint's trip or more: below
    # that no checkpoint completed and the job never finished.
    low = max(STEPS_PER_CHANNEL * max(2, channels), trip(scenario["graph"], channels))
    timeout = d.integer(low, 3 * low)
    delay = 2 * timeout - d.integer(0, timeout - 1)
    sched["barrier_delay"] = delay
    if always_held:
        for v in scenario["graph"]["vertices"]:
            if "records" in v:  # sources
                v["records"] *= FOCUS_RECORDS
    ck["checkpoint_timeout"] = timeout
    # The next trigger comes one to two trips after an expiry: the expired checkpoint's barriers that are
    # not held drain meanwhile (as ``generate._expiry`` leaves them), while a held one still waits for
    # the newer checkpoint. Triggered at the expiry, each checkpoint's barriers cost as many actions as
    # the steps between triggers, the stale ones piled up at the receivers, and sources starved: seeds
    # 10506 and 10636 of the focus expired every checkpoint to their step limits (12 730 and 2 909).
    ck["interval"] = timeout + d.integer(low, 2 * low)
    if ck.get("mode") == "aligned_timeout" and ck.get("timeout") is not None:
        ck["timeout"] = min(ck["timeout"], timeout)
    # Expiries here are the point, not a failure of the job: Flink users with such timeouts tolerate them.
    ck["tolerable_failed"] = UNLIMITED_TOLERABLE_FAILURES
    return True


def acknowledgement_delay(d: Draw, scenario: dict[str, Any], forced: bool) -> int:
    """Draw ``checkpoint.ack_delay`` into ``scenario``; return it (0: none drawn).

    Where the order of completions matters (concurrent checkpoints, or savepoints beside checkpoints)
    most scenarios delay their acknowledgements, so that a newer checkpoint completes while an older
    one is pending (``reference.checkpointing.acks``); ``forced`` (the feature asked for by a
    guided campaign) draws it in any streaming scenario. Drawn after everything else, so the rest of
    the scenario is the one the same draws give without it. The delay stays within a quarter of the
    checkpoint timeout, so that expiry scenarios still complete checkpoints; below that it is drawn
    freely, as acks cross only when a checkpoint's slowest one outlasts the time between completions,
    which alignment makes hundreds of steps.
    """
    ck = scenario["checkpoint"]
    concurrent = ck.get("max_concurrent", 1) > 1
    # Three in four with concurrent checkpoints (two checkpoints pending is what lets one complete
    # before an older one); one in four beside savepoints with one checkpoint at a time, where only a
    # savepoint and the checkpoint pending at its trigger can cross (a pending savepoint holds the next
    # trigger back), so that most of those scenarios stay as they were. The draws shrink to no delay.
    drawn = d.integer(0, 3) > 0 if concurrent else bool(scenario.get("savepoints")) and chance(d, 4)
    if not (forced or drawn):
        return 0
    high: int = max(1, ck.get("checkpoint_timeout", 1_000_000) // 4)
    delay = high - d.integer(0, high - 1)  # shrinks to the longest: the one that crosses most
    ck["ack_delay"] = delay
    return delay
