"""Random scenarios from one generator, for the tests and the campaigns (docs/scenarios.md).

The generator draws through a ``Draw`` (``integer(lo, hi)``), so the same code serves two drivers:
Hypothesis (``tests/strategies.py`` and ``reference.fuzzing.campaigns``, whose draws shrink towards
small graphs, few failures and short schedules) and a seed (``scenario_from_seed``, for campaigns
distributed as Spark tasks, where each task only needs an integer).

Each scenario first draws a swarm mask (``reference.fuzzing.swarm``): every feature of the engine is
on in about half the scenarios, and a feature that is off takes its plain default. The graph comes
from ``generate_graph``, failures, rescales and savepoints from ``generate_faults``; this module
draws the checkpointing, network and schedule sections and the step budget.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from cutcheck.model.execution import ExecutionGraph
from cutcheck.model.graph import JobGraph
from cutcheck.reference.fuzzing import generate_faults as faults
from cutcheck.reference.fuzzing.generate_graph import (
    ANY_INPUT,
    MIDDLE_KINDS,
    SINGLE_GATE_FAMILIES,
    graph_dict,
    rescalable,
)
from cutcheck.reference.fuzzing.generate_interleaving import acknowledgement_delay, interleaving
from cutcheck.reference.fuzzing.generate_resubmit import resubmit_section
from cutcheck.reference.fuzzing.swarm import (
    UNLIMITED_TOLERABLE_FAILURES,
    Draw,
    Feature,
    SeedDraw,
    chance,
    choice,
    draw_mask,
    features_of,
)

__all__ = ["ANY_INPUT", "GENERATED_CHECKPOINT_TIMEOUT", "MIDDLE_KINDS", "MODES", "SINGLE_GATE_FAMILIES",
           "UNLIMITED_TOLERABLE_FAILURES", "Draw", "Feature", "SeedDraw", "choice", "features_of", "graph_dict",
           "final_checkpoint_room", "scenario_dict", "scenario_from_seed", "step_budget"]

MODES = ("aligned", "unaligned", "aligned_timeout")
GENERATED_CHECKPOINT_TIMEOUT = 5_000  # steps; see scenario_dict
RECORD_BYTES = 64
HORIZON_SHARE = 6  # failures and savepoints at a step come within work // HORIZON_SHARE steps
# Steps per channel of a back-to-back checkpoint timeout (see _expiry); at 2 a run now and then
# completed no checkpoint at all, so its exactly-once sinks never committed and it never finished.
BACK_TO_BACK = (3, 6)
# storage=True: what the discard-on-abort hunt needs (shared files reused across checkpoints, aborts).
STORAGE_FEATURES = (Feature.STORAGE, Feature.INCREMENTAL, Feature.INLINE_ZERO, Feature.EXPIRY, Feature.RETAINED)


def _rescalable(graph: dict[str, Any]) -> list[str]:
    """Kept for flink_bridge.conform: see generate_graph.rescalable."""
    return rescalable(graph)


def scenario_dict(d: Draw, *, mutants: Sequence[str] = (), modes: Sequence[str] = MODES,
                  max_parallelism: int = 4, rescale: bool | str = True, max_records: int = 200,
                  storage: bool | None = None, batch: bool | None = None, after_checkpoint: bool = False,
                  keyed_pressure: bool = False, handover: bool = False, on: Collection[Feature] = (),
                  off: Collection[Feature] = (),
                  interleave: bool = False, held_barriers: bool = False,
                  graph_shape: dict[str, Any] | None = None, conversion: bool = False) -> dict[str, Any]:
    """A scenario over a generated graph, with the features of a freshly drawn swarm mask.

    ``rescale``: False never rescales, True leaves it to the mask, "always" makes at least one
    failure and rescales on it whenever the graph has a vertex Flink would rescale (for hunting
    rescale bugs). ``storage``: True forces on-disk incremental checkpoints that expire now and then
    (STORAGE_FEATURES), False keeps checkpoints in memory, None leaves it to the mask. ``batch``
    likewise for blocking exchanges; None allows them only without ``mutants`` (a batch job takes no
    checkpoints, so no protocol mutant can show in it). ``after_checkpoint`` checkpoints often and makes
    every failure come soon after checkpoint 1 or 2 completed, so that the job restores one while
    its channels still carry records. ``keyed_pressure``: the slow vertex (with BACKPRESSURE) is a
    keyed one when the graph has one, and the first rescale moves it, so that a rescale splits keyed
    state and the in-flight records queued on its hash inputs; with ``handover`` the first rescale moves
    the source feeding that keyed vertex instead, which hands source splits to other producer subtasks
    while their records are in flight (``reference.fuzzing.handover``). ``on``/``off`` force further features.
    ``interleave``: the schedule explores interleavings on purpose (``generate_interleaving``), drawn
    after everything else, so the rest of the scenario is the one the same draws give without it;
    ``held_barriers`` makes every such scenario hold barriers (the expiry-unaligned focus).
    ``graph_shape``: further arguments of ``generate_graph.graph_dict`` (a side pipeline, features to show).
    ``conversion``: what a sender-side alignment-timeout conversion needs (``shapes.TIMEOUT_CONVERSION``):
    buffers of one or two records, so that senders queue several, and with ``aligned_timeout`` an
    alignment timeout of at least one step (never the 0 that makes every barrier unaligned at once).
    """
    force_on, force_off = set(on), set(off)
    if rescale is False:
        force_off.add(Feature.RESCALE)
    elif rescale == "always":
        force_on |= {Feature.FAILURE, Feature.RESCALE}
        force_off |= {Feature.REFUSABLE_RESCALE, Feature.BLOCKING}
    if storage:
        force_on |= set(STORAGE_FEATURES)
        force_off.add(Feature.BLOCKING)
    elif storage is False:
        force_off.add(Feature.STORAGE)
    if Feature.AT_LEAST_ONCE_SINK not in force_on:
        # An at-least-once sink duplicates records after a failure, as in Flink, and the exactly-once
        # verdict counts every sink: such scenarios are controls, asked for by name only.
        force_off.add(Feature.AT_LEAST_ONCE_SINK)
    if batch is False or (batch is None and mutants):
        force_off.add(Feature.BLOCKING)
    elif batch:
        force_on.add(Feature.BLOCKING)
    mask = draw_mask(d, force_on, force_off)
    if Feature.RESCALE in mask and Feature.FAILURE not in force_off:
        mask |= {Feature.FAILURE}  # a rescale happens on a failure: without one it would be no feature
    if mask & {Feature.BLOCKING, Feature.DEBLOAT}:
        # The batch engine's and the debloater's per-step work cost up to ten times a plain step.
        max_records //= 2
    graph = graph_dict(d, max_parallelism=max_parallelism, max_records=max_records, blocking=True, mask=mask,
                       keyed=keyed_pressure, **(graph_shape or {}))
    is_batch = any(e["exchange"] == "blocking" for e in graph["edges"])
    execution = ExecutionGraph(JobGraph.from_json(graph))
    channels, subtasks = len(execution.channels), len(execution.subtasks)
    ids = [v["id"] for v in graph["vertices"]]

    network: dict[str, Any] = {"buffer_bytes": RECORD_BYTES * d.integer(1, 2 if conversion else 8), "record_bytes": RECORD_BYTES,
                               "exclusive": d.integer(1, 3), "floating": d.integer(1, 4)}
    if Feature.OUTPUT_POOL in mask:
        # Flink's minimum for a pipelined result partition is one buffer per subpartition plus one.
        network["output_pool"] = max_parallelism + d.integer(1, 4)
    schedule: dict[str, Any] = {"policy": "uniform"}
    if Feature.BACKPRESSURE in mask:
        keyed = [v["id"] for v in graph["vertices"] if v["kind"] == "keyed_count"]
        if handover:  # a keyed vertex that reads a source directly, whose rescale hands splits over
            sources = {v["id"] for v in graph["vertices"] if v["kind"] == "source"}
            keyed = [k for k in keyed if any(e["to"] == k and e["from"] in sources for e in graph["edges"])] or keyed
        slow = choice(d, keyed if keyed_pressure and keyed else ids)
        schedule = {"policy": "backpressure", "slow": slow, "slowdown": d.integer(2, 40)}
    if Feature.RECORDS_PER_ACTION in mask:
        schedule["records_per_action"] = d.integer(1, 16)
    debloat = _debloat(d, network["buffer_bytes"]) if Feature.DEBLOAT in mask else None

    work = _work(graph, network, schedule, debloat)
    ck, tolerant = _checkpointing(d, mask, choice(d, modes), channels, schedule, work, early=after_checkpoint, conversion=conversion,
                                  direct=subtasks)
    # ``work`` is a budget's estimate, mostly about 8 times the steps a clean run takes: failures and
    # savepoints drawn over all of it mostly came after the job had finished (over 160 seeds of the
    # rescale-unaligned focus, 63 failures fired).
    shape = faults.RunShape(is_batch, max(40, work // HORIZON_SHARE), max_parallelism, after_checkpoint)
    failures, workers = faults.failures(d, graph, mask, shape)
    rescales = faults.rescales(d, graph, failures, mask, shape, always=rescale == "always",
                               first=_first_moved(graph, schedule.get("slow"), handover) if keyed_pressure else None,
                               grow=handover)
    out: dict[str, Any] = {"graph": graph, "seed": d.integer(0, 2**31 - 1), "checkpoint": ck, "network": network,
                           "schedule": schedule, "failures": failures, "rescales": rescales,
                           "mutants": list(mutants)}
    savepoints = faults.savepoints(d, mask, shape)
    if savepoints:
        out["savepoints"] = savepoints
    if workers is not None:
        out["workers"] = workers
    if debloat is not None:
        out["debloat"] = debloat
    if Feature.FULL_FAILOVER in mask:
        if is_batch:
            out["batch"] = {"failover_strategy": "full"}
        else:
            out["failover_strategy"] = "full"
    if Feature.STORAGE in mask and not is_batch:
        out["storage"] = _storage(d, mask, ck)
        if Feature.RESUBMIT in mask and not rescales:
            # Not after a rescale: the second job would restore at the scenario's parallelism a
            # checkpoint of another one, and the credit for the first job's output does not yet count
            # broadcast copies across such a restore (a false loss; see the README's open work).
            out["resubmit"] = resubmit_section(d, savepoints=bool(savepoints))
    if interleave and not is_batch:
        tolerant = interleaving(d, out, work, channels, always_held=held_barriers) or tolerant
    ack_delay = 0 if is_batch else acknowledgement_delay(d, out, Feature.ACK_DELAY in mask)
    clean = _work(graph, network, schedule, debloat, per_action=schedule.get("records_per_action"))
    out["max_steps"] = step_budget(clean, failures, ck, tolerant, barrier_trip=0 if is_batch else subtasks + channels)
    out["max_steps"] += 4 * ack_delay * (1 + len(failures))  # each restart's final checkpoint waits for its acks
    return out


def _checkpointing(d: Draw, mask: Collection[Feature], mode: str, channels: int,
                   schedule: dict[str, Any], work: int, *, early: bool = False,
                   direct: int = 0, conversion: bool = False) -> tuple[dict[str, Any], bool]:
    """The checkpoint section, and whether it tolerates failed checkpoints. ``early``: checkpoints
    come often enough that one completes while a small job's records still flow. ``direct``: the
    job's subtasks, each triggered directly once its inputs have finished (docs/flink-facts.md 4.8)."""
    if early:
        interval = d.integer(5, 20)
    elif Feature.STORAGE in mask:
        # A checkpoint on disk costs milliseconds: a few dozen per run, not hundreds. ``work`` is a
        # budget's estimate, 1 to 45 times the steps a clean run takes (mostly about 8): an interval of
        # a tenth of it or more often let the job finish before its first checkpoint.
        interval = d.integer(max(10, work // 100), max(40, work // 20))
    else:
        interval = d.integer(5, 60)
    ck: dict[str, Any] = {"mode": mode, "interval": interval}
    # Steps a barrier takes to align across the job: about one per channel, times the slow vertex's
    # slowdown when it must pass it.
    transit = max(2, channels) * (1 if schedule.get("slow") is None else max(1, schedule["slowdown"] // 4))
    if mode == "aligned_timeout":
        # Before the typical alignment (mostly unaligned), during it, or after it (mostly aligned).
        band = d.integer(1 if conversion else 0, 3)
        ck["timeout"] = (0, d.integer(1, transit), d.integer(transit, 4 * transit),
                         d.integer(4 * transit, 4 * transit + interval))[band]
    if mode == "aligned" and Feature.CONCURRENT in mask:
        ck["max_concurrent"] = d.integer(2, 3)
    if Feature.RETAINED in mask:
        ck["retained"] = d.integer(2, 3)
    tolerant = Feature.EXPIRY in mask
    if tolerant:
        timeout, ck["interval"] = _expiry(d, interval, channels, transit)
        # A timeout every checkpoint needs longer than, even once the records have drained, leaves
        # an exactly-once job waiting for ever for the final checkpoint its tasks need to finish,
        # as a Flink job would (docs/flink-facts.md 4.8): no finding, a scenario that cannot end.
        # Once the sources have finished, every subtask is triggered directly, an action each, and
        # concurrent checkpoints share the steps; twice that lets the final checkpoint complete, so
        # checkpoints expire only while records still flow (an aligned job of 2 subtasks with 3
        # concurrent checkpoints never completed one at a timeout of 6 steps, always at 8).
        ck["checkpoint_timeout"] = max(timeout, final_checkpoint_room(direct, ck.get("max_concurrent", 1)))
        # Drawn expiries are there to abort checkpoints and leave their barriers travelling. Under a
        # finite tolerance (Flink's default is none) the failed checkpoint past it fails the job over
        # (CheckpointFailureManager), a failover of its own kind; a job whose checkpoints always take
        # longer than the timeout then restarts for ever, as it would in Flink, which the verdict
        # classes as that outcome (``verdicts.restart_loop``), not as a finding. Without the feature
        # the job tolerates failed checkpoints, as a Flink user with such timeouts would configure it.
        finite = Feature.FINITE_TOLERANCE in mask
        ck["tolerable_failed"] = d.integer(0, 3) if finite else UNLIMITED_TOLERABLE_FAILURES
        tolerant = not finite
    else:
        # Every generated job has a checkpoint timeout, as every Flink job has (10 minutes by
        # default), far above what a checkpoint of these small jobs needs when it can complete at
        # all. Some cannot: where an unaligned stage feeds a forced-aligned join that also waits on
        # the stage's own (forced-aligned) producer, only expiry ends the checkpoint, in Flink as
        # in the engine; with Flink's default tolerance of none, that expiry fails the job over
        # (tests/reference/regressions/seeds/forced-aligned-join-expiry.json).
        ck["checkpoint_timeout"] = GENERATED_CHECKPOINT_TIMEOUT
    return ck, tolerant


def final_checkpoint_room(subtasks: int, concurrent: int) -> int:
    """The shortest drawn expiry timeout: steps for the final checkpoint of an idle job (see
    ``_checkpointing``), each subtask triggered directly, ``concurrent`` checkpoints sharing them."""
    return 2 * subtasks * concurrent + 2


def _expiry(d: Draw, interval: int, channels: int, transit: int) -> tuple[int, int]:
    """A checkpoint timeout near the time checkpoints take, so that some expire while their barriers
    still travel (the stale-priority-barrier regression needed 8 steps per channel), and the interval.

    One step is one action anywhere in the job, so a barrier needs on the order of a step per
    channel to cross the job; the checkpoints of generated jobs took 1 to 8 steps per channel (half
    of them under 3). Checkpoints that expire faster than their barriers drain, triggered again at
    once, pile up stale barriers and starve the job (a Flink job handles such an event in
    microseconds, far below any checkpoint timeout, so this would be the model's artefact): 4 steps
    per channel with a short interval took a 57-channel job 253 000 steps. So a timeout below 8
    steps per channel comes with an interval that leaves the barriers of an expired checkpoint
    2 steps per channel to drain before the next trigger (over 300 seeds no run starved).
    """
    floor = 8 * channels
    band = d.integer(0, 3)
    if band == 0:  # below the slower checkpoints' time: those expire
        timeout = d.integer(channels, 4 * channels)
        return timeout, max(interval, timeout + 2 * channels)
    if band == 3:
        # Back to back: the next checkpoint is due before this one expires, so it is triggered the
        # moment this one expires, while its barriers still travel; a newer checkpoint then meets the
        # stale barriers of the older one (FLINK-21104, the stale-priority-barrier regression: a
        # 2-steps-per-channel timeout, the interval below it).
        timeout = d.integer(BACK_TO_BACK[0] * channels, BACK_TO_BACK[1] * channels)
        return timeout, d.integer(max(1, timeout // 2), timeout)
    if band == 1:  # near the transit time under backpressure
        return d.integer(floor, max(2 * floor, 3 * transit)), interval
    # Kept under the timeout every other generated job has, which is no expiry feature.
    return min(GENERATED_CHECKPOINT_TIMEOUT - 1, max(floor, d.integer(2 * interval, 8 * interval))), interval


def _debloat(d: Draw, buffer_bytes: int) -> dict[str, Any]:
    """Debloating with times short enough to act within a small job's run."""
    return {"enabled": True, "target": d.integer(5, 200), "period": d.integer(5, 50), "samples": d.integer(1, 20),
            "threshold": d.integer(0, 50),
            # At least a quarter of a buffer: one-record buffers make every record an action of its own.
            "min_buffer": RECORD_BYTES * d.integer(max(1, buffer_bytes // RECORD_BYTES // 4), buffer_bytes // RECORD_BYTES)}


def _storage(d: Draw, mask: Collection[Feature], ck: dict[str, Any]) -> dict[str, Any]:
    """On-disk checkpoints; the directory is whoever runs the scenario's (campaigns: a temporary one)."""
    incremental = Feature.INCREMENTAL in mask
    ck["incremental"] = incremental
    sec: dict[str, Any] = {"incremental": incremental}
    if Feature.INLINE_ZERO in mask:
        sec["inline_threshold"] = 0  # nothing inlined: keyed state lands in shared files checkpoints reuse
    elif chance(d, 2):
        sec["inline_threshold"] = RECORD_BYTES * d.integer(1, 16)
    sec["restore_mode"] = "claim" if Feature.CLAIM in mask else "no_claim"
    return sec


def _work(graph: dict[str, Any], network: dict[str, Any], schedule: dict[str, Any],
          debloat: dict[str, Any] | None, per_action: int | None = None) -> int:
    """Steps a clean run needs, about: each buffer crosses each edge in a few actions, and the slow
    vertex's share is paid ``slowdown`` times over. ``per_action`` (``schedule.records_per_action``)
    makes processing cost a step per that many records, so a buffer takes more than one: the draws
    use the estimate without it (they were tuned on it), the step budget the one with it."""
    size = min(network["buffer_bytes"], debloat["min_buffer"]) if debloat else network["buffer_bytes"]
    per_buffer = max(1, size // RECORD_BYTES)
    # A buffer is produced, sent and processed: three actions, the last one -(-n // per_action).
    actions = 3 if per_action is None else 2 + -(-per_buffer // per_action)
    par = {v["id"]: v["parallelism"] for v in graph["vertices"]}
    reach = {v["id"]: v.get("records", 0) for v in graph["vertices"]}
    work = slow_work = 0
    slowdown: int = schedule.get("slowdown", 1)
    slow = schedule.get("slow")
    for e in graph["edges"]:  # edges are listed producers first
        records = reach[e["from"]] * (par[e["to"]] if e["partitioner"] == "broadcast" else 1)
        reach[e["to"]] += records
        buffers = actions * (records // per_buffer + par[e["from"]] * par[e["to"]])
        work += buffers
        if slow in (e["from"], e["to"]):
            slow_work += buffers
    return work + slow_work * slowdown


def step_budget(work: int, failures: list[dict[str, Any]], ck: dict[str, Any], tolerant: bool,
                barrier_trip: int = 0) -> int:
    """``max_steps``: ten times the expected work of every restart, plus four checkpoint timeouts for
    a job that tolerates no failed checkpoint (each expiry fails it over), so that LIVENESS fires on
    a stuck job, not a slow one. ``work`` counts records per action (``_work``'s ``per_action``);
    checkpoints add their barriers' actions, ``barrier_trip`` each, one checkpoint per ``interval``
    steps and per checkpoint in flight at most, and one takes at least its trip: so at most as many
    barrier actions as others per concurrent checkpoint (an interval of 1 step on a 2-subtask job made
    the barriers' actions three quarters of the run)."""
    restarts = 1 + len(failures)
    concurrent: int = ck.get("max_concurrent", 1)
    interval: int = ck["interval"]
    barriers = concurrent * work * min(barrier_trip, interval) // max(1, interval)
    expiries = 0 if tolerant else 4 * ck["checkpoint_timeout"]
    return 10 * restarts * (work + barriers) + expiries + 5_000


def scenario_from_seed(seed: int, mutants: Sequence[str] = (), **gen: Any) -> dict[str, Any]:
    return scenario_dict(SeedDraw(seed), mutants=mutants, **gen)


def _first_moved(graph: dict[str, Any], slow: str | None, handover: bool) -> str | None:
    """The vertex the first rescale moves under keyed pressure: the slow keyed vertex, or with ``handover``
    a source it reads directly (the slow vertex when it reads none)."""
    if not handover:
        return slow
    sources = {v["id"] for v in graph["vertices"] if v["kind"] == "source"}
    return next((e["from"] for e in graph["edges"] if e["to"] == slow and e["from"] in sources), slow)
