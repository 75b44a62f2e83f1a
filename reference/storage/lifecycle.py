"""Which age-based lifecycle rule, on which prefix, stays safe while the job keeps running.

S3 expires an object N days after its creation, rounded to midnight UTC (``expires_at``: creation
plus N days, rounded up, as AWS documents it). Deletions run asynchronously after that moment, and
operators report removals early in the UTC day the rule names, so the safe reading used here is
``earliest_deletion``: creation plus N days rounded *down* to midnight, which can be as early as
N-1 days and a few hours after creation. A file that must live L seconds is safe under an N-day
rule only when N - 1 days exceed L (``days_for``), so no rule shorter than 2 days is ever safe.

The answer is built from the one keep-set (reference.storage.inspection: every ``_metadata`` under
the base, jobs restored in claim mode from this one, --keep-referenced-by, re-rooted copies), per
job directory and prefix:

* ``<job>/shared/``: an incremental checkpoint keeps naming a shared file for as long as RocksDB
  keeps the SST file, with no upper bound, so while any checkpoint references a shared file no
  age-based rule there is safe; use ``cutcheck storage orphans`` periodically instead.
* ``<job>/chk-``: a checkpoint's own files (and its ``_metadata``) are needed while it is retained,
  that is until ``retained`` newer checkpoints complete. The lifetime needed is the age of the
  oldest file a retained checkpoint's directory holds plus the observed checkpoint interval (it
  stays until the next completion); the rule is ``days_for`` that, and it holds only while the job
  keeps completing checkpoints: a stopped job's last checkpoint expires too.
* ``<job>/taskowned/``: task-owned files are not bounded by anything cutcheck can see: no rule.
* a savepoint's directory: the user's, needed for as long as anyone may restore it: no rule.
* With entropy injection each data file sits under its own random prefix, so a prefix filter
  cannot select ``shared/`` or ``chk-`` data; a rule covers the whole bucket (or a tag): unsafe as
  soon as one shared file is referenced.

Also reported: per checkpoint the oldest file it references, a proposed ``--expire-days`` rule on
``shared/`` checked against every referenced file (deleted already, or within a day), and objects
per prefix as stored and without entropy injection (S3 scales request rates per prefix, about 3,500
writes and 5,500 reads per second each).
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from cutcheck.model.errors import StorageError
from cutcheck.reference.storage.files import METADATA, SHARED_DIR, TASKOWNED_DIR
from cutcheck.reference.storage.guard import chk_id
from cutcheck.reference.storage.inspection import CheckpointListing
from cutcheck.reference.storage.scope import inside

DAY = 86400.0
WRITES_PER_PREFIX = 3500  # S3: PUT/COPY/POST/DELETE per second per partitioned prefix
READS_PER_PREFIX = 5500  # S3: GET/HEAD per second per partitioned prefix
TOP = 20
SOON = DAY  # --expire-days: referenced files the rule deletes within this long count as deleted


def expires_at(created: float, days: int) -> float:
    """When S3 says an N-day expiration rule removes an object created at ``created``: creation plus N
    days, rounded up to the next midnight UTC."""
    return math.ceil((created + days * DAY) / DAY) * DAY


def earliest_deletion(created: float, days: int) -> float:
    """The earliest moment to plan for: creation plus N days rounded down to midnight UTC."""
    return math.floor((created + days * DAY) / DAY) * DAY


def safe_days(created: float, now: float) -> int:
    """The smallest N whose rule has not expired an object created at ``created`` by ``now`` (S3's reading)."""
    n = max(0, int((now - created) // DAY) - 1)
    while expires_at(created, n) <= now:
        n += 1
    return n


def days_for(lifetime: float) -> int:
    """The shortest N-day rule under which a file needed for ``lifetime`` seconds after its creation is
    never deleted early: ``earliest_deletion`` after creation plus the lifetime, whatever the hour."""
    return int(max(0.0, lifetime) // DAY) + 2


class Prefix:
    SHARED = "shared"
    EXCLUSIVE = "chk"
    TASKOWNED = "taskowned"
    EVERYTHING = "everything"
    SAVEPOINT = "savepoint"


@dataclass(slots=True)
class RuleAdvice:
    """One prefix's answer: a rule in days that stays safe while the job runs, or none and what instead."""

    prefix: str  # as the user reads it (an S3 lifecycle Filter.Prefix is this, without the bucket)
    kind: str  # Prefix.*
    days: int | None
    referenced: int  # files the keep-set holds under the prefix
    oldest_days: float | None  # age of the oldest of them
    why: str
    instead: str = ""


@dataclass(slots=True)
class CheckpointAge:
    key: str
    id: int
    kind: str
    files: int
    shared_files: int
    oldest_file: str | None
    oldest_age_days: float | None
    oldest_shared_age_days: float | None
    missing: int
    broken_by_rule: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ExpiredFile:
    path: str
    age_days: float
    checkpoints: list[str]


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
    rules: list[RuleAdvice]
    oldest_shared: str | None
    oldest_shared_days: float | None
    entropy: bool
    stored: PrefixReport
    without_entropy: PrefixReport
    expire_days: int | None = None
    deleted_referenced: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    deleted_unreferenced: int = 0
    expired: list[ExpiredFile] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _prefixes(paths: list[str]) -> PrefixReport:
    counts = Counter(os.path.dirname(p) + "/" for p in paths)
    top = [PrefixCount(p, n) for p, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]]
    return PrefixReport(len(counts), max(counts.values(), default=0), top)


def _is(path: str, name: str) -> bool:
    return name in path.split("/")[:-1]


def _users(listing: CheckpointListing) -> dict[str, list[str]]:
    """Every kept file and the checkpoints (keys, or other directories' URIs) that reference it."""
    users: dict[str, list[str]] = {}
    for c in listing.checkpoints:
        users.setdefault(os.path.join(c.path, METADATA), []).append(c.key)  # expires with a chk- rule too
        for fs in c.files.values():
            for f in fs:
                users.setdefault(f, []).append(c.key)
    for d, fs in listing.context_files.items():
        users.setdefault(os.path.join(d, METADATA), []).append(listing.uri(d))
        for f in fs:
            users.setdefault(f, []).append(listing.uri(d))
    for f in listing.rerooted:
        users.setdefault(f, []).append("a moved or copied _metadata")
    return users


def _interval(listing: CheckpointListing, created: dict[str, float], job: str) -> float:
    """The observed time between completed checkpoints of a job (0 with fewer than two)."""
    done = sorted((n, created[m]) for c in listing.checkpoints
                  if os.path.dirname(c.path) == job and (n := chk_id(os.path.basename(c.path))) is not None
                  and (m := os.path.join(c.path, METADATA)) in created)
    if len(done) < 2 or done[-1][0] == done[0][0]:
        return 0.0
    return max(0.0, (done[-1][1] - done[0][1]) / (done[-1][0] - done[0][0]))


def _advice(listing: CheckpointListing, users: dict[str, list[str]], created: dict[str, float], now: float,
            entropy: bool) -> list[RuleAdvice]:
    kept = [f for f in users if f in created]
    jobs = sorted({os.path.dirname(c.path) for c in listing.checkpoints if chk_id(os.path.basename(c.path)) is not None})
    out: list[RuleAdvice] = []
    shared_kept = [f for f in kept if _is(f, SHARED_DIR)]
    if entropy:
        oldest = min((created[f] for f in kept), default=None)
        out.append(RuleAdvice(listing.uri(os.path.dirname(listing.data_roots[0])) + "/", Prefix.EVERYTHING,
                              None if shared_kept else days_for(now - oldest) if oldest is not None else None,
                              len(kept), None if oldest is None else round((now - oldest) / DAY, 3),
                              "with entropy injection every data file has its own random prefix, so a rule cannot "
                              "single out shared/ or chk-N files: it covers the whole bucket (or a tag)"
                              + (", and incremental checkpoints reference shared files for as long as RocksDB keeps "
                                 "them" if shared_kept else ""),
                              "run 'cutcheck storage orphans --delete' periodically instead" if shared_kept else ""))
    for job in jobs:
        shown = listing.uri(job)
        mine = [f for f in shared_kept if inside(f, os.path.join(job, SHARED_DIR))]
        oldest = min((created[f] for f in mine), default=None)
        if mine:
            out.append(RuleAdvice(f"{shown}/{SHARED_DIR}/", Prefix.SHARED, None, len(mine),
                                  round((now - oldest) / DAY, 3) if oldest is not None else None,
                                  "incremental checkpoints keep referencing a shared file for as long as RocksDB keeps "
                                  "its SST file, with no upper bound, so no age-based rule on shared/ is safe while "
                                  "the job runs",
                                  "put rules only on the chk- prefix below, and run 'cutcheck storage orphans "
                                  "--delete' periodically for shared/ (it keeps every referenced file)"))
        exclusive = [f for f in kept if inside(f, job) and any(chk_id(p) is not None for p in
                                                                os.path.relpath(f, job).split("/")[:1])]
        if exclusive and not entropy:
            first = min(created[f] for f in exclusive)
            lifetime = (now - first) + _interval(listing, created, job)
            days = days_for(lifetime)
            out.append(RuleAdvice(f"{shown}/chk-", Prefix.EXCLUSIVE, days, len(exclusive), round((now - first) / DAY, 3),
                                  f"a checkpoint's own files are needed while it is retained: the oldest retained is "
                                  f"{(now - first) / DAY:.2f} day(s) old and stays until the next checkpoint "
                                  f"completes; a {days}-day rule may delete after {days - 1} day(s) and a few hours "
                                  f"(S3 rounds to midnight UTC)",
                                  f"safe only while the job completes a checkpoint at least every {days - 1} day(s) "
                                  f"divided by the number retained: a stopped job's last checkpoint expires too, so "
                                  f"restore or copy it out within {days - 1} day(s)"))
        owned = [f for f in kept if inside(f, os.path.join(job, TASKOWNED_DIR))]
        if owned or any(inside(f, os.path.join(job, TASKOWNED_DIR)) for f in listing.taskowned):
            out.append(RuleAdvice(f"{shown}/{TASKOWNED_DIR}/", Prefix.TASKOWNED, None, len(owned), None,
                                  "task-owned files live as long as the tasks that own them decide; nothing cutcheck "
                                  "reads bounds that", "leave taskowned/ without an expiration rule"))
    for c in listing.checkpoints:
        if c.kind == "savepoint":
            out.append(RuleAdvice(listing.uri(c.path) + "/", Prefix.SAVEPOINT, None, len(users) and sum(
                1 for f in users if inside(f, c.path)), None, "a savepoint is the user's: Flink never deletes it and "
                "no age bounds how long it is needed", "delete a savepoint by hand once no job will restore it"))
    return out


def lifecycle(listing: CheckpointListing, expire_days: int | None = None, now: float | None = None) -> LifecycleReport:
    """The report on an inspection's keep-set and files (their modification or LastModified times). Refused while
    a _metadata cannot be read: it may reference any file, so no rule can be called safe."""
    if listing.unreadable:
        bad = listing.unreadable[0]
        why = listing.why_unreadable.get(bad, f"{listing.uri(bad)}: unreadable checkpoint metadata").rstrip(".")
        raise StorageError(f"{why}; that _metadata may reference any file here, so no lifecycle rule can be called "
                           "safe: fix or remove it (or set its checkpoint aside) first.")
    now = time.time() if now is None else now
    store = listing.store
    created = {p: i.mtime for p, i in listing.infos.items()}
    for f in listing.kept:
        if f not in created and (info := store.stat(f)) is not None:
            created[f] = info.mtime
    users = _users(listing)
    rows: list[CheckpointAge] = []
    for c in listing.checkpoints:
        refs = sorted({f for fs in c.files.values() for f in fs})
        ages = {f: created[f] for f in refs if f in created}
        shared = [f for f in ages if _is(f, SHARED_DIR)]
        first = min(ages, key=lambda f: (ages[f], f)) if ages else None
        first_shared = min(shared, key=lambda f: (ages[f], f)) if shared else None
        rows.append(CheckpointAge(c.key, c.id, c.kind, len(refs), len([f for f in refs if _is(f, SHARED_DIR)]),
                                  store.uri(first) if first else None,
                                  round((now - ages[first]) / DAY, 3) if first else None,
                                  round((now - ages[first_shared]) / DAY, 3) if first_shared else None,
                                  len(refs) - len(ages)))
    kept_shared = [f for f in users if f in created and _is(f, SHARED_DIR)]
    oldest = min(kept_shared, key=lambda f: (created[f], f)) if kept_shared else None
    fold = {r: listing.root for r in listing.data_roots if r != listing.root}
    every = sorted(listing.infos)
    without = []
    for p in every:
        root = next((r for r in fold if p.startswith(r.rstrip("/") + "/")), None)
        without.append(fold[root] + p[len(root):] if root else p)
    report = LifecycleReport(store.uri(listing.root), now, rows, _advice(listing, users, created, now, bool(fold)),
                             store.uri(oldest) if oldest else None,
                             round((now - created[oldest]) / DAY, 3) if oldest else None, bool(fold),
                             _uri_prefixes(_prefixes(every), store), _uri_prefixes(_prefixes(without), store))
    if expire_days is not None:
        _propose(report, listing, users, created, expire_days, kept_shared)
    return report


def _propose(report: LifecycleReport, listing: CheckpointListing, users: dict[str, list[str]],
             created: dict[str, float], days: int, kept_shared: list[str]) -> None:
    """A proposed N-day rule on shared/: the referenced files it deletes by tomorrow, and who needs them."""
    now, store = report.now, listing.store
    gone = sorted(f for f in kept_shared if earliest_deletion(created[f], days) <= now + SOON)
    report.expire_days = days
    report.deleted_referenced = [store.uri(f) for f in gone]
    report.expired = [ExpiredFile(store.uri(f), round((now - created[f]) / DAY, 3), users[f]) for f in gone]
    keys = {c.key for c in listing.checkpoints}
    broken = sorted({k for f in gone for k in users[f]})
    report.broken = [k for k in broken if k in keys] + [k for k in broken if k not in keys]
    for row in report.checkpoints:
        row.broken_by_rule = [store.uri(f) for f in gone if row.key in users[f]]
    kept = set(users)
    report.deleted_unreferenced = sum(1 for p, t in created.items() if _is(p, SHARED_DIR) and p not in kept
                                      and earliest_deletion(t, days) <= now + SOON)


def _uri_prefixes(report: PrefixReport, store: Any) -> PrefixReport:
    for p in report.top:
        p.prefix = store.uri(p.prefix.rstrip("/")) + "/"
    return report
