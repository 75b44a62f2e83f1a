"""How a run uses checkpoint storage: open it from the scenario, and start from a checkpoint of an
earlier run (``simulate --restore PATH``).

A run that starts from an earlier run's checkpoint N continues that job: checkpoint ids go on from
N + 1, the attempt after N's, and the committers' transactions in N count as committed by the
earlier run's external system (re-committing them is the usual idempotent no-op). The oracle then
judges the continuation: it is credited with the output the earlier run committed up to N, which
the cut determines exactly (CUT): every record the sources had read, less the copies still to come
from the channel state in N; and per key, the counts 1..c of the keyed state, less the counts of
records still in flight after their keyed vertex.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutcheck.model.errors import ScenarioError, StorageError
from cutcheck.model.graph import JobGraph
from cutcheck.model.kinds import RestoreMode
from cutcheck.reference.faults.catalogue import Mutants
from cutcheck.reference.runtime.records import COUNT, COUNTER, KEY, RID, filter_keeps
from cutcheck.reference.storage.config import RESTORE_MODES, ResubmitFrom, StorageConfig, restore_section
from cutcheck.reference.storage.files import METADATA, SAVEPOINT_PREFIX
from cutcheck.reference.storage.fs import FsCheckpointStorage, load_restore_target
from cutcheck.reference.storage.memory import CompletedCheckpoint
from cutcheck.reference.storage.meta import referenced_files
from cutcheck.reference.storage.rules import first_checkpoint_id_after_restore

if TYPE_CHECKING:
    from cutcheck.reference.engine import Engine
    from cutcheck.reference.scenario import Scenario


def open_storage(scenario: Scenario, *, checkpoint_dir: str | Path | None = None, restore: str | Path | None = None,
                 restore_mode: str | None = None) -> tuple[FsCheckpointStorage | None, CompletedCheckpoint | None]:
    """(the on-disk storage, or None to keep checkpoints in memory; the checkpoint to start from)."""
    config = StorageConfig.from_json(scenario.extra.get("storage"), incremental=scenario.checkpoint.incremental,
                                     seed=scenario.seed, dir_override=str(checkpoint_dir) if checkpoint_dir else None)
    path, mode = restore_section(scenario.extra.get("restore"))
    path = str(restore) if restore is not None else path
    given = restore_mode or mode or (config.restore_mode if config else RestoreMode.NO_CLAIM)
    if given not in RESTORE_MODES:
        raise ScenarioError(f"--restore-mode {given!r} is not one of {', '.join(RESTORE_MODES)}.")
    mode = RestoreMode(given)
    if config is None:
        return None, (load_restore_target(path)[0] if path is not None else None)
    storage = FsCheckpointStorage(config, restore=path, restore_mode=mode, rules=Mutants.of(list(scenario.mutants)).rules())
    return storage, storage.restored


def resubmit_target(storage: FsCheckpointStorage, source: ResubmitFrom, savepoints: list[int]) -> str | None:
    """The directory a resubmitted job restores from: the ended job's latest retained checkpoint, or
    the latest of its completed ``savepoints`` (ids) still on disk; None when it has none."""
    if source is ResubmitFrom.CHECKPOINT:
        held = [h for h in storage.held if h.kind == "checkpoint"]
        return held[-1].path if held else None
    # A savepoint leaves the completed-checkpoint store when a later checkpoint subsumes it, but its
    # self-contained directory stays (it is the user's): find it by the job and id its metadata names.
    prefix, best = f"{SAVEPOINT_PREFIX}{storage.job[:6]}-", (0, None)
    for name in sorted(os.listdir(storage.base)):
        directory = os.path.join(storage.base, name)
        if not (name.startswith(prefix) and os.path.exists(os.path.join(directory, METADATA))):
            continue
        refs = referenced_files(directory)
        if refs.job == storage.job and refs.kind == "savepoint" and refs.id in savepoints and refs.id > best[0]:
            best = (refs.id, directory)
    return best[1]


def start_from(engine: Engine, done: CompletedCheckpoint) -> None:
    """Prepare a fresh engine to restore ``done`` (the engine then builds its tasks from it)."""
    graph = engine.graph
    ids = {v.id for v in graph.vertices}
    unknown = sorted({sid.vertex for sid in done.tasks} - ids)
    if unknown:
        raise StorageError(f"checkpoint {done.cp} holds state of vertex(es) {', '.join(unknown)}, which the scenario's "
                           f"graph does not have; restore it with the graph it was taken with.")
    engine.coordinator.next_id = engine.rules[first_checkpoint_id_after_restore](done.cp)
    engine.coordinator._last_completed = done.cp  # the committers re-commit N's transactions on restore
    engine.attempt = done.attempt + 1
    for sid, snap in done.tasks.items():
        if graph.vertex(sid.vertex).kind == "sink":
            for _cp, txn in snap.operator.get("pending", []):
                engine.store.committed.add(txn)
    credit_earlier_output(engine, done)


def copies_from(graph: JobGraph, vertex: str, rid: int) -> int:
    """Committed copies one record at ``vertex`` still makes (reference.runtime.records.routes, from the middle)."""
    v = graph.vertex(vertex)
    if v.kind == "filter" and not filter_keeps(rid, v.drop_every):
        return 0
    if v.kind == "sink":
        return 1
    return sum((graph.vertex(e.target).parallelism if e.partitioner == "broadcast" else 1)
               * copies_from(graph, e.target, rid) for e in graph.out_edges(vertex))


def _reaches(graph: JobGraph, vertex: str, sink: str) -> bool:
    return vertex == sink or any(_reaches(graph, e.target, sink) for e in graph.out_edges(vertex))


def credit_earlier_output(engine: Engine, done: CompletedCheckpoint) -> None:
    graph, oracle = engine.graph, engine.oracle
    in_flight: list[tuple[str, tuple]] = []  # (vertex the record goes to, record)
    for snap in done.tasks.values():
        for states in (snap.input_state, snap.output_state):
            for (edge, _p, _c), bufs in states.items():
                target = graph.edge(edge).target
                in_flight += [(target, rec) for b in bufs for rec in b.recs]
    still_to_come: Counter[int] = Counter()
    for target, rec in in_flight:
        still_to_come[rec[RID]] += copies_from(graph, target, rec[RID])
    read: dict[str, dict[int, int]] = {}
    for sid, snap in done.tasks.items():
        if graph.vertex(sid.vertex).kind == "source":
            for split, offset in snap.operator.get("splits", []):
                read.setdefault(sid.vertex, {})[split] = offset
    for name, layout in engine.expect.layouts.items():
        period, table = oracle.expected_copies(name)
        offsets = read.get(name, {})
        for j in range(layout.records):
            if j // layout.splits < offsets.get(j % layout.splits, 0):
                rid = layout.rid_base + j
                oracle.counts[rid] = max(0, table[j % period] - still_to_come[rid])
    _credit_counts(engine, done, in_flight)


def _credit_counts(engine: Engine, done: CompletedCheckpoint, in_flight: list[tuple[str, tuple]]) -> None:
    graph, oracle = engine.graph, engine.oracle
    for sink, (label, _lane) in oracle.labels.items():
        if label is None:
            continue
        counter = label.split("/", 1)[0]
        counts: dict[int, int] = {}
        for sid, snap in done.tasks.items():
            if sid.vertex == counter:
                for per_key in snap.operator.get("counts", {}).values():
                    counts.update(per_key)
        group = oracle.count_seen.setdefault(label, {})
        for key, c in counts.items():
            group[key] = bytearray(b"\0" + b"\1" * c)
        index = engine.vertex_index[counter]
        for target, rec in in_flight:
            if rec[COUNTER] == index and rec[COUNT] > 0 and _reaches(graph, target, sink):
                seen: Any = group.get(rec[KEY])
                if seen is not None and rec[COUNT] < len(seen):
                    seen[rec[COUNT]] = 0  # still to be committed by this run
