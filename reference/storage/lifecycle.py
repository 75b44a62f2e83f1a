"""The seed thread's question as a report: can a lifecycle rule expire old files under ``shared/``?

A lifecycle expiration rule of N days deletes an object once its creation time plus N days,
rounded up to the next midnight UTC (how S3 computes it; an object's LastModified is its creation
time, checkpoint files are never rewritten), has passed. Incremental checkpoints keep referencing
a ``shared/`` file for as long as RocksDB keeps the SST file, so a file written by the job's first
checkpoint can be needed by the newest one: the rule must be longer than the age of the oldest
file any retained checkpoint still references, and that age grows every day the file stays in use.

``lifecycle(listing, expire_days)`` answers from an inspection (reference.storage.inspection):

* per retained checkpoint (and savepoint) the oldest file it references and its age;
* ``safe_days``: the smallest N a rule on ``shared/`` could use today without deleting a
  referenced file (``safe_days_all``: the same for a rule on every file of the directory);
* for a proposed N, exactly which referenced files the rule would already have deleted, and which
  checkpoints that breaks (plus how many unreferenced shared files it would take, harmlessly);
* objects per prefix as stored and as they would be without entropy injection: S3 scales request
  rates per prefix (about 3,500 writes and 5,500 reads per second each), so one ``shared/`` prefix
  takes every upload and every restore read of a job, while entropy injection gives each data
  file its own random prefix.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from cutcheck.reference.storage.files import SHARED_DIR
from cutcheck.reference.storage.inspection import CheckpointListing

DAY = 86400.0
WRITES_PER_PREFIX = 3500  # S3: PUT/COPY/POST/DELETE per second per partitioned prefix
READS_PER_PREFIX = 5500  # S3: GET/HEAD per second per partitioned prefix
TOP = 20


def expires_at(created: float, days: int) -> float:
    """When an N-day expiration rule removes an object created at ``created``: creation plus N days,
    rounded up to the next midnight UTC."""
    t = created + days * DAY
    return math.ceil(t / DAY) * DAY


def safe_days(created: float, now: float) -> int:
    """The smallest N whose rule has not expired an object created at ``created`` by ``now``."""
    n = max(0, int((now - created) // DAY) - 1)
    while expires_at(created, n) <= now:
        n += 1
    return n


@dataclass(slots=True)
class CheckpointAge:
    key: str
    id: int
    kind: str
    files: int
    shared_files: int
    oldest_file: str | None  # the oldest existing file it references
    oldest_age_days: float | None
    oldest_shared_age_days: float | None
    missing: int
    broken_by_rule: list[str] = field(default_factory=list)  # files the proposed rule deletes


@dataclass(slots=True)
class ExpiredFile:
    path: str
    age_days: float
    checkpoints: list[str]  # keys of the retained checkpoints that reference it


@dataclass(slots=True)
class PrefixCount:
    prefix: str
    objects: int


@dataclass(slots=True)
class PrefixReport:
    prefixes: int
    max_objects: int
    top: list[PrefixCount]


@dataclass(slots=True)
class LifecycleReport:
    root: str
    now: float
    checkpoints: list[CheckpointAge]
    safe_days: int | None  # a rule on shared/ (None: no retained checkpoint references a shared file)
    safe_days_all: int | None  # a rule on every file under the directory
    oldest_shared: str | None
    entropy: bool
    stored: PrefixReport  # objects per prefix as stored
    without_entropy: PrefixReport  # the same objects with the entropy segment removed
    expire_days: int | None = None
    deleted_referenced: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)  # keys of the checkpoints the rule breaks
    deleted_unreferenced: int = 0
    expired: list[ExpiredFile] = field(default_factory=list)  # the referenced files the rule deletes, with their users

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _prefixes(paths: list[str]) -> PrefixReport:
    counts = Counter(os.path.dirname(p) + "/" for p in paths)
    top = [PrefixCount(p, n) for p, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]]
    return PrefixReport(len(counts), max(counts.values(), default=0), top)


def _fold(listing: CheckpointListing) -> dict[str, str]:
    """Each entropy data root and its counterpart without entropy, the metadata root (``/b/Xy12/ck`` -> ``/b/ck``)."""
    return {r: listing.root for r in listing.data_roots if r != listing.root}


def lifecycle(listing: CheckpointListing, expire_days: int | None = None, now: float | None = None) -> LifecycleReport:
    """The report on an inspection's checkpoints and files (their modification or LastModified times)."""
    now = time.time() if now is None else now
    store = listing.store
    files = {p: i.mtime for p, i in listing.infos.items()}

    def created(path: str) -> float | None:
        if path in files:
            return files[path]
        info = store.stat(path)
        return None if info is None else info.mtime

    def is_shared(path: str) -> bool:
        return SHARED_DIR in path.split("/")[:-1]

    rows: list[CheckpointAge] = []
    oldest_shared: tuple[float, str] | None = None
    oldest_any: float | None = None
    deleted: dict[str, list[str]] = {}
    broken: list[str] = []
    for c in listing.checkpoints:
        refs = sorted({f for fs in c.files.values() for f in fs})
        ages = {f: t for f in refs if (t := created(f)) is not None}
        shared = [f for f in ages if is_shared(f)]
        first = min(ages, key=lambda f: (ages[f], f)) if ages else None
        first_shared = min(shared, key=lambda f: (ages[f], f)) if shared else None
        row = CheckpointAge(c.key, c.id, c.kind, len(refs), len([f for f in refs if is_shared(f)]),
                            store.uri(first) if first else None,
                            round((now - ages[first]) / DAY, 3) if first else None,
                            round((now - ages[first_shared]) / DAY, 3) if first_shared else None,
                            len(refs) - len(ages))
        if first_shared and (oldest_shared is None or ages[first_shared] < oldest_shared[0]):
            oldest_shared = (ages[first_shared], first_shared)
        if first and (oldest_any is None or ages[first] < oldest_any):
            oldest_any = ages[first]
        if expire_days is not None:
            row.broken_by_rule = sorted(store.uri(f) for f in shared if expires_at(ages[f], expire_days) <= now)
            for f in shared:
                if expires_at(ages[f], expire_days) <= now:
                    deleted.setdefault(f, []).append(c.key)
            if row.broken_by_rule:
                broken.append(c.key)
        rows.append(row)
    fold = _fold(listing)
    every = sorted(files)
    without = []
    for p in every:
        root = next((r for r in fold if p.startswith(r.rstrip("/") + "/")), None)
        without.append(fold[root] + p[len(root):] if root else p)
    report = LifecycleReport(store.uri(listing.root), now, rows,
                             safe_days(oldest_shared[0], now) if oldest_shared else None,
                             safe_days(oldest_any, now) if oldest_any is not None else None,
                             store.uri(oldest_shared[1]) if oldest_shared else None, bool(fold),
                             _uri_prefixes(_prefixes(every), store), _uri_prefixes(_prefixes(without), store))
    if expire_days is not None:
        referenced = listing.referenced
        report.expire_days = expire_days
        report.deleted_referenced = sorted(store.uri(f) for f in deleted)
        report.expired = [ExpiredFile(store.uri(f), round((now - files.get(f, now)) / DAY, 3), users)
                          for f, users in sorted(deleted.items())]
        report.broken = broken
        report.deleted_unreferenced = sum(1 for p, t in files.items() if is_shared(p) and p not in referenced
                                          and expires_at(t, expire_days) <= now)
    return report


def _uri_prefixes(report: PrefixReport, store: Any) -> PrefixReport:
    for p in report.top:
        p.prefix = store.uri(p.prefix.rstrip("/")) + "/"
    return report
