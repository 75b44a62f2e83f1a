"""Inspecting a checkpoint directory: its checkpoints, what each references, and the orphans.

The data model is independent of who wrote the directory, so that a reader of real Flink
checkpoints (``_metadata`` read through PyFlink's Java gateway) can produce the same listing:

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
      shared:     {shared file: [keys of the checkpoints that reference it]}
      orphans:    files under root (and the entropy roots) nothing keeps, older than min_age
      too_young:  files nothing keeps but modified less than min_age ago (never orphans)
      taskowned:  files in taskowned/ (owned by tasks, never called orphans)
      unreadable: _metadata files no reader understood (then nothing is called an orphan)
      base:       the checkpoint base above root (reference.storage_scope.locate)
      context:    the other _metadata read for what they keep: sibling jobs and savepoints under
                  the base, and every _metadata under the ``keep`` (--keep-referenced-by) directories
      rerooted:   files kept only because a moved or copied _metadata names their old location
      scope:      the base (with entropy: each random-prefix counterpart) and the keep directories

All of it is built by ``inspect(root, reader)`` from one per-checkpoint function,
``reader(directory) -> CheckpointRefs`` (reference.storage_meta: id, kind, job, path,
files by scope as absolute paths, inlined_bytes, metadata_bytes), which raises StorageError for a
``_metadata`` it cannot read. A directory under which no ``_metadata`` exists, or a chk-N without
one, is refused (StorageError): nothing there can be judged.

What "resolves" means: a checkpoint is restorable when every path its ``_metadata`` names, taken
as a restore takes it (absolute as written; relative against the directory of the ``_metadata``),
is an existing file inside ``scope``. A moved or copied directory whose ``_metadata`` holds
absolute paths names the old location: missing if that is gone, outside if it is still there
(the copy then depends on the original and is no backup). Re-rooting those paths onto the new
location (reference.storage_scope.reroot) only ever adds files to keep; it never makes a
checkpoint restorable.

The orphan rule: a file under root is an orphan when it is not a ``_metadata``, no ``_metadata``
under the base or the keep directories references it (nor its re-rooted counterpart), it is not
task-owned, and it is older than ``min_age``. So ``orphans`` never lists a referenced file,
whoever wrote the checkpoint, and never one a job restored from this one in claim mode uses.

Entropy (facts §5.6): give the configured path with its marker (``/b/_entropy_/ckpts``);
metadata are found under the path without it, and data files also under every existing directory
the marker may have become (``/b/<4 alphanumerics>/ckpts``). A path that exists as written is
read as it is (the marker is never a real directory: nothing is written under it).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from model.errors import StorageError
from reference.storage_files import (
    CHK_PREFIX,
    METADATA,
    METADATA_TMP,
    SAVEPOINT_PREFIX,
    SHARED_DIR,
    TASKOWNED_DIR,
    remove_marker,
)
from reference.storage_meta import SCOPES, CheckpointRefs, referenced_files
from reference.storage_scope import (
    context_metadata,
    inside,
    keep_metadata,
    locate,
    require_metadata,
    reroot,
    walk,
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

    @property
    def referenced(self) -> set[str]:
        return {f for c in self.checkpoints for fs in c.files.values() for f in fs}

    @property
    def not_restorable(self) -> list[CheckpointInfo]:
        return [c for c in self.checkpoints if not c.restorable]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for c, raw in zip(self.checkpoints, data["checkpoints"], strict=True):
            raw["restorable"] = c.restorable
        return data


def entropy_roots(root: str, key: str | None, length: int = 4) -> tuple[str, list[str]]:
    """(the metadata root, the existing directories data files may live under), symlinks resolved."""
    if not key or key not in root or os.path.isdir(root):  # a directory that exists is taken as it is
        return os.path.realpath(root), [os.path.realpath(root)]
    meta_root = os.path.realpath(remove_marker(root, key))
    before, after = os.path.abspath(root).split(key, 1)
    parent, prefix = os.path.split(before)
    suffix, _, rest = after.partition(os.sep)
    pattern = re.compile(re.escape(prefix) + f"[A-Za-z0-9]{{{length}}}" + re.escape(suffix) + r"\Z")
    found = [meta_root]
    for name in sorted(os.listdir(parent)) if os.path.isdir(parent) else []:
        candidate = os.path.realpath(os.path.join(parent, name, rest))
        if pattern.match(name) and os.path.isdir(candidate) and candidate != meta_root:
            found.append(candidate)
    return meta_root, found


def _walk(root: str) -> list[str]:
    # Every path is compared in its canonical form: a file reached through a symlinked directory
    # must never look unreferenced because its checkpoint names it by another path. Symbolic links
    # themselves are no checkpoint files (Flink writes none): never orphans, never followed.
    if os.path.isfile(root):
        return [os.path.realpath(root)]
    return sorted(os.path.realpath(os.path.join(d, f)) for d, _, files in walk(root) for f in files
                  if not os.path.islink(os.path.join(d, f)))


def _size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def _lift(data_root: str, meta_root: str, base: str) -> str:
    """The base's counterpart of a data root (``/b/Xy12/ckpts/<job>`` -> ``/b/Xy12/ckpts``)."""
    rel = os.path.relpath(meta_root, base)
    if rel == "." or rel.startswith(".."):
        return data_root
    return data_root[: -len(rel) - 1] if data_root.endswith(os.sep + rel) else data_root


