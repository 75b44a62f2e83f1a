"""Generator shapes for abstract cells the feature cycle reaches rarely.

A guided campaign reaches most abstract cells (``abstract_coverage``) in its first hundred examples;
a few it reaches in two or three runs of 600, or on one campaign seed and not the next. For those
cells the shape of scenario that makes them is known, and while such a cell is unreached a guided
campaign spends one fresh example in ``SHAPE_EVERY`` on its shape (``wanted``), once it ran ``WARM_UP``
examples (timed replays wait as long):

* ``crowd``: a channel persisting with a savepoint pending beside its unaligned checkpoint while
  another pipelined region runs (the moments timed replays need, ``timed``): unaligned checkpoints,
  savepoint bursts (``guided.savepoint_bursts``), and a side pipeline, a source feeding only its own
  sink (``generate_graph.graph_dict``). Wanted until some run marked such a moment.
* ``restore``: channel state restored on an edge of one partitioner, input or output side: unaligned
  checkpoints behind a slow vertex (data in flight), failures soon after a checkpoint completed, and
  an edge of that partitioner shown in the graph. Wanted once ``WARM_UP`` examples ran without it.
* ``stale``: a barrier of an aborted checkpoint still in flight as a newer one starts, and records
  crossing behind it once the receiver handled it: the expiry-unaligned focus (held barriers, short
  checkpoint timeouts) with 100 records (``STALE``). Wanted once ``WARM_UP`` examples ran.
* ``handover``: a source split handed to another producer by a rescale, its restored records on one
  channel of a keyed gate while its new records wait on another (``handover``): the handover focus
  (a growing source read by a slow keyed vertex, few keys, several splits). Wanted once ``WARM_UP``
  examples ran without it; the cycle brings the focus too, one seed in 19.
* ``retrigger``: a task's last producer finishing while its handler collects one checkpoint and another
  one is pending that no barrier brings it (``finishing``): at-least-once checkpointing (its tracker
  blocks no channel, so ends of partition cross while it counts barriers), savepoint bursts (the
  pending checkpoint beside a periodic one; ``guided.maybe_bursts``), no failures (a failover aborts
  them) and no slow vertex. Wanted once ``WARM_UP`` examples ran without the cell, after the crowd
  phase (wanted beside the crowd shape too, it took examples from the stale shape: ci campaign seed 2
  then missed ``stale barrier records-behind``).
* ``cancel``: a cancel marker ending an unaligned collection that holds channels blocked before its
  alignment timeout switched it (``cancelling``): the aligned-timeout-expiry focus (alignment
  timeouts, expiry with held barriers, failures). Wanted once ``WARM_UP`` examples ran without the cell.
* ``timeout``: the alignment timeout converting a barrier queued behind buffers at its sender
  (``timeout at-sender``), then the receiver's unaligned snapshot finding buffers that barrier overtook
  in its channel (``timeout overtaken-at-snapshot``, the moment a wrong cut of the conversion shows
  in): ``TIMEOUT_CONVERSION``. Wanted once ``WARM_UP`` examples ran without the second cell.
* ``ownership``: a shared file of a checkpoint restored without claiming it falling out of use
  (``ownership restored-released``): the resubmit focus (9 of its seeds 0-99 reach the cell; the cycle
  brings that focus one seed in 19). Wanted once ``WARM_UP`` examples ran without the cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from cutcheck.reference.fuzzing.abstract_cells import ABSTRACT_UNIVERSE, RESTORED_RELEASED
from cutcheck.reference.fuzzing.abstract_coverage import AbstractCoverage
from cutcheck.reference.fuzzing.cancelling import ENDS_UNALIGNED_BLOCKED
from cutcheck.reference.fuzzing.converting import TIMEOUT_AT_SNAPSHOT
from cutcheck.reference.fuzzing.finishing import WHILE_COLLECTING
from cutcheck.reference.fuzzing.swarm import Feature
from cutcheck.reference.fuzzing.timed import TIMED_FOR
from cutcheck.reference.fuzzing.verdicts import FOCI, SMALL

SHAPE_EVERY = 3  # of the fresh examples, while a shape is wanted
# Examples a campaign runs before it spends any on shapes or timed replays: the first ones find most
# faults (bench_fuzz: most within 50 scenarios), and spent on coverage from the start, they left
# restart-failed-task-only unfound within 60 s on 2 of 5 campaign seeds (found on 5 of 5 before).
WARM_UP = 100
# No feature pair is forced on the crowd shape: a full failover or a rescale would leave no region
# failover to time, and a resubmit (storage) no savepoint bursts; an empty source only shortens the
# run. About one run in six marks a crowded moment (measured over 40 seeds: 6).
CROWD: dict[str, Any] = {"modes": ("unaligned",), "on": (Feature.SAVEPOINT,),
                         "off": (Feature.FULL_FAILOVER, Feature.EMPTY_SOURCE), "rescale": False, "storage": False,
                         "graph_shape": {"side_pipeline": True}, **SMALL}
# Measured over seeds 0-199 of the shape, each with savepoint bursts, on clean code: 37 runs reached
# the retrigger-while-collecting cell, and 33 of them break when the end of partition re-triggers only
# an idle handler (TRIGGER); with 40 records 38 and 33 at almost twice the time; a slow vertex allowed,
# or no bursts, fewer (27, 7). The plain cycle reached the cell in 0 of 400 seeds, the at-least-once
# focus in 1 of 100. The expiry feature stays forced although without it more seeds reach the cell (63
# of 200): a Hypothesis campaign draws most shaped examples from seed 0 (20 of the 35 of ci campaign
# seed 1: it favours the bounds of a range), and seed 0 reaches it only with expiry. In-memory
# checkpoints: a resubmit (on-disk only) takes no bursts, and the runs are faster.
RETRIGGER: dict[str, Any] = {"modes": ("at_least_once",), "on": (Feature.SAVEPOINT, Feature.EXPIRY),
                             "off": (Feature.FAILURE, Feature.BACKPRESSURE), "after_checkpoint": True, "batch": False,
                             "rescale": False, "storage": False, "max_records": 20, "max_parallelism": 3}
# What a sender-side timeout conversion and the snapshot after it need (``generate.scenario_dict``'s
# ``conversion``: buffers of one or two records, so that a sender queues several behind its barrier, and
# an alignment timeout that fires while barriers are in flight, never at 0), no slow vertex (its
# slowdown stretches the timeouts drawn past the moment the queues build), and records enough to keep
# them queued. Measured on clean code over seeds 0-499: 82 reach ``timeout overtaken-at-snapshot``
# (176 the conversion); the aligned-timeout focus 7 of 300 (16 the conversion). The failures stay: a
# restore of the converted barrier's output state is part of what the class needs.
TIMEOUT_CONVERSION: dict[str, Any] = {"modes": ("aligned_timeout",), "on": (Feature.FAILURE,),
                                      "off": (Feature.BACKPRESSURE,), "max_records": 100, "max_parallelism": 3,
                                      "conversion": True}
# The expiry-unaligned focus with 100 records: its runs reach ``stale barrier records-behind`` (records
# crossing after a handled stale barrier, in a checkpoint that completes) twice as often per run (24 of
# seeds 0-299, 12 with 40 records) at twice the time, so as often per second. A ci campaign's fixed 600
# examples count runs, not seconds: at 40 records campaign seed 4 spent 63 shaped examples and missed it.
STALE: dict[str, Any] = {**FOCI["expiry-unaligned"], "max_records": 100}
BURSTING = ("crowd", "retrigger")  # the shapes whose every scenario takes savepoint bursts
# The feature that brings an edge of each partitioner whose channel state a restore can install
# (rebalance: every graph has one; hash: keyed vertices).
SHOWN_BY = {"shuffle": Feature.SHUFFLE, "global": Feature.GLOBAL, "hash": Feature.KEYED_COUNT}


class HasMoments(Protocol):
    moments: dict[str, list[tuple[int, str]]]


def restore_shape(partitioner: str) -> dict[str, Any]:
    shown = (SHOWN_BY[partitioner],) if partitioner in SHOWN_BY else ()
    return {"modes": ("unaligned",), "on": (Feature.FAILURE, Feature.BACKPRESSURE, *shown), "after_checkpoint": True,
            **SMALL, "graph_shape": {"show": shown}}


def wanted(reached: AbstractCoverage, corpus: Sequence[HasMoments], examples: int) -> list[tuple[str, dict[str, Any]]]:
    """The shapes of the cells ``reached`` lacks, each with its name (``BURSTING`` take savepoint bursts),
    none before ``examples`` reached ``WARM_UP``: the crowd shape alone while the failover transition is
    unreached and no entry of ``corpus`` marked a moment for it (its replays take over; it is the
    rarest), else one per partitioner of an unreached restore cell, one for the stale cells, one for
    the handover cells, one for the re-trigger while a handler collects, one for a cancel marker
    ending an unaligned collection that holds blocked channels, one for a receiver's snapshot after
    a sender-side timeout conversion and one for a restored unclaimed file falling out of use."""
    out: list[tuple[str, dict[str, Any]]] = []
    if examples < WARM_UP:
        return out
    if not reached.hits[TIMED_FOR["crowded"]] and not any(e.moments.get("crowded") for e in corpus):
        return [("crowd", CROWD)]
    missed = [c for c, why in ABSTRACT_UNIVERSE.items() if why is None and c[0] in ("restore", "stale", "handover")
              and not reached.hits[c]]
    for partitioner in dict.fromkeys(c[1] for c in missed if c[0] == "restore"):
        out.append(("restore", restore_shape(partitioner)))
    if any(c[0] == "stale" for c in missed):
        out.append(("stale", dict(STALE)))
    if any(c[0] == "handover" for c in missed):
        out.append(("handover", dict(FOCI["handover"])))
    if not reached.hits[WHILE_COLLECTING]:
        out.append(("retrigger", dict(RETRIGGER)))
    if not reached.hits[ENDS_UNALIGNED_BLOCKED]:
        out.append(("cancel", dict(FOCI["aligned-timeout-expiry"])))
    if not reached.hits[TIMEOUT_AT_SNAPSHOT]:  # reached only after a conversion: the sender's cell too
        out.append(("timeout", dict(TIMEOUT_CONVERSION)))
    if not reached.hits[RESTORED_RELEASED]:
        out.append(("ownership", dict(FOCI["resubmit"])))
    return out
