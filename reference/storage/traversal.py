"""The traversal under a storage inspection (reference.storage.inspection): listing into a compact
table, resolving what each ``_metadata`` names, and the per-file answers, in time and memory that
stay small on a base of millions of files.

No per-file Python object outlives the step that needs it: the listing is a FileTable (paths and
numbers per directory, a flag byte per file for "referenced"), each referenced path is one string however many checkpoints name it,
directories are resolved once (``realpath``, the scope test), and "who references this shared file"
shares one list per distinct set of checkpoints. Nothing here prints; long steps report through a
``progress(stage, done, total)`` callback the CLI turns into lines on stderr.
"""

from __future__ import annotations

import gc
import heapq
import os
import re
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from itertools import compress, groupby, islice, repeat
from operator import contains, itemgetter, lt, not_
from stat import S_ISREG
from typing import TYPE_CHECKING, Any

from cutcheck.reference.storage.files import METADATA, TASKOWNED_DIR
from cutcheck.reference.storage.filetable import FileTable, dir_files, split
from cutcheck.reference.storage.local_scan import scan_local
from cutcheck.reference.storage.scope import reroot
from cutcheck.reference.storage.store import LocalStore, Store, within

if TYPE_CHECKING:
    from cutcheck.reference.storage.inspection import CheckpointInfo

_UNMARKED = re.compile(b"\\x00")
_AFTER_SLASH = chr(ord("/") + 1)  # head + "/" <= p < head + _AFTER_SLASH: p starts with head + "/"
Progress = Callable[[str, int, "int | None"], None]  # (stage, done, total): "listed" files, then "read" _metadata


def scan_into(table: FileTable, store: Store, root: str, progress: Progress | None,
               keep_dir: Callable[[str], bool] = lambda d: True, defer: bool = False) -> None:
    """Add every file under ``root`` to ``table``, a directory at a time (only directories ``keep_dir`` accepts);
    ``defer``: a local listing may leave large directories' sizes and times to ``FileTable.settle``."""
    done = len(table)
    tick = (lambda n: progress("listed", done + n, None)) if progress is not None else None
    scan = partial(scan_local, defer=defer) if isinstance(store, LocalStore) else getattr(store, "scan", None)
    if scan is not None:
        for directory, files in scan(root, tick):
            if keep_dir(directory):
                table.add(directory, files)
        return
    grouped: dict[str, tuple[list[str], list[int], list[float], list[str]]] = {}
    for info in store.files(root):  # a store without a streaming listing: its list, grouped by directory
        g = grouped.setdefault(split(info.path)[0], ([], [], [], []))
        g[0].append(info.path)
        g[1].append(info.size)
        g[2].append(info.mtime)
        g[3].append(info.etag)
    for directory, (paths, sizes, mtimes, etags) in grouped.items():
        if keep_dir(directory):
            table.add(directory, dir_files(directory, paths, sizes, mtimes, etags, full=True))


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while an inspection builds its tables: a full collection visits every
    element of every list and dictionary alive (the table's millions of paths, the shared files' users), and
    the allocations of a large inspection start dozens of them; the inspection makes no reference cycles
    worth collecting. About a second of 12 at 10^6 files (benchmarks/bench_storage_scale.py)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Kept:
    """Every path some ``_metadata`` names, each as one string: a listed file is marked in the table (a byte
    a file, the table's own string), anything else (missing, outside the listing) is kept here."""

    __slots__ = ("extra", "table")

    def __init__(self, table: FileTable):
        self.table = table
        self.extra: dict[str, str] = {}

    def add(self, path: str) -> str:
        found = self.table.find(path)
        if found is None:
            return self.extra.setdefault(path, path)
        d, i = found
        d.marks[i] = 1
        return d.paths[i]


