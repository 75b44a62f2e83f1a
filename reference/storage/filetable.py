"""Every file a listing found, held compactly: a base of millions of files must fit in memory once.

A ``FileTable`` groups the files by directory. Per directory it keeps the names (sorted, one ``str``
each), and the sizes and modification times in typed arrays (8 bytes a number, not a Python object);
an object store's ETags are kept only when the store gives them. The full path of a file exists as a
string only while someone asks for it. About 110 bytes a file for 36-character names, against about
450 for a ``dict[str, FileInfo]``.

It is a read-only ``Mapping[str, FileInfo]`` (internal paths, sorted by path) so that the callers that
looked files up in the old dictionary keep working; ``size``/``mtime``/``contains`` answer without
building a FileInfo, and ``directories()`` walks the table a directory at a time.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from cutcheck.reference.storage.store import FileInfo


@dataclass(slots=True)
class DirFiles:
    """The files directly in one directory: parallel sequences, sorted by name."""

    names: list[str]
    sizes: array  # 'q'
    mtimes: array  # 'd'
    etags: list[str] | None = None

    def index(self, name: str) -> int:
        i = bisect_left(self.names, name)
        return i if i < len(self.names) and self.names[i] == name else -1


def dir_files(names: Sequence[str], sizes: Sequence[int], mtimes: Sequence[float],
              etags: Sequence[str] | None = None) -> DirFiles:
    """The files of one directory, sorted by name (the inputs in any order)."""
    order = sorted(range(len(names)), key=names.__getitem__)
    return DirFiles([names[i] for i in order], array("q", [sizes[i] for i in order]),
                    array("d", [mtimes[i] for i in order]), [etags[i] for i in order] if etags is not None else None)


def split(path: str) -> tuple[str, str]:
    """(directory, name) of an internal path, as posixpath.split without normalising."""
    head, _, name = path.rpartition("/")
    return head or "/", name


class FileTable(Mapping[str, FileInfo]):
    """Files by directory (see the module docstring). ``add`` a directory's files; later adds of the same
    directory merge (entropy roots and the root may overlap)."""

    __slots__ = ("_dirs", "_count")

    def __init__(self) -> None:
        self._dirs: dict[str, DirFiles] = {}
        self._count = 0

    def add(self, directory: str, files: DirFiles) -> None:
        if not files.names:
            return
        old = self._dirs.get(directory)
        if old is None:
            self._dirs[directory] = files
            self._count += len(files.names)
            return
        seen = set(old.names)
        fresh = [i for i, n in enumerate(files.names) if n not in seen]
        if not fresh:
            return
        etags = None if old.etags is None or files.etags is None else [*old.etags, *(files.etags[i] for i in fresh)]
        merged = dir_files([*old.names, *(files.names[i] for i in fresh)],
                           [*old.sizes, *(files.sizes[i] for i in fresh)],
                           [*old.mtimes, *(files.mtimes[i] for i in fresh)], etags)
        self._dirs[directory] = merged
        self._count += len(fresh)

    # -- lookups without a FileInfo -------------------------------------------------------------
    def _find(self, path: str) -> tuple[DirFiles, int] | None:
        head, name = split(path)
        d = self._dirs.get(head)
        if d is None:
            return None
        i = d.index(name)
        return (d, i) if i >= 0 else None

    def contains(self, path: str) -> bool:
        return self._find(path) is not None

    def size(self, path: str) -> int | None:
        found = self._find(path)
        return None if found is None else found[0].sizes[found[1]]

    def mtime(self, path: str) -> float | None:
        found = self._find(path)
        return None if found is None else found[0].mtimes[found[1]]

    def has_dir(self, directory: str) -> bool:
        return directory in self._dirs

    def names(self, directory: str) -> list[str]:
        d = self._dirs.get(directory)
        return [] if d is None else d.names

    def drop_under(self, root: str) -> None:
        """Forget the files at or under ``root`` (a directory listed again)."""
        for directory in list(self.under(root)):
            self._count -= len(self._dirs.pop(directory).names)

    def directories(self) -> Iterator[tuple[str, DirFiles]]:
        """(directory, its files), directories sorted."""
        for directory in sorted(self._dirs):
            yield directory, self._dirs[directory]

    def paths(self, directory: str) -> Iterator[str]:
        d = self._dirs.get(directory)
        prefix = directory.rstrip("/") + "/"
        return iter(()) if d is None else (prefix + n for n in d.names)

    def under(self, root: str) -> Iterator[str]:
        """The directories at or under ``root``."""
        head = root.rstrip("/") + "/"
        return (d for d in self._dirs if d == root or d.startswith(head))

    # -- the Mapping ----------------------------------------------------------------------------
    def __getitem__(self, path: str) -> FileInfo:
        found = self._find(path)
        if found is None:
            raise KeyError(path)
        d, i = found
        return FileInfo(path, d.sizes[i], d.mtimes[i], d.etags[i] if d.etags is not None else "")

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self._find(path) is not None

    def __iter__(self) -> Iterator[str]:
        """Every path: directories in the order of their paths, and each directory's files by name."""
        for directory in sorted(self._dirs, key=lambda d: d.rstrip("/") + "/"):
            yield from self.paths(directory)

    def __len__(self) -> int:
        return self._count

    def sorted_paths(self) -> list[str]:
        return sorted(self)
