"""Moving one file into a local quarantine batch and back (reference.storage.quarantine): never overwriting,
a hard link then an unlink where the file system allows, else a copy that is checked before the original goes."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil

from cutcheck.model.errors import StorageError


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _move(src: str, dst: str) -> str:
    """Move without ever overwriting ``dst``: a hard link then unlink, else copy (exclusive), check, remove.
    Returns "" when it linked (the same file: its bytes are never read), else the sha256 of the bytes copied.

    FileNotFoundError when ``src`` is gone, with nothing left at ``dst``: a concurrent --delete that
    moved the same file first wins, and this one keeps no second copy of it."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    digest = ""
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
        try:
            h = hashlib.sha256()
            with open(src, "rb") as fin, open(dst, "xb") as fout:
                for chunk in iter(lambda: fin.read(1 << 20), b""):
                    h.update(chunk)
                    fout.write(chunk)
            shutil.copystat(src, dst)
            digest = h.hexdigest()
        except FileNotFoundError:
            if os.path.exists(dst) and not os.path.exists(src):
                os.remove(dst)
            raise
        if os.path.getsize(dst) != os.path.getsize(src):
            os.remove(dst)
            raise StorageError(f"{src}: the copy to {dst} came out short; nothing was removed.") from None
    try:
        os.remove(src)
    except FileNotFoundError:
        os.remove(dst)  # another run unlinked it between our link and our unlink: its batch holds it
        raise
    return digest


def _links_work(batch: str) -> bool:
    """Whether the batch's file system makes hard links (some refuse them: the files are then copied)."""
    probe = os.path.join(batch, ".link-probe")
    try:
        with open(probe, "x"):
            pass
        os.link(probe, probe + "-2")
        os.remove(probe + "-2")
        return True
    except OSError:
        return False
    finally:
        if os.path.exists(probe):
            os.remove(probe)
