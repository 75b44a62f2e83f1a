"""Output of the storage commands that stays fast on bases of millions of files: progress lines on
stderr during long inspections, and tables too long for a rendered table printed row by row.

A rendered table (rich) costs about a third of a millisecond a row and holds every row until it is
printed: five minutes and a gigabyte for the shared files of a large base. Up to ``RENDERED_ROWS`` rows
keep the rendered table; a longer one is printed as it is computed, one tab-separated line a row
under a header line, which ``cut -f`` and spreadsheets read.
"""

from __future__ import annotations

import os
import sys
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from itertools import compress, islice, repeat
from operator import eq, itemgetter, lt, not_
from typing import Any

from cutcheck.commands.common import err, out, table

RENDERED_ROWS = 1000
PROGRESS_EVERY = 2.0  # seconds: the first line after this long, then at most one line per interval
_BATCH = 10_000


def progress_lines(where: str, every: float | None = None) -> Callable[[str, int, int | None], None]:
    """A progress callback for reference.storage.inspection.inspect: one line on stderr at most every
    ``every`` seconds (``PROGRESS_EVERY``), none for an inspection that ends sooner."""
    every = PROGRESS_EVERY if every is None else every
    start = time.monotonic()
    last = [start]

    def report(stage: str, done: int, total: int | None) -> None:
        now = time.monotonic()
        if now - last[0] < every:
            return
        last[0] = now
        if stage == "listed":
            text = f"listing {where}: {done:,} files so far ({now - start:.0f} s)"
        else:
            text = f"reading the _metadata under {where}: {done:,} of {total:,} ({now - start:.0f} s)"
        err.print(text, soft_wrap=True, highlight=False, markup=False)

    return report


def print_rows(title: str, columns: list[str], rows: Iterable[list[Any]], count: int,
               lines: Callable[[], Iterable[str]] | None = None) -> None:
    """A table of ``count`` rows: rendered when short, else streamed as tab-separated lines (``lines()``'s when
    given: the same rows, already joined)."""
    if count <= RENDERED_ROWS:
        out.print(table(title, columns, [list(r) for r in rows]))
        return
    out.print(f"{title + ': ' if title else ''}{count:,} rows, one per line, tab-separated", soft_wrap=True,
              highlight=False, markup=False)
    write = sys.stdout.write
    write("\t".join(columns) + "\n")
    joined = lines() if lines is not None else map("\t".join, (map(str, r) for r in rows))
    while batch := list(islice(joined, _BATCH)):
        write("\n".join(batch) + "\n")
    sys.stdout.flush()


def _runs(listing: Any, files: list[str]) -> Iterator[tuple[int, int, Any]]:
    """(lo, hi, the sizes of ``files[lo:hi]`` or None) for each run of ``files`` (sorted) in one directory: the sizes
    found by binary searches mapped in C over the directory's sorted files, None for a run not simply listed."""
    find = getattr(listing.infos, "files_in", None)
    at, n = 0, len(files)
    while at < n:
        first = files[at]
        head = first[:first.rfind("/")]
        hi = bisect_left(files, head + chr(ord("/") + 1), at + 1) if head else at + 1
        part = files[at:hi]
        d = find(head) if find is not None else None
        listed = d.paths if d is not None else []
        found = _marked_run(d, part) if d is not None and hi - at > _BATCH else None
        if found is None:
            found = list(map(bisect_left, repeat(listed), part))
        if d is not None and found[-1] < len(listed) and all(map(eq, map(listed.__getitem__, found), part)):
            yield at, hi, map(d.sizes.__getitem__, found)
        else:
            yield at, hi, None
        at = hi


def _marked_run(d: Any, part: list[str]) -> list[int] | None:
    """The positions of ``part`` in its directory's listing when ``part`` is exactly its marked (referenced) files, or
    exactly its unmarked ones (the usual shared-file and orphan tables); None otherwise. The positions come from the
    mark bytes (compress over them, in C) instead of a binary search a file."""
    n = len(d.paths)
    for selectors in (d.marks, map(not_, d.marks)):
        found = list(compress(range(n), selectors))
        if len(found) == len(part) and list(map(d.paths.__getitem__, found)) == part:
            return found
    return None


