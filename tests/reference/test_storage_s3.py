"""`cutcheck storage ls/orphans/restore-quarantine/purge` on S3: a real S3 API (moto's server on a free
localhost port), Flink-format _metadata naming s3:// objects, cutcheck's own JSON _metadata uploaded
from a simulated run, the entropy-injected layout, the safety rules (refuse a prefix without a
completed checkpoint, --min-age on LastModified, a missing object makes a checkpoint NOT RESTORABLE
and blocks --delete, the quarantine is reversible), file: URIs, and store failures as one sentence."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.model.errors import StorageError
from cutcheck.reference.storage.inspection import inspect
from cutcheck.reference.storage.store import QUARANTINE_DIR, open_store
from tests.reference.s3_server import S3, _free_port, age, flink_metadata, s3_fixture, s3_server_fixture  # noqa: F401
from tests.reference.test_storage_cli import JOB, assert_user_error, simulated

runner = CliRunner()
logging.getLogger("werkzeug").setLevel(logging.ERROR)


def flink_job(s3: S3, bucket: str, base: str = "ckpts", scheme: str = "s3") -> dict[str, list[str]]:
    """Two retained incremental checkpoints (5 and 6) sharing SST files, plus the leftovers of a crash:
    an unreferenced shared file, a chk-4 without _metadata, a task-owned file. Returns the keys by role."""
    job = f"{base}/{JOB}"
    shared = [f"{job}/shared/sst-{i}" for i in range(5)]
    roles = {"referenced": [], "orphans": [f"{job}/shared/sst-0", f"{job}/chk-4/a1b2-private"],
             "taskowned": [f"{job}/taskowned/cl-1"]}
    metas = {}
    for cp, used in ((5, shared[1:4]), (6, shared[2:5])):
        meta, private = f"{job}/chk-{cp}/meta-{cp}", f"{job}/chk-{cp}/private-{cp}"
        roles["referenced"] += [meta, private, *used]
        metas[f"{job}/chk-{cp}/_metadata"] = flink_metadata(cp, [(f"{scheme}://{bucket}/{meta}", [
            f"{scheme}://{bucket}/{k}" for k in used], [f"{scheme}://{bucket}/{private}"])])
    for key in sorted({*roles["referenced"], *roles["orphans"], *roles["taskowned"]}):
        s3.put(bucket, key, b"state")
    for key, data in metas.items():  # _metadata last, as Flink writes it
        s3.put(bucket, key, data)
    roles["referenced"] = sorted(set(roles["referenced"]))
    return roles


def test_ls_orphans_quarantine_restore_and_purge_on_s3(s3: S3, tmp_path: Path) -> None:
    bucket = s3.bucket("flink-ck")
    roles = flink_job(s3, bucket, scheme="s3a")  # Hadoop's s3a:// names the same objects
    ls = runner.invoke(app, ["storage", "ls", f"s3://{bucket}/ckpts", "--json", str(tmp_path / "ls.json")])
    assert ls.exit_code == 0, ls.stdout + ls.stderr
    assert f"checkpoints in s3://{bucket}/ckpts, job {JOB}" in ls.stdout
    assert "2 checkpoint(s), 4 shared file(s), 2 orphan(s)" in ls.stdout
    data = json.loads((tmp_path / "ls.json").read_text())
    assert [c["restorable"] for c in data["checkpoints"]] == [True, True]
    assert sorted(data["orphans"]) == sorted(f"s3://{bucket}/{k}" for k in roles["orphans"])
    assert data["shared"][f"s3://{bucket}/ckpts/{JOB}/shared/sst-2"] == [f"{JOB}/chk-5", f"{JOB}/chk-6"]

    young = runner.invoke(app, ["storage", "orphans", f"s3://{bucket}/ckpts", "--delete"])  # default --min-age 1h
    assert young.exit_code == 0 and "moved 0 file(s)" in young.stdout and "2 too young" in young.stdout
    for key in roles["orphans"]:
        age(bucket, key, days=1)
    moved = runner.invoke(app, ["storage", "orphans", f"s3://{bucket}/ckpts", "--delete", "--json",
                                str(tmp_path / "o.json")])
    assert moved.exit_code == 0 and "moved 2 file(s)" in moved.stdout, moved.stdout + moved.stderr
    keys = s3.keys(bucket)
    assert not set(roles["orphans"]) & set(keys)
    assert set(roles["referenced"]) | set(roles["taskowned"]) <= set(keys)  # nothing needed was touched
    batch = json.loads((tmp_path / "o.json").read_text())["quarantine"]
    name = batch["path"].rsplit("/", 1)[1]
    assert sorted(k for k in keys if QUARANTINE_DIR in k and name in k) == sorted(
        [f"ckpts/{QUARANTINE_DIR}/{name}/manifest.json"] + [f"ckpts/{QUARANTINE_DIR}/{name}/files/{k[len('ckpts/'):]}"
                                                             for k in roles["orphans"]])
    assert len([k for k in keys if k.endswith("manifest.json")]) == 2  # one batch per run, the first one empty
    assert all(m["etag"] for m in batch["files"])
    assert "0 orphan(s)" in runner.invoke(app, ["storage", "orphans", f"s3://{bucket}/ckpts"]).stdout

    back = runner.invoke(app, ["storage", "restore-quarantine", f"s3://{bucket}/ckpts"])
    assert back.exit_code == 0 and "restored 2 file(s)" in back.stdout, back.stdout + back.stderr
    assert set(roles["orphans"]) <= set(s3.keys(bucket))
    assert not [k for k in s3.keys(bucket) if name in k]  # a batch put back goes, manifest and all

    # a copy back is a new object (LastModified now, after the newest _metadata): in progress until --force
    held = runner.invoke(app, ["storage", "orphans", f"s3://{bucket}/ckpts", "--delete", "--min-age", "0"])
    assert held.exit_code == 0 and "moved 0 file(s)" in held.stdout and "never moved without --force" in held.stdout
    again = runner.invoke(app, ["storage", "orphans", f"s3://{bucket}/ckpts", "--delete", "--min-age", "0", "--force"])
    assert again.exit_code == 0 and "moved 2 file(s)" in again.stdout
    listed = runner.invoke(app, ["storage", "purge", f"s3://{bucket}/ckpts", "--older-than", "0"])
    assert listed.exit_code == 0 and "would remove 3 of 3 batch(es)" in listed.stdout
    gone = runner.invoke(app, ["storage", "purge", f"s3://{bucket}/ckpts", "--older-than", "0", "--yes"])
    assert gone.exit_code == 0 and "removed 3 of 3" in gone.stdout
    assert not [k for k in s3.keys(bucket) if QUARANTINE_DIR in k]
    assert sorted(s3.keys(bucket)) == sorted([*roles["referenced"], *roles["taskowned"],
                                              *(f"ckpts/{JOB}/chk-{cp}/_metadata" for cp in (5, 6))])


def test_a_missing_object_is_not_restorable_and_blocks_delete(s3: S3) -> None:
    bucket = s3.bucket("flink-missing")
    roles = flink_job(s3, bucket)
    s3.client.delete_object(Bucket=bucket, Key=f"ckpts/{JOB}/shared/sst-2")
    ls = runner.invoke(app, ["storage", "ls", f"s3://{bucket}/ckpts/{JOB}"])
    assert ls.exit_code == 1 and "NOT RESTORABLE (1 MISSING)" in ls.stdout
    rows = [line for line in ls.stdout.splitlines() if "shared/sst-2" in line]
    assert rows and all("missing" in line for line in rows), ls.stdout  # the file's row says so, not any row
    refused = runner.invoke(app, ["storage", "orphans", f"s3://{bucket}/ckpts/{JOB}", "--delete", "--min-age", "0"])
    assert_user_error(refused, "can never be restored", f"s3://{bucket}/ckpts/{JOB}/shared/sst-2",
                      "storage quarantine-checkpoint")
    assert set(roles["orphans"]) <= set(s3.keys(bucket))


def test_a_failed_copy_leaves_every_original_and_no_copy(s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    from cutcheck.reference.storage.s3 import S3Store

    bucket = s3.bucket("flink-interrupted")
    roles = flink_job(s3, bucket)
    real = S3Store.copy

    def flaky(self: S3Store, src: str, dst: str, size: int | None = None) -> object:
        if src.endswith("sst-0"):
            raise StorageError(f"s3:/{src}: copying failed (InternalError); try again.")
        return real(self, src, dst, size)

    monkeypatch.setattr(S3Store, "copy", flaky)
    failed = runner.invoke(app, ["storage", "orphans", f"s3://{bucket}/ckpts", "--delete", "--min-age", "0"])
    assert_user_error(failed, "copying failed")
    keys = s3.keys(bucket)
    assert set(roles["orphans"]) <= set(keys)
    assert [k for k in keys if QUARANTINE_DIR in k] == [k for k in keys if k.endswith("manifest.json")]
    manifest = json.loads(s3.client.get_object(Bucket=bucket, Key=next(k for k in keys if QUARANTINE_DIR in k))
                          ["Body"].read())
    assert manifest["complete"] and manifest["files"] == []


def test_keep_set_spans_the_base_and_keep_directories(s3: S3) -> None:
    """A job restored in claim mode references the first job's shared files: orphans of the first job's
    directory must not name them, nor files a --keep-referenced-by prefix (another bucket) references."""
    bucket = s3.bucket("flink-claim")
    roles = flink_job(s3, bucket)
    other = "f" * 32
    borrowed = f"ckpts/{JOB}/shared/sst-0"  # an orphan of job 1 alone, but job 2 uses it
    s3.put(bucket, f"ckpts/{other}/chk-1/_metadata", flink_metadata(1, [
        (f"s3://{bucket}/ckpts/{other}/chk-1/m", [f"s3://{bucket}/{borrowed}"], [])]))
    s3.put(bucket, f"ckpts/{other}/chk-1/m", b"m")
    copy = s3.bucket("flink-claim-copy")
    s3.put(copy, "sp/savepoint-1/_metadata", flink_metadata(2, [
        (f"s3://{copy}/sp/savepoint-1/m", [f"s3://{bucket}/{roles['orphans'][1]}"], [])]))
    alone = runner.invoke(app, ["storage", "orphans", f"s3://{bucket}/ckpts/{JOB}", "--min-age", "0"])
    assert alone.exit_code == 0, alone.stdout + alone.stderr
    assert "1 orphan(s)" in alone.stdout and "chk-4/a1b2-private" in alone.stdout and "sst-0" not in alone.stdout
    kept = runner.invoke(app, ["storage", "orphans", f"s3://{bucket}/ckpts/{JOB}", "--min-age", "0",
                               "--keep-referenced-by", f"s3://{copy}/sp", "--delete"])
    assert kept.exit_code == 0 and "moved 0 file(s)" in kept.stdout, kept.stdout + kept.stderr
    assert set(roles["orphans"]) <= set(s3.keys(bucket))


def test_a_prefix_without_a_completed_checkpoint_is_refused(s3: S3) -> None:
    bucket = s3.bucket("flink-empty")
    s3.put(bucket, f"ckpts/{JOB}/shared/lonely")
    s3.put(bucket, f"ckpts/{JOB}/chk-3/half-written")
    for cmd in ("ls", "orphans", "lifecycle"):
        assert_user_error(runner.invoke(app, ["storage", cmd, f"s3://{bucket}/ckpts"]), "no _metadata of a completed")
    assert_user_error(runner.invoke(app, ["storage", "ls", f"s3://{bucket}/nothing-here"]), "no such checkpoint directory")
    assert_user_error(runner.invoke(app, ["storage", "orphans", f"s3://{bucket}/ckpts/{JOB}/chk-3", "--delete"]),
                      "without _metadata")
    assert len(s3.keys(bucket)) == 2


def test_entropy_injected_layout(s3: S3, tmp_path: Path) -> None:
    """s3.entropy.key=_entropy_, length 4: data files under a random first segment each, _metadata without."""
    bucket = s3.bucket("flink-entropy")
    job = f"ckpts/{JOB}"
    data = {cp: [f"E{cp}a{i}/{job}/shared/sst-{cp}-{i}" for i in range(3)] for cp in (7, 8)}
    data[8].append(data[7][0])  # checkpoint 8 still uses a file checkpoint 7 uploaded
    private = {cp: f"P{cp}xy/{job}/chk-{cp}/private" for cp in (7, 8)}
    orphans = [f"Zq9r/{job}/shared/from-an-aborted-checkpoint", f"{job}/chk-6/leftover"]
    for cp in (7, 8):
        s3.put(bucket, f"{job}/chk-{cp}/_metadata", flink_metadata(cp, [(
            f"s3://{bucket}/{private[cp]}", [f"s3://{bucket}/{k}" for k in data[cp]], [])]))
    for key in {*data[7], *data[8], *private.values(), *orphans}:
        s3.put(bucket, key, b"state")
    s3.put(bucket, "unrelated/data", b"other")  # the bucket holds other things: never an orphan
    for key in orphans:
        age(bucket, key, days=2)
    age(bucket, data[7][0], days=10)
    where = f"s3://{bucket}/_entropy_/ckpts"
    ls = runner.invoke(app, ["storage", "ls", where, "--json", str(tmp_path / "ls.json")])
    assert ls.exit_code == 0, ls.stdout + ls.stderr
    listing = json.loads((tmp_path / "ls.json").read_text())
    assert [c["restorable"] for c in listing["checkpoints"]] == [True, True]
    assert sorted(listing["orphans"]) == sorted(f"s3://{bucket}/{k}" for k in orphans)
    life = runner.invoke(app, ["storage", "lifecycle", where, "--expire-days", "5", "--json", str(tmp_path / "l.json")])
    assert life.exit_code == 1, life.stdout + life.stderr  # a 5-day rule deletes the 10-day-old file checkpoint 8 needs
    report = json.loads((tmp_path / "l.json").read_text())
    assert report["entropy"] and [(r["kind"], r["days"]) for r in report["rules"]][0] == ("everything", None)
    assert "NONE SAFE" in life.stdout and "cutcheck storage orphans --delete" in life.stdout
    assert report["deleted_referenced"] == [f"s3://{bucket}/{data[7][0]}"]
    assert report["broken"] == [f"{JOB}/chk-7", f"{JOB}/chk-8"]
    assert report["stored"]["max_objects"] == 1 and report["without_entropy"]["max_objects"] == 7
    moved = runner.invoke(app, ["storage", "orphans", where, "--delete"])
    assert moved.exit_code == 0 and "moved 2 file(s)" in moved.stdout, moved.stdout + moved.stderr
    keys = set(s3.keys(bucket))
    assert not set(orphans) & keys and {*data[7], *data[8], *private.values(), "unrelated/data"} <= keys
    # the quarantine goes under the base; every random prefix keeps its place there
    assert f"{QUARANTINE_DIR}/" in " ".join(keys) and any(k.endswith("Zq9r/" + orphans[0][5:]) for k in keys)
    assert runner.invoke(app, ["storage", "restore-quarantine", f"s3://{bucket}/ckpts"]).exit_code == 0
    assert set(orphans) <= set(s3.keys(bucket))


def test_cutcheck_metadata_uploaded_to_s3_reads_as_on_disk(s3: S3, tmp_path: Path) -> None:
    """A simulated run's directory (relative paths in its JSON _metadata), copied to a bucket, lists the same."""
    _, ck = simulated(tmp_path / "run")
    bucket = s3.bucket("cutcheck-run")
    for d, _, names in os.walk(ck):
        for n in names:
            s3.put(bucket, "up/" + os.path.relpath(os.path.join(d, n), ck), Path(d, n).read_bytes())
    local, remote = inspect(ck), inspect(f"s3://{bucket}/up")
    assert [(c.key, c.id, c.restorable) for c in remote.checkpoints] == [(c.key, c.id, c.restorable)
                                                                         for c in local.checkpoints]
    assert [os.path.relpath(f, remote.root) for f in remote.shared] == [os.path.relpath(f, local.root) for f in local.shared]
    assert remote.orphans == [] and all(c.restorable for c in remote.checkpoints)