def checkpoint_size(by_scope: dict[str, list[str]], sizes: dict[str, array[int]], in_scope: Callable[[str], bool],
                    unlisted: set[str] | None) -> tuple[int, list[str], list[str]]:
    """(the bytes of the files that exist, the files that do not, those outside the scope), each file counted
    once even when two scopes name it. Only ``unlisted`` files (all, when None) can be outside: a listed file lies
    under a data root, and every data root lies in the scope (inspection checks that once a directory)."""
    largest = max(by_scope, key=lambda sc: len(by_scope[sc]))
    others: set[str] = set()
    total, missing, outside = 0, [], []
    for scope in sorted(by_scope, key=lambda sc: sc == largest):  # the small scopes first, remembered
        remember = scope != largest
        for path, size in zip(by_scope[scope], sizes[scope], strict=True):
            if path in others:
                continue
            if remember:
                others.add(path)
            if size < 0:
                missing.append(path)
                continue
            total += size
            if (unlisted is None or path in unlisted) and not in_scope(path):
                outside.append(path)
    return total, sorted(missing), sorted(outside)


class Within:
    """``within(path, roots)`` for many files: the answer is the same for every file of a directory."""

    __slots__ = ("dirs", "roots")

    def __init__(self, roots: set[str]):
        self.roots = roots
        self.dirs: dict[str, bool] = {}

    def __call__(self, path: str) -> bool:
        if path in self.roots:
            return True
        head = split(path)[0]
        answer = self.dirs.get(head)
        if answer is None:
            answer = self.dirs[head] = within(head, self.roots)
        return answer


def rerooted_files(named: list[tuple[list[str], str]], anchors: list[str], unkept: set[str]) -> set[str]:
    """The files among ``unkept`` that scope.reroot finds for some _metadata (``named``: its references and
    directory): ``reroot(refs, directory, [*anchors, parent], present) & unkept``, computed from the files in
    question rather than from every tail of every reference (which costs gigabytes on a large base).

    Rule 2 of reroot keeps ``anchor/<tail>`` when some reference ends in ``/<tail>``: such a reference has the
    file's name, so only references named like a file in question are looked at."""
    if not unkept:
        return set()
    by_name: dict[str, list[str]] = {}
    for f in unkept:
        by_name.setdefault(f[f.rfind(os.sep) + 1:], []).append(f)
    dirs = {f[:f.rfind(os.sep)] for f in unkept}
    found: set[str] = set()
    for refs, directory in named:
        mark = os.sep + os.path.basename(directory) + os.sep
        # The filters run in C (compress over mapped tests), not a Python step a reference.
        marked = compress(refs, map(contains, refs, repeat(mark)))
        if any(os.path.dirname(r) != directory for r in marked):  # rule 1: the directory was moved
            found |= reroot(refs, directory, []) & unkept
        heads = [a.rstrip(os.sep) + os.sep for a in {*anchors, os.path.dirname(directory)}]
        for r in _named_like(refs, by_name, dirs):
            for f in by_name[r[r.rfind(os.sep) + 1:]]:
                if f not in found and any(f.startswith(h) and r.endswith(os.sep + f[len(h):]) for h in heads):
                    found.add(f)
    return found


def _named_like(refs: list[str], by_name: dict[str, list[str]], dirs: set[str]) -> list[str]:
    """The references named like a file in question (``by_name``; ``dirs``: those files' directories), in order.
    A sorted run of references directly in the one directory all those files are in is passed over whole: a
    reference there named like such a file would be that file, which is referenced, so not in question."""
    if not all(map(lt, refs, islice(refs, 1, None))):
        return _by_names(refs, by_name)
    out: list[str] = []
    at, n = 0, len(refs)
    while at < n:
        first = refs[at]
        cut = first.rfind("/")
        hi = bisect_left(refs, first[:cut] + _AFTER_SLASH, at + 1) if cut > 0 else at + 1
        part = refs[at:hi]
        if not (cut > 0 and dirs == {first[:cut]} and max(map(str.find, part, repeat("/"), repeat(cut + 1))) < 0):
            out += _by_names(part, by_name)
        at = hi
    return out


def _by_names(refs: list[str], by_name: dict[str, list[str]]) -> list[str]:
    names = map(itemgetter(2), map(str.rpartition, refs, repeat(os.sep)))
    return list(compress(refs, map(by_name.__contains__, names)))


