"""The storage inspection as it was before it streamed (every file a FileInfo, a realpath per file, every
reference resolved on its own, a set of every tail of every reference): the oracle the streamed
inspection must equal on small bases, field by field. Kept verbatim in behaviour; slow on purpose.
(No tests here.)"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from cutcheck.model.errors import StorageError
from cutcheck.reference.storage.files import METADATA, TASKOWNED_DIR, remove_marker
from cutcheck.reference.storage.flink_metadata import FlinkMetadata, _norm, local_path, scope_of
from cutcheck.reference.storage.flink_metadata_format import decode, read_metadata
from cutcheck.reference.storage.inspection import (
    CheckpointInfo,
    CheckpointListing,
    Reader,
    _keep_path,
    _lift,
    _marker_pattern,
    entropy_roots,
)
from cutcheck.reference.storage.meta import SCOPES, CheckpointRefs, referenced_files
from cutcheck.reference.storage.scope import (
    context_metadata,
    inside,
    keep_metadata,
    locate,
    require_metadata,
    reroot,
)
from cutcheck.reference.storage.store import QUARANTINE_DIR, FileInfo, Store, open_store, within
from cutcheck.reference.storage.traversal import json_uris as _uris


def local_files(root: str) -> list[FileInfo]:
    """LocalStore.files as it was: os.walk, a realpath and a stat per file."""
    if os.path.isfile(root):
        found = [os.path.realpath(root)]
    else:
        found = []
        for d, dirs, names in os.walk(root):
            dirs[:] = sorted(n for n in dirs if n != QUARANTINE_DIR)
            found += [os.path.realpath(os.path.join(d, f)) for f in names if not os.path.islink(os.path.join(d, f))]
    out = []
    for f in sorted(found):
        try:
            st = os.stat(f)
        except OSError:
            continue
        if os.path.isfile(f):
            out.append(FileInfo(f, st.st_size, st.st_mtime))
    return out


def files_of(store: Store, root: str) -> list[FileInfo]:
    return local_files(root) if store.is_local else store.files(root)


def any_referenced_files(directory: str) -> CheckpointRefs:
    """flink_metadata.any_referenced_files as it was: the whole StateRef list, then refs_of."""
    path = os.path.join(os.path.abspath(directory), METADATA)
    with open(path, "rb") as fh:
        is_flink = fh.read(4) == bytes.fromhex("4960672d")
    if not is_flink:
        return referenced_files(directory)
    return refs_of(read_metadata(path), os.path.abspath(directory), os.path.getsize(path))


def refs_of(meta: FlinkMetadata, chk_dir: str, size: int) -> CheckpointRefs:
    """CheckpointRefs of decoded metadata read from ``chk_dir`` (absolute)."""
    job_dir = os.path.dirname(chk_dir)
    files: dict[str, set[str]] = {scope: set() for scope in SCOPES}
    inlined = 0
    for ref in meta.refs:
        if ref.path is None:
            inlined += ref.size
            continue
        raw = os.path.join(chk_dir, ref.path) if ref.kind == "relative" else local_path(ref.path)
        path = _norm(raw)  # as written: what a restore reads
        files[scope_of(path)].add(path)
    name = os.path.basename(chk_dir)
    savepoint = name.startswith("savepoint") or meta.snapshot_type == "savepoint"
    job = os.path.basename(job_dir) if name.startswith("chk-") else ""
    return CheckpointRefs(meta.checkpoint_id, "savepoint" if savepoint else "checkpoint", job, chk_dir,
                          {scope: sorted(paths) for scope, paths in files.items()},
                          inlined_bytes=inlined, metadata_bytes=size)


def _gather(store: Store, root: str, key: str | None, length: int) -> tuple[str, list[str], list[FileInfo]]:
    """(the metadata root, the data roots, every file under them) on any store.

    Locally as ``entropy_roots`` then a walk of each root. On an object store one paginated listing:
    of the root, or with the marker of the prefix above it, whose keys are sorted into the random
    prefixes (one listing, however many random prefixes there are)."""
    if store.is_local:
        meta_root, data_roots = entropy_roots(root, key, length)
        infos = {i.path: i for r in data_roots for i in files_of(store, r) if inside(i.path, r)}
        return meta_root, data_roots, [infos[p] for p in sorted(infos)]
    if not key or key not in root:
        return root, [root], files_of(store, root)
    meta_root = remove_marker(root, key)
    parent, pattern, rest = _marker_pattern(root, key, length)
    roots: set[str] = {meta_root}
    kept: list[FileInfo] = []
    for info in files_of(store, parent):
        name = info.path[len(parent):].lstrip("/").split("/", 1)[0]
        candidate = os.path.join(parent, name, rest) if rest else os.path.join(parent, name)
        if inside(info.path, meta_root):
            kept.append(info)
        elif pattern.match(name) and inside(info.path, candidate) and info.path != candidate:
            roots.add(candidate)
            kept.append(info)
    return meta_root, [meta_root, *sorted(roots - {meta_root})], kept


def _store_reader(store: Store, reader: Reader) -> Reader:
    """The per-checkpoint reader on a store: the given one locally; on an object store the bytes are read
    through the store and decoded by the pure-Python readers (Flink's binary format or cutcheck's JSON)."""
    if store.is_local:
        return reader

    def read(directory: str) -> CheckpointRefs:
        path = os.path.join(directory, METADATA)
        data = store.read(path)
        if data is None:
            raise StorageError(f"{store.uri(directory)}: no {METADATA} object; give a chk-N of a completed checkpoint.")
        if data[:4] == bytes.fromhex("4960672d"):
            refs = refs_of(decode(data, store.uri(path)), store.uri(directory), len(data))
            refs.files = {sc: sorted({store.internal(p) for p in ps}) for sc, ps in refs.files.items()}
            refs.path = directory
            return refs
        from cutcheck.reference.storage.meta import refs_from_bytes

        return refs_from_bytes(data, directory, store.uri(path))

    return read


def inspect(root: str | os.PathLike[str], reader: Reader = referenced_files, *, entropy: str | None = "_entropy_",
            entropy_length: int = 4, keep: Sequence[str | os.PathLike[str]] = (), min_age: float = 0.0,
            now: float | None = None, store: Store | None = None) -> CheckpointListing:
    """The listing of the directory given (see the module docstring); ``keep`` are --keep-referenced-by
    directories, and files modified less than ``min_age`` seconds ago are "too young", never orphans.
    ``root`` is a local path, ``file:/…``, or a URI of an object store (``store`` opened from it when not given,
    then ``root`` is read as an internal path of that store)."""
    if store is None:
        store, start = open_store(str(root))
    else:
        start = str(root)
    if store.is_local:
        start = os.fspath(start)
    meta_root, data_roots, infos = _gather(store, start, entropy, entropy_length)
    if not store.isdir(meta_root):
        raise StorageError(f"{store.uri(start)}: no such checkpoint directory; give the checkpoint base directory, a "
                           f"job directory or a chk-N directory.")
    target = locate(meta_root, store)
    files = [i.path for i in infos]
    info_of = {i.path: i for i in infos}
    metas = [f for f in files if os.path.basename(f) == METADATA and inside(f, meta_root)]
    require_metadata(target, metas, store)
    lifted = sorted({_lift(r, meta_root, target.base) for r in data_roots})
    keep_dirs = [_keep_path(store, str(k)) for k in keep]
    scope = sorted({*lifted, *keep_dirs})
    scope_set = set(scope)
    others = [*context_metadata(target, store), *(m for k in keep_dirs for m in keep_metadata(k, store))]
    read_refs = _store_reader(store, reader)
    checkpoints: list[CheckpointInfo] = []
    unreadable: list[str] = []
    why_unreadable: dict[str, str] = {}
    kept: set[str] = {*metas, *others}
    candidates: set[str] = set()
    present = set(files)
    anchors = [target.base, *lifted, *data_roots]
    for meta in [*metas, *others]:
        directory = os.path.dirname(meta)
        try:
            refs = read_refs(directory)
        except StorageError as exc:
            unreadable.append(meta)
            why_unreadable[meta] = str(exc)
            continue
        by_scope = {sc: sorted({store.realpath(store.internal(p)) for p in refs.files.get(sc, [])}) for sc in SCOPES}
        every = [p for paths in by_scope.values() for p in paths]
        kept.update(every)
        candidates |= reroot(every, directory, [*anchors, os.path.dirname(directory)], present)
        if meta not in metas:
            continue
        sizes = {p: _size(store, p, info_of) for p in every}
        missing = sorted(p for p, sz in sizes.items() if sz is None)
        outside = sorted(p for p, sz in sizes.items() if sz is not None and not within(p, scope_set))
        key = os.path.relpath(directory, meta_root) if directory != meta_root else os.path.basename(directory)
        checkpoints.append(CheckpointInfo(key, refs.id, refs.kind, refs.job, directory,
                                          refs.metadata_bytes + sum(sz for sz in sizes.values() if sz is not None), 0,
                                          by_scope, refs.inlined_bytes, missing, outside))
    checkpoints.sort(key=lambda c: (c.job, c.kind != "checkpoint", c.id, c.key))
    _new_sizes(checkpoints, store, info_of)
    shared: dict[str, list[str]] = {}
    for c in checkpoints:
        for path in c.files["shared"]:
            shared.setdefault(path, []).append(c.key)
    rerooted = sorted((candidates & present) - kept)
    taskowned = [f for f in files if TASKOWNED_DIR in f.split(os.sep)[:-1]]
    orphans: list[str] = []
    young: list[str] = []
    if not unreadable:  # an unreadable _metadata may reference anything: then nothing is an orphan
        skip = kept | set(rerooted) | set(taskowned)
        limit = (time.time() if now is None else now) - min_age
        for f in files:
            if f not in skip:
                (young if min_age > 0 and _mtime(store, f, info_of) > limit else orphans).append(f)
    return CheckpointListing(meta_root, checkpoints, dict(sorted(shared.items())), orphans, taskowned, unreadable,
                             target.base, young, others, rerooted, scope, sorted(data_roots), why_unreadable, store=store,
                             infos=info_of)


def _size(store: Store, path: str, known: dict[str, FileInfo]) -> int | None:
    info = known.get(path) or store.stat(path)
    return None if info is None else info.size


def _mtime(store: Store, path: str, known: dict[str, FileInfo]) -> float:
    info = known.get(path) if not store.is_local else store.stat(path)
    return float("inf") if info is None else info.mtime  # vanished or unreadable: never called an orphan


def _new_sizes(checkpoints: list[CheckpointInfo], store: Store, known: dict[str, FileInfo]) -> None:
    seen: dict[str, set[str]] = {}
    for c in sorted(checkpoints, key=lambda c: (c.job, c.id)):
        known_files = seen.setdefault(c.job, set())
        mine = {f for fs in c.files.values() for f in fs}
        c.new_size = (_size(store, os.path.join(c.path, METADATA), known) or 0) + sum(
            _size(store, f, known) or 0 for f in mine - known_files)
        known_files |= mine


def to_json(self: CheckpointListing) -> dict[str, Any]:
    data = {name: copy.deepcopy(getattr(self, name)) for name in self.__dataclass_fields__ if name not in ("store", "infos")}
    data["checkpoints"] = [asdict(c) | {"restorable": c.restorable} for c in self.checkpoints]
    return data if self.store.is_local else _uris(data, self.store)