def test_pyarrow_door_reads_the_same_bucket(s3: S3) -> None:
    """The generic PyArrow store (any FileSystem.from_uri) on the same server gives the same listing."""
    import pyarrow.fs as pafs

    from cutcheck.reference.storage.store import ArrowStore

    bucket = s3.bucket("flink-arrow")
    roles = flink_job(s3, bucket)
    fs = pafs.S3FileSystem(endpoint_override=s3.endpoint.split("://")[1], scheme="http", access_key="testing",
                           secret_key="testing", region="us-east-1")
    store = ArrowStore(fs, "s3", "s3://", True)
    listing = inspect(f"/{bucket}/ckpts", store=store)
    assert sorted(listing.orphans) == sorted(f"/{bucket}/{k}" for k in roles["orphans"])
    assert all(c.restorable for c in listing.checkpoints) and len(listing.checkpoints) == 2


def test_any_pyarrow_filesystem_lists_like_the_local_disk(tmp_path: Path) -> None:
    """The generic door over a PyArrow FileSystem (here PyArrow's own local one) gives the local listing."""
    import pyarrow.fs as pafs

    from cutcheck.reference.storage.store import ArrowStore

    _, ck = simulated(tmp_path / "run")
    stray = ck / JOB / "shared" / "stray"
    stray.write_text("x")
    os.utime(stray, (1, 1))  # older than the newest checkpoint: not of one in progress
    local = inspect(ck)
    arrow = inspect(str(ck), store=ArrowStore(pafs.LocalFileSystem(), "file", "file://", False))
    assert arrow.orphans == local.orphans == [str(stray)]
    assert [(c.key, c.restorable, c.files) for c in arrow.checkpoints] == [(c.key, c.restorable, c.files)
                                                                            for c in local.checkpoints]