def listed_sizes(listing: Any, files: list[str], size: Callable[[str], int | None]) -> dict[str, int]:
    """``{f: size(f) for f in files if size(f) is not None}``, a directory's run at a time when ``files`` is sorted."""
    if not all(map(lt, files, islice(files, 1, None))):
        return {f: sz for f in files if (sz := size(f)) is not None}
    out: dict[str, int] = {}
    for lo, hi, sizes in _runs(listing, files):
        part = files[lo:hi]
        if sizes is not None:
            out.update(zip(part, sizes, strict=True))
        else:
            out.update((f, sz) for f in part if (sz := size(f)) is not None)
    return out


def shared_lines(listing: Any, label: Callable[[str], str], size: Callable[[str], int | None],
                 shown: Callable[[int], str], users: Callable[[tuple[str, ...]], str]) -> Iterator[str]:
    """``"\t".join([label(f), shown(size(f)) or "missing", users(tuple(keys))])`` for each shared file of ``listing``,
    in order, a directory's run of files at a time with the per-file steps mapped in C (``_runs``' sizes, the
    labels cut by one slice, the users' text once per distinct list: files referenced by the same checkpoints
    share one). A run that is not simply listed goes file by file."""
    files = list(listing.shared)
    lists = list(listing.shared.values())
    texts = {i: users(tuple(keys)) for i, keys in dict(zip(map(id, lists), lists, strict=True)).items()}
    user_text = list(map(texts.__getitem__, map(id, lists)))
    del lists
    cut = getattr(label, "cut", None)  # labeller's: a path under the job directory shows from here
    for lo, hi, sizes in _runs(listing, files):
        part = files[lo:hi]
        shown_sizes: Iterable[str] = map(shown, sizes) if sizes is not None else \
            [shown(sz) if (sz := size(f)) is not None else "missing" for f in part]
        if cut is not None and all(map(str.startswith, part, repeat(cut[0]))):
            labels: Iterable[str] = map(itemgetter(slice(cut[1], None)), part)
        else:
            labels = map(label, part)
        yield from map("\t".join, zip(labels, shown_sizes, islice(user_text, lo, hi), strict=True))


def relative(path: str, root: str, uri: Callable[[str], str]) -> str:
    """``os.path.relpath(path, root)`` for a canonical path under the canonical ``root`` (without its cost:
    it is called once a file), else the path as the user reads it."""
    head = root.rstrip(os.sep) + os.sep
    return path[len(head):] if path.startswith(head) else uri(path)


def sizer(listing: Any, slow: Callable[[Any, str], int | None]) -> Callable[[str], int | None]:
    """The size of a file of ``listing`` (``slow(listing, path)`` for a file the listing does not hold), for files
    asked for in sorted order: through the file table's Cursor, a step a file instead of a search."""
    cursor = listing.infos.cursor() if hasattr(listing.infos, "cursor") else None

    def size(path: str) -> int | None:
        found = cursor.find(path) if cursor is not None else None
        return int(found[0].sizes[found[1]]) if found is not None else slow(listing, path)

    return size


def labeller(listing: Any, name: Callable[[str], str]) -> Callable[[str], str]:
    """``name`` (commands.storage._namer's) for many paths: a path under the one job directory is cut by slicing."""
    jobs = {c.job for c in listing.checkpoints if c.kind == "checkpoint"}
    if len(jobs) != 1:
        return name
    head = os.path.join(listing.root, jobs.pop()) + os.sep
    cut = len(head)

    def label(path: str) -> str:
        return path[cut:] if path.startswith(head) and path != head else name(path)

    label.cut = (head, cut)  # type: ignore[attr-defined]  # for shared_lines: a whole run cut at once
    return label
