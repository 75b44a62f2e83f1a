"""Every file a listing found, held compactly: a base of millions of files must fit in memory once.

A ``FileTable`` groups the files by directory. Per directory it keeps the paths (sorted, one ``str``
each: the same string objects are handed to whoever asks, so a path that a listing, a checkpoint's
references and the orphans all hold exists once), the sizes and modification times in typed arrays
(8 bytes a number, not a Python object), a byte of flags per file (``mark``: the inspection marks what
a ``_metadata`` references), and an object store's ETags only when the store gives them. About 200
bytes a file, against about 450 for a ``dict[str, FileInfo]``.

It is a read-only ``Mapping[str, FileInfo]`` (internal paths) so that callers that looked files up in
the old dictionary keep working; ``size``/``mtime``/``find`` answer without building a FileInfo, and
``directories()`` walks the table a directory at a time.
"""

from __future__ import annotations

import os
import re
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from cutcheck.reference.storage.store import FileInfo

_UNMARKED = re.compile(b"\\x00")


@dataclass(slots=True)
class DirFiles:
    """The files directly in one directory: parallel sequences, sorted by path."""

    paths: list[str]
    sizes: array[int]  # 'q'
    mtimes: array[float]  # 'd'
    etags: list[str] | None = None
    marks: bytearray = field(default_factory=bytearray)  # one byte a file, zero until marked
    # Listed without sizes and times (local_scan's ``defer``): they read 0 until ``FileTable.settle`` stats the
    # unmarked files; a marked (referenced) file's stay 0.
    pending: bool = False

    def __post_init__(self) -> None:
        if len(self.marks) != len(self.paths):
            self.marks = bytearray(len(self.paths))

    def index(self, path: str) -> int:
        i = bisect_left(self.paths, path)
        return i if i < len(self.paths) and self.paths[i] == path else -1


def join(directory: str, name: str) -> str:
    return directory + "/" + name if directory != "/" else "/" + name


def dir_files(directory: str, names: Sequence[str], sizes: Sequence[int], mtimes: Sequence[float],
              etags: Sequence[str] | None = None, *, full: bool = False) -> DirFiles:
    """The files of one directory, sorted (the inputs in any order); ``names`` are full paths when ``full``."""
    paths = list(names) if full else [join(directory, n) for n in names]
    if all(a < b for a, b in zip(paths, paths[1:], strict=False)):  # often already in order (S3 lists so)
        return DirFiles(paths, array("q", sizes), array("d", mtimes), list(etags) if etags is not None else None)
    order = sorted(range(len(paths)), key=paths.__getitem__)
    # Arrays filled from iterators: no list of a million int or float objects on the way.
    return DirFiles(list(map(paths.__getitem__, order)), array("q", map(sizes.__getitem__, order)),
                    array("d", map(mtimes.__getitem__, order)),
                    list(map(etags.__getitem__, order)) if etags is not None else None)


def split(path: str) -> tuple[str, str]:
    """(directory, name) of an internal path, as posixpath.split without normalising."""
    head, _, name = path.rpartition("/")
    return head or "/", name