def test_file_uris_as_flink_reports_them(tmp_path: Path) -> None:
    _, ck = simulated(tmp_path / "run")
    for form in (f"file:{ck}", f"file://{ck}"):
        result = runner.invoke(app, ["storage", "ls", form])
        assert result.exit_code == 0 and f"checkpoints in {ck}" in result.stdout, (form, result.stdout, result.stderr)
    assert open_store(f"file:///{ck}")[1].lstrip("/") == str(ck).lstrip("/")


def test_store_failures_are_one_sentence(s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_user_error(runner.invoke(app, ["storage", "ls", "s3://no-such-bucket-here/ckpts"]), "does not exist")
    closed = f"http://127.0.0.1:{_free_port()}"
    assert_user_error(runner.invoke(app, ["storage", "ls", "s3://any-bucket/ckpts", "--endpoint-url", closed]),
                      "cannot be reached", closed)
    assert_user_error(runner.invoke(app, ["storage", "ls", "s3://any-bucket/ckpts", "--endpoint-url", "not a url"]),
                      "--endpoint-url")
    bucket = s3.bucket("flink-creds")
    flink_job(s3, bucket)
    assert_user_error(runner.invoke(app, ["storage", "ls", f"s3://{bucket}/ckpts", "--reader", "flink"]),
                      "--reader flink reads local directories only")
    with monkeypatch.context() as anonymous:
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
            anonymous.delenv(name, raising=False)
        anonymous.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        anonymous.setenv("AWS_CONFIG_FILE", "/nonexistent")
        anonymous.setenv("AWS_EC2_METADATA_DISABLED", "true")
        assert_user_error(runner.invoke(app, ["storage", "ls", f"s3://{bucket}/ckpts"]), "no AWS credentials found")
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin

    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # the server now checks credentials
    monkeypatch.setattr(ActionAuthenticatorMixin, "request_count", 0)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGWRONGWRONG0")
    assert_user_error(runner.invoke(app, ["storage", "orphans", f"s3://{bucket}/ckpts"]), "refused the credentials")


def test_open_store_rejects_what_it_cannot_open() -> None:
    with pytest.raises(StorageError, match="no bucket"):
        open_store("s3:///ckpts")
    with pytest.raises(StorageError, match="neither PyArrow nor fsspec"):
        open_store("nosuchfs://x/y")


@pytest.mark.slow
def test_a_hundred_thousand_shared_objects(s3: S3, capsys: pytest.CaptureFixture[str]) -> None:
    """100,000 objects under shared/: one listing pages through them (1000 a request), two checkpoints reference
    98,500, the other 1,500 are quarantined (copies, then DeleteObjects 1000 at a time), then 50,000 deleted.
    Most of the time is moto's: each ListObjectsV2 page scans and sorts the whole bucket."""
    import datetime
    import time

    from cutcheck.reference.storage.inspection import orphan_reason
    from cutcheck.reference.storage.quarantine import quarantine
    from cutcheck.reference.storage.s3 import S3Store
    from tests.reference.s3_server import backend, put_many, stored_keys

    bucket = s3.bucket("flink-100k")
    job = f"ckpts/{JOB}"
    keys = [f"{job}/shared/{i:06d}" for i in range(100_000)]
    put_many(bucket, keys)
    for cp, used in ((10, keys[:60_000]), (11, keys[40_000:98_500])):
        halves = [used[: len(used) // 2], used[len(used) // 2:]]  # two subtasks
        s3.put(bucket, f"{job}/chk-{cp}/_metadata", flink_metadata(cp, [
            (f"s3://{bucket}/{used[0]}", [f"s3://{bucket}/{k}" for k in half], []) for half in halves]))
    stored = backend().get_bucket(bucket).keys
    for key in keys[98_500:]:
        stored[key].last_modified -= datetime.timedelta(days=1)

    store = S3Store(s3.endpoint)
    start = time.perf_counter()
    listing = inspect(f"/{bucket}/ckpts", store=store, min_age=3600)
    list_seconds = time.perf_counter() - start
    # is the prefix an object?, 101 pages, the bucket's top level (does an enclosing base hold it?), the 2 _metadata
    assert store.requests == 1 + 101 + 1 + 2
    assert len(listing.infos) == 100_002 and all(c.restorable for c in listing.checkpoints)
    assert listing.orphans == [f"/{bucket}/{k}" for k in keys[98_500:]]

    before = store.requests
    start = time.perf_counter()
    batch = quarantine(listing, {f: orphan_reason(listing, f) for f in listing.orphans}, min_age=3600)
    move_seconds = time.perf_counter() - start
    assert len(batch.files) == 1_500 and batch.complete
    assert stored_keys(bucket, f"{job}/shared/") == keys[:98_500]
    assert len(stored_keys(bucket, f"ckpts/{QUARANTINE_DIR}/")) == 1_501  # the copies and the manifest
    moved_requests = store.requests - before

    start = time.perf_counter()
    gone = store.delete([f"/{bucket}/{k}" for k in keys[:50_000]])
    delete_seconds = time.perf_counter() - start
    assert len(gone) == 50_000 and stored_keys(bucket, f"{job}/shared/") == keys[50_000:98_500]
    with capsys.disabled():
        print(f"\n100k objects: inspect (listing, 2 _metadata of 49k-58k handles) {list_seconds:.1f} s; quarantine of "
              f"1,500: {move_seconds:.1f} s, {moved_requests} requests; DeleteObjects {50_000 / delete_seconds:.0f}/s")
