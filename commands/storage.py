"""Checkpoint directories: storage ls, storage orphans."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from cli import app, out, table, user_errors, write_json

storage_app = typer.Typer(help="Inspect checkpoint directories: checkpoints, shared files, orphans.", no_args_is_help=True)
app.add_typer(storage_app, name="storage")

_DIR_HELP = ("A checkpoint directory: the base (state.checkpoints.dir), a job directory or a chk-N directory. "
             "With entropy injection give the configured path, marker included.")


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _storage_listing(directory: Path, entropy_key: str, entropy_length: int) -> Any:
    """cutcheck's own _metadata is JSON; anything else is read as Flink's, through flink_bridge."""
    from reference.storage_inspect import inspect
    from reference.storage_meta import referenced_files

    reader: Any = referenced_files
    for d, _, files in os.walk(directory):
        if "_metadata" in files:
            with open(os.path.join(d, "_metadata"), "rb") as fh:
                if fh.read(1) != b"{":
                    from flink_bridge.checkpoints import any_referenced_files

                    reader = any_referenced_files
                    break
    return inspect(directory, reader, entropy=entropy_key or None, entropy_length=entropy_length)


def _namer(listing: Any) -> tuple[list[str], Callable[[str], str]]:
    """The jobs of a listing, and how to show its paths (relative to the job when there is one)."""
    jobs = sorted({c.job for c in listing.checkpoints if c.kind == "checkpoint"})
    return jobs, functools.partial(_label, root=listing.root, job=jobs[0] if len(jobs) == 1 else None)


def _label(path: str, root: str, job: str | None = None) -> str:
    """A path as people read it: relative to the root, and to the job directory when there is one job."""
    rel = os.path.relpath(path, root) if path.startswith(root + os.sep) else path
    return rel[len(job) + 1:] if job and rel.startswith(job + os.sep) else rel


@storage_app.command("ls")
@user_errors
def storage_ls(
    directory: Path = typer.Argument(..., help=_DIR_HELP),
    json_path: Path = typer.Option(None, "--json", help="Write the listing as JSON."),
    entropy_key: str = typer.Option("_entropy_", "--entropy-key", help="Entropy marker (s3.entropy.key) in DIR, if any."),
    entropy_length: int = typer.Option(4, "--entropy-length", help="s3.entropy.length."),
) -> None:
    """Checkpoints with their sizes, and for each shared file the checkpoints that reference it.

    Exit 1 when a checkpoint references a file that is missing (it cannot be restored)."""
    listing = _storage_listing(directory, entropy_key, entropy_length)
    jobs, name = _namer(listing)
    rows = [[name(c.path), _bytes(c.size), _bytes(c.new_size), f"{len(c.files['exclusive'])} / {len(c.files['shared'])}",
             _bytes(c.inlined_bytes), "ok" if not c.missing else f"{len(c.missing)} MISSING"]
            for c in listing.checkpoints]
    rows += [[name(os.path.dirname(u)), "", "", "", "", "unreadable"] for u in listing.unreadable]
    out.print(f"checkpoints in {listing.root}" + (f", job {jobs[0]}" if len(jobs) == 1 else ""), soft_wrap=True,
              highlight=False, markup=False)
    out.print(table("", ["checkpoint", "size", "new", "files excl. / shared", "inlined", "status"], rows))
    if listing.shared:
        by_path = {c.key: name(c.path) for c in listing.checkpoints}
        out.print(table("shared files", ["file", "size", "referenced by"],
                        [[name(f), _bytes(os.path.getsize(f)) if os.path.exists(f) else "missing",
                          ", ".join(by_path[k] for k in keys)] for f, keys in listing.shared.items()]))
    out.print(f"{len(listing.checkpoints)} checkpoint(s), {len(listing.shared)} shared file(s), "
              f"{len(listing.orphans)} orphan(s)" + (f" (cutcheck storage orphans {directory})" if listing.orphans else "")
              + (f", {len(listing.unreadable)} unreadable _metadata (so no orphans are named)" if listing.unreadable else ""),
              highlight=False, markup=False)
    write_json(json_path, listing.to_json())
    raise typer.Exit(1 if any(c.missing for c in listing.checkpoints) else 0)


@storage_app.command("orphans")
@user_errors
def storage_orphans(
    directory: Path = typer.Argument(..., help=_DIR_HELP),
    delete: bool = typer.Option(False, "--delete", help="Remove the orphans (default: only list them)."),
    json_path: Path = typer.Option(None, "--json", help="Write the orphans (and what was removed) as JSON."),
    entropy_key: str = typer.Option("_entropy_", "--entropy-key", help="Entropy marker (s3.entropy.key) in DIR, if any."),
    entropy_length: int = typer.Option(4, "--entropy-length", help="s3.entropy.length."),
) -> None:
    """Files no checkpoint in DIR references: leftovers of crashed or abandoned runs and of aborted
    checkpoints. Never a referenced file. A dry run unless --delete."""
    from model.errors import StorageError
    from reference.storage_inspect import delete_orphans, orphan_reason

    listing = _storage_listing(directory, entropy_key, entropy_length)
    if listing.unreadable:
        raise StorageError(f"{listing.unreadable[0]}: unreadable checkpoint metadata; it may reference any file, so "
                           f"no file can be called an orphan. Fix or remove it first.")
    sizes = {f: os.path.getsize(f) for f in listing.orphans if os.path.exists(f)}
    jobs, name = _namer(listing)
    reasons = {f: orphan_reason(listing, f) for f in listing.orphans}
    removed = delete_orphans(listing) if delete else []
    out.print(("removed" if delete else "orphans") + f" in {listing.root}" + (f", job {jobs[0]}" if len(jobs) == 1 else ""),
              soft_wrap=True, highlight=False, markup=False)
    out.print(table("", ["file", "size", "why"],
                    [[name(f), _bytes(sizes.get(f, 0)), reasons[f]]
                     for f in (removed if delete else listing.orphans)]))
    total = sum(sizes.get(f, 0) for f in (removed if delete else listing.orphans))
    if delete:
        out.print(f"removed {len(removed)} file(s), {_bytes(total)}; {len(listing.checkpoints)} checkpoint(s) untouched",
                  highlight=False, markup=False)
    else:
        out.print(f"{len(listing.orphans)} orphan(s), {_bytes(total)}; {len(listing.checkpoints)} checkpoint(s) "
                  f"reference every other file" + (" (--delete removes them)" if listing.orphans else ""),
                  highlight=False, markup=False)
    write_json(json_path, {"root": listing.root, "orphans": listing.orphans, "removed": removed,
                           "checkpoints": [c.key for c in listing.checkpoints]})
