"""The deletion-safety classes of issue 26 on the S3 test server (tests/reference/s3_server.py): every
object's content hashed before and after, only what may go moved, and a restore gives the bucket back.

* a guessed data root: an entropy-shaped prefix (prod/) holding another environment's checkpoints;
* in progress: a chk-N newer than the newest completed checkpoint, and a fresh shared object;
* a broken checkpoint set aside with quarantine-checkpoint, then orphans --delete runs;
* a --delete whose DeleteObjects request is cut short: the restore puts back exactly what went."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cutcheck.cli import app
from tests.reference.s3_server import S3, _free_port, backend, flink_metadata, s3_fixture, s3_server_fixture  # noqa: F401
from tests.reference.test_storage_cli import JOB, assert_user_error
from tests.reference.test_storage_s3 import flink_job

runner = CliRunner()
logging.getLogger("werkzeug").setLevel(logging.ERROR)


def objects(bucket: str) -> dict[str, str]:
    """sha256 of every object's content (the quarantine included)."""
    return {k: hashlib.sha256(o.value).hexdigest() for k, o in backend().get_bucket(bucket).keys.items()}


def outside(hashes: dict[str, str]) -> dict[str, str]:
    return {k: h for k, h in hashes.items() if ".cutcheck-quarantine" not in k}


def stamp(bucket: str, keys: list[str] | None = None, days: float = 2) -> None:
    """One LastModified for the keys (default: all), ``days`` ago."""
    when = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(days=days)
    found = backend().get_bucket(bucket).keys
    for k in keys if keys is not None else list(found.keys()):
        found[k].last_modified = when


def storage(*args: str) -> object:
    return runner.invoke(app, ["storage", *args])


def restore_all(uri: str) -> None:
    while True:
        back = storage("restore-quarantine", uri)
        if back.exit_code != 0:
            assert "holds no .cutcheck-quarantine" in back.stderr or "no batch" in back.stderr, back.stderr
            return


def test_a_prefix_shaped_like_an_entropy_value_holding_checkpoints_is_never_touched(s3: S3) -> None:
    bucket = s3.bucket("guard-prod")
    job = f"ckpts/{JOB}"
    ours = [f"E7a{i}/{job}/shared/sst-{i}" for i in range(3)]
    s3.put(bucket, f"{job}/chk-7/_metadata", flink_metadata(7, [(f"s3://{bucket}/P7xy/{job}/chk-7/private",
                                                                 [f"s3://{bucket}/{k}" for k in ours], [])]))
    prod = [f"prod/{job}/shared/live-{i}" for i in range(3)] + [f"prod/{job}/chk-3/private"]
    s3.put(bucket, f"prod/{job}/chk-3/_metadata", flink_metadata(3, [(f"s3://{bucket}/{prod[-1]}",
                                                                      [f"s3://{bucket}/{k}" for k in prod[:2]], [])]))
    for key in [*ours, f"P7xy/{job}/chk-7/private", *prod, f"prod/{job}/shared/prods-own-leftover",
                f"data/{job}-other-app/file"]:
        s3.put(bucket, key, key.encode())
    orphan = f"Zq9r/{job}/shared/aborted-upload"
    s3.put(bucket, orphan, b"stale")
    stamp(bucket)
    stamp(bucket, [orphan], days=3)
    before = objects(bucket)
    where = f"s3://{bucket}/_entropy_/ckpts"
    ls = storage("ls", where)
    assert ls.exit_code == 0 and f"s3://{bucket}/prod/ckpts is named like an entropy prefix" in ls.stdout, ls.stdout
    done = storage("orphans", where, "--delete", "--min-age", "0")
    assert done.exit_code == 0 and "moved 1 file(s)" in done.stdout, done.stdout + done.stderr
    after = objects(bucket)
    assert outside(after) == {k: h for k, h in before.items() if k != orphan}
    assert storage("ls", f"s3://{bucket}/prod/ckpts").exit_code == 0
    restore_all(f"s3://{bucket}/ckpts")
    assert objects(bucket) == before


