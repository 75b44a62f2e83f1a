"""Where a dataset lives: a local path, a ``file:`` URI (as Flink reports paths), or any filesystem
PyArrow reaches (``s3://``, ``gs://``, ``hdfs://``, ...).

Spark reads only local files here: its S3 connector (hadoop-aws and the AWS SDK bundle, about
300 MB of jars that must match Spark's Hadoop build) is not on PyPI, so ``pip install`` cannot
provide it. A remote dataset is therefore listed and copied through PyArrow's filesystem
(``pyarrow.fs``, which pages through listings of any size) into a temporary local directory that
lives as long as the validation, then read by Spark like any local dataset. Hidden and pending
files (names starting with ``.`` or ``_``, FileSink's ``.part-*.inprogress.*``) are never copied.
It costs local disk equal to the dataset's size.

S3 credentials, region and endpoint are the usual ones: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_SESSION_TOKEN, AWS_PROFILE, AWS_REGION or AWS_DEFAULT_REGION, and AWS_ENDPOINT_URL_S3 or
AWS_ENDPOINT_URL for an S3-compatible store (MinIO, Ceph, moto); ``--endpoint-url`` wins over the
environment.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from cutcheck.model.errors import LogDataError

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
CHUNK = 8 << 20


def is_remote(text: str) -> bool:
    m = _URI.match(text)
    return m is not None and m.group(1).lower() != "file"


def local_path(text: str | os.PathLike[str]) -> Path:
    """A local path; ``file:/x``, ``file:///x`` and ``file://localhost/x`` are the path ``/x``."""
    s = os.fspath(text)
    if not s.lower().startswith("file:"):
        return Path(s)
    u = urlparse(s)
    if u.netloc not in ("", "localhost"):
        raise LogDataError(f"{s} names the host {u.netloc!r}; a file: URI must name a local path, like file:/data/out.")
    return Path(unquote(u.path))


def committed(relative: str) -> bool:
    """A file a validation reads: no path part hidden (``.``/``_``), not a FileSink in-progress or pending file."""
    parts = relative.replace("\\", "/").split("/")
    return not any(p.startswith((".", "_")) for p in parts) and ".inprogress" not in parts[-1]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300].rstrip(".")


def _s3(endpoint: str | None) -> Any:
    from pyarrow import fs as pafs

    endpoint = endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    kwargs: dict[str, Any] = {}
    if endpoint:
        u = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
        if not u.netloc:
            raise LogDataError(f"--endpoint-url {endpoint} is not an address; give one like http://localhost:9000.")
        kwargs.update(endpoint_override=u.netloc, scheme=u.scheme or "https")
    if region or endpoint:
        kwargs["region"] = region or "us-east-1"
    return pafs.S3FileSystem(**kwargs)


def filesystem(uri: str, endpoint: str | None = None) -> tuple[Any, str]:
    """(PyArrow filesystem, path within it) for a remote URI."""
    from pyarrow import fs as pafs

    scheme = uri.split("://", 1)[0].lower()
    try:
        if scheme in ("s3", "s3a", "s3n"):
            return _s3(endpoint), uri.split("://", 1)[1].rstrip("/")
        return pafs.FileSystem.from_uri(uri)
    except LogDataError:
        raise
    except (OSError, ValueError, ImportError) as exc:
        raise LogDataError(
            f"{uri}: PyArrow cannot open this filesystem ({_first_line(exc)}); validate reads local paths, "
            "file: URIs and the filesystems pyarrow.fs provides (s3://, gs://, hdfs://)."
        ) from None


@dataclass(frozen=True, slots=True)
class Staged:
    """A remote dataset copied to ``path`` (a local directory, or a file for a single remote file)."""

    uri: str
    path: Path
    files: int
    bytes: int


def stage(name: str, uri: str, into: Path, endpoint: str | None = None) -> Staged:
    """Copy the committed files of the remote dataset ``uri`` into the new local directory ``into``."""
    from pyarrow import fs as pafs

    fs, root = filesystem(uri, endpoint)
    try:
        info = fs.get_file_info(root)
        if info.type == pafs.FileType.NotFound:
            raise LogDataError(f"{name} dataset {uri} does not exist; pass an existing file or directory.")
        if info.type == pafs.FileType.File:
            listing = [info]
            base = root.rsplit("/", 1)[0]
        else:
            listing = fs.get_file_info(pafs.FileSelector(root, recursive=True))
            base = root
        into.mkdir(parents=True, exist_ok=True)
        files = size = 0
        for f in sorted(listing, key=lambda i: i.path):
            rel = f.path[len(base):].lstrip("/")
            if f.type != pafs.FileType.File or not committed(rel):
                continue
            target = into / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with fs.open_input_stream(f.path) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, CHUNK)
            if f.mtime_ns:  # keep commit order by modification time
                os.utime(target, ns=(f.mtime_ns, f.mtime_ns))
            files += 1
            size += f.size or 0
    except LogDataError:
        raise
    except OSError as exc:
        raise LogDataError(f"{name} dataset {uri} cannot be read ({_first_line(exc)}).") from None
    path = into / listing[0].path[len(base):].lstrip("/") if info.type == pafs.FileType.File else into
    return Staged(uri, path, files, size)
