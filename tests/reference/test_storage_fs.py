"""The on-disk checkpoint storage, driven directly: format, layout, inlining, the registry's
last-used semantics (the seed thread's checkpoint 1 file still used by checkpoint 10), aborts,
restore modes, savepoints, entropy."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cutcheck.model.errors import InvariantViolation, StorageError
from cutcheck.reference.faults.catalogue import Mutants
from cutcheck.reference.storage.codec import decode, dumps, encode, loads
from cutcheck.reference.storage.config import StorageConfig
from cutcheck.reference.storage.fs import FsCheckpointStorage
from cutcheck.reference.storage.inspection import inspect
from cutcheck.reference.storage.memory import CompletedCheckpoint, InMemoryStorage
from cutcheck.reference.storage.meta import load_checkpoint, referenced_files
from tests.reference.test_storage_support import (
    PARALLELISM,
    SIDS,
    advance,
    files_under,
    initial_state,
    make_snapshot,
    norm,
    typed,
)

JOB = "0" * 32


def storage(base: Path, **kw: Any) -> FsCheckpointStorage:
    restore = kw.pop("restore", None)
    mode = kw.pop("restore_mode", None)
    mutants = kw.pop("mutants", None)
    log = kw.pop("op_log", None)
    cfg = StorageConfig(dir=str(base), **{"incremental": True, "inline_threshold": 0, **kw})
    return FsCheckpointStorage(cfg, restore=restore, restore_mode=mode, rules=(mutants or Mutants()).rules(), op_log=log)


def checkpoint(st_: FsCheckpointStorage, cp: int, state: dict, rng: random.Random, retained: int = 3,
               kind: str = "checkpoint", mem: InMemoryStorage | None = None) -> CompletedCheckpoint:
    st_.begin(cp, kind)
    acks = {sid: make_snapshot(cp, sid, state, rng) for sid in SIDS}
    for snap in acks.values():
        st_.acknowledge(snap)
    done = CompletedCheckpoint(cp, kind, 0, dict(PARALLELISM), acks, cp * 10, cp * 10 + 5)
    sub = st_.complete(done, retained)
    if mem is not None:
        assert mem.complete(done, retained) == sub
    return done


# ---------------------------------------------------------------------------- codec
keys = st.one_of(st.integers(-10**12, 10**12), st.tuples(st.integers(0, 9), st.integers(-3, 3)), st.text(max_size=4))
values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                            st.dictionaries(keys, inner, max_size=4)),
    max_leaves=20)


@given(values)
def test_codec_keeps_types(value: Any) -> None:
    if isinstance(value, dict) and any(isinstance(k, str) and k.startswith("$") for k in value):
        return
    try:
        raw = dumps(encode(value))
    except ValueError:
        return  # a str key starting with "$" somewhere inside: refused, never mis-read
    assert typed(decode(loads(raw, "test"))) == typed(value)


def test_codec_refuses_reserved_keys() -> None:
    with pytest.raises(ValueError):
        encode({"$tuple": 1})


# ---------------------------------------------------------------------------- layout and format
def test_layout_metadata_last_and_every_file_listed(tmp_path: Path) -> None:
    log: list[tuple[str, str]] = []
    s = storage(tmp_path, op_log=log)
    state, rng = initial_state(), random.Random(1)
    advance(state, rng)
    done = checkpoint(s, 1, state, rng)
    job = tmp_path / JOB
    assert {p.name for p in job.iterdir()} == {"chk-1", "shared", "taskowned"}
    assert log[-1] == ("commit", str(job / "chk-1" / "_metadata"))  # the rename is the last operation
    meta = json.loads((job / "chk-1" / "_metadata").read_text())
    assert meta["format"] == "cutcheck-checkpoint/1" and meta["checkpoint"] == 1 and meta["job"] == JOB
    listed = {os.path.normpath(job / "chk-1" / f) for fs in meta["files"].values() for f in fs}
    assert listed == files_under(str(job)) - {str(job / "chk-1" / "_metadata")}
    assert all(not os.path.isabs(f) for f in meta["files"]["exclusive"])  # inside chk-1: its name
    assert meta["files"]["shared"] and all(f.startswith("../shared/") for f in meta["files"]["shared"])  # relocatable
    assert norm(load_checkpoint(str(job / "chk-1"))) == norm(done)


def test_small_state_is_inlined_under_the_threshold(tmp_path: Path) -> None:
    state, rng = initial_state(), random.Random(2)
    advance(state, rng)
    s = storage(tmp_path / "a", inline_threshold=20 * 1024)
    done = checkpoint(s, 1, state, random.Random(3))
    chk = tmp_path / "a" / JOB / "chk-1"
    assert [p.name for p in chk.iterdir()] == ["_metadata"]
    assert not list((tmp_path / "a" / JOB / "shared").iterdir())
    assert norm(load_checkpoint(str(chk))) == norm(done)
    big = storage(tmp_path / "b", inline_threshold=0)
    checkpoint(big, 1, state, random.Random(3))
    assert len(list((tmp_path / "b" / JOB / "chk-1").iterdir())) > 1


# ---------------------------------------------------------------------------- the registry, retention
def test_seed_thread_checkpoint_1_file_still_used_by_checkpoint_10_with_3_retained(tmp_path: Path) -> None:
    """The thread: 'if I retain 3 and just completed checkpoint 10, is anything in shared from 8 and 9
    only?' No: a key group that never changed still uses checkpoint 1's file."""
    s, mem = storage(tmp_path), InMemoryStorage()
    state, rng = initial_state(), random.Random(4)
    state[SIDS[1]]["counts"][5] = {5000 + k: k + 1 for k in range(6)}  # key group 5: written once
    for cp in range(1, 11):
        state[SIDS[2]]["counts"][64] = {64000: cp}  # key group 64: changes every checkpoint
        checkpoint(s, cp, state, rng, retained=3, mem=mem)
        if cp == 1:
            first = referenced_files(str(tmp_path / JOB / "chk-1")).kg_files
    assert s.retained_ids() == mem.retained_ids() == [8, 9, 10]
    listing = inspect(tmp_path)
    old = first[("count", 5)][1]
    assert os.path.exists(old) and listing.shared[old] == [f"{JOB}/chk-8", f"{JOB}/chk-9", f"{JOB}/chk-10"]
    changing = {os.path.basename(p) for p, users in listing.shared.items() if len(users) == 1}
    assert len(changing) == 3  # key group 64's files of 8, 9 and 10; those of 1..7 are gone
    assert not os.path.exists(first[("count", 64)][1])
    assert listing.orphans == []


def test_aborted_upload_is_deleted_at_a_later_subsumption_unless_reused(tmp_path: Path) -> None:
    s = storage(tmp_path)
    state, rng = initial_state(), random.Random(5)
    state[SIDS[1]]["counts"][3] = {3000: 1}
    checkpoint(s, 1, state, rng, retained=1)
    state[SIDS[1]]["counts"][3] = {3000: 2}
    s.begin(2, "checkpoint")
    s.acknowledge(make_snapshot(2, SIDS[1], state, rng))
    upload = next(iter(s.pending[2].shared.values()))
    s.abort(2)
    assert os.path.exists(upload)  # registered on acknowledgement: not deleted by the abort
    checkpoint(s, 3, state, rng, retained=1)  # same bytes: reuses the aborted checkpoint's file
    assert upload in referenced_files(str(tmp_path / JOB / "chk-3")).files["shared"]
    state[SIDS[1]]["counts"][3] = {3000: 3}
    s.begin(4, "checkpoint")
    s.acknowledge(make_snapshot(4, SIDS[1], state, rng))
    second = next(iter(s.pending[4].shared.values()))
    s.abort(4)
    checkpoint(s, 5, initial_state(), rng, retained=1)  # key group 3 gone: nothing reuses 4's upload
    assert os.path.exists(upload) is False and os.path.exists(second) is False
    assert inspect(tmp_path).orphans == []


def test_discard_on_abort_deletes_a_file_a_retained_checkpoint_uses(tmp_path: Path) -> None:
    for mutants, broken in ((Mutants(), False), (Mutants.of(["discard-on-abort"]), True)):
        s = storage(tmp_path / str(broken), mutants=mutants)
        state, rng = initial_state(), random.Random(6)
        advance(state, rng)
        checkpoint(s, 1, state, rng)
        s.begin(2, "checkpoint")
        s.acknowledge(make_snapshot(2, SIDS[1], state, rng))  # reuses checkpoint 1's files
        if broken:
            with pytest.raises(InvariantViolation) as exc:
                s.abort(2)
            assert exc.value.name == "REF" and "retained checkpoint 1" in exc.value.detail
        else:
            s.abort(2)
            assert norm(s.latest()) is not None


# ---------------------------------------------------------------------------- restore modes, savepoints
def _run(base: Path, n: int, retained: int = 3, **kw: Any) -> tuple[FsCheckpointStorage, dict, list[CompletedCheckpoint]]:
    s, state, rng, done = storage(base, **kw), initial_state(), random.Random(7), []
    for cp in range(1, n + 1):
        advance(state, rng)
        done.append(checkpoint(s, cp, state, rng, retained=retained))
    return s, state, done


def test_no_claim_first_checkpoint_is_full_and_restored_files_are_never_deleted(tmp_path: Path) -> None:
    _, state, done = _run(tmp_path / "a", 4)
    chk4 = str(tmp_path / "a" / JOB / "chk-4")
    before = referenced_files(chk4)
    s = storage(tmp_path / "b", restore=chk4, restore_mode="no_claim")
    assert norm(s.restored) == norm(done[-1]) and s.retained_ids() == [4]
    rng = random.Random(8)
    checkpoint(s, 5, state, rng, retained=1)
    first = referenced_files(str(tmp_path / "b" / s.job / "chk-5"))
    assert first.files["shared"] == [] and first.kg_files == {}  # NO_SHARING: keyed pieces are exclusive
    for cp in range(6, 10):
        advance(state, rng)
        checkpoint(s, cp, state, rng, retained=1)
        refs = referenced_files(str(tmp_path / "b" / s.job / f"chk-{cp}"))
        assert not set(refs.files["shared"]) & set(before.files["shared"])  # never builds on what it does not own
    s.close()
    assert all(os.path.exists(f) for fs in before.files.values() for f in fs)
    assert os.path.exists(os.path.join(chk4, "_metadata"))


def test_claim_takes_ownership_and_deletes_the_restored_checkpoint_once_subsumed(tmp_path: Path) -> None:
    _, state, done = _run(tmp_path, 4)
    job = tmp_path / JOB
    s = storage(tmp_path, restore=str(job / "chk-4"), restore_mode="claim")
    assert s.job == JOB and s.retained_ids() == [2, 3, 4]  # the job directory's checkpoints, adopted
    assert norm(s.restored) == norm(done[-1])
    rng = random.Random(9)
    for cp in range(5, 9):
        advance(state, rng)
        checkpoint(s, cp, state, rng, retained=2)
    assert sorted(p.name for p in job.iterdir()) == ["chk-7", "chk-8", "shared", "taskowned"]
    s.close()
    assert inspect(tmp_path).orphans == []


def test_claim_refuses_an_older_checkpoint_and_a_fresh_run_refuses_a_used_directory(tmp_path: Path) -> None:
    _run(tmp_path, 3)
    with pytest.raises(StorageError, match="newer"):
        storage(tmp_path, restore=str(tmp_path / JOB / "chk-2"), restore_mode="claim")
    with pytest.raises(StorageError, match="already holds a checkpoint"):
        storage(tmp_path)


def test_savepoint_is_self_contained_and_restorable_after_moving(tmp_path: Path) -> None:
    s, state, _ = _run(tmp_path / "a", 2)
    sp = checkpoint(s, 3, state, random.Random(10), kind="savepoint")
    (sp_dir,) = [p for p in (tmp_path / "a").iterdir() if p.name.startswith("savepoint-")]
    meta = json.loads((sp_dir / "_metadata").read_text())
    assert meta["files"]["shared"] == [] and all(not os.path.isabs(f) for f in meta["files"]["exclusive"])
    moved = tmp_path / "elsewhere"
    sp_dir.rename(moved)
    assert norm(load_checkpoint(str(moved))) == norm(sp)
    for mode in ("claim", "no_claim"):
        r = storage(tmp_path / mode, restore=str(moved), restore_mode=mode)
        assert norm(r.restored) == norm(sp)


def test_random_prefixes_in_data_file_paths_never_in_metadata(tmp_path: Path) -> None:
    # (the first occurrence of the key is replaced: no "_entropy_" in this test's name, or tmp_path)
    base = tmp_path / "_entropy_" / "ckpts"
    s = storage(base, entropy="_entropy_")
    state, rng = initial_state(), random.Random(11)
    advance(state, rng)
    done = checkpoint(s, 1, state, rng)
    meta_dir = tmp_path / "ckpts" / JOB / "chk-1"
    assert (meta_dir / "_metadata").exists() and not (tmp_path / "_entropy_").exists()
    refs = referenced_files(str(meta_dir))
    data = [f for fs in refs.files.values() for f in fs]
    assert data and all(os.path.isabs(f) for f in data)  # entropy-injected handles are absolute
    dirs = {Path(f).relative_to(tmp_path).parts[0] for f in data}
    assert len(dirs) > 1 and all(len(d) == 4 and d.isalnum() for d in dirs)  # each file its own entropy
    assert norm(load_checkpoint(str(meta_dir))) == norm(done)
    again = storage(tmp_path / "x" / "_entropy_" / "ckpts", entropy="_entropy_")
    checkpoint(again, 1, state, random.Random(11))
    assert sorted(Path(f).relative_to(tmp_path / "x").parts[0]
                  for f in referenced_files(str(tmp_path / "x" / "ckpts" / JOB / "chk-1")).files["exclusive"]) == \
        sorted(d for d in (Path(f).relative_to(tmp_path).parts[0] for f in refs.files["exclusive"]))  # from the seed
    listing = inspect(base)
    assert listing.orphans == [] and {c.id for c in listing.checkpoints} == {1}
    stray = tmp_path / "Zz99" / "ckpts" / JOB / "shared" / "left-behind"  # in a directory the marker became
    stray.parent.mkdir(parents=True)
    stray.write_text("x")
    assert inspect(base).in_progress == [str(stray)]  # written after the newest checkpoint completed
    os.utime(stray, (1, 1))
    assert inspect(base).orphans == [str(stray)] and inspect(tmp_path / "ckpts").orphans == []
    prod = tmp_path / "prod" / "ckpts" / JOB  # named like a random prefix, but another environment's checkpoints
    for name in ("chk-3/_metadata", "chk-3/live-state", "shared/live-sst"):
        (prod / name).parent.mkdir(parents=True, exist_ok=True)
        (prod / name).write_text("prod")
        os.utime(prod / name, (1, 1))
    listing = inspect(base)
    assert listing.orphans == [str(stray)] and str(tmp_path / "prod" / "ckpts") in listing.foreign


def test_restore_of_a_broken_checkpoint_names_the_missing_file(tmp_path: Path) -> None:
    s, _, _ = _run(tmp_path, 2)
    victim = referenced_files(str(tmp_path / JOB / "chk-2")).files["shared"][0]
    os.remove(victim)
    with pytest.raises(InvariantViolation, match="REF: restoring checkpoint 2"):
        s.latest()
    with pytest.raises(StorageError, match=os.path.basename(victim)):
        storage(tmp_path / "b", restore=str(tmp_path / JOB / "chk-2"))
