"""What a ``_metadata`` names, resolved against the listing: canonical paths, the table's own strings,
sizes, and the "referenced" mark on each listed file, with the per-reference steps run in C.

A checkpoint of a large incremental job names hundreds of thousands of shared files, nearly all in one
directory, all listed. So the work is done a directory at a time: the references of one directory are
a contiguous run of the sorted list (found by two binary searches), they are looked up in a dictionary
of that directory's paths (built once, for every ``_metadata`` read), and when every one of them is
listed the strings, sizes and marks are taken for the whole run through mapped lookups. Only the
references that are not simply listed (missing, outside the listing, in a subdirectory of the run's
directory, a symbolic link) go one by one, exactly as before.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left
from collections import deque
from itertools import islice, repeat
from operator import eq, lt

from cutcheck.reference.storage.filetable import FileTable
from cutcheck.reference.storage.meta import SCOPES
from cutcheck.reference.storage.store import Store
from cutcheck.reference.storage.traversal import Kept, size_of

_ODD_ENDS = ("/", "/.", "/..")  # names a directory's realpath may change: never taken on the fast path
_AFTER_SLASH = chr(ord("/") + 1)  # head + "/" <= p < head + _AFTER_SLASH: p starts with head + "/"


def increasing(paths: list[str]) -> bool:
    """Sorted, without repeats (compared in C)."""
    return all(map(lt, paths, islice(paths, 1, None)))


class Canonical:
    """A path a ``_metadata`` names -> the internal, canonical path (``store.realpath(store.internal(p))``),
    resolving each directory once: the last component of a path is never a symbolic link that needs
    resolving when the file was listed (listings follow none), so only unlisted files are looked at."""

    __slots__ = ("dirs", "store", "table", "unlisted")

    def __init__(self, store: Store, table: FileTable):
        self.store, self.table = store, table
        self.dirs: dict[str, str] = {}
        self.unlisted: set[str] = set()  # files that exist but were not listed (outside the data roots)

    def resolve(self, files: dict[str, list[str]], kept: Kept) -> tuple[dict[str, list[str]], dict[str, array[int]]]:
        """(the canonical paths by scope, sorted, each the one string ``kept`` holds; their sizes, aligned, -1 for
        a file that does not exist) of what one ``_metadata`` names (``files``: by scope, as the reader gave them)."""
        by_scope: dict[str, list[str]] = {}
        sizes: dict[str, array[int]] = {}
        for scope in SCOPES:
            refs = files.get(scope, [])
            listed = self._all_listed(refs)
            if listed is not None:  # the usual case: one directory's listed files, in any order
                by_scope[scope], sizes[scope] = listed
                continue
            if not increasing(refs):  # the same answer as mapping first then sorting (the mapping is per path)
                refs = sorted(set(refs))
            named = self.canonical(refs)
            # Readers give each scope sorted and without repeats, and the mapping keeps that order when it changes
            # nothing (the usual case): then no set and no sort of hundreds of thousands of paths.
            canon = named if named is refs or increasing(named) else sorted(set(named))
            paths, found_sizes, links = self._look_up(canon, kept, self.store.is_local)
            if links:  # rare (Flink writes no links): again, with the links resolved
                canon = sorted((set(canon) - set(links)) | {os.path.realpath(p) for p in links})
                paths, found_sizes, _ = self._look_up(canon, kept, False)
            by_scope[scope], sizes[scope] = paths, found_sizes
        return by_scope, sizes

    def _all_listed(self, refs: list[str]) -> tuple[list[str], array[int]] | None:
        """``resolve``'s answer for one scope when every reference is a file listed directly in one canonical
        directory (a job's ``shared/``), in any order, repeats allowed; None otherwise (then the general path
        decides). A listed path is the directory's canonical path, "/", a plain name, and never a link, so such a
        reference is its own canonical path. The references are looked up by binary searches mapped in C, and the
        canonical checks a directory's run of references needs in the general path are not needed here."""
        if not refs:
            return None
        first = refs[0]
        cut = first.rfind("/")
        head = first[:cut]
        if cut <= 0 or self._directory(head) != head:
            return None
        d = self.table.files_in(head)
        prefix = first[:cut + 1]
        if d is None or not all(map(str.startswith, refs, repeat(prefix))):
            return None
        if not increasing(refs):  # sorted first: binary searches in order stay in the cache (four times faster)
            refs = sorted(refs)
        listed = d.paths
        found = list(map(bisect_left, repeat(listed), refs))
        if found[-1] >= len(listed) or list(map(listed.__getitem__, found)) != refs:
            return None  # some reference is not a listed file of this directory
        if not all(map(lt, found, islice(found, 1, None))):
            found = list(dict.fromkeys(found))  # repeats of a reference, side by side
        deque(map(d.marks.__setitem__, found, repeat(1)), maxlen=0)
        return list(map(listed.__getitem__, found)), array("q", map(d.sizes.__getitem__, found))

    def canonical(self, refs: list[str]) -> list[str]:
        """``[self.one(r) for r in refs]``; ``refs`` itself when every directory named is canonical (the usual case,
        found a directory's run of the sorted references at a time)."""
        if not increasing(refs):
            return [self.one(ref) for ref in refs]
        out: list[str] | None = None  # a copy, once some run changes
        lo, n = 0, len(refs)
        while lo < n:
            first = refs[lo]
            cut = first.rfind("/")
            head = first[:cut]
            hi = bisect_left(refs, head + _AFTER_SLASH, lo + 1) if cut > 0 else lo + 1
            part = refs[lo:hi]
            plain = cut > 0 and self._directory(head) == head and \
                max(map(str.find, part, repeat("/"), repeat(cut + 1))) < 0 and \
                not any(map(str.endswith, part, repeat(_ODD_ENDS)))  # every one head/name, name a plain name
            if not plain:
                if out is None:
                    out = refs[:lo]
                out += map(self.one, part)
            elif out is not None:
                out += part
            lo = hi
        return refs if out is None else out

    def _directory(self, head: str) -> str:
        d = self.dirs.get(head)
        if d is None:
            d = self.dirs[head] = self.store.realpath(self.store.internal(head))
        return d

    def one(self, ref: str) -> str:
        """``store.realpath(store.internal(ref))``, but for a symbolic link as the last component (see ``resolve``)."""
        head, sep, name = ref.rpartition("/")
        if not sep or not head or name in ("", ".", ".."):
            return self.store.realpath(self.store.internal(ref))
        d = self._directory(head)
        return ref if d == head else d + "/" + name if d != "/" else "/" + name

    def _look_up(self, canon: list[str], kept: Kept, check_links: bool) -> tuple[list[str], array[int], list[str]]:
        """(``canon`` (sorted, no repeats), as the strings the table or ``kept`` hold; their sizes, -1 for none; the unlisted
        symbolic links among them, left out when ``check_links``: a listed file is never a link, an unlisted one
        may be, and then it resolves further). Marks what it finds listed."""
        paths = list(canon)
        found_sizes = array("q", bytes(8 * len(canon)))
        links: list[str] = []
        dropped: set[int] = set()  # positions of the links
        done: set[str] = set()
        pending: list[str] = []  # directories met inside another's run (a subdirectory of it)
        at, n = 0, len(canon)
        while at < n or pending:
            if pending:
                head = pending.pop()
                if head in done:
                    continue
            else:
                path = canon[at]
                head = path[:path.rfind("/")] or "/"
                if head in done:  # never, as runs are taken in order; one step on if it were
                    at += 1
                    continue
            done.add(head)
            prefix = head + "/" if head != "/" else "/"
            lo = bisect_left(canon, prefix)
            hi = bisect_left(canon, prefix[:-1] + _AFTER_SLASH, lo)  # every path that starts with prefix
            self._run(canon, lo, hi, head, prefix, paths, found_sizes, kept, check_links, links, dropped, pending)
            at = max(at, hi)
        if dropped:
            keep = [i for i in range(len(canon)) if i not in dropped]
            paths = [paths[i] for i in keep]
            found_sizes = array("q", (found_sizes[i] for i in keep))
        return paths, found_sizes, links

    def _run(self, canon: list[str], lo: int, hi: int, head: str, prefix: str, paths: list[str], found_sizes: array[int],
             kept: Kept, check_links: bool, links: list[str], dropped: set[int], pending: list[str]) -> None:
        """The references in ``canon[lo:hi]`` directly in ``head`` (the others, in its subdirectories, go on ``pending``)."""
        part = canon[lo:hi]
        d = self.table.files_in(head)
        listed = d.paths if d is not None else []
        # Binary searches mapped in C: cheaper than a dictionary of a large directory, and no memory.
        found = list(map(bisect_left, repeat(listed), part))
        if d is not None and found[-1] < len(listed) and all(map(eq, map(listed.__getitem__, found), part)):
            paths[lo:hi] = map(listed.__getitem__, found)  # all listed, all directly in head: taken at once
            found_sizes[lo:hi] = array("q", map(d.sizes.__getitem__, found))
            deque(map(d.marks.__setitem__, found, repeat(1)), maxlen=0)
            return
        cut = len(prefix)
        for at, (path, i) in enumerate(zip(part, found, strict=True), lo):
            if d is not None and i < len(listed) and listed[i] == path:
                d.marks[i] = 1
                paths[at], found_sizes[at] = listed[i], d.sizes[i]
            elif path.find("/", cut) >= 0:
                pending.append(path[:path.rfind("/")])  # in a subdirectory of head: looked up with that directory
            elif check_links and os.path.islink(path):
                links.append(path)
                dropped.add(at)
            else:
                paths[at] = kept.extra.setdefault(path, path)
                size = size_of(self.store, path, self.table)
                found_sizes[at] = -1 if size is None else size
                if size is not None:
                    self.unlisted.add(path)