def inspect(root: str | os.PathLike[str], reader: Reader = referenced_files, *, entropy: str | None = "_entropy_",
            entropy_length: int = 4, keep: Sequence[str | os.PathLike[str]] = (), min_age: float = 0.0,
            now: float | None = None) -> CheckpointListing:
    """The listing of the directory given (see the module docstring); ``keep`` are --keep-referenced-by
    directories, and files modified less than ``min_age`` seconds ago are "too young", never orphans."""
    meta_root, data_roots = entropy_roots(str(root), entropy, entropy_length)
    if not os.path.isdir(meta_root):
        raise StorageError(f"{root}: no such checkpoint directory; give the checkpoint base directory, a job directory or a chk-N directory.")
    target = locate(meta_root)
    files = sorted({f for r in data_roots for f in _walk(r) if inside(f, r)})
    metas = [f for f in files if os.path.basename(f) == METADATA and inside(f, meta_root)]
    require_metadata(target, metas)
    lifted = sorted({_lift(r, meta_root, target.base) for r in data_roots})
    keep_dirs = [os.path.realpath(k) for k in keep]
    scope = sorted({*lifted, *keep_dirs})
    others = [*context_metadata(target), *(m for k in keep for m in keep_metadata(str(k)))]
    checkpoints: list[CheckpointInfo] = []
    unreadable: list[str] = []
    why_unreadable: dict[str, str] = {}
    kept: set[str] = {*metas, *others}
    candidates: set[str] = set()
    for meta in [*metas, *others]:
        directory = os.path.dirname(meta)
        try:
            refs = reader(directory)
        except StorageError as exc:
            unreadable.append(meta)
            why_unreadable[meta] = str(exc)
            continue
        by_scope = {sc: sorted({os.path.realpath(p) for p in refs.files.get(sc, [])}) for sc in SCOPES}
        every = [p for paths in by_scope.values() for p in paths]
        kept.update(every)
        candidates |= reroot(every, directory, [target.base, *lifted, *data_roots, os.path.dirname(directory)])
        if meta not in metas:
            continue
        sizes = {p: _size(p) for p in every}
        missing = sorted(p for p, sz in sizes.items() if sz is None)
        outside = sorted(p for p, sz in sizes.items() if sz is not None and not any(inside(p, s) for s in scope))
        key = os.path.relpath(directory, meta_root) if directory != meta_root else os.path.basename(directory)
        checkpoints.append(CheckpointInfo(key, refs.id, refs.kind, refs.job, directory,
                                          refs.metadata_bytes + sum(sz for sz in sizes.values() if sz is not None), 0,
                                          by_scope, refs.inlined_bytes, missing, outside))
    checkpoints.sort(key=lambda c: (c.job, c.kind != "checkpoint", c.id, c.key))
    _new_sizes(checkpoints)
    shared: dict[str, list[str]] = {}
    for c in checkpoints:
        for path in c.files["shared"]:
            shared.setdefault(path, []).append(c.key)
    present = set(files)
    rerooted = sorted((candidates & present) - kept)
    taskowned = [f for f in files if TASKOWNED_DIR in f.split(os.sep)[:-1]]
    orphans: list[str] = []
    young: list[str] = []
    if not unreadable:  # an unreadable _metadata may reference anything: then nothing is an orphan
        skip = kept | set(rerooted) | set(taskowned)
        limit = (time.time() if now is None else now) - min_age
        for f in files:
            if f not in skip:
                (young if min_age > 0 and _mtime(f) > limit else orphans).append(f)
    return CheckpointListing(meta_root, checkpoints, dict(sorted(shared.items())), orphans, taskowned, unreadable,
                             target.base, young, others, rerooted, scope, sorted(data_roots), why_unreadable)


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return float("inf")  # vanished or unreadable: never called an orphan


def _new_sizes(checkpoints: list[CheckpointInfo]) -> None:
    seen: dict[str, set[str]] = {}
    for c in sorted(checkpoints, key=lambda c: (c.job, c.id)):
        known = seen.setdefault(c.job, set())
        mine = {f for fs in c.files.values() for f in fs}
        c.new_size = (_size(os.path.join(c.path, METADATA)) or 0) + sum(_size(f) or 0 for f in mine - known)
        known |= mine


def orphan_reason(listing: CheckpointListing, path: str) -> str:
    """Why a file is an orphan, in a few words (for people deciding whether to delete it)."""
    parent = os.path.dirname(path)
    name, folder = os.path.basename(path), os.path.basename(parent)
    if name == METADATA_TMP:
        return "metadata of a checkpoint that never completed"
    if folder.startswith((CHK_PREFIX, SAVEPOINT_PREFIX)):
        if any(c.path == parent for c in listing.checkpoints):
            return f"in {folder}, whose _metadata does not reference it"
        return f"in {folder}, which has no _metadata (never completed, or discarded)"
    if folder == SHARED_DIR:
        return "shared file no checkpoint references"
    return "not part of any checkpoint"


def delete_orphans(listing: CheckpointListing, *, min_age: float = 0.0) -> list[str]:
    """Move the listing's orphans (never a referenced file) into a quarantine batch under the base
    (reference.storage_quarantine); return what moved. Nothing is ever removed outright."""
    from reference.storage_quarantine import quarantine

    batch = quarantine(listing, {f: orphan_reason(listing, f) for f in listing.orphans}, min_age=min_age)
    return [m.original for m in batch.files]


def listing_json(listing: CheckpointListing) -> str:
    return json.dumps(listing.to_json(), indent=2, sort_keys=True)
