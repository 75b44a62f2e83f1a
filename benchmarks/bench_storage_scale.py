"""`cutcheck storage ls` and `storage orphans` on large checkpoint bases, against what merely listing costs.

Builds a synthetic local checkpoint base of N files (default 10^4 and 10^5; ``--sizes 1000000`` for the
acceptance case) laid out as Flink writes an incremental RocksDB job: ``<base>/<job>/chk-{1,2,3}/_metadata``
in Flink's binary format (version 6, Flink 2.x: INCREMENTAL_V2 handles whose shared SST files are
``file:`` URIs), one private file per checkpoint, and the rest in ``<job>/shared/``. The three checkpoints
reference overlapping windows of the shared files (each shares half its files with the next, as retained
incremental checkpoints do), 90 % of the files in all; the other 10 % are orphans, two days old.

Prints one JSON line per figure:

* ``find_wc`` (local): ``find BASE | wc -l``, the baseline (the fastest of three: wall and CPU seconds);
* ``ls``, ``orphans`` (local): ``python -m cutcheck storage ls|orphans BASE`` in a child process (output to
  /dev/null; ``orphans`` without --delete never stats the referenced files of ``shared/``, ``ls`` prints their
  sizes): wall and CPU (user + system) seconds, peak RSS, exit code, and ``over_find`` and
  ``cpu_over_find``, the ratios to ``find_wc`` of the same tree measured in the same run (on a loaded
  machine the CPU ratio is the steadier one);
* ``listing_split``, ``listing_one_process`` (local): in a child process, only the listing of the base
  (reference.storage.local_scan), a large directory's ``lstat`` calls shared with a forked child as the
  commands do, then all in one process (``SPLIT`` raised past the directory's size); CPU includes the
  forked child's; on a loaded machine the wall-clock difference is the second process's share;
* ``orphans_delete_plan`` (local): in a child process, what ``orphans --delete`` decides before it moves
  anything (the inspection with the default --min-age 1h, and a reason per orphan);
* ``orphans_delete``, ``restore_quarantine``, ``after_restore`` (local, with ``--delete``): ``orphans --delete``
  moving every orphan into the quarantine, then ``restore-quarantine`` putting them back, each in a child
  process; ``after_restore`` checks that ``find`` counts the same lines as before;
* ``s3_list`` and ``s3_inspect`` (with ``--s3``; sizes up to ``--s3-max``, default 10^5): the same layout as
  objects on a local moto S3 server (tests/reference/s3_server.py's kind), a plain paged boto3 ListObjectsV2
  of the prefix (1000 keys a page) against ``inspect`` of ``s3://bucket/ckpts`` in this process; the server's
  own time (it scans the bucket for every page) dominates both.

    python benchmarks/bench_storage_scale.py                      # 10^4 and 10^5, local
    python benchmarks/bench_storage_scale.py --sizes 1000000      # the acceptance case (about 4 GB of inodes)
    python benchmarks/bench_storage_scale.py --sizes 10000,100000 --s3
    python benchmarks/bench_storage_scale.py --sizes 100000 --delete  # also --delete and restore-quarantine
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

JOB = "d0c5c2f0a3a24b0e9f1b7c3e5a6d8e01"
CHECKPOINTS = 3
SUBTASKS = 64
REFERENCED = 0.9
ORPHAN_AGE = 2 * 86400.0
MAGIC, VERSION = 0x4960672D, 6
NULL, FILE, INCREMENTAL_V2 = 0, 2, 11
PROPERTIES = (b"\xac\xed\x00\x05sr\x00;org.apache.flink.runtime.checkpoint.CheckpointProperties"
              b"sr\x001org.apache.flink.runtime.checkpoint.CheckpointType")


# -- the synthetic base -----------------------------------------------------------------------------
def _utf(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">H", len(raw)) + raw


def _file_handle(uri: str, size: int) -> bytes:
    return bytes([FILE]) + struct.pack(">q", size) + _utf(uri)


def flink_metadata(cp: int, subtasks: list[tuple[str, list[str], list[str]]], size: int) -> bytes:
    """Flink's ``_metadata`` (format 6) of one keyed operator: per subtask its RocksDB metadata file, shared
    SST files and private files, each named by an absolute URI as Flink writes it."""
    out = bytearray(struct.pack(">iiq", MAGIC, VERSION, cp))
    out += struct.pack(">i", 0)  # no master states
    out += struct.pack(">i", 1)  # one operator
    out += _utf("count") + _utf("") + struct.pack(">qqii", 1, 2, len(subtasks), 128) + bytes([NULL])
    out += struct.pack(">i", len(subtasks))
    for index, (meta, shared, private) in enumerate(subtasks):
        out += struct.pack(">iii", index, 0, 0)  # no operator state
        out += bytes([INCREMENTAL_V2]) + struct.pack(">q", cp) + _utf("backend") + struct.pack(">iiq", 0, 127, size)
        out += _file_handle(meta, size)
        for files in (shared, private):
            out += struct.pack(">i", len(files))
            for n, f in enumerate(files):
                out += _utf(f"{n:06d}.sst") + _file_handle(f, size)
        out += _utf(f"handle-{cp}-{index}") + bytes([NULL]) + struct.pack(">ii", 0, 0)
    return bytes(out + PROPERTIES)


def layout(n: int, prefix: str) -> tuple[list[str], dict[int, list[str]], list[str]]:
    """(every data file, the files each checkpoint references, the orphans), as paths under ``prefix``.

    Of the ``n`` files, ``CHECKPOINTS`` are _metadata and ``CHECKPOINTS`` private files; the shared files
    0..r (r = 90 % of n) are referenced by windows that overlap by half; the rest are orphans."""
    job = f"{prefix}/{JOB}"
    data_files = n - CHECKPOINTS
    rng = random.Random(n)  # names like Flink's (random UUIDs), the same for every run of one size
    shared = [f"{job}/shared/{uuid.UUID(int=rng.getrandbits(128), version=4)}" for _ in range(data_files - CHECKPOINTS)]
    referenced = int(n * REFERENCED) - 2 * CHECKPOINTS
    window = 2 * referenced // (CHECKPOINTS + 1)
    step = window // 2
    refs: dict[int, list[str]] = {}
    privates = []
    for cp in range(1, CHECKPOINTS + 1):
        private = f"{job}/chk-{cp}/{uuid.UUID(int=rng.getrandbits(128), version=4)}"
        privates.append(private)
        end = referenced if cp == CHECKPOINTS else (cp - 1) * step + window
        refs[cp] = [private, *shared[(cp - 1) * step:end]]
    return [*shared, *privates], refs, shared[referenced:]


def subtasks_of(files: list[str], scheme: str) -> list[tuple[str, list[str], list[str]]]:
    """The checkpoint's files dealt to ``SUBTASKS`` subtasks (the private file is the first one's metadata file)."""
    private, shared = files[0], files[1:]
    out = []
    for s in range(SUBTASKS):
        part = shared[s::SUBTASKS]
        meta = private if s == 0 else (part[0] if part else private)
        out.append((scheme + meta, [scheme + f for f in part], []))
    return out


def build_local(base: str, n: int) -> dict[str, int]:
    every, refs, orphans = layout(n, base)
    payload = b"sst"
    made: set[str] = set()
    for path in every:
        d = path.rpartition("/")[0]
        if d not in made:
            os.makedirs(d, exist_ok=True)
            made.add(d)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, payload)
        os.close(fd)
    old = time.time() - ORPHAN_AGE
    for path in orphans:
        os.utime(path, (old, old))
    for cp, files in refs.items():
        meta = f"{base}/{JOB}/chk-{cp}/_metadata"
        with open(meta, "wb") as fh:
            fh.write(flink_metadata(cp, subtasks_of(files, "file:"), len(payload)))
    return {"files": len(every) + len(refs), "orphans": len(orphans),
            "referenced": len({f for files in refs.values() for f in files})}


# -- measuring --------------------------------------------------------------------------------------
def child(args: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[float, float, int, float]:
    """Wall seconds, peak RSS in MB, exit code and CPU seconds (user and system) of a child process (output
    discarded; killed after ``timeout``)."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, env=env)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    return (time.perf_counter() - start, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status),
            usage.ru_utime + usage.ru_stime)


