"""Checkpoint storage on disk: Flink's layout, incremental keyed state, the shared-state registry,
retention and subsumption, restore modes and entropy injection (facts §5).

Layout (facts §5.1), under the configured directory (``execution.checkpointing.dir``, ``state.checkpoints.dir`` in Flink 1.x)::

    <dir>/<job>/chk-N/_metadata     written last, atomically (temporary file, then rename)
    <dir>/<job>/chk-N/<uuid>        EXCLUSIVE: operator state, channel state, full keyed state
    <dir>/<job>/shared/<uuid>       SHARED: incremental keyed state, one file per changed key group
    <dir>/<job>/taskowned/          created as in Flink; nothing of the model is task-owned
    <dir>/savepoint-<job6>-<hex>/   a savepoint: _metadata and every file, relative paths

State under ``inline_threshold`` bytes (state.storage.fs.memory-threshold, 20 KiB) is kept inside
``_metadata``. The format is reference.storage.meta's; it names every file relative to the
checkpoint directory (``x``, ``../shared/x``), so a moved storage directory still restores. A subtask's files are written when it
acknowledges, and its shared files are registered then (facts §5.4); nothing else is written
until completion, so a crash leaves at most unreferenced files, never a torn checkpoint.

Incremental (``incremental``): a keyed subtask writes each key group's state as a piece; a piece
whose bytes equal a registered piece of the same key group is referenced, not uploaded again (like
RocksDB's SST reuse, and the registry's de-duplication of a re-uploaded file), so a file lives as
long as some checkpoint uses it, and a file of an aborted checkpoint is reused when it still fits.

Restore modes (facts §5.5): ``claim`` takes ownership of the restored checkpoint and of the older
checkpoints of its job directory, which share its files (as Flink's HA recovery of the checkpoint
store would; Flink without HA would later delete files those still reference: we depart so that
REF holds for every restorable checkpoint). ``no_claim`` never deletes the restored checkpoint's
files, and every checkpoint until the first one completes is NO_SHARING (keyed pieces exclusive).
A run refuses a job directory that already holds a checkpoint newer than its starting point.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cutcheck.model.errors import InvariantViolation, StorageError
from cutcheck.model.execution import SubtaskId
from cutcheck.reference.core.seams import Rules
from cutcheck.reference.runtime.tasks import TaskSnapshot
from cutcheck.reference.storage.codec import (
    dumps,
    encode,
    encode_channels,
    encode_counters,
    is_keyed,
    split_keyed,
)
from cutcheck.reference.storage.config import StorageConfig
from cutcheck.reference.storage.files import (
    CHK_PREFIX,
    METADATA,
    SAVEPOINT_PREFIX,
    SHARED_DIR,
    TASKOWNED_DIR,
    FileOps,
    remove_marker,
    sha256,
)
from cutcheck.reference.storage.memory import CompletedCheckpoint, StorageObserver, latest_index
from cutcheck.reference.storage.meta import (
    MissingStateFile,
    load_checkpoint,
    metadata_bytes,
)
from cutcheck.reference.storage.restore_target import (  # noqa: F401 (load_restore_target: imported from here too)
    default_job,
    load_restore_target,
    older_checkpoints,
    storage_root,
)
from cutcheck.reference.storage.retention import subsume
from cutcheck.reference.storage.rules import (
    builds_on_restored,
    exclusive_files_discarded_on_abort,
    files_discarded_when_subsumed,
    job_owns_completed,
    registry_key,
    shared_files_discarded_on_abort,
)
from cutcheck.reference.storage.shared_registry import SharedStateRegistry, registry_may_discard


@dataclass(slots=True)
class Held:
    """A checkpoint in the completed-checkpoint store."""

    cp: int
    kind: str
    path: str  # directory of its _metadata
    owned: bool  # discarded when subsumed (false: savepoints, a checkpoint restored with no_claim)
    files: dict[str, list[str]]


@dataclass(slots=True)
class Pending:
    cp: int
    kind: str
    path: str
    tasks: dict[SubtaskId, dict[str, Any]] = field(default_factory=dict)
    exclusive: list[str] = field(default_factory=list)
    shared: dict[str, str] = field(default_factory=dict)  # registry key -> file
    no_sharing: bool = False


class FsCheckpointStorage:
    """The engine's CheckpointStorage (reference.storage.memory) over a real directory."""

    def __init__(self, config: StorageConfig, *, restore: str | None = None, restore_mode: str | None = None,
                 rules: Rules | None = None, crash_after: int | None = None,
                 op_log: list[tuple[str, str]] | None = None):
        self.config = config
        self.rules = rules or Rules()  # the seams of storage rules a fault may replace
        self.base = os.path.abspath(remove_marker(config.dir, config.entropy))  # metadata, directories: no entropy
        self.data_base = os.path.abspath(config.dir)  # data files: the marker stays, replaced per file
        self.root = storage_root(config.dir, config.entropy)  # what _metadata names files relative to
        self.registry = SharedStateRegistry()
        self.held: list[Held] = []
        self.pending: dict[int, Pending] = {}
        self.kinds: dict[int, str] = {}
        self._kind_of: Callable[[int], str] = lambda cp: "checkpoint"
        self.observer: StorageObserver | None = None  # set by bind: the run's event bus
        self._no_sharing = False
        self.restored: CompletedCheckpoint | None = None
        self.unclaimed: list[str] = []  # files of a checkpoint restored with no_claim: the user's, never deleted
        self._unclaimed_dir = ""  # that checkpoint's directory
        self.restore_mode = restore_mode or config.restore_mode
        target = load_restore_target(restore) if restore is not None else None
        self.job = config.job or default_job(target[1] if target else None, self.restore_mode)
        rng = random.Random(f"cutcheck-storage/{config.seed}/{self.job}/{target[1].id if target else 0}")
        self.files = FileOps(rng, crash_after, op_log)
        self.job_dir = os.path.join(self.base, self.job)
        claim = self.restore_mode == "claim"
        chain = ([*older_checkpoints(target[1]), target[1]] if claim and target[1].kind == "checkpoint" else [target[1]]) \
            if target else []
        self._guard(target[1].id if target else 0)
        for sub in (SHARED_DIR, TASKOWNED_DIR):
            self.files.mkdirs(os.path.join(self.job_dir, sub))
        if target is not None:
            self._restore(target[0], chain)

    # ------------------------------------------------------------------ engine wiring
    def bind(self, rules: Rules, kind_of: Callable[[int], str], observer: StorageObserver) -> None:
        """Called by the engine: its rules, the kind of a pending checkpoint (its coordinator knows), and
        where this storage reports its transitions and its closing (the run's event bus)."""
        self.rules = rules
        self._kind_of = kind_of
        self.observer = observer

    def _transition(self, name: str) -> None:
        if self.observer is not None:
            self.observer.transition(name)  # core.coverage counts it

    def begin(self, cp: int, kind: str) -> None:
        """For callers without a coordinator (tests): declare a checkpoint's kind before its acks."""
        self.kinds[cp] = kind

    # ------------------------------------------------------------------ the CheckpointStorage protocol
    def acknowledge(self, snapshot: TaskSnapshot) -> None:
        p = self.pending.get(snapshot.cp)
        if p is None:
            p = self.pending[snapshot.cp] = self._start(snapshot.cp)
        known = set(p.shared)
        p.tasks[snapshot.sid] = self._write_task(snapshot, p)
        if p.kind == "checkpoint":
            for key in sorted(set(p.shared) - known):  # on acknowledgement, whatever happens next (facts §5.4)
                self._transition("reuse" if key in self.registry.entries else "register")
                if self.registry.register(key, p.shared[key], p.cp) != p.shared[key]:
                    raise ValueError(f"the registry holds another file for {key}")  # _piece reuses what it can

    def complete(self, checkpoint: CompletedCheckpoint, retained: int) -> list[int]:
        p = self.pending.pop(checkpoint.cp, None) or self._start(checkpoint.cp, checkpoint.kind)
        if p.kind != checkpoint.kind:
            raise ValueError(f"checkpoint {checkpoint.cp} was written as a {p.kind} but completes as a {checkpoint.kind}")
        tasks = [p.tasks[sid] for sid in sorted(p.tasks, key=lambda s: (s.vertex, s.index))]
        savepoint = p.kind == "savepoint"
        shared = sorted(set(p.shared.values()))
        files = {"exclusive": [self._stored_path(f, p, "exclusive") for f in p.exclusive],
                 "shared": [self._stored_path(f, p, "shared") for f in shared]}
        sharing = "self_contained" if savepoint else "no_sharing" if p.no_sharing else "shared"
        self.files.write_metadata(p.path, metadata_bytes(self.job, checkpoint, sharing, tasks, files))
        owned = self.rules[job_owns_completed](savepoint)
        self.held.append(Held(p.cp, p.kind, p.path, owned, {"exclusive": list(p.exclusive), "shared": shared}))
        if savepoint:
            self._transition("savepoint")
        if not savepoint:
            self._no_sharing = False  # the first completed checkpoint after a no_claim restore ends NO_SHARING
        subsumed = self._subsume(retained)
        self._collect_garbage()
        self._check_ref(f"after checkpoint {checkpoint.cp} completed")
        return subsumed

    def abort(self, cp: int) -> None:
        p = self.pending.pop(cp, None)
        if p is None:
            return
        self._transition("abort-discard")
        # Exclusive files go at once; shared ones stay registered and go at a later subsumption
        # unless a later checkpoint reuses them ("on JM, shared state is removed on subsumption").
        for path in self.rules[exclusive_files_discarded_on_abort](list(p.exclusive)):
            self.files.delete(path)
            self._prune(os.path.dirname(path))
        for path in self.rules[shared_files_discarded_on_abort](sorted(set(p.shared.values()))):
            self.files.delete(path)
        self._prune(p.path)
        self._check_ref(f"after checkpoint {cp} was aborted")

    def latest(self) -> CompletedCheckpoint | None:
        i = latest_index([(h.cp, h.kind) for h in self.held])
        if i is None:
            return None
        h = self.held[i]
        try:
            return load_checkpoint(h.path)
        except MissingStateFile as exc:
            raise InvariantViolation("REF", f"restoring checkpoint {h.cp}: {exc}") from None

    def retained_ids(self) -> list[int]:
        return [h.cp for h in self.held]

    def retained(self) -> list[tuple[int, str]]:
        return [(h.cp, h.kind) for h in self.held]

    def close(self) -> None:
        """The job ended: drop pending checkpoints and every owned file no retained checkpoint uses.

        Flink's shutdown runs unregisterUnusedState(lowest retained), which keeps the uploads of
        checkpoints aborted after that one forever; we delete them too, as REF asks.
        """
        for cp in sorted(self.pending):
            self.abort(cp)
        live = {f for h in self.held for f in h.files["shared"]}
        for path in self.registry.discard_all_except(live, self.rules[registry_may_discard]):
            self.files.delete(path)
        self._check_ref("when the job ended")
        if self.observer is not None:
            self.observer.closed()  # reference.checks.storage_invariants: SAVEPOINT_KEPT, NO_ORPHANS

    # ------------------------------------------------------------------ writing
    def _kind(self, cp: int) -> str:
        return self.kinds.get(cp) or self._kind_of(cp)

    def _start(self, cp: int, kind: str | None = None) -> Pending:
        kind = kind or self._kind(cp)
        if kind == "savepoint":
            while True:  # a fresh, self-contained directory (state.savepoints.dir)
                path = os.path.join(self.base, f"{SAVEPOINT_PREFIX}{self.job[:6]}-{self.files.rng.getrandbits(48):012x}")
                if not os.path.exists(path):
                    break
        else:
            path = os.path.join(self.job_dir, f"{CHK_PREFIX}{cp}")
        self.files.mkdirs(path)
        return Pending(cp, kind, path, no_sharing=self._no_sharing)

    def _write_task(self, snap: TaskSnapshot, p: Pending) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "sid": str(snap.sid), "unaligned": snap.unaligned, "input_done": snap.input_done,
            "outputs_pending": snap.outputs_pending, "acked": snap.acked,
            "processed": encode_counters(snap.processed), "emitted": encode_counters(snap.emitted)}
        operator = snap.operator
        if self.config.incremental and p.kind == "checkpoint" and is_keyed(operator):
            rest, pieces = split_keyed(operator)
            entry["operator"] = self._handle(encode(rest), p)
            entry["key_groups"] = [[kg, self._piece(snap.sid.vertex, kg, encode(pieces[kg]), p)] for kg in sorted(pieces)]
        else:
            entry["operator"] = self._handle(encode(operator), p)
        if snap.input_state or snap.output_state:
            entry["channels"] = self._handle({"input": encode_channels(snap.input_state),
                                              "output": encode_channels(snap.output_state)}, p)
        return entry

    def _handle(self, value: Any, p: Pending) -> dict[str, Any]:
        """An exclusive piece of state: inlined under the threshold, else a file in chk-N."""
        data = dumps(value)
        if len(data) < self.config.inline_threshold:
            return {"inline": value, "bytes": len(data)}
        path = self._create(p, f"{CHK_PREFIX}{p.cp}", data)
        p.exclusive.append(path)
        return {"file": self._stored_path(path, p, "exclusive"), "scope": "exclusive", "bytes": len(data),
                "sha256": sha256(data)}

    def _piece(self, vertex: str, kg: int, value: Any, p: Pending) -> dict[str, Any]:
        """A key group's state: a registered file with the same bytes if the job owns one, else a new
        file in shared/ (NO_SHARING: an exclusive file, facts §5.2)."""
        data = dumps(value)
        if len(data) < self.config.inline_threshold:
            return {"inline": value, "bytes": len(data)}
        if p.no_sharing:
            return self._handle(value, p)
        digest = sha256(data)
        key = self.rules[registry_key](vertex, kg, digest)
        path = p.shared.get(key) or self.registry.reusable(key) or self._create(p, SHARED_DIR, data)
        p.shared[key] = path
        return {"file": self._stored_path(path, p, "shared"), "scope": "shared", "bytes": len(data), "sha256": digest}

    def _create(self, p: Pending, sub: str, data: bytes) -> str:
        if p.kind == "savepoint":  # self-contained: no entropy, so the directory can be moved
            return self.files.create(p.path, data, None, 0)
        template = os.path.join(self.data_base, self.job, sub)
        return self.files.create(template, data, self.config.entropy, self.config.entropy_length)

    def _stored_path(self, path: str, p: Pending, scope: str) -> str:
        """How ``_metadata`` names a file: relative to the checkpoint directory whenever the file lies
        under the storage root (``chk-N/x`` -> ``x``, ``shared/x`` -> ``../shared/x``, an entropy-injected
        ``/b/Xy12/ckpts/<job>/shared/x`` -> ``../../../Xy12/ckpts/<job>/shared/x``), so that moving the
        root moves every checkpoint with it; absolute only for a file outside it (a checkpoint restored
        in claim mode from another directory). Readers resolve relative paths against the directory of
        the ``_metadata`` (reference.storage.files.resolve). ``scope`` is kept for callers."""
        del scope
        if os.path.dirname(path) == p.path:
            return os.path.basename(path)
        if path.startswith(self.root + os.sep):
            return os.path.relpath(path, p.path)
        return path

    # ------------------------------------------------------------------ retention and deletion
    def _subsume(self, retained: int) -> list[int]:
        """addCheckpointAndSubsumeOldestOne with CheckpointSubsumeHelper's rules (``storage.retention``)."""
        subsumed: list[int] = []
        for victim in subsume(self.held, retained, self.rules):
            subsumed.append(victim.cp)
            self._transition("subsume")
            if victim.owned:
                self._discard(victim)
            else:  # a savepoint (or an unclaimed restore) is the user's: its files are no longer ours to clean
                self.files.created.difference_update([*victim.files["exclusive"], *victim.files["shared"]])
        return subsumed

    def _discard(self, h: Held) -> None:
        """The metadata first, so a half-discarded checkpoint is never offered for restore."""
        self.files.delete(os.path.join(h.path, METADATA))
        for path in self.rules[files_discarded_when_subsumed](h.files["exclusive"]):
            self.files.delete(path)
            self._prune(os.path.dirname(path))
        self._prune(h.path)

    def _collect_garbage(self) -> None:
        # A pending checkpoint registered its shared files on acknowledgement (facts §5.4), so the bound
        # never passes one: a completed checkpoint subsumes every older pending checkpoint, but a
        # completed savepoint subsumes nothing, and with acknowledgements crossing (checkpoint.ack_delay)
        # a savepoint can complete while an older checkpoint is pending. (Flink 1.15+ never stores a
        # savepoint, so completing one never collects; the engine's store holds them, a departure.)
        ids = [h.cp for h in self.held if h.kind != "savepoint"] or [self.held[-1].cp]
        ids += [cp for cp, p in self.pending.items() if p.kind == "checkpoint"]
        for path in self.registry.unregister_unused(min(ids), self.rules[registry_may_discard]):
            self._transition("shared-delete")
            self.files.delete(path)

    def _prune(self, directory: str) -> None:
        if os.path.basename(directory).startswith((CHK_PREFIX, SAVEPOINT_PREFIX)):
            self.files.rmdir_if_empty(directory)

    def _check_ref(self, when: str) -> None:
        """REF, as the engine goes: every file of every retained checkpoint still exists, and so does
        every file of a checkpoint restored with no_claim (the user may restore it again)."""
        for path in self.unclaimed:
            if not os.path.exists(path):
                raise InvariantViolation("REF", f"{when}: {path} of checkpoint {self.restored.cp if self.restored else '?'}, "
                                                "restored with no_claim, was deleted")
        unclaimed = set(self.unclaimed)
        for h in self.held:
            borrowed = sorted(unclaimed.intersection(h.files["shared"])) if unclaimed and h.path != self._unclaimed_dir else []
            if borrowed:  # the user may delete a no_claim snapshot once a checkpoint of the job completed
                raise InvariantViolation("REF", f"{when}: checkpoint {h.cp} references {borrowed[0]}, a file of the "
                                                "checkpoint restored with no_claim, which the job does not own")
            for path in [os.path.join(h.path, METADATA), *h.files["exclusive"], *h.files["shared"]]:
                if not os.path.exists(path):
                    raise InvariantViolation("REF", f"{when}: retained checkpoint {h.cp} references {path}, which was deleted")

    # ------------------------------------------------------------------ restore
    def _guard(self, start: int) -> None:
        for name in sorted(os.listdir(self.job_dir)) if os.path.isdir(self.job_dir) else []:
            if name.startswith(CHK_PREFIX) and name[len(CHK_PREFIX):].isdigit() and int(name[len(CHK_PREFIX):]) > start \
                    and os.path.exists(os.path.join(self.job_dir, name, METADATA)):
                raise StorageError(
                    f"{os.path.join(self.job_dir, name)} already holds a checkpoint of another run of job {self.job}; "
                    f"restore from it (--restore), remove it, or give another job id or directory.")

    def _restore(self, done: CompletedCheckpoint, chain: list[Any]) -> None:
        claim = self.restore_mode == "claim"
        shares = self.rules[builds_on_restored](claim)
        for r in chain:
            # Unclaimed files are registered under their path: never matched, so never built upon.
            keys = {path: self.rules[registry_key](v, kg, digest) for (v, kg), (digest, path) in r.kg_files.items()} if shares else {}
            self.registry.register_restored([(keys.get(f, f), f) for f in r.files["shared"]], r.id, claimed=shares)
            self.held.append(Held(r.id, "checkpoint", r.path, claim,
                                  {"exclusive": r.files["exclusive"], "shared": r.files["shared"]}))
        self.held[-1].kind = done.kind
        if not claim:
            self._unclaimed_dir = chain[-1].path
            self.unclaimed = [os.path.join(chain[-1].path, METADATA), *chain[-1].files["exclusive"],
                              *chain[-1].files["shared"]]
        self._no_sharing = not shares  # facts §8.4: the first checkpoint after a no_claim restore is full
        self.restored = done
