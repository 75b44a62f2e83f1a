"""A real S3 API on localhost for the storage tests: moto's server mode (a PyPI package, the test
extra), started once per test module on a free port, with test credentials in the environment.
Also a builder of Flink-format ``_metadata`` (format version 6, as Flink 2.x writes it) whose
incremental RocksDB handles name ``s3://`` objects, and helpers to put many objects fast and to
age an object (moto keeps LastModified as a plain attribute). (No tests here.)"""

from __future__ import annotations

import datetime as dt
import os
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends
from moto.server import ThreadedMotoServer

from cutcheck.reference.storage import flink_metadata as mr

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


@dataclass(slots=True)
class S3:
    endpoint: str
    client: Any

    def bucket(self, name: str) -> str:
        self.client.create_bucket(Bucket=name)
        return name

    def put(self, bucket: str, key: str, data: bytes = b"x") -> None:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        out: list[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return sorted(out)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module", name="s3_server")
def s3_server_fixture() -> Iterator[S3]:
    saved = {k: os.environ.get(k) for k in [*CREDENTIALS, "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"]}
    os.environ.update(CREDENTIALS)
    for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        os.environ.pop(k, None)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        yield S3(endpoint, boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1"))
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(name="s3")
def s3_fixture(s3_server: S3, monkeypatch: pytest.MonkeyPatch) -> S3:
    """The server, with AWS_ENDPOINT_URL pointing at it (as a user would configure cutcheck)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    return s3_server


def backend() -> Any:
    return s3_backends[DEFAULT_ACCOUNT_ID]["aws"]


def put_many(bucket: str, keys: list[str], data: bytes = b"sst") -> None:
    """Objects straight into the server's store (the same objects a PUT makes, without 100k requests)."""
    b = backend()
    for key in keys:
        b.put_object(bucket, key, data)


def stored_keys(bucket: str, prefix: str = "") -> list[str]:
    """The keys the server holds, read from its store (a listing of 100k keys through the API takes a minute)."""
    return sorted(k for k in backend().get_bucket(bucket).keys if k.startswith(prefix))


def age(bucket: str, key: str, days: float) -> None:
    """Make an object look created ``days`` ago (its LastModified)."""
    obj = backend().get_bucket(bucket).keys[key]
    obj.last_modified = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(days=days)


# -- Flink _metadata (format 6) with incremental RocksDB handles ----------------------------------
def _utf(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">H", len(raw)) + raw


def _file(path: str, size: int = 3) -> bytes:
    return bytes([mr.FILE]) + struct.pack(">q", size) + _utf(path)


CHECKPOINT_PROPERTIES = (b"\xac\xed\x00\x05sr\x00;org.apache.flink.runtime.checkpoint.CheckpointProperties"
                         b"sr\x001org.apache.flink.runtime.checkpoint.CheckpointType")


def flink_metadata(cp: int, subtasks: list[tuple[str, list[str], list[str]]]) -> bytes:
    """``_metadata`` of checkpoint ``cp``: per subtask (its RocksDB metadata file, shared SST files, private files),
    every path as Flink writes it (absolute URIs)."""
    out = bytearray(struct.pack(">iiq", mr.MAGIC, 6, cp))
    out += struct.pack(">i", 0)  # master states
    out += struct.pack(">i", 1)  # one operator
    out += _utf("count") + _utf("") + struct.pack(">qqii", 1, 2, len(subtasks), 128) + bytes([mr.NULL])
    out += struct.pack(">i", len(subtasks))
    for index, (meta, shared, private) in enumerate(subtasks):
        out += struct.pack(">i", index) + struct.pack(">ii", 0, 0)  # no operator state
        out += bytes([mr.INCREMENTAL_V2]) + struct.pack(">q", cp) + _utf("backend") + struct.pack(">iiq", 0, 127, 10)
        out += _file(meta)
        for files in (shared, private):
            out += struct.pack(">i", len(files))
            for n, f in enumerate(files):
                out += _utf(f"{n:06d}.sst") + _file(f)
        out += _utf(f"handle-{cp}-{index}")
        out += bytes([mr.NULL]) + struct.pack(">ii", 0, 0)  # no raw keyed state, no channel state
    return bytes(out + CHECKPOINT_PROPERTIES)
