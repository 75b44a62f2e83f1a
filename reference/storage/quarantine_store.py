"""The quarantine on an object store: copy, check, then delete in batches.

The same batches as on a local disk (reference.storage.quarantine), under
``<base>/.cutcheck-quarantine/<UTC yyyymmddThhmmssZ>-<pid>/`` with ``manifest.json`` and
``files/<path>``. An object store has no rename, so a move is: every orphan is looked up again
(HEAD: it must still exist and still be older than --min-age), the plan is written to the manifest
(``"complete": false``), each object is copied to the quarantine prefix (CopyObject) and the copy's
size checked, and only then are the originals deleted, 1000 keys a DeleteObjects request. The
manifest records each copy's ETag in place of a sha256 (hashing would read every object back); a
restore refuses a stored object whose ETag changed. Copies and lookups run on a few threads.
An interruption before the deletes leaves the originals in place (the copies are removed again);
one between two delete batches leaves a batch that ``restore`` puts back.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from cutcheck.model.errors import StorageError
from cutcheck.reference.storage.files import METADATA
from cutcheck.reference.storage.quarantine import (
    FILES,
    MANIFEST,
    Batch,
    Moved,
    Restored,
    _anchor,
    belongs,
    load_batch_json,
    pick_batch,
)
from cutcheck.reference.storage.scope import QUARANTINE_DIR
from cutcheck.reference.storage.store import FileInfo, Store

if TYPE_CHECKING:
    from cutcheck.reference.storage.inspection import CheckpointListing
    from cutcheck.reference.storage.quarantine import Batch

THREADS = 16
T = TypeVar("T")
R = TypeVar("R")


def _parallel(fn: Callable[[T], R], items: list[T]) -> list[R]:
    if len(items) < 2:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(fn, items))


def _write_manifest(store: Store, batch: Batch) -> None:

    store.write(os.path.join(batch.path, MANIFEST), (json.dumps(batch.to_json(), indent=1, sort_keys=True) + "\n").encode())


def _new_batch_path(store: Store, base: str, started: float) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    root = os.path.join(base, QUARANTINE_DIR)
    taken = set(store.listdir(root))
    name, n = f"{stamp}-{os.getpid()}", 1
    while name in taken:
        n += 1
        name = f"{stamp}-{os.getpid()}-{n}"
    return os.path.join(root, name)


def quarantine(listing: CheckpointListing, reasons: dict[str, str], *, min_age: float = 0.0,
               now: float | None = None) -> Batch:
    """storage_quarantine.quarantine on an object store (the listing's store)."""

    store = listing.store
    anchor = _anchor(listing)
    started = time.time() if now is None else now
    path = _new_batch_path(store, listing.base, started)
    batch = Batch(path, listing.base, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)), started)
    todo = list(reasons)  # checked by storage_quarantine.quarantine (keep-set, _metadata, data roots)
    fresh: list[FileInfo | None] = _parallel(lambda f: store.stat(f, fresh=True), todo)
    limit = time.time() - min_age
    plan = [Moved(i.path, os.path.relpath(i.path, anchor), i.size, "", i.mtime, reasons.get(i.path, "orphan"))
            for i in fresh if i is not None and not (min_age > 0 and i.mtime > limit)]
    batch.files = plan
    _write_manifest(store, batch)  # before the first copy: an interrupted run can still be put back

    copied: list[Moved] = []  # appended by the copying threads as each copy is checked

    def copy(m: Moved) -> None:
        try:
            info = store.copy(m.original, os.path.join(path, FILES, m.stored), m.size)
        except FileNotFoundError:
            return
        m.etag = info.etag
        copied.append(m)

    deleted: set[str] = set()
    try:
        _parallel(copy, plan)
        copied.sort(key=lambda m: m.original)
        for i in range(0, len(copied), 1000):
            deleted.update(store.delete([m.original for m in copied[i:i + 1000]]))
    finally:
        # A delete request cut short may have removed originals it never reported: look each one up
        # again rather than drop a copy that is now the only one.
        unsure = [m for m in copied if m.original not in deleted]
        there = _parallel(lambda m: store.stat(m.original, fresh=True) is not None, unsure)
        batch.files = [m for m in copied if m.original in deleted] + [m for m, t in zip(unsure, there, strict=True) if not t]
        undo = [os.path.join(path, FILES, m.stored) for m, t in zip(unsure, there, strict=True) if t]
        if undo:  # copied but the original was not deleted: the original stays, the copy goes
            store.delete(undo)
        batch.complete = True
        _write_manifest(store, batch)
    return batch


