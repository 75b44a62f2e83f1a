"""Held-out adversarial cases (issue 26) on the S3 test server (tests/reference/s3_server.py): the classes of
test_storage_adversarial*.py that apply to an object store. Every object's content is hashed before and after,
nothing any _metadata references moves, every batch restores and the bucket is as it was."""

from __future__ import annotations

import logging

import pytest

from cutcheck.reference.storage.s3 import S3Store
from tests.reference.adversarial_helpers import JOB_A, JOB_B
from tests.reference.s3_server import S3, _free_port, flink_metadata, s3_fixture, s3_server_fixture  # noqa: F401
from tests.reference.test_storage_cli import assert_user_error
from tests.reference.test_storage_guard_s3 import objects, outside, restore_all, stamp, storage

logging.getLogger("werkzeug").setLevel(logging.ERROR)


def two_jobs(s3: S3, bucket: str, scheme_b: str = "s3") -> dict[str, str]:
    """Job A (chk-4, chk-5) and job B restored from A in claim mode (B's chk-9 names A's claimed file with
    ``scheme_b``), an orphan in A's shared/, all two days old."""
    a, b = f"ck/{JOB_A}", f"ck/{JOB_B}"
    keys = {"s1": f"{a}/shared/s1", "s2": f"{a}/shared/s2", "claimed": f"{a}/shared/claimed",
            "orphan": f"{a}/shared/orphan", "p4": f"{a}/chk-4/p4", "p5": f"{a}/chk-5/p5", "b1": f"{b}/shared/b1"}
    for k in keys.values():
        s3.put(bucket, k, k.encode())

    def uri(key: str, scheme: str = "s3") -> str:
        return f"{scheme}://{bucket}/{key}"

    s3.put(bucket, f"{a}/chk-4/_metadata", flink_metadata(4, [(uri(keys["p4"]), [uri(keys["s1"])], [])]))
    s3.put(bucket, f"{a}/chk-5/_metadata", flink_metadata(5, [(uri(keys["p5"]), [uri(keys["s1"]), uri(keys["s2"])], [])]))
    s3.put(bucket, f"{b}/chk-9/_metadata", flink_metadata(9, [(uri(keys["b1"], scheme_b),
                                                               [uri(keys["claimed"], scheme_b)], [])]))
    stamp(bucket)
    return keys


def delete_and_restore(bucket: str, given: str, must_keep: list[str], *extra: str, base: str | None = None) -> list[str]:
    before = objects(bucket)
    done = storage("orphans", given, "--delete", "--min-age", "0", *extra)
    after = outside(objects(bucket))
    for k in must_keep:
        assert after.get(k) == before[k], f"{k} was moved or changed"
    gone = sorted(k for k in outside(before) if k not in after)
    restore_all(base or f"s3://{bucket}/ck")
    assert objects(bucket) == before
    assert done.exit_code in (0, 2), done.stdout + done.stderr
    return gone


@pytest.mark.parametrize("scheme", ["s3a", "s3n", "S3"])
def test_a_claim_restored_job_naming_files_with_another_scheme_keeps_them(s3: S3, scheme: str) -> None:
    bucket = s3.bucket(f"adv-scheme-{scheme.lower()}")
    k = two_jobs(s3, bucket, scheme_b=scheme)
    gone = delete_and_restore(bucket, f"s3://{bucket}/ck/{JOB_A}", [k["claimed"], k["s1"], k["s2"]])
    assert gone == [k["orphan"]]


@pytest.mark.parametrize("form", ["s3://{b}/ck/{A}/", "s3://{b}/ck//{A}", "s3a://{b}/ck/{A}", "s3://{b}/ck/./{A}"])
def test_every_spelling_of_a_job_prefix_is_the_same_prefix(s3: S3, form: str) -> None:
    bucket = s3.bucket("adv-spelling-" + str(abs(hash(form)) % 10**6))
    k = two_jobs(s3, bucket)
    gone = delete_and_restore(bucket, form.format(b=bucket, A=JOB_A), [k["claimed"], k["s1"], k["s2"]])
    assert gone == [k["orphan"]]