def find_wc(base: str) -> tuple[float, int, float]:
    """Wall seconds, lines, and CPU seconds of ``find BASE | wc -l`` (the shell, find and wc)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(f"find {base} | wc -l", shell=True, capture_output=True, text=True, check=True).stdout
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, int(out.strip()), after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def _figure(name: str, run: tuple[float, float, int, float], baseline: tuple[float, float], timeout: float,
            common: dict[str, Any]) -> str:
    """One JSON line: wall and CPU seconds, each also as a ratio to find's (on a loaded machine the CPU ratio
    is the steadier one: other processes' load stretches wall time, not CPU time)."""
    seconds, rss, code, cpu = run
    return json.dumps({"figure": name, "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
                       "peak_rss_mb": round(rss), "exit": code, "over_find": round(seconds / baseline[0], 1),
                       "cpu_over_find": round(cpu / baseline[1], 1), "timed_out": seconds >= timeout, **common})


_PLAN = """
import sys, time
from functools import partial
from cutcheck.reference.storage.flink_metadata import any_referenced_files
any_referenced_files = partial(any_referenced_files, sort=False)  # as the CLI reads them
from cutcheck.reference.storage.guard import orphan_reasons
from cutcheck.reference.storage.inspection import inspect
listing = inspect(sys.argv[1], any_referenced_files, min_age=3600)
reasons = orphan_reasons(listing, listing.orphans)
assert len(reasons) == int(sys.argv[2]), (len(reasons), sys.argv[2])
"""