def batches(store: Store, base: str) -> list[Batch]:

    root = base if os.path.basename(base) == QUARANTINE_DIR else os.path.join(base, QUARANTINE_DIR)
    names = store.listdir(root)
    if not names:
        raise StorageError(f"{store.uri(base)}: holds no {QUARANTINE_DIR}; give the checkpoint base that 'storage "
                           f"orphans --delete' named.")
    found = []
    for name in sorted(names):
        data = store.read(os.path.join(root, name, MANIFEST))
        if data is not None:
            found.append(load_batch_json(os.path.join(root, name), data, store.uri(os.path.join(root, name))))
    return sorted(found, key=lambda b: (b.created_unix, b.name))


def restore_batch(store: Store, base: str, name: str | None = None) -> Restored:
    """storage_quarantine.restore_batch on an object store: copy back, check, delete the stored copies."""

    batch = pick_batch(batches(store, base), store.uri(base), name)
    belongs(batch, store.uri)
    result = Restored(batch)
    stored_infos = {i.path: i for i in store.files(os.path.join(batch.path, FILES))}
    todo: list[tuple[Moved, str]] = []
    back: list[str] = []
    for m in batch.files:
        stored = os.path.join(batch.path, FILES, m.stored)
        info = stored_infos.get(stored)
        if info is None:  # never moved (an interrupted or losing run), or already back
            (result.in_place if store.stat(m.original, fresh=True) is not None else result.absent).append(m)
            continue
        if m.etag and info.etag != m.etag:
            raise StorageError(f"{store.uri(stored)} no longer holds what was quarantined (its ETag differs); restore "
                               f"it by hand if you trust it (nothing was restored).")
        there = store.stat(m.original, fresh=True)
        if there is not None:
            if there.size == info.size and _same(store, there, info):
                back.append(stored)  # the original never went (an interrupted or concurrent run), or is back already
                result.in_place.append(m)
                continue
            raise StorageError(f"{store.uri(m.original)} exists again, so restoring batch {batch.name} would overwrite "
                               f"it; move that object aside first (nothing was restored).")
        todo.append((m, stored))
    todo.sort(key=lambda t: (os.path.basename(t[0].original) == METADATA, t[0].original))
    _parallel(lambda pair: store.copy(pair[1], pair[0].original), [t for t in todo if os.path.basename(t[0].original) != METADATA])
    for m, stored in todo:  # a checkpoint's _metadata last, as Flink writes it
        if os.path.basename(m.original) == METADATA:
            store.copy(stored, m.original)
    result.restored = [m for m, _ in todo]
    store.delete(back + [stored for _, stored in todo])
    if not store.files(os.path.join(batch.path, FILES)):  # all back: the batch goes
        store.delete([os.path.join(batch.path, MANIFEST)])
    return result


def _same(store: Store, a: FileInfo, b: FileInfo) -> bool:
    if a.etag and b.etag and a.etag == b.etag:
        return True
    return store.read(a.path) == store.read(b.path)


def purge(store: Store, base: str, older_than_days: float, *, yes: bool, now: float | None = None) -> list[Batch]:
    if not older_than_days >= 0:
        raise StorageError(f"--older-than {older_than_days} must be a number of days, 0 or more.")
    limit = (time.time() if now is None else now) - older_than_days * 86400
    old = [b for b in batches(store, base) if b.created_unix <= limit]
    if yes:
        for b in old:
            store.delete([i.path for i in store.files(b.path)])
    return old
