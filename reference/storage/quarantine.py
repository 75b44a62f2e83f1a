"""Reversible deletion of orphans: a quarantine under the checkpoint base.

``storage orphans --delete`` never removes a file. It moves the orphans into one new folder per
run of the command, keeping their paths::

    <base>/.cutcheck-quarantine/<UTC yyyymmddThhmmssZ>-<pid>/
        manifest.json     format, when, the base, and per file: original path, stored path, size,
                          modification time, why it was an orphan, and what identifies its bytes:
                          moved by a hard link (the same file system), its inode and modification time
                          in nanoseconds (a link keeps the bytes, so no byte is read); copied (across
                          file systems), its sha256
        files/<path>      the file, at its path relative to the base (with entropy injection: to
                          the directory before the marker, so every random prefix keeps its place)

The manifest is written before the first move (``"complete": false``) and again after the last, so
an interrupted run leaves a batch that ``restore_batch`` still puts back. Moves are ``link`` then
``unlink`` (never overwriting), falling back to copy-verify-remove across file systems; on an object
store (reference.storage.quarantine_store) the same is a copy to the quarantine prefix, a size check,
then DeleteObjects 1000 keys at a time, with the copy's ETag in the manifest instead of a sha256. ``restore_batch`` puts a
batch back and refuses, before moving anything, when a file exists again at an original path or a
stored file no longer has the hash it had; ``purge`` removes whole batches older than a number of
days. Nothing under the quarantine is ever scanned as a checkpoint or called an orphan.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from cutcheck.model.errors import StorageError
from cutcheck.reference.storage.files import METADATA
from cutcheck.reference.storage.guard import completed_since
from cutcheck.reference.storage.inspection import CheckpointListing
from cutcheck.reference.storage.quarantine_moves import _links_work, _move, _sha256
from cutcheck.reference.storage.scope import QUARANTINE_DIR, inside, is_checkpoint_dir_name
from cutcheck.reference.storage.store import Store, local_form, open_store

MANIFEST = "manifest.json"
FILES = "files"
FORMAT = "cutcheck-quarantine/1"


@dataclass(slots=True)
class Moved:
    original: str
    stored: str  # relative to the batch's files/ folder
    size: int
    sha256: str
    mtime: float
    reason: str
    etag: str = ""  # on an object store: the stored copy's ETag (sha256 is then empty)
    inode: int = 0  # moved by a hard link: the file's inode and st_mtime_ns (sha256 is then empty)
    mtime_ns: int = 0

    def unchanged(self, stored: str) -> bool:
        """Whether the stored file still holds what was quarantined: its sha256 when it was copied; when it was
        linked (the same inode, so the same bytes unless written since), its inode, size and modification time."""
        if self.sha256:
            return _sha256(stored) == self.sha256
        try:
            st = os.stat(stored)
        except OSError:
            return False
        return (st.st_ino, st.st_size, st.st_mtime_ns) == (self.inode, self.size, self.mtime_ns)

    def same_bytes(self, other: str, stored: str) -> bool:
        """Whether ``other`` holds the bytes quarantined: its sha256 against the one recorded, or (linked, nothing
        recorded) against the stored file's, when that is unchanged."""
        if self.sha256:
            return _sha256(other) == self.sha256
        return self.unchanged(stored) and _sha256(other) == _sha256(stored)


@dataclass(slots=True)
class Batch:
    path: str
    base: str
    created: str  # UTC, ISO 8601
    created_unix: float
    files: list[Moved] = field(default_factory=list)
    removed_dirs: list[str] = field(default_factory=list)
    complete: bool = False

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def size(self) -> int:
        return sum(m.size for m in self.files)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}


def parse_age(text: str) -> float:
    """``3600``, ``3600s``, ``60m``, ``1h``, ``2d``, ``0`` -> seconds."""
    raw = text.strip().lower()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (raw[:-1], raw[-1]) if raw and raw[-1] in units else (raw, "s")
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise StorageError(f"--min-age {text!r} is not an age; give seconds or a number with s, m, h or d (3600s, 60m, 1h, 0).")
    return value * units[unit]


def _write_manifest(batch: Batch) -> None:
    tmp = os.path.join(batch.path, MANIFEST + ".tmp")
    with open(tmp, "w") as fh:
        json.dump(batch.to_json(), fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, os.path.join(batch.path, MANIFEST))