def shared_users(checkpoints: list[CheckpointInfo]) -> dict[str, list[str]]:
    """{shared file: keys of the checkpoints that reference it}, sorted by file, from one merge of the
    checkpoints' sorted lists. Files referenced by the same checkpoints share one list (a base of millions
    of shared files has few distinct sets): do not mutate."""
    tagged = [zip(c.files["shared"], repeat(bit)) for bit, c in enumerate(checkpoints)]
    lists: dict[int, list[str]] = {}
    shared: dict[str, list[str]] = {}
    for path, group in groupby(heapq.merge(*tagged), key=itemgetter(0)):
        mask = 0
        for _, bit in group:
            mask |= 1 << bit
        users = lists.get(mask)
        if users is None:
            users = lists[mask] = [c.key for bit, c in enumerate(checkpoints) if mask >> bit & 1]
        shared[path] = users
    return shared


def size_of(store: Store, path: str, table: FileTable) -> int | None:
    size = table.size(path)
    if size is not None:
        return size
    info = store.stat(path)
    return None if info is None else info.size


def fresh_mtime(store: Store, path: str, table: FileTable) -> float:
    if isinstance(store, LocalStore):  # looked at again: a file written since it was listed is never called an orphan
        try:  # LocalStore.stat's answer with one stat, not two (it asks os.path.isfile again)
            st = os.stat(path)
        except OSError:
            return float("inf")
        return st.st_mtime if S_ISREG(st.st_mode) else float("inf")
    if store.is_local:
        info = store.stat(path)
        return float("inf") if info is None else info.mtime
    mtime = table.mtime(path)
    return float("inf") if mtime is None else mtime  # vanished or unreadable: never called an orphan


def new_sizes(checkpoints: list[CheckpointInfo], store: Store, table: FileTable,
              sizes: dict[str, dict[str, array[int]]]) -> None:
    """Each checkpoint's ``new_size``: its _metadata and the files no older checkpoint of its job references
    (``sizes``: by checkpoint key, per scope the sizes aligned with ``files``, -1 for a file that does not exist)."""
    seen: dict[str, set[str]] = {}
    for c in sorted(checkpoints, key=lambda c: (c.job, c.id)):
        known = seen.setdefault(c.job, set())
        total = size_of(store, os.path.join(c.path, METADATA), table) or 0
        for scope, files in c.files.items():  # each scope's files are distinct (sorted, no repeats): tested in C
            fresh = map(not_, map(known.__contains__, files))
            total += sum(map(max, compress(sizes[c.key][scope], fresh), repeat(0)))
            known.update(files)
        c.new_size = total


def unreferenced(table: FileTable, kept: Kept) -> tuple[list[str], list[tuple[str, bool]]]:
    """(the task-owned files, every listed file ``kept`` does not hold, with whether it is task-owned); the
    unmarked files of a directory are found by scanning its mark bytes, not by a loop over every file."""
    taskowned: list[str] = []
    loose: list[tuple[str, bool]] = []
    extra = kept.extra
    for d, files in table.directories():
        task_dir = TASKOWNED_DIR in d.split(os.sep)
        if task_dir:
            taskowned += files.paths
        paths = files.paths
        for m in _UNMARKED.finditer(files.marks):
            path = paths[m.start()]
            if not extra or path not in extra:
                loose.append((path, task_dir))
    return taskowned, loose


def fresh_json(value: Any) -> Any:
    """A copy of a JSON value's containers (strings and numbers are immutable: shared, not copied)."""
    if isinstance(value, list):
        return [fresh_json(v) for v in value] if value and isinstance(value[0], (list, dict)) else list(value)
    if isinstance(value, dict):
        return {k: fresh_json(v) for k, v in value.items()}
    return value


def json_uris(value: Any, store: Store) -> Any:
    """Every internal path in a JSON value shown as its URI."""
    if isinstance(value, str):
        return store.uri(value) if value.startswith("/") else value
    if isinstance(value, list):
        return [json_uris(v, store) for v in value]
    if isinstance(value, dict):
        return {json_uris(k, store): json_uris(v, store) for k, v in value.items()}
    return value
