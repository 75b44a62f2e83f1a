"""What a storage command may move: the rules between "nothing references it" and "moved".

Not being referenced is necessary, never sufficient. Three more rules, each stated from what the
user gave and what the directory holds, never from a name that merely looks right:

* **Entropy data roots are scoped.** With entropy injection (facts §8.5) data files live under
  directories the marker became (``/b/Xy12/ckpts``), found by their name's shape alone. Such a
  directory is taken for this storage's only when it holds no ``_metadata`` (a directory with
  checkpoints of its own is another job's or environment's, ``/b/prod/ckpts``), and of it only the
  files at a checkpoint path this storage stated: ``<job>/shared/``, ``<job>/taskowned/`` or
  ``<job>/chk-N/`` of a job directory whose completed checkpoints are under the path given.
  Anything else under it is not this storage's: never an orphan, never moved.
* **In progress until shown otherwise.** Per job directory, a ``chk-N`` newer than the newest
  completed checkpoint (one with ``_metadata``), and every file modified after that ``_metadata``
  was written, belong to a checkpoint that may still be running (Flink writes ``_metadata`` last).
  In a job directory with no completed checkpoint yet, every ``chk-N`` is. These are never moved
  without ``--force``, whatever ``--min-age`` says.
* **Empty checkpoint directories** older than the newest completed checkpoint of their job are
  what Flink's discard of a subsumed checkpoint leaves when it is killed before removing the
  directory; they may be removed (reversibly, recorded in the quarantine batch). Newer ones are
  a checkpoint being written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cutcheck.model.errors import StorageError
from cutcheck.reference.storage.files import (
    CHK_PREFIX,
    METADATA,
    METADATA_TMP,
    SAVEPOINT_PREFIX,
    SHARED_DIR,
    TASKOWNED_DIR,
)
from cutcheck.reference.storage.scope import inside, is_checkpoint_dir_name
from cutcheck.reference.storage.store import Store


def chk_id(name: str) -> int | None:
    """N of a ``chk-N`` name, else None."""
    tail = name[len(CHK_PREFIX):]
    return int(tail) if name.startswith(CHK_PREFIX) and tail.isdigit() else None


@dataclass(slots=True)
class Job:
    """A job directory under the metadata root and its newest completed checkpoint."""

    path: str
    newest: int  # the highest N of a chk-N holding _metadata
    completed_at: float  # when the newest _metadata was written (mtime, or an object's LastModified)


def jobs_of(metas: Iterable[str], mtime: dict[str, float]) -> dict[str, Job]:
    """The job directories of the completed checkpoints ``metas`` (``<job>/chk-N/_metadata``)."""
    found: dict[str, Job] = {}
    for m in metas:
        chk = os.path.dirname(m)
        n = chk_id(os.path.basename(chk))
        if n is None:
            continue  # a savepoint or a bare checkpoint directory: no job directory around it
        job = os.path.dirname(chk)
        t = mtime.get(m, 0.0)
        have = found.get(job)
        if have is None:
            found[job] = Job(job, n, t)
        else:
            have.newest, have.completed_at = max(have.newest, n), max(have.completed_at, t)
    return found


@dataclass(slots=True)
class DataScope:
    """Which data roots and which files under them belong to the storage given (module docstring)."""

    meta_root: str
    roots: list[str]  # accepted data roots: the metadata root first, then entropy counterparts
    jobs: dict[str, Job]
    refused: dict[str, str] = field(default_factory=dict)  # data root -> why it is not this storage's

    @classmethod
    def build(cls, meta_root: str, data_roots: list[str], files: Iterable[str], metas: list[str],
              mtime: dict[str, float]) -> DataScope:
        others = [r for r in data_roots if r != meta_root]
        refused: dict[str, str] = {}
        if others:
            for f in files:
                if os.path.basename(f) in (METADATA, METADATA_TMP):  # metadata is never written with entropy
                    for r in others:
                        if r not in refused and inside(f, r):
                            refused[r] = f
        roots = [meta_root, *(r for r in others if r not in refused)]
        return cls(meta_root, roots, jobs_of(metas, mtime), refused)

    def counterpart(self, path: str) -> str | None:
        """The path under the metadata root that a file under a data root stands for (itself there)."""
        if inside(path, self.meta_root):
            return path
        for r in self.roots[1:]:
            if inside(path, r):
                return self.meta_root + path[len(r):]
        return None

    def job_of(self, counterpart: str) -> tuple[Job | None, str | None]:
        """(the job directory the path lies in, the path's first component below it)."""
        parent = counterpart
        while True:
            up = os.path.dirname(parent)
            if up == parent:
                return None, None
            job = self.jobs.get(up)
            if job is not None:
                return job, os.path.basename(parent)
            parent = up

    def accepts(self, path: str) -> bool:
        """A file of this storage: under the metadata root, or at a stated checkpoint path of an entropy root."""
        if inside(path, self.meta_root):
            return True
        c = self.counterpart(path)
        if c is None:
            return False
        job, first = self.job_of(c)
        return job is not None and first is not None and (first in (SHARED_DIR, TASKOWNED_DIR) or chk_id(first) is not None)

    def in_progress(self, path: str, mtime: float, newest_overall: float) -> bool:
        """Part of a checkpoint that may still be running (module docstring)."""
        c = self.counterpart(path)
        if c is None:
            return True
        job, first = self.job_of(c)
        if job is None:
            n = _chk_above(c, self.meta_root)
            return n is not None or mtime > newest_overall
        n = chk_id(first or "")
        return (n is not None and n > job.newest) or mtime > job.completed_at


def _chk_above(path: str, root: str) -> int | None:
    """N of the nearest ``chk-N`` directory holding ``path`` below ``root`` (a job with no completed checkpoint)."""
    d = os.path.dirname(path)
    while inside(d, root) and d != root:
        n = chk_id(os.path.basename(d))
        if n is not None:
            return n
        d = os.path.dirname(d)
    return None


def empty_checkpoint_dirs(store: Store, scope: DataScope) -> list[str]:
    """Empty ``chk-N`` directories older than their job's newest completed checkpoint (local disks:
    an object store has no empty directories)."""
    if not store.is_local:
        return []
    found = []
    for job in scope.jobs.values():
        rel = os.path.relpath(job.path, scope.meta_root)
        for root in scope.roots:
            where = os.path.normpath(os.path.join(root, rel))
            for name in sorted(store.listdir(where)):
                n = chk_id(name)
                path = os.path.join(where, name)
                if n is not None and n < job.newest and os.path.isdir(path) and not os.path.islink(path) \
                        and not os.listdir(path):
                    found.append(path)
    return found


def completed_since(listing: Any) -> None:
    """Refuse when a checkpoint completed after the listing was read: its _metadata may name files the listing
    took for orphans. Looked for just before the first move, per job directory of every _metadata read (a new
    checkpoint has a higher N than its job's newest), with one directory listing a job."""
    store = listing.store
    read = [os.path.join(c.path, METADATA) for c in listing.checkpoints] + list(listing.context)
    for job in jobs_of(read, {}).values():
        for name in store.listdir(job.path, fresh=True):
            n = chk_id(name)
            if n is not None and n > job.newest and store.stat(os.path.join(job.path, name, METADATA), fresh=True):
                raise StorageError(f"{listing.uri(os.path.join(job.path, name))} completed while cutcheck read the "
                                   f"checkpoints, and its {METADATA} may reference files taken for orphans, so nothing "
                                   f"was moved; run the command again.")


def other_case_metadata(directories: Iterable[tuple[str, Any]], uri: Callable[[str], str]) -> dict[str, str]:
    """Files of checkpoint directories named like ``_metadata`` in another case (``_METADATA``), each with the
    sentence why it stops deletion: on a case-insensitive file system (macOS, a Windows share) it is the
    checkpoint's _metadata under the name it was written with, so the listing must not take the checkpoint for one
    without (``directories``: FileTable.directories(); only chk-N and savepoint directories are looked at)."""
    found = {}
    for d, files in directories:
        if is_checkpoint_dir_name(os.path.basename(d)):
            for p in files.paths:
                if (n := os.path.basename(p)) != METADATA and n.casefold() == METADATA:
                    found[p] = (f"{uri(p)} is named like a checkpoint's {METADATA} in another case, which on a "
                                f"case-insensitive file system is that checkpoint's {METADATA}")
    return found


def orphan_reason(listing: Any, path: str) -> str:
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


def orphan_reasons(listing: Any, paths: Iterable[str]) -> dict[str, str]:
    """``{p: orphan_reason(listing, p) for p in paths}``, worked out once a directory: the reason depends only on the
    directory, except for a temporary _metadata."""
    by_dir: dict[str, str] = {}
    out: dict[str, str] = {}
    tmp = "/" + METADATA_TMP
    for p in paths:
        if p.endswith(tmp):
            out[p] = orphan_reason(listing, p)
            continue
        parent = p[:p.rfind("/")]
        reason = by_dir.get(parent)
        if reason is None:
            reason = by_dir[parent] = orphan_reason(listing, p)
        out[p] = reason
    return out
