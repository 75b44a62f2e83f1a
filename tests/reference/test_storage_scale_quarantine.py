"""`orphans --delete` and `restore-quarantine` on many orphans: the quarantine's bookkeeping is linear in
the number of files (counted in comparisons of planned moves, not timed: benchmarks/bench_storage_scale.py
times it), and what it moves still comes back exactly, whole or after an interruption."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutcheck.reference.storage import quarantine as q
from cutcheck.reference.storage.flink_metadata import any_referenced_files
from cutcheck.reference.storage.inspection import inspect
from tests.reference.test_storage_cli import JOB, simulated
from tests.reference.test_storage_safety import age, tree

N = 300  # quadratic bookkeeping compares about N*N/2 = 45 000 planned moves; linear, none


def stale_files(tmp_path: Path) -> tuple[Path, list[Path]]:
    _, ck = simulated(tmp_path / "run")
    many = [ck / JOB / "shared" / f"left-{i:04d}" for i in range(N)]
    for p in many:
        p.write_text(f"stale {p.name}")
    age(many)
    return ck, many


def counting_comparisons(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A counter of ``Moved == Moved`` (what searching a list of planned moves costs, one a step)."""
    count = [0]
    real = q.Moved.__eq__

    def eq(self: q.Moved, other: object) -> bool:
        count[0] += 1
        return real(self, other)

    monkeypatch.setattr(q.Moved, "__eq__", eq)
    return count


def test_moving_many_orphans_compares_no_planned_move_with_another(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ck, many = stale_files(tmp_path)
    before = tree(ck)
    count = counting_comparisons(monkeypatch)
    listing = inspect(ck, any_referenced_files)
    batch = q.quarantine(listing, {f: "orphan" for f in listing.orphans})
    assert {m.original for m in batch.files} >= {str(p) for p in many}
    assert not any(p.exists() for p in many)
    assert count[0] <= len(batch.files), count[0]  # linear (it was about N*N/2)
    back = q.restore_batch(str(listing.base))
    assert len(back.restored) == len(batch.files)
    assert tree(ck) == before


def test_an_interrupted_move_of_many_orphans_is_linear_and_leaves_the_rest_in_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ck, many = stale_files(tmp_path)
    before = tree(ck)
    real, calls = q._move, []

    def dying(src: str, dst: str) -> None:
        if len(calls) == N // 2:
            raise KeyboardInterrupt  # Ctrl-C, half way
        calls.append(src)
        real(src, dst)

    monkeypatch.setattr(q, "_move", dying)
    count = counting_comparisons(monkeypatch)
    listing = inspect(ck, any_referenced_files)
    with pytest.raises(KeyboardInterrupt):
        q.quarantine(listing, {f: "orphan" for f in listing.orphans})
    assert count[0] <= len(listing.orphans), count[0]  # it was about N*N/2 * 3/4
    assert len([p for p in many if not p.exists()]) == N // 2
    monkeypatch.setattr(q, "_move", real)
    back = q.restore_batch(str(listing.base))
    assert sorted(m.original for m in back.restored) == sorted(calls)
    assert tree(ck) == before
