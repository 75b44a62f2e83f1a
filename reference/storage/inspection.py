"""Inspecting a checkpoint directory: its checkpoints, what each references, and the orphans.

The data model is independent of who wrote the directory (Flink's own loader through PyFlink gives the same):

    CheckpointListing(root, checkpoints, shared, orphans, taskowned, unreadable, base, too_young,
                      context, rerooted, scope, data_roots)
      checkpoints: [CheckpointInfo(key, id, kind, job, path, size, new_size, files, inlined_bytes,
                                   missing, outside)]   -- those under root only
        key        the checkpoint directory relative to root ("chk-7", "<job>/chk-7", "savepoint-…")
        files      {"exclusive" | "shared" | "taskowned": [absolute paths]}   (facts §5.2)
        size       bytes needed to restore it: _metadata plus every referenced file that exists
        new_size   of those, the files no older checkpoint of the same job references
        missing    referenced files that do not exist
        outside    referenced files that exist, but outside ``scope``
        restorable neither: every file resolves, inside the storage being inspected
      shared:     {shared file: [keys of the checkpoints that reference it]} (files referenced by the same
                  checkpoints share one list: read, never mutate)
      orphans:    files under root (and the entropy roots) nothing keeps, older than min_age
      too_young:  files nothing keeps but modified less than min_age ago (never orphans)
      in_progress, empty_dirs, foreign: what reference.storage.guard holds back (never orphans)
      taskowned:  files in taskowned/ (owned by tasks, never called orphans)
      unreadable: _metadata files no reader understood (then nothing is called an orphan)
      base:       the checkpoint base above root (reference.storage.scope.locate)
      context:    the other _metadata read for what they keep: sibling jobs and savepoints under
                  the base, and every _metadata under the ``keep`` (--keep-referenced-by) directories
      rerooted:   files kept only because a moved or copied _metadata names their old location
      scope:      the base (with entropy: each random-prefix counterpart) and the keep directories

All of it is built by ``inspect(root, reader)`` from one per-checkpoint function,
``reader(directory) -> CheckpointRefs`` (reference.storage.meta: id, kind, job, path,
files by scope as absolute paths, inlined_bytes, metadata_bytes), which raises StorageError for a
``_metadata`` it cannot read. A directory under which no ``_metadata`` exists, or a chk-N without
one, is refused (StorageError): nothing there can be judged.

What "resolves" means: a checkpoint is restorable when every path its ``_metadata`` names, taken
as a restore takes it (absolute as written; relative against the directory of the ``_metadata``),
is an existing file inside ``scope``. A moved or copied directory whose ``_metadata`` holds
absolute paths names the old location: missing if that is gone, outside if it is still there
(the copy then depends on the original and is no backup). Re-rooting those paths onto the new
location (reference.storage.scope.reroot) only ever adds files to keep; it never makes a
checkpoint restorable.

The orphan rule: a file under root is an orphan when it is not a ``_metadata``, no ``_metadata``
under the base or the keep directories references it (nor its re-rooted counterpart), it is not
task-owned, and it is older than ``min_age``. So ``orphans`` never lists a referenced file,
whoever wrote the checkpoint, and never one a job restored from this one in claim mode uses.

Scale (reference.storage.traversal, reference.storage.filetable): one listing into a compact table (paths,
sizes and times per directory; ``infos`` is that table, a read-only mapping), each referenced path held once,
lookups in sorted order, no per-file object beyond the answer; ``progress`` reports long inspections.

Stores (reference.storage.store): ``root`` may be a local path, ``file:/…`` or an object store's URI
(``s3://bucket/prefix``, or any filesystem PyArrow or fsspec opens). Every path in the listing is
then an internal POSIX path (``/bucket/key``), shown with ``listing.uri``; sizes and modification
times (an object's LastModified) come from one paginated listing, and a checkpoint on an object
store is restorable when every object it references exists. ``_metadata`` there is read through
the store by the pure-Python readers (Flink's binary format, cutcheck's JSON).

Entropy (facts §5.6): give the configured path with its marker (``/b/_entropy_/ckpts``);
metadata are found under the path without it, and data files also under every existing directory
the marker may have become (``/b/<4 alphanumerics>/ckpts``). A path that exists as written is
read as it is (the marker is never a real directory: nothing is written under it). On an object
store the prefix above the marker is listed once and its keys sorted into the random prefixes.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from cutcheck.model.errors import StorageError
from cutcheck.reference.storage.files import METADATA, remove_marker
from cutcheck.reference.storage.filetable import FileTable, join
from cutcheck.reference.storage.guard import (  # orphan_reason: imported from here too
    DataScope,
    empty_checkpoint_dirs,
    orphan_reason,  # noqa: F401
    orphan_reasons,
    other_case_metadata,
)
from cutcheck.reference.storage.meta import CheckpointRefs, referenced_files
from cutcheck.reference.storage.references import Canonical
from cutcheck.reference.storage.scope import (
    context_metadata,
    inside,
    keep_metadata,
    locate,
    require_metadata,
)
from cutcheck.reference.storage.store import LOCAL, FileInfo, Store, open_store
from cutcheck.reference.storage.traversal import (
    Kept,
    Progress,
    Within,
    checkpoint_size,
    cyclic_gc_paused,
    fresh_json,
    fresh_mtime,
    json_uris,
    new_sizes,
    rerooted_files,
    scan_into,
    shared_users,
    unreferenced,
)

Reader = Callable[[str], CheckpointRefs]


@dataclass(slots=True)
class CheckpointInfo:
    key: str
    id: int
    kind: str
    job: str
    path: str
    size: int
    new_size: int
    files: dict[str, list[str]]
    inlined_bytes: int = 0
    missing: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)

    @property
    def restorable(self) -> bool:
        return not self.missing and not self.outside


@dataclass(slots=True)
class CheckpointListing:
    root: str
    checkpoints: list[CheckpointInfo]
    shared: dict[str, list[str]]
    orphans: list[str]
    taskowned: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    base: str = ""
    too_young: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)  # other _metadata read only for what they keep
    rerooted: list[str] = field(default_factory=list)  # files kept because a moved _metadata names their old place
    scope: list[str] = field(default_factory=list)  # where a restorable checkpoint's files may be
    data_roots: list[str] = field(default_factory=list)  # where orphans may be (the root, entropy roots)
    why_unreadable: dict[str, str] = field(default_factory=dict)  # unreadable _metadata -> the reader's sentence
    in_progress: list[str] = field(default_factory=list)  # unreferenced, but of a checkpoint that may be running
    empty_dirs: list[str] = field(default_factory=list)  # empty chk-N older than their job's newest checkpoint
    foreign: dict[str, str] = field(default_factory=dict)  # entropy-shaped roots not taken: root -> its _metadata
    context_files: dict[str, list[str]] = field(default_factory=dict)  # other _metadata's directory -> its files
    store: Store = field(default=LOCAL, repr=False, compare=False)  # where the paths live (internal paths)
    infos: Mapping[str, FileInfo] = field(default_factory=FileTable, repr=False, compare=False)  # every file listed

    @property
    def referenced(self) -> set[str]:
        return {f for c in self.checkpoints for fs in c.files.values() for f in fs}

    @property
    def kept(self) -> set[str]:
        """The one keep-set: every file any _metadata read references (this directory's checkpoints,
        the other jobs under the base, --keep-referenced-by), and the re-rooted and task-owned files."""
        return {*self.referenced, *(f for fs in self.context_files.values() for f in fs), *self.rerooted,
                *self.taskowned}

    @property
    def not_restorable(self) -> list[CheckpointInfo]:
        return [c for c in self.checkpoints if not c.restorable]

    def uri(self, path: str) -> str:
        """A path as the user reads it (``s3://bucket/key`` on S3; the path itself locally)."""
        return self.store.uri(path)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values, fresh containers (the listing's own are never handed out)."""
        data = {name: fresh_json(getattr(self, name)) for name in self.__dataclass_fields__
                if name not in ("store", "infos", "checkpoints", "context_files")}
        data["checkpoints"] = [{name: fresh_json(getattr(c, name)) for name in c.__dataclass_fields__}
                               | {"restorable": c.restorable} for c in self.checkpoints]
        return data if self.store.is_local else json_uris(data, self.store)


def entropy_roots(root: str, key: str | None, length: int = 4) -> tuple[str, list[str]]:
    """(the metadata root, the existing directories data files may live under), symlinks resolved."""
    if not key or key not in root or os.path.isdir(root):  # a directory that exists is taken as it is
        return os.path.realpath(root), [os.path.realpath(root)]
    meta_root = os.path.realpath(remove_marker(root, key))
    parent, pattern, rest = _marker_pattern(os.path.abspath(root), key, length)
    found = [meta_root]
    for name in sorted(os.listdir(parent)) if os.path.isdir(parent) else []:
        candidate = os.path.realpath(os.path.join(parent, name, rest))
        if pattern.match(name) and os.path.isdir(candidate) and candidate != meta_root:
            found.append(candidate)
    return meta_root, found


def _marker_pattern(root: str, key: str, length: int) -> tuple[str, re.Pattern[str], str]:
    """(the directory above the marker, the names the marker's directory may have become, the path after it)."""
    before, after = root.split(key, 1)
    parent, prefix = os.path.split(before)
    suffix, _, rest = after.partition(os.sep)
    return parent, re.compile(re.escape(prefix) + f"[A-Za-z0-9]{{{length}}}" + re.escape(suffix) + r"\Z"), rest


def _gather(store: Store, root: str, key: str | None, length: int, progress: Progress | None = None,
            defer: bool = False) -> tuple[str, list[str], FileTable]:
    """(the metadata root, the data roots, every file under them) on any store.

    Locally as ``entropy_roots`` then a scan of each root. On an object store one paginated listing:
    of the root, or with the marker of the prefix above it, whose keys are sorted into the random
    prefixes (one listing, however many random prefixes there are)."""
    table = FileTable()
    if store.is_local:
        meta_root, data_roots = entropy_roots(root, key, length)
        for r in data_roots:
            scan_into(table, store, r, progress, partial(inside, root=r), defer)
        return meta_root, data_roots, table
    if not key or key not in root:
        scan_into(table, store, root, progress)
        return root, [root], table
    meta_root = remove_marker(root, key)
    parent, pattern, rest = _marker_pattern(root, key, length)
    roots: set[str] = {meta_root}

    def keep_dir(directory: str) -> bool:
        if inside(directory, meta_root):
            return True
        name = directory[len(parent):].lstrip("/").split("/", 1)[0] if inside(directory, parent) else ""
        if not name:
            return False
        candidate = os.path.join(parent, name, rest) if rest else os.path.join(parent, name)
        if pattern.match(name) and inside(directory, candidate):
            roots.add(candidate)
            return True
        return False

    scan_into(table, store, parent, progress, keep_dir)
    return meta_root, [meta_root, *sorted(roots - {meta_root})], table


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
            from cutcheck.reference.storage.flink_metadata import refs_of_bytes

            refs = refs_of_bytes(data, store.uri(directory), store.uri(path))
            refs.files = {sc: sorted({store.internal(p) for p in ps}) for sc, ps in refs.files.items()}
            refs.path = directory
            return refs
        from cutcheck.reference.storage.meta import refs_from_bytes

        return refs_from_bytes(data, directory, store.uri(path))

    return read


def _lift(data_root: str, meta_root: str, base: str) -> str:
    """The base's counterpart of a data root (``/b/Xy12/ckpts/<job>`` -> ``/b/Xy12/ckpts``)."""
    rel = os.path.relpath(meta_root, base)
    if rel == "." or rel.startswith(".."):
        return data_root
    return data_root[: -len(rel) - 1] if data_root.endswith(os.sep + rel) else data_root


def _keep_path(store: Store, keep: str) -> str:
    other, path = open_store(keep) if store.is_local else (store, store.internal(keep))
    if other is not store or path.startswith("//"):
        raise StorageError(f"--keep-referenced-by {keep}: not on the same store as the directory inspected; give a "
                           f"directory there ({'a local path' if store.is_local else store.scheme + '://…'}).")
    return store.realpath(path)


@cyclic_gc_paused()
def inspect(root: str | os.PathLike[str], reader: Reader = referenced_files, *, entropy: str | None = "_entropy_",
            entropy_length: int = 4, keep: Sequence[str | os.PathLike[str]] = (), min_age: float = 0.0,
            now: float | None = None, store: Store | None = None, progress: Progress | None = None,
            referenced_sizes: bool = True) -> CheckpointListing:
    """The listing of the directory given (see the module docstring); ``keep`` are --keep-referenced-by
    directories, and files modified less than ``min_age`` seconds ago are "too young", never orphans.
    ``root`` is a local path, ``file:/…``, or a URI of an object store (``store`` opened from it when not given,
    then ``root`` is read as an internal path of that store). ``progress(stage, done, total)`` is called as a
    long inspection goes: "listed" files (total None), then "read" _metadata (of total). Without ``referenced_sizes``
    a local listing stats no referenced file of a large directory: their and the checkpoints' sizes read 0."""
    if store is None:
        store, start = open_store(str(root))
    else:
        start = str(root)
    if store.is_local:
        start = os.fspath(start)
    start = start.rstrip("/") or "/"  # "ckpts/" and "ckpts" are one directory
    meta_root, data_roots, table = _gather(store, start, entropy, entropy_length, progress, not referenced_sizes)
    if not store.isdir(meta_root):
        raise StorageError(f"{store.uri(start)}: no such checkpoint directory; give the checkpoint base directory, a "
                           f"job directory or a chk-N directory.")
    target = locate(meta_root, store)
    metas = sorted(join(d, METADATA) for d, f in table.directories()
                   if inside(d, meta_root) and f.index(join(d, METADATA)) >= 0)
    meta_mtime = {m: table.mtime(m) or 0.0 for m in metas}
    require_metadata(target, metas, store)
    # Policy (reference.storage.guard): of the entropy-shaped roots, only those without _metadata of
    # their own, and of them only the files at checkpoint paths of this storage's jobs.
    lifted = sorted({_lift(r, meta_root, target.base) for r in data_roots})
    data_scope = DataScope.build(meta_root, data_roots, iter(table), metas, meta_mtime)
    table.keep_only(data_scope.accepts, unless_under=meta_root)
    data_roots = data_scope.roots
    keep_dirs = [_keep_path(store, str(k)) for k in keep]
    scope = sorted({*lifted, *keep_dirs})
    in_scope = Within(set(scope))
    others = [*context_metadata(target, store), *(m for k in keep_dirs for m in keep_metadata(k, store))]
    read_refs = _store_reader(store, reader)
    checkpoints: list[CheckpointInfo] = []
    context_files: dict[str, list[str]] = {}
    why_unreadable = other_case_metadata(table.directories(), store.uri)  # then nothing is an orphan either
    unreadable = list(why_unreadable)
    kept = Kept(table)  # every path some _metadata names (and the _metadata themselves), each string once
    for m in [*metas, *others]:
        kept.add(m)
    named: list[tuple[list[str], str]] = []  # (what a _metadata references, its directory): for re-rooting
    canonical = Canonical(store, table)
    aligned: dict[str, dict[str, Any]] = {}  # per checkpoint, the sizes of its files (for new_size)
    loose_scope = not all(in_scope(join(d, "x")) for d, _ in table.directories())  # never, as _gather lists
    own = set(metas)
    everything = [*metas, *others]
    for done, meta in enumerate(everything):
        if progress is not None:
            progress("read", done, len(everything))
        directory = os.path.dirname(meta)
        try:
            refs = read_refs(directory)
        except StorageError as exc:
            unreadable.append(meta)
            why_unreadable[meta] = str(exc)
            continue
        by_scope, sizes = canonical.resolve(refs.files, kept)
        refs.files = {}  # free the reader's lists before the next _metadata is read
        every = [p for paths in by_scope.values() for p in paths]
        named.append((every, directory))
        if meta not in own:
            context_files[directory] = every
            continue
        size, missing, outside = checkpoint_size(by_scope, sizes, in_scope, None if loose_scope else canonical.unlisted)
        key = os.path.relpath(directory, meta_root) if directory != meta_root else os.path.basename(directory)
        aligned[key] = sizes
        checkpoints.append(CheckpointInfo(key, refs.id, refs.kind, refs.job, directory, refs.metadata_bytes + size, 0,
                                          by_scope, refs.inlined_bytes, missing, outside))
    if progress is not None:
        progress("read", len(everything), len(everything))
    checkpoints.sort(key=lambda c: (c.job, c.kind != "checkpoint", c.id, c.key))
    new_sizes(checkpoints, store, table, aligned)
    del aligned
    table.settle()  # the sizes and times of unreferenced files a deferred listing left out
    taskowned, unkept = unreferenced(table, kept)
    del kept
    anchors = [target.base, *lifted, *data_roots]
    rerooted = sorted(rerooted_files(named, anchors, {f for f, _ in unkept}))
    del named
    orphans: list[str] = []
    young: list[str] = []
    running: list[str] = []
    if not unreadable:  # an unreadable _metadata may reference anything: then nothing is an orphan
        skip = set(rerooted)
        limit = (time.time() if now is None else now) - min_age
        newest = max(meta_mtime.values(), default=0.0)
        for f, task_owned in unkept:
            if task_owned or f in skip:
                continue
            # The listed time decides "in progress" (Flink never rewrites a file, it writes new names); a fresh
            # stat only where --min-age needs one, so that nothing is read again a file for the 0 default.
            if data_scope.in_progress(f, table.mtime(f) or float("inf"), newest):
                running.append(f)  # never an orphan without --force, whatever min_age says
            else:
                (young if min_age > 0 and fresh_mtime(store, f, table) > limit else orphans).append(f)
    return CheckpointListing(meta_root, checkpoints, shared_users(checkpoints), sorted(orphans), sorted(taskowned),
                             unreadable, target.base, sorted(young), others, rerooted, scope, sorted(data_roots),
                             why_unreadable, sorted(running), empty_checkpoint_dirs(store, data_scope),
                             dict(data_scope.refused), context_files, store, table)


def delete_orphans(listing: CheckpointListing, *, min_age: float = 0.0) -> list[str]:
    """Move the listing's orphans (never a referenced file) into a quarantine batch under the base
    (reference.storage.quarantine); return what moved. Nothing is ever removed outright."""
    from cutcheck.reference.storage.quarantine import quarantine

    batch = quarantine(listing, orphan_reasons(listing, listing.orphans), min_age=min_age)
    return [m.original for m in batch.files]


def listing_json(listing: CheckpointListing) -> str:
    return json.dumps(listing.to_json(), indent=2, sort_keys=True)