class FileTable(Mapping[str, FileInfo]):
    """Files by directory (see the module docstring). ``add`` a directory's files; a later add of the same
    directory merges (entropy roots and the root may overlap)."""

    __slots__ = ("_count", "_dirs")

    def __init__(self) -> None:
        self._dirs: dict[str, DirFiles] = {}
        self._count = 0

    def add(self, directory: str, files: DirFiles) -> None:
        if not files.paths:
            return
        old = self._dirs.get(directory)
        if old is None:
            self._dirs[directory] = files
            self._count += len(files.paths)
            return
        seen = set(old.paths)
        fresh = [i for i, p in enumerate(files.paths) if p not in seen]
        if not fresh:
            return
        etags = None if old.etags is None or files.etags is None else [*old.etags, *(files.etags[i] for i in fresh)]
        merged = dir_files(directory, [*old.paths, *(files.paths[i] for i in fresh)],
                           [*old.sizes, *(files.sizes[i] for i in fresh)],
                           [*old.mtimes, *(files.mtimes[i] for i in fresh)], etags, full=True)
        merged.pending = old.pending or files.pending  # settle stats every unmarked file of it again
        self._dirs[directory] = merged
        self._count += len(fresh)

    # -- lookups without a FileInfo -------------------------------------------------------------
    def find(self, path: str) -> tuple[DirFiles, int] | None:
        """Where ``path`` is held: (its directory's files, its index there)."""
        d = self._dirs.get(path.rpartition("/")[0] or "/")  # split(path)[0], inlined: called once a reference
        if d is None:
            return None
        paths = d.paths
        i = bisect_left(paths, path)
        return (d, i) if i < len(paths) and paths[i] == path else None

    def cursor(self) -> Cursor:
        return Cursor(self)

    def size(self, path: str) -> int | None:
        found = self.find(path)
        return None if found is None else found[0].sizes[found[1]]

    def mtime(self, path: str) -> float | None:
        found = self.find(path)
        return None if found is None else found[0].mtimes[found[1]]

    def files_in(self, directory: str) -> DirFiles | None:
        return self._dirs.get(directory)

    def directories(self) -> Iterator[tuple[str, DirFiles]]:
        """(directory, its files), directories sorted."""
        for directory in sorted(self._dirs):
            yield directory, self._dirs[directory]

    def under(self, root: str) -> Iterator[str]:
        """The directories at or under ``root``."""
        head = root.rstrip("/") + "/"
        return (d for d in self._dirs if d == root or d.startswith(head))

    def keep_only(self, accepts: Callable[[str], bool], *, unless_under: str) -> None:
        """Forget the files ``accepts`` refuses, except those at or under ``unless_under`` (always kept:
        the directory given; only the entropy roots beside it are filtered)."""
        head = unless_under.rstrip("/") + "/"
        for directory in list(self._dirs):
            if directory == unless_under or directory.startswith(head):
                continue
            d = self._dirs[directory]
            keep = [i for i, p in enumerate(d.paths) if accepts(p)]
            if len(keep) == len(d.paths):
                continue
            self._count -= len(d.paths) - len(keep)
            if not keep:
                del self._dirs[directory]
                continue
            self._dirs[directory] = DirFiles([d.paths[i] for i in keep], array("q", (d.sizes[i] for i in keep)),
                                             array("d", (d.mtimes[i] for i in keep)),
                                             [d.etags[i] for i in keep] if d.etags is not None else None,
                                             pending=d.pending)

    def settle(self) -> None:
        """Stat the unmarked files of the directories listed without sizes and times (``DirFiles.pending``): what an
        eager listing would have read for them, and a file that vanished since it was listed left out, as an eager
        listing leaves it out. The marked (referenced) files are not looked at."""
        for directory, d in list(self._dirs.items()):
            if not d.pending:
                continue
            gone: set[int] = set()
            sizes, mtimes, paths = d.sizes, d.mtimes, d.paths
            for m in _UNMARKED.finditer(d.marks):
                i = m.start()
                try:
                    st = os.lstat(paths[i])
                except OSError:
                    gone.add(i)
                    continue
                sizes[i], mtimes[i] = st.st_size, st.st_mtime
            if gone:
                keep = [i for i in range(len(paths)) if i not in gone]
                self._count -= len(gone)
                if not keep:
                    del self._dirs[directory]
                    continue
                self._dirs[directory] = DirFiles([paths[i] for i in keep], array("q", (sizes[i] for i in keep)),
                                                 array("d", (mtimes[i] for i in keep)), None,
                                                 bytearray(d.marks[i] for i in keep), pending=True)

    def drop_under(self, root: str) -> None:
        """Forget the files at or under ``root`` (a directory listed again)."""
        for directory in list(self.under(root)):
            self._count -= len(self._dirs.pop(directory).paths)

    # -- the Mapping ----------------------------------------------------------------------------
    def __getitem__(self, path: str) -> FileInfo:
        found = self.find(path)
        if found is None:
            raise KeyError(path)
        d, i = found
        return FileInfo(path, d.sizes[i], d.mtimes[i], d.etags[i] if d.etags is not None else "")

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self.find(path) is not None

    def __iter__(self) -> Iterator[str]:
        """Every path: directories in the order of their paths, and each directory's files in order."""
        for directory in sorted(self._dirs, key=lambda d: d.rstrip("/") + "/"):
            yield from self._dirs[directory].paths

    def __len__(self) -> int:
        return self._count

    def items(self) -> Iterator[tuple[str, FileInfo]]:  # type: ignore[override]
        """(path, FileInfo) in ``__iter__``'s order, walking the arrays (no lookup a file)."""
        for directory in sorted(self._dirs, key=lambda d: d.rstrip("/") + "/"):
            d = self._dirs[directory]
            etags = d.etags
            for i, path in enumerate(d.paths):
                yield path, FileInfo(path, d.sizes[i], d.mtimes[i], etags[i] if etags is not None else "")

    def values(self) -> Iterator[FileInfo]:  # type: ignore[override]
        return (info for _, info in self.items())


class Cursor:
    """``FileTable.find`` for paths asked for in increasing order (a sorted list of references, a sorted
    report): per directory a position that moves forward a step or two a path instead of a binary search
    over millions of paths each time. Any order still gets the right answer (a step back searches)."""

    __slots__ = ("at", "table")

    def __init__(self, table: FileTable):
        self.table = table
        self.at: dict[str, int] = {}

    def find(self, path: str) -> tuple[DirFiles, int] | None:
        head = path.rpartition("/")[0] or "/"
        d = self.table.files_in(head)
        if d is None:
            return None
        paths = d.paths
        n = len(paths)
        i = self.at.get(head, 0)
        if i and (i > n or paths[i - 1] >= path):  # asked out of order: search from the start
            i = bisect_left(paths, path)
        else:
            stop = min(n, i + 8)
            while i < stop and paths[i] < path:
                i += 1
            if i < n and paths[i] < path:
                i = bisect_left(paths, path, i)
        found = i < n and paths[i] == path
        self.at[head] = i + 1 if found else i
        return (d, i) if found else None

    def size(self, path: str) -> int | None:
        found = self.find(path)
        return None if found is None else found[0].sizes[found[1]]