def test_savepoints_below_the_base_keep_what_a_claim_restored_job_names(s3: S3) -> None:
    bucket = s3.bucket("adv-savepoints")
    sp = "ck/savepoints"
    kept = f"{sp}/savepoint-0a0a0a-1111111111/kept-by-b"  # its _metadata removed by Flink on subsumption
    for key in (kept, f"{sp}/savepoint-0b0b0b-2222222222/x", f"ck/{JOB_B}/chk-9/m"):
        s3.put(bucket, key, key.encode())
    s3.put(bucket, f"{sp}/savepoint-0b0b0b-2222222222/_metadata", flink_metadata(1, [
        (f"s3://{bucket}/{sp}/savepoint-0b0b0b-2222222222/x", [], [])]))
    s3.put(bucket, f"ck/{JOB_B}/chk-9/_metadata", flink_metadata(9, [
        (f"s3://{bucket}/ck/{JOB_B}/chk-9/m", [f"s3://{bucket}/{kept}"], [])]))
    stamp(bucket)
    delete_and_restore(bucket, f"s3://{bucket}/{sp}", [kept])


@pytest.mark.parametrize("whose", ["own", "sibling"])
def test_a_truncated_metadata_keeps_everything_and_lifecycle_says_no_rule(s3: S3, whose: str) -> None:
    bucket = s3.bucket(f"adv-truncated-{whose}")
    k = two_jobs(s3, bucket)
    key = f"ck/{JOB_A}/chk-5/_metadata" if whose == "own" else f"ck/{JOB_B}/chk-9/_metadata"
    raw = s3.client.get_object(Bucket=bucket, Key=key)["Body"].read()
    s3.put(bucket, key, raw[: len(raw) // 2])
    stamp(bucket)
    before = objects(bucket)
    where = f"s3://{bucket}/ck/{JOB_A}"
    assert_user_error(storage("orphans", where, "--delete", "--min-age", "0"), "nothing is deleted")
    assert_user_error(storage("lifecycle", where), "no lifecycle rule can be called safe")
    assert objects(bucket) == before and k["orphan"] in before


def test_quarantine_checkpoint_never_moves_an_object_another_job_claimed(s3: S3) -> None:
    bucket = s3.bucket("adv-qc-claimed")
    k = two_jobs(s3, bucket)
    private_claimed = f"ck/{JOB_A}/chk-5/claimed-private"
    s3.put(bucket, private_claimed, b"claimed")
    s3.client.delete_object(Bucket=bucket, Key=k["p5"])  # chk-5 broken
    s3.put(bucket, f"ck/{JOB_B}/chk-10/_metadata", flink_metadata(10, [
        (f"s3://{bucket}/{k['b1']}", [f"s3://{bucket}/{k['claimed']}", f"s3://{bucket}/{private_claimed}"], [])]))
    stamp(bucket)
    before = objects(bucket)
    done = storage("quarantine-checkpoint", f"s3://{bucket}/ck/{JOB_A}/chk-5")
    assert done.exit_code == 0, done.stdout + done.stderr
    after = outside(objects(bucket))
    assert after[private_claimed] == before[private_claimed] and f"ck/{JOB_A}/chk-5/_metadata" not in after
    restore_all(f"s3://{bucket}/ck")
    assert objects(bucket) == before


def test_a_checkpoint_completed_during_the_scan_stops_the_delete(s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = s3.bucket("adv-race")
    k = two_jobs(s3, bucket)
    real = S3Store.read
    done_once: list[bool] = []

    def read(self: S3Store, path: str) -> bytes | None:
        if not done_once:  # Flink completes chk-6 of A, naming the old orphan again, while cutcheck reads
            done_once.append(True)
            s3.put(bucket, f"ck/{JOB_A}/chk-6/_metadata", flink_metadata(6, [
                (f"s3://{bucket}/{k['p5']}", [f"s3://{bucket}/{k['orphan']}"], [])]))
        return real(self, path)

    monkeypatch.setattr(S3Store, "read", read)
    before = objects(bucket)
    done = storage("orphans", f"s3://{bucket}/ck/{JOB_A}", "--delete", "--min-age", "0")
    assert_user_error(done, "chk-6 completed while cutcheck read the checkpoints")
    after = objects(bucket)
    assert {key: h for key, h in after.items() if key in before} == before


def test_taskowned_objects_under_a_random_prefix_are_never_moved(s3: S3) -> None:
    bucket = s3.bucket("adv-entropy-taskowned")
    data = f"Ab12/ck/{JOB_A}"
    owned = [f"{data}/taskowned/channel-state", f"ck/{JOB_A}/taskowned/op-state"]
    for key in [*owned, f"{data}/shared/s1", f"{data}/chk-5/m", f"{data}/shared/orphan"]:
        s3.put(bucket, key, key.encode())
    s3.put(bucket, f"ck/{JOB_A}/chk-5/_metadata", flink_metadata(5, [
        (f"s3://{bucket}/{data}/chk-5/m", [f"s3://{bucket}/{data}/shared/s1"], [])]))
    stamp(bucket)
    gone = delete_and_restore(bucket, f"s3://{bucket}/_entropy_/ck", owned)
    assert gone == [f"{data}/shared/orphan"]


@pytest.mark.parametrize("spelling", ["s3://{b}/copy/", "s3a://{b}/copy"])
def test_keep_referenced_by_in_any_spelling_keeps_its_objects(s3: S3, spelling: str) -> None:
    bucket = s3.bucket("adv-keep-" + spelling[:3].replace(":", ""))
    k = two_jobs(s3, bucket)
    s3.put(bucket, f"copy/{JOB_B}/chk-1/_metadata", flink_metadata(1, [
        (f"s3://{bucket}/{k['b1']}", [f"s3://{bucket}/{k['orphan']}"], [])]))
    gone = delete_and_restore(bucket, f"s3://{bucket}/ck/{JOB_A}", [k["orphan"], k["claimed"]],
                              "--keep-referenced-by", spelling.format(b=bucket))
    assert gone == []


S3_CHILD = """
import os, signal, sys
from cutcheck.reference.storage.s3 import S3Store
mode, at = sys.argv[1], int(sys.argv[2])
count = [0]
real = S3Store.copy if mode == "copy" else S3Store.delete
def hook(self, *args, **kwargs):
    count[0] += 1
    if count[0] == at:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, *args, **kwargs)
setattr(S3Store, mode, hook)
from cutcheck.cli import main
sys.argv = ["cutcheck", *sys.argv[3:]]
main()
"""


@pytest.mark.parametrize(("mode", "at"), [("copy", 5), ("delete", 1)])
def test_sigkill_in_the_middle_of_delete_on_s3_restores_exactly(s3: S3, mode: str, at: int) -> None:
    """Killed after some copies into the quarantine (originals all there), or just before DeleteObjects: a
    restore gives the bucket back and says how many it put back."""
    import re
    import subprocess
    import sys

    bucket = s3.bucket(f"adv-kill-{mode}")
    k = two_jobs(s3, bucket)
    orphans = [f"ck/{JOB_A}/shared/orphan-{i:02d}" for i in range(12)]
    for key in orphans:
        s3.put(bucket, key, key.encode())
    stamp(bucket)
    before = objects(bucket)
    done = subprocess.run([sys.executable, "-c", S3_CHILD, mode, str(at), "storage", "orphans",
                           f"s3://{bucket}/ck/{JOB_A}", "--delete", "--min-age", "0"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == -9, done.stderr
    after = outside(objects(bucket))
    for key in [k["claimed"], k["s1"], k["s2"], k["p4"], k["p5"]]:
        assert after[key] == before[key]
    gone = len([key for key in outside(before) if key not in after])
    results = []
    while (back := storage("restore-quarantine", f"s3://{bucket}/ck")).exit_code == 0:
        results.append(back)
    said = sum(int(m.group(1)) for r in results if (m := re.search(r"^restored (\d+) file", r.stdout, re.M)))
    assert said == gone
    assert outside(objects(bucket)) == outside(before)
    assert not [key for key in objects(bucket) if ".cutcheck-quarantine" in key and not key.endswith("manifest.json")]


def test_savepoints_beside_jobs_at_the_bucket_root_keep_what_a_claim_restored_job_names(s3: S3) -> None:
    bucket = s3.bucket("adv-root-savepoints")
    kept = "savepoints/savepoint-0a0a0a-1111111111/kept-by-b"
    for key in (kept, "savepoints/savepoint-0b0b0b-2222222222/x", f"{JOB_B}/chk-9/m"):
        s3.put(bucket, key, key.encode())
    s3.put(bucket, "savepoints/savepoint-0b0b0b-2222222222/_metadata", flink_metadata(1, [
        (f"s3://{bucket}/savepoints/savepoint-0b0b0b-2222222222/x", [], [])]))
    s3.put(bucket, f"{JOB_B}/chk-9/_metadata", flink_metadata(9, [
        (f"s3://{bucket}/{JOB_B}/chk-9/m", [f"s3://{bucket}/{kept}"], [])]))
    stamp(bucket)
    delete_and_restore(bucket, f"s3://{bucket}/savepoints", [kept], base=f"s3://{bucket}")