_LISTING = """
import sys
from cutcheck.reference.storage import local_scan
from cutcheck.reference.storage.traversal import cyclic_gc_paused
if sys.argv[2] == "one":
    local_scan.SPLIT = 1 << 62
with cyclic_gc_paused():
    assert sum(len(f.paths) for _, f in local_scan.scan_local(sys.argv[1])) > 0
"""


def local_figures(n: int, timeout: float, keep: bool, reuse: str | None = None, delete: bool = False) -> None:
    tmp = reuse or tempfile.mkdtemp(prefix="cutcheck-bench-storage-")
    base = f"{tmp}/ckpts"
    keep = keep or reuse is not None
    try:
        start = time.perf_counter()
        if reuse and os.path.isdir(base):  # a base an earlier run kept (--keep): the same files, not built again
            every, refs, orphans = layout(n, base)
            shape = {"files": len(every) + len(refs), "orphans": len(orphans),
                     "referenced": len({f for files in refs.values() for f in files})}
        else:
            shape = build_local(base, n)
        common = {"n": n, **shape, "layout": f"{CHECKPOINTS} incremental checkpoints, {int(REFERENCED * 100)} % referenced"}
        print(json.dumps({"figure": "build", "seconds": round(time.perf_counter() - start, 1), **common}), flush=True)
        find_wc(base)  # the same warm cache for every figure
        runs = [find_wc(base) for _ in range(3)]
        wall, lines, _ = min(runs)
        baseline = (wall, min(cpu for _, _, cpu in runs))
        print(json.dumps({"figure": "find_wc", "seconds": round(wall, 3), "cpu_seconds": round(baseline[1], 3),
                          "lines": lines, **common}), flush=True)
        runs_of = {"ls": ["storage", "ls", base], "orphans": ["storage", "orphans", base]}
        for name, args in runs_of.items():
            print(_figure(name, child([sys.executable, "-m", "cutcheck", *args], timeout), baseline, timeout, common),
                  flush=True)
        for name, how in (("listing_split", "split"), ("listing_one_process", "one")):
            print(_figure(name, child([sys.executable, "-c", _LISTING, base, how], timeout), baseline, timeout, common),
                  flush=True)
        plan = child([sys.executable, "-c", _PLAN, base, str(shape["orphans"])], timeout)
        print(_figure("orphans_delete_plan", plan, baseline, timeout, common), flush=True)
        if delete:  # then moved into the quarantine and put back: the base is as it was afterwards
            for name, args in {"orphans_delete": ["storage", "orphans", base, "--delete"],
                               "restore_quarantine": ["storage", "restore-quarantine", base]}.items():
                print(_figure(name, child([sys.executable, "-m", "cutcheck", *args], timeout), baseline, timeout,
                              common), flush=True)
            _, lines_after, _ = find_wc(base)
            print(json.dumps({"figure": "after_restore", "lines": lines_after, "same": lines_after == lines, **common}),
                  flush=True)
    finally:
        if keep:
            print(json.dumps({"figure": "kept", "base": base}), flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


# -- S3 (a local moto server) -----------------------------------------------------------------------
def _moto() -> Iterator[tuple[str, Any]]:
    import socket

    import boto3
    from moto.server import ThreadedMotoServer

    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        yield endpoint, boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    finally:
        server.stop()


def s3_figures(sizes: list[int]) -> None:
    import logging

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    from cutcheck.reference.storage.inspection import inspect
    from cutcheck.reference.storage.s3 import S3Store

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    for endpoint, client in _moto():
        for n in sizes:
            bucket = f"bench-{n}"
            client.create_bucket(Bucket=bucket)
            backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
            every, refs, orphans = layout(n, "ckpts")
            for key in every:  # straight into the server's store: the objects a PUT makes, without n requests
                backend.put_object(bucket, key, b"sst")
            for cp, files in refs.items():
                client.put_object(Bucket=bucket, Key=f"ckpts/{JOB}/chk-{cp}/_metadata",
                                  Body=flink_metadata(cp, subtasks_of([f"{bucket}/{f}" for f in files], "s3://"), 3))
            common = {"n": n, "files": len(every) + len(refs), "orphans": len(orphans)}
            start = time.perf_counter()
            listed = 0
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="ckpts/",
                                                                          PaginationConfig={"PageSize": 1000}):
                listed += len(page.get("Contents", []))
            plain = time.perf_counter() - start
            print(json.dumps({"figure": "s3_list", "seconds": round(plain, 2), "objects": listed, **common}), flush=True)
            store = S3Store(endpoint)
            start = time.perf_counter()
            listing = inspect(f"/{bucket}/ckpts", store=store, min_age=0)
            seconds = time.perf_counter() - start
            assert len(listing.orphans) == len(orphans), (len(listing.orphans), len(orphans))
            print(json.dumps({"figure": "s3_inspect", "seconds": round(seconds, 2), "requests": store.requests,
                              "over_list": round(seconds / plain, 2), **common}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="files per base, comma-separated")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds before a command is killed")
    ap.add_argument("--s3", action="store_true", help="also measure on a local moto S3 server")
    ap.add_argument("--s3-max", type=int, default=100_000, help="largest base put on the S3 server")
    ap.add_argument("--local", action=argparse.BooleanOptionalAction, default=True, help="measure the local figures")
    ap.add_argument("--delete", action="store_true",
                    help="also time `orphans --delete` then `restore-quarantine` (the base is put back)")
    ap.add_argument("--keep", action="store_true", help="keep the local bases (their paths are printed)")
    ap.add_argument("--reuse", help="a directory an earlier --keep run printed: measure its base again (one size)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x]
    if args.local:
        for n in sizes:
            local_figures(n, args.timeout, args.keep, args.reuse, args.delete)
    if args.s3:
        s3_figures([n for n in sizes if n <= args.s3_max])


if __name__ == "__main__":
    main()