def test_in_progress_objects_stay_without_force(s3: S3) -> None:
    bucket = s3.bucket("guard-progress")
    roles = flink_job(s3, bucket)
    stamp(bucket)
    running = [f"ckpts/{JOB}/chk-7/private-7", f"ckpts/{JOB}/shared/sst-new"]
    for key in running:
        s3.put(bucket, key, b"uploading")
    stamp(bucket, running[:1], days=3)  # old by the clock: the chk-N number alone says in progress
    before = objects(bucket)
    for min_age in ("1h", "0"):  # the two old orphans go with --min-age 0; the running ones never
        kept = storage("orphans", f"s3://{bucket}/ckpts", "--delete", "--min-age", min_age)
        assert kept.exit_code == 0 and "never moved without --force" in kept.stdout, kept.stdout + kept.stderr
        assert {k: before[k] for k in running} == {k: h for k, h in objects(bucket).items() if k in running}
    assert not set(roles["orphans"]) & set(objects(bucket))  # the two old orphans went with the first run
    forced = storage("orphans", f"s3://{bucket}/ckpts", "--delete", "--min-age", "0", "--force")
    assert forced.exit_code == 0 and "moved 2 file(s)" in forced.stdout, forced.stdout
    assert not set(running) & set(outside(objects(bucket)))
    restore_all(f"s3://{bucket}/ckpts")
    assert objects(bucket) == before


def test_a_broken_checkpoint_is_set_aside_then_orphans_run(s3: S3, tmp_path: Path) -> None:
    bucket = s3.bucket("guard-broken")
    roles = flink_job(s3, bucket)
    s3.client.delete_object(Bucket=bucket, Key=f"ckpts/{JOB}/shared/sst-1")  # only chk-5 names it
    stamp(bucket)
    before = objects(bucket)
    base = f"s3://{bucket}/ckpts"
    refused = storage("orphans", base, "--delete", "--min-age", "0")
    assert_user_error(refused, "can never be restored", f"storage quarantine-checkpoint {base}/{JOB}/chk-5")
    assert objects(bucket) == before
    aside = storage("quarantine-checkpoint", f"{base}/{JOB}/chk-5", "--json", str(tmp_path / "a.json"))
    assert aside.exit_code == 0, aside.stdout + aside.stderr
    moved = sorted(m["original"] for m in json.loads((tmp_path / "a.json").read_text())["quarantine"]["files"])
    assert moved == [f"{base}/{JOB}/chk-5/{n}" for n in ("_metadata", "meta-5", "private-5")]
    assert storage("ls", base).exit_code == 0
    done = storage("orphans", base, "--delete", "--min-age", "0")
    assert done.exit_code == 0 and "moved 2 file(s)" in done.stdout, done.stdout + done.stderr
    assert set(roles["referenced"]) - {f"ckpts/{JOB}/shared/sst-1", *(k for k in roles["referenced"] if "chk-5" in k)} \
        <= set(objects(bucket))
    restore_all(base)
    assert objects(bucket) == before


def test_a_delete_request_cut_short_restores_exactly_what_went(s3: S3, monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    from cutcheck.reference.storage.s3 import S3Store

    bucket = s3.bucket("guard-cut")
    roles = flink_job(s3, bucket)
    stamp(bucket)
    before = objects(bucket)
    real = S3Store.delete

    def cut(self: S3Store, paths: list[str]) -> list[str]:
        if any(".cutcheck-quarantine" in p for p in paths):
            return real(self, paths)
        real(self, sorted(paths)[:1])  # the first object went, then the connection dropped
        raise KeyboardInterrupt

    monkeypatch.setattr(S3Store, "delete", cut)
    assert storage("orphans", f"s3://{bucket}/ckpts", "--delete", "--min-age", "0").exit_code == 130
    monkeypatch.setattr(S3Store, "delete", real)
    gone = sorted(set(roles["orphans"]) - set(objects(bucket)))
    assert len(gone) == 1
    back = storage("restore-quarantine", f"s3://{bucket}/ckpts", "--json", str(tmp_path / "r.json"))
    assert back.exit_code == 0 and "restored 1 file(s)" in back.stdout, back.stdout + back.stderr
    assert json.loads((tmp_path / "r.json").read_text())["restored"] == [f"s3://{bucket}/{gone[0]}"]
    assert objects(bucket) == before
