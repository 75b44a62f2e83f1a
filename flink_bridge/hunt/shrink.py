"""Shrinking a finding: the fewest vertices, then records, then the smallest parallelism that still disagree,
then each drawn dimension (failure after the restore, claim, native savepoint, RocksDB, chaining off) it
does not need switched back to its default.

Every step is a smaller case, predicted again by the model and run again on the runner; it is kept
only when that run still shows every kind of disagreement the finding has. Steps are tried in a
fixed order, so one seed shrinks one way.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cutcheck.flink_bridge.hunt.case import HuntCase

MIN_RECORDS = 20
MAX_SHRINK_RUNS = 40

Check = Callable[[HuntCase], bool]  # predict, run and compare: does the case still disagree the same way?


@dataclass(slots=True)
class ShrinkLog:
    steps: list[dict[str, Any]] = field(default_factory=list)  # {"try": ..., "kept": bool, "size": ...}
    runs: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "seconds": round(self.seconds, 1), "steps": self.steps}


def _with_graph(case: HuntCase, graph: dict[str, Any], rescale: dict[str, int] | None = None) -> HuntCase:
    ids = {v["id"] for v in graph["vertices"]}
    r = {v: p for v, p in (case.rescale if rescale is None else rescale).items() if v in ids}
    maxp = {v: m for v, m in case.max_parallelism_after.items() if v in ids}
    return dataclasses.replace(case, graph=graph, rescale=r, max_parallelism_after=maxp)


def _prune(graph: dict[str, Any]) -> dict[str, Any]:
    """Drop what no longer reaches a sink, and sources left without consumers."""
    while True:
        fed = {e["from"] for e in graph["edges"]}
        dead = {v["id"] for v in graph["vertices"] if v["kind"] != "sink" and v["id"] not in fed}
        if not dead:
            return graph
        graph["vertices"] = [v for v in graph["vertices"] if v["id"] not in dead]
        graph["edges"] = [e for e in graph["edges"] if e["to"] not in dead and e["from"] not in dead]


def smaller_graphs(case: HuntCase) -> Iterator[tuple[str, HuntCase]]:
    """Cases with fewer vertices: a sink's branch dropped, a one-in one-out vertex bypassed, an extra input dropped."""
    g = case.graph
    sinks = [v["id"] for v in g["vertices"] if v["kind"] == "sink"]
    for sink in sinks if len(sinks) > 1 else []:
        new = copy.deepcopy(g)
        new["vertices"] = [v for v in new["vertices"] if v["id"] != sink]
        new["edges"] = [e for e in new["edges"] if e["to"] != sink]
        yield f"drop sink {sink} and what only feeds it", _with_graph(case, _prune(new))
    for v in g["vertices"]:
        ins = [e for e in g["edges"] if e["to"] == v["id"]]
        outs = [e for e in g["edges"] if e["from"] == v["id"]]
        if v["kind"] in ("source", "sink") or len(ins) != 1 or len(outs) != 1:
            continue
        # The bypass keeps either exchange: the one into the vertex, or the one out of it.
        keeps = [({**ins[0], "to": outs[0]["to"]}, ins[0]["partitioner"]), ({**outs[0], "from": ins[0]["from"]}, outs[0]["partitioner"])]
        for bypass, part in keeps if ins[0]["partitioner"] != outs[0]["partitioner"] else keeps[:1]:
            new = copy.deepcopy(g)
            new["vertices"] = [w for w in new["vertices"] if w["id"] != v["id"]]
            new["edges"] = [e for e in new["edges"] if v["id"] not in (e["from"], e["to"])] + [bypass]
            yield f"bypass {v['id']} (keeping {part})", _with_graph(case, new)
    for i, e in enumerate(g["edges"]):
        if sum(x["to"] == e["to"] for x in g["edges"]) > 1:
            new = copy.deepcopy(g)
            del new["edges"][i]
            yield f"drop edge {e['from']} -> {e['to']} ({e['partitioner']})", _with_graph(case, _prune(new))


def fewer_records(case: HuntCase) -> Iterator[tuple[str, HuntCase]]:
    records = max((int(v.get("records", 0)) for v in case.graph["vertices"] if v["kind"] == "source"), default=0)
    if records // 2 >= MIN_RECORDS:
        new = copy.deepcopy(case.graph)
        for v in new["vertices"]:
            if v["kind"] == "source":
                v["records"] = max(MIN_RECORDS, int(v.get("records", 0)) // 2)
        yield f"records per source {records} -> {records // 2}", _with_graph(case, new)


def lower_parallelism(case: HuntCase) -> Iterator[tuple[str, HuntCase]]:
    from cutcheck.flink_bridge.hunt.risk import _forward_group

    seen: set[frozenset[str]] = set()
    for v in case.graph["vertices"]:
        p = int(v["parallelism"])
        group = _forward_group(case.graph, v["id"])
        if frozenset(group) in seen:
            continue
        seen.add(frozenset(group))
        if p > 1 and min(x["parallelism"] for x in case.graph["vertices"] if x["id"] in group) == p:
            new = copy.deepcopy(case.graph)
            for w in new["vertices"]:
                if w["id"] in group:
                    w["parallelism"] = p - 1
            rescale = {k: q for k, q in case.rescale.items() if not (k in group and q == p - 1)}
            yield f"parallelism of {'/'.join(sorted(group))} {p} -> {p - 1}", _with_graph(case, new, rescale)
    for vid, q in sorted(case.rescale.items()):
        now = next(int(x["parallelism"]) for x in case.graph["vertices"] if x["id"] == vid)
        if q > 1 and q - 1 != now:
            yield f"rescale {vid} to {q - 1}", _with_graph(case, case.graph, {**case.rescale, vid: q - 1})


def plainer(case: HuntCase) -> Iterator[tuple[str, HuntCase]]:
    """The same case with one drawn dimension back at its default: which of them the finding needs."""
    if case.fail_restored:
        yield "no failure after the restore", dataclasses.replace(case, fail_restored=None)
    if case.claim_mode == "claim":
        yield "restore in no_claim mode", dataclasses.replace(case, claim_mode="no_claim")
    if case.savepoint == "native":
        yield "canonical savepoint", dataclasses.replace(case, savepoint="canonical")
    if case.max_parallelism_after:
        yield "the same max parallelism on the restore", dataclasses.replace(case, max_parallelism_after={})
    if case.incremental:
        yield "hashmap backend", dataclasses.replace(case, incremental=False)
    if not case.chaining:
        yield "chaining on", dataclasses.replace(case, chaining=True)


def shrink(case: HuntCase, still_disagrees: Check, accepts: Check, *, max_runs: int = MAX_SHRINK_RUNS,
           deadline: float | None = None) -> tuple[HuntCase, ShrinkLog]:
    """The smallest case the steps reach that ``still_disagrees`` (each step one run on the runner)."""
    log = ShrinkLog()
    start = time.monotonic()
    current = case
    for phase in (smaller_graphs, fewer_records, lower_parallelism, plainer):
        progress = True
        while progress:
            progress = False
            for what, smaller in phase(current):
                if log.runs >= max_runs or (deadline is not None and time.monotonic() > deadline):
                    log.seconds = time.monotonic() - start
                    return current, log
                if not (smaller.builds() and accepts(smaller)):
                    continue
                log.runs += 1
                kept = still_disagrees(smaller)
                log.steps.append({"try": what, "kept": kept, "size": list(smaller.size())})
                if kept:
                    current, progress = smaller, True
                    break
    log.seconds = time.monotonic() - start
    return current, log