def _anchor(listing: CheckpointListing) -> str:
    return os.path.commonpath([listing.base, *listing.data_roots]) if listing.data_roots else listing.base


def quarantine(listing: CheckpointListing, reasons: dict[str, str], *, min_age: float = 0.0,
               now: float | None = None, keep: set[str] | None = None, metadata: bool = False,
               dirs: list[str] | None = None) -> Batch:
    """Move the files ``reasons`` names (path -> why) into a new batch; return it (its files are what moved).

    Checked again here, whatever the caller passed: nothing in ``keep`` (default: the listing's one
    keep-set), no ``_metadata`` unless ``metadata`` (a whole checkpoint set aside), nothing outside the
    listing's data roots, nothing modified less than ``min_age`` ago. ``dirs``: empty checkpoint
    directories to remove too (recorded, put back by a restore)."""
    if listing.unreadable:
        raise StorageError(f"{listing.uri(listing.unreadable[0])}: unreadable checkpoint metadata; it may reference "
                           f"any file, so no file is moved. Remove or fix it first.")
    completed_since(listing)
    keep = listing.kept if keep is None else keep
    todo = sorted((f for f in reasons if f not in keep and (metadata or os.path.basename(f) != METADATA)
                   and any(inside(f, r) for r in listing.data_roots)),
                  key=lambda f: (os.path.basename(f) != METADATA, f))  # a checkpoint's _metadata goes first
    if not listing.store.is_local:
        from cutcheck.reference.storage import quarantine_store as storage_quarantine_store

        return storage_quarantine_store.quarantine(listing, {f: reasons[f] for f in todo}, min_age=min_age, now=now)
    anchor = _anchor(listing)
    started = time.time() if now is None else now
    path = _new_batch(listing.base, started)
    batch = Batch(path, listing.base, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)), started)
    plan: list[Moved] = []
    here, links = os.stat(path).st_dev, _links_work(path)
    for f in todo:
        try:
            st = os.lstat(f)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or (min_age > 0 and st.st_mtime > time.time() - min_age):
            continue  # a link or no file at all; or written to since it was listed
        linked = links and st.st_dev == here  # a hard link keeps the bytes: no need to read them
        plan.append(Moved(f, os.path.relpath(f, anchor), st.st_size, "" if linked else _sha256(f), st.st_mtime,
                          reasons.get(f, "orphan"), inode=st.st_ino if linked else 0,
                          mtime_ns=st.st_mtime_ns if linked else 0))
    batch.files = plan
    _write_manifest(batch)  # before the first move: an interrupted run can still be put back
    moved: list[Moved] = []
    try:
        for m in plan:
            stored = os.path.join(path, FILES, m.stored)
            try:
                copied = _move(m.original, stored)
            except FileNotFoundError:
                continue
            if copied and not m.sha256:  # a link refused after all (rare): the bytes were copied, so hashed
                m.sha256, m.inode, m.mtime_ns = copied, 0, 0
                _write_manifest(batch)
            moved.append(m)
    finally:
        batch.files = moved
        # The files not moved, by identity in a set (each original is planned once): no search of ``moved``
        # a file, which was quadratic (10^10 comparisons for 10^5 orphans).
        done = {id(m) for m in moved}
        for m in (m for m in plan if id(m) not in done):  # interrupted between link and unlink: the original stays, the link goes
            stored = os.path.join(path, FILES, m.stored)
            if os.path.exists(stored) and os.path.exists(m.original) and os.path.samefile(stored, m.original):
                os.remove(stored)
        emptied = sorted({os.path.dirname(m.original) for m in moved} | set(dirs or ()), key=lambda d: -d.count(os.sep))
        for d in emptied:  # only checkpoint directories, and only when empty
            if is_checkpoint_dir_name(os.path.basename(d)) and os.path.isdir(d) and not os.path.islink(d) \
                    and not os.listdir(d):
                os.rmdir(d)
                batch.removed_dirs.append(d)
        batch.complete = True
        _write_manifest(batch)
    return batch


