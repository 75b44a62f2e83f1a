"""Shrinking a counterexample scenario as JSON, after Hypothesis shrank the draws that made it.

Hypothesis shrinks the generator's draws (smaller graphs, fewer failures, choices towards 0), but
the generator keeps some sizes above a floor (a source has at least a quarter of the maximum
records) and a recorded schedule keeps its length. This pass works on the scenario itself: fewer
scripted choices, fewer records, keys and splits, fewer failures, rescales and vertices, each step
kept only when the scenario still ends in the same finding (same invariant name), under its own
scheduler seed or one of a few others. It stops at a deadline, a candidate still running included
(``reference.core.deadline``); whatever it reached by then is the counterexample.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from cutcheck.reference.core.deadline import BudgetExhausted, walled
from cutcheck.reference.fuzzing.verdicts import GENERATOR, Verdict, run_scenario

Candidate = dict[str, Any]
RESEEDS = 4  # other scheduler seeds tried for a smaller scenario that no longer fails (see _reseeded)


@dataclass(slots=True)
class ShrinkResult:
    verdict: Verdict  # of the smallest scenario that still fails the same way
    runs: int  # scenarios run while shrinking
    complete: bool  # False: the deadline stopped it before no step made progress


def size_of(sdict: dict[str, Any]) -> dict[str, int]:
    """The figures a counterexample is judged by."""
    g = sdict["graph"]
    return {"vertices": len(g["vertices"]), "edges": len(g["edges"]),
            "records": sum(v.get("records", 0) for v in g["vertices"] if v["kind"] == "source"),
            "choices": len(sdict.get("schedule", {}).get("choices", [])),
            "failures": len(sdict.get("failures", [])), "rescales": len(sdict.get("rescales", []))}


def shrink_scenario(found: Verdict, deadline: float, *,
                    run: Callable[[dict[str, Any]], Verdict] = run_scenario) -> ShrinkResult:
    """Greedy passes over ``found.scenario`` until a pass changes nothing or ``deadline`` (monotonic)."""
    want = found.invariant
    best = found
    runs = 0
    progress = True
    while progress:
        progress = False
        for candidate in _candidates(best.scenario):
            if time.monotonic() >= deadline:
                return ShrinkResult(best, runs, False)
            for attempt in _reseeded(candidate):
                if time.monotonic() >= deadline:
                    return ShrinkResult(best, runs, False)
                runs += 1
                try:
                    with walled(deadline):
                        v = run(attempt)
                except BudgetExhausted:
                    return ShrinkResult(best, runs, False)  # a candidate cut short proves nothing
                if not v.ok and not v.refused and v.invariant == want:
                    best, progress = v, True
                    break
                if v.invariant == GENERATOR:
                    break  # an invalid scenario stays invalid under any seed
            if progress:
                break  # restart from the smallest candidates of the new scenario
    return ShrinkResult(best, runs, True)


def _reseeded(candidate: Candidate) -> Iterator[Candidate]:
    """The candidate, then the same scenario under ``RESEEDS`` other scheduler seeds. A smaller job
    interleaves differently, so the seed that showed the finding in the bigger one rarely shows it
    in the smaller; a nearby seed often does, and the result is as replayable (its seed is in it)."""
    yield candidate
    base = int(candidate.get("seed", 0))
    for k in range(1, RESEEDS + 1):
        yield dict(candidate, seed=(base + k * 7_919) % 2**31)


def _candidates(s: dict[str, Any]) -> Iterator[Candidate]:
    """Smaller scenarios, most promising (biggest cut) first."""
    yield from _fewer_choices(s)
    yield from _fewer_failures(s)
    # The graph before the records: a job cut down to one record rarely survives losing a vertex.
    yield from _fewer_vertices(s)
    yield from _smaller_sources(s)
    yield from _simpler_network(s)


def _fewer_choices(s: dict[str, Any]) -> Iterator[Candidate]:
    choices = s.get("schedule", {}).get("choices", [])
    n = len(choices)
    for keep in sorted({0, 1, 2, 4, 8, 16, 32, n // 4, n // 2, (3 * n) // 4}):
        if keep < n:
            c = copy.deepcopy(s)
            c["schedule"]["choices"] = choices[:keep]
            yield c
    nonzero = [i for i, x in enumerate(choices) if x]
    if nonzero:  # zeroed choices read simpler (the first enabled action)
        c = copy.deepcopy(s)
        c["schedule"]["choices"] = [0] * len(choices)
        yield c


def _fewer_failures(s: dict[str, Any]) -> Iterator[Candidate]:
    for i in range(len(s.get("failures", []))):
        c = copy.deepcopy(s)
        del c["failures"][i]
        c["rescales"] = [dict(r, on_failure=r["on_failure"] - (r["on_failure"] > i))
                         for r in c.get("rescales", []) if r["on_failure"] != i]
        yield c
    for j in range(len(s.get("rescales", []))):
        c = copy.deepcopy(s)
        del c["rescales"][j]
        yield c


def _smaller_sources(s: dict[str, Any]) -> Iterator[Candidate]:
    for i, v in enumerate(s["graph"]["vertices"]):
        if v["kind"] != "source":
            continue
        for field_, floor in (("records", 1), ("keys", 1), ("splits", 1)):
            now = v.get(field_, floor)
            for smaller in sorted({floor, 2, 5, 10, 20, now // 2}):
                if floor <= smaller < now:
                    c = copy.deepcopy(s)
                    c["graph"]["vertices"][i][field_] = smaller
                    yield c
        if v.get("parallelism", 1) > 1:
            yield _with_parallelism(s, v["id"], 1)


def _fewer_vertices(s: dict[str, Any]) -> Iterator[Candidate]:
    """Drop a middle vertex, wiring one of its inputs straight to its consumers; drop an extra sink or
    an extra input edge."""
    g = s["graph"]
    sources = [v["id"] for v in g["vertices"] if v["kind"] == "source"]
    for src in sources if len(sources) > 1 else []:
        yield _without_source(s, src)
    for v in g["vertices"]:
        if v["kind"] == "source":
            continue
        ins = [e for e in g["edges"] if e["to"] == v["id"]]
        outs = [e for e in g["edges"] if e["from"] == v["id"]]
        if v["kind"] == "sink":
            if sum(x["kind"] == "sink" for x in g["vertices"]) > 1 and all(
                    any(e2["from"] == e["from"] and e2["to"] != v["id"] for e2 in g["edges"]) for e in ins):
                yield _without(s, v["id"], [])
            continue
        if outs:  # bypassed from any one of its inputs (a union's, a join's, a broadcast side's)
            for src in dict.fromkeys(e["from"] for e in ins):
                bypass = [dict(e, **{"from": src, "partitioner": _bypass_partitioner(e, g, src)}) for e in outs]
                yield _without(s, v["id"], bypass)
    for i, e in enumerate(g["edges"]):
        # One input fewer for a vertex with several (a sink fed twice, a three-way union); a kind that
        # needs it makes the candidate invalid, which the shrinker then rejects.
        if sum(x["to"] == e["to"] for x in g["edges"]) > 1:
            c = copy.deepcopy(s)
            del c["graph"]["edges"][i]
            yield c
    for v in g["vertices"]:
        if v["kind"] != "source" and v.get("parallelism", 1) > 1:
            yield _with_parallelism(s, v["id"], 1)


def _without_source(s: dict[str, Any], src: str) -> Candidate:
    """Drop a source with every vertex that only it feeds (transitively)."""
    g = s["graph"]
    gone = {src}
    changed = True
    while changed:
        changed = False
        for v in g["vertices"]:
            ins = {e["from"] for e in g["edges"] if e["to"] == v["id"]}
            if v["id"] not in gone and ins and ins <= gone:
                gone.add(v["id"])
                changed = True
    c = s
    for vid in sorted(gone):
        c = _without(c, vid, [])
    return c


def _bypass_partitioner(e: dict[str, Any], g: dict[str, Any], src: str) -> str:
    """A forward edge stays valid only between equal parallelisms; otherwise rebalance."""
    par = {v["id"]: v["parallelism"] for v in g["vertices"]}
    if e["partitioner"] == "forward" and par[src] != par[e["to"]]:
        return "rebalance"
    return str(e["partitioner"])


def _without(s: dict[str, Any], vid: str, extra_edges: list[dict[str, Any]]) -> Candidate:
    c = copy.deepcopy(s)
    g = c["graph"]
    g["vertices"] = [v for v in g["vertices"] if v["id"] != vid]
    g["edges"] = [e for e in g["edges"] if vid not in (e["from"], e["to"])] + extra_edges
    c["failures"] = [f for f in c.get("failures", []) if not f["target"].startswith(f"{vid}[")]
    for r in c.get("rescales", []):
        r["parallelism"].pop(vid, None)
    c["rescales"] = [r for r in c.get("rescales", []) if r["parallelism"] and r["on_failure"] < len(c["failures"])]
    if c.get("schedule", {}).get("slow") == vid:
        c["schedule"] = {k: x for k, x in c["schedule"].items() if k not in ("slow", "slowdown")} | {"policy": "uniform"}
    return c


def _with_parallelism(s: dict[str, Any], vid: str, p: int) -> Candidate:
    c = copy.deepcopy(s)
    for v in c["graph"]["vertices"]:
        if v["id"] == vid:
            v["parallelism"] = p
    for f in c.get("failures", []):
        if f["target"].startswith(f"{vid}["):
            f["target"] = f"{vid}[0]"
    return c


def _simpler_network(s: dict[str, Any]) -> Iterator[Candidate]:
    if s.get("schedule", {}).get("policy") == "backpressure":
        c = copy.deepcopy(s)
        c["schedule"] = {"policy": "uniform", **({"choices": s["schedule"]["choices"]} if "choices" in s["schedule"] else {})}
        yield c
