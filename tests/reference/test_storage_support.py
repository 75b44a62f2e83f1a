"""Shared by the storage tests: a synthetic job's snapshots, and a normal form of checkpoints that
keeps Python types (tuple vs list, int vs str keys), written without the storage codec so that a
lossy codec cannot hide behind itself. (No tests here.)"""

from __future__ import annotations

import copy
import os
import random
from typing import Any

from cutcheck.model.execution import SubtaskId
from cutcheck.reference.runtime.network import Buf
from cutcheck.reference.runtime.tasks import TaskSnapshot
from cutcheck.reference.storage.memory import CompletedCheckpoint

SIDS = [SubtaskId("src", 0), SubtaskId("count", 0), SubtaskId("count", 1), SubtaskId("sink", 0)]
PARALLELISM = {"src": 1, "count": 2, "sink": 1}
KEY_GROUPS = {0: range(0, 64), 1: range(64, 128)}


def typed(x: Any) -> Any:
    if isinstance(x, Buf):
        return ("Buf", x.seq0, x.origin, typed(x.recs))
    if isinstance(x, tuple):
        return ("tuple", [typed(v) for v in x])
    if isinstance(x, list):
        return ("list", [typed(v) for v in x])
    if isinstance(x, dict):
        return ("dict", sorted(([typed(k), typed(v)] for k, v in x.items()), key=repr))
    if isinstance(x, SubtaskId):
        return ("sid", str(x))
    return (type(x).__name__, x)


def norm_snapshot(s: TaskSnapshot) -> Any:
    return typed({"cp": s.cp, "sid": s.sid, "operator": s.operator, "unaligned": s.unaligned, "processed": s.processed,
                  "input_state": s.input_state, "emitted": s.emitted, "output_state": s.output_state,
                  "input_done": s.input_done, "outputs_pending": s.outputs_pending, "acked": s.acked})


def norm(done: CompletedCheckpoint | None) -> Any:
    if done is None:
        return None
    return (done.cp, done.kind, done.attempt, typed(done.parallelism), done.trigger_step, done.end_step,
            sorted((str(sid), norm_snapshot(s)) for sid, s in done.tasks.items()))


def initial_state() -> dict[SubtaskId, dict[str, Any]]:
    return {SIDS[0]: {"splits": [(0, 0), (1, 0)]},
            SIDS[1]: {"counts": {}, "order": {}},
            SIDS[2]: {"counts": {}, "order": {}, "broadcast": []},
            SIDS[3]: {"pending": [], "next_txn": 0}}


def advance(state: dict[SubtaskId, dict[str, Any]], rng: random.Random, groups: int = 2, keys: int = 6) -> None:
    """Change a few key groups of one keyed subtask, move the source on, and the sink's transactions."""
    i = rng.randrange(2)
    op = state[SIDS[1 + i]]
    for _ in range(groups):
        kg = rng.choice(list(KEY_GROUPS[i])[:8])  # few key groups, so that unchanged ones recur
        counts = op["counts"].setdefault(kg, {})
        for _ in range(rng.randrange(1, keys)):
            key = kg * 1000 + rng.randrange(keys)
            counts[key] = counts.get(key, 0) + 1
            op["order"].setdefault(kg, {})[(key, rng.randrange(2), 0, 0)] = counts[key] * 7
    src = state[SIDS[0]]
    src["splits"] = [(s, off + rng.randrange(3)) for s, off in src["splits"]]
    sink = state[SIDS[3]]
    sink["next_txn"] += 1
    sink["pending"] = [*sink["pending"][-2:], [sink["next_txn"], f"sink[0]-a0-t{sink['next_txn']}"]]


def make_snapshot(cp: int, sid: SubtaskId, state: dict[SubtaskId, dict[str, Any]], rng: random.Random) -> TaskSnapshot:
    """A subtask's acknowledgement: a copy of its state, channel counters and (sometimes) channel state."""
    snap = TaskSnapshot(cp=cp, sid=sid, operator=copy.deepcopy(state[sid]), unaligned=rng.random() < 0.5,
                        input_done=True, acked=True)
    if sid.vertex == "count":
        key = (0, 0, sid.index)
        snap.processed[key] = rng.randrange(100)
        if snap.unaligned:
            recs = [(r, r % 7, r * 3, r % 2, r // 2, 0, -1) for r in range(rng.randrange(0, 5))]
            snap.input_state[key] = [Buf(recs, snap.processed[key], rng.choice([-1, 0]))] if recs else []
    if sid.vertex in ("src", "count"):
        for c in range(2 if sid.vertex == "src" else 1):
            key = (0, 0, c) if sid.vertex == "src" else (1, sid.index, 0)
            snap.emitted[key] = rng.randrange(100)
            snap.output_state[key] = ([Buf([(7, 1, 2, 0, 3, 4, 1)], snap.emitted[key] - 1)]
                                      if snap.unaligned and rng.random() < 0.5 else [])
    return snap


def files_under(root: str) -> set[str]:
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}