def _new_batch(base: str, started: float) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    root = os.path.join(base, QUARANTINE_DIR)
    os.makedirs(root, exist_ok=True)
    path, n = os.path.join(root, f"{stamp}-{os.getpid()}"), 1
    while True:
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            n += 1
            path = os.path.join(root, f"{stamp}-{os.getpid()}-{n}")


# ---------------------------------------------------------------------------- reading batches back
def quarantine_dir(base: str) -> str:
    path = os.path.realpath(base)
    if os.path.basename(path) == QUARANTINE_DIR:
        return path
    if os.path.isdir(os.path.join(path, QUARANTINE_DIR)):
        return os.path.join(path, QUARANTINE_DIR)
    if not os.path.isdir(path):
        raise StorageError(f"{base}: no such directory; give the checkpoint base that 'storage orphans --delete' named.")
    raise StorageError(f"{base}: holds no {QUARANTINE_DIR}; give the checkpoint base that 'storage orphans --delete' named.")


def load_batch(path: str) -> Batch:
    try:
        with open(os.path.join(path, MANIFEST), "rb") as fh:
            data = fh.read()
    except OSError:
        data = b""
    return load_batch_json(path, data, path)


def load_batch_json(path: str, data: bytes, shown: str) -> Batch:
    """A batch from its manifest's bytes; ``shown`` names the batch in errors."""
    try:
        raw = json.loads(data)
        if raw.get("format") != FORMAT:
            raise ValueError("format")
        files = [Moved(**m) for m in raw["files"]]
        return Batch(path, raw["base"], raw["created"], float(raw["created_unix"]), files, list(raw["removed_dirs"]),
                     bool(raw["complete"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StorageError(f"{shown}: not a readable quarantine batch ({type(exc).__name__}); its {MANIFEST} is "
                           f"missing or damaged, so cutcheck leaves it alone.") from None


def _remote(base: str, endpoint_url: str | None) -> tuple[Store, str] | None:
    store, path = open_store(base, endpoint_url)
    return None if store.is_local else (store, path)


def batches(base: str, endpoint_url: str | None = None) -> list[Batch]:
    remote = _remote(base, endpoint_url)
    if remote:
        from cutcheck.reference.storage import quarantine_store as storage_quarantine_store

        return storage_quarantine_store.batches(*remote)
    base = local_form(base) or base
    root = quarantine_dir(base)
    found = []
    for name in sorted(os.listdir(root)):
        if os.path.isfile(os.path.join(root, name, MANIFEST)):
            found.append(load_batch(os.path.join(root, name)))
    return sorted(found, key=lambda b: (b.created_unix, b.name))


def pick_batch(every: list[Batch], base: str, name: str | None) -> Batch:
    """The batch named (default: the newest) among those of a base."""
    if not every:
        raise StorageError(f"{base}: its {QUARANTINE_DIR} holds no batch to restore.")
    if name is None:
        return every[-1]
    match = [b for b in every if b.name == os.path.basename(name.rstrip(os.sep))]
    if not match:
        raise StorageError(f"{name}: no such batch in {base}/{QUARANTINE_DIR}; 'cutcheck storage purge "
                           f"{base} --older-than 0' lists them.")
    return match[0]


@dataclass(slots=True)
class Restored:
    """What a restore did: exactly the files it put back, and those it found already in place."""

    batch: Batch
    restored: list[Moved] = field(default_factory=list)
    in_place: list[Moved] = field(default_factory=list)  # never moved (an interrupted or losing run), or back already
    absent: list[Moved] = field(default_factory=list)  # planned, never moved, and gone from its place since
    dirs: list[str] = field(default_factory=list)  # empty checkpoint directories made again

    @property
    def size(self) -> int:
        return sum(m.size for m in self.restored)


def belongs(batch: Batch, uri: Callable[[str], str] = str) -> None:
    """A batch is put back only into the base it was made for, and only as its manifest's plain paths say: a
    copied or moved base (its manifest names the original's absolute paths) would write into the original."""
    home = os.path.dirname(os.path.dirname(batch.path))
    if os.path.normpath(batch.base) != home:
        raise StorageError(f"batch {batch.name} was made for {uri(batch.base)} (its {MANIFEST} says so), not for "
                           f"{uri(home)}: a copied or moved quarantine would put its files back into the original; "
                           f"restore it there, or by hand (nothing was restored).")
    for m in batch.files:
        if os.path.isabs(m.stored) or m.stored.startswith("..") or os.path.normpath(m.stored) != m.stored \
                or not os.path.isabs(m.original) or os.path.normpath(m.original) != m.original:
            raise StorageError(f"batch {batch.name}: its {MANIFEST} names {m.stored!r} for {m.original!r}, outside the "
                               f"batch or not a plain absolute path, so cutcheck leaves it alone (nothing was restored).")


def restore_batch(base: str, name: str | None = None, endpoint_url: str | None = None) -> Restored:
    """Put a batch (default: the newest) back where its files were; refuse rather than overwrite."""
    remote = _remote(base, endpoint_url)
    if remote:
        from cutcheck.reference.storage import quarantine_store as storage_quarantine_store

        return storage_quarantine_store.restore_batch(*remote, name)
    base = local_form(base) or base
    batch = pick_batch(batches(base), base, name)
    belongs(batch)
    result = Restored(batch)
    todo: list[tuple[Moved, str]] = []
    stray: list[str] = []
    for m in batch.files:
        stored = os.path.join(batch.path, FILES, m.stored)
        if not os.path.isfile(stored):
            (result.in_place if os.path.isfile(m.original) else result.absent).append(m)
            continue  # never moved (an interrupted or losing run), or already back
        if os.path.exists(m.original) and os.path.samefile(stored, m.original):
            stray.append(stored)  # an interrupted move or restore had both names: the original stays
            result.in_place.append(m)
            continue
        if os.path.lexists(m.original):
            if os.path.isfile(m.original) and m.same_bytes(m.original, stored):
                stray.append(stored)  # a copy made before the run was interrupted; the original never went
                result.in_place.append(m)
                continue
            raise StorageError(f"{m.original} exists again, so restoring batch {batch.name} would overwrite it; move "
                               f"that file aside first (nothing was restored).")
        if not m.unchanged(stored):
            raise StorageError(f"{stored} no longer holds what was quarantined (its "
                               f"{'sha256' if m.sha256 else 'inode, size or modification time'} differs); restore it "
                               f"by hand if you trust it (nothing was restored).")
        todo.append((m, stored))
    for d in batch.removed_dirs:
        if not os.path.isdir(d):
            os.makedirs(d)
            result.dirs.append(d)
    for m, stored in sorted(todo, key=lambda t: (os.path.basename(t[0].original) == METADATA, t[0].original)):
        _move(stored, m.original)  # a checkpoint's _metadata last, as Flink writes it
        result.restored.append(m)
    for leftover in stray:
        os.remove(leftover)
    files = os.path.join(batch.path, FILES)
    for d, _, _ in sorted(os.walk(files), key=lambda t: -t[0].count(os.sep)):
        if not os.listdir(d):
            os.rmdir(d)
    if not os.path.exists(files):  # all back: the batch goes (anything else in it stays, with its manifest)
        for leftover in (MANIFEST, MANIFEST + ".tmp"):
            if os.path.exists(os.path.join(batch.path, leftover)):
                os.remove(os.path.join(batch.path, leftover))
        if not os.listdir(batch.path):
            os.rmdir(batch.path)
    root = os.path.dirname(batch.path)
    if os.path.isdir(root) and not os.listdir(root):
        os.rmdir(root)
    return result


def purge(base: str, older_than_days: float, *, yes: bool, now: float | None = None,
          endpoint_url: str | None = None) -> list[Batch]:
    """The batches older than ``older_than_days``; removed for good only with ``yes``."""
    remote = _remote(base, endpoint_url)
    if remote:
        from cutcheck.reference.storage import quarantine_store as storage_quarantine_store

        return storage_quarantine_store.purge(*remote, older_than_days, yes=yes, now=now)
    base = local_form(base) or base
    if not older_than_days >= 0:
        raise StorageError(f"--older-than {older_than_days} must be a number of days, 0 or more.")
    limit = (time.time() if now is None else now) - older_than_days * 86400
    old = [b for b in batches(base) if b.created_unix <= limit]
    if yes:
        for b in old:
            shutil.rmtree(b.path)
        root = quarantine_dir(base)
        if not os.listdir(root):
            os.rmdir(root)
    return old
