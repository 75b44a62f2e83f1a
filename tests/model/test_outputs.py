"""model.outputs: cutcheck replaces only what it wrote, and only when asked."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cutcheck.model.outputs import (
    OutputRefused,
    check_output_dir,
    check_output_file,
    is_cutcheck_run_dir,
    mark,
    replace_dir,
    staging_dir,
    write_manifest,
)


def _run_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps(mark({"seed": 1})))
    (path / "data").write_text("old")
    write_manifest(path)
    return path


def test_a_new_path_is_accepted(tmp_path: Path) -> None:
    assert check_output_dir(tmp_path / "new" / "run", force=False) == tmp_path / "new" / "run"


@pytest.mark.parametrize("force", [False, True])
def test_a_directory_cutcheck_did_not_write_is_refused_even_with_force(tmp_path: Path, force: bool) -> None:
    d = tmp_path / "mine"
    d.mkdir()
    (d / "thesis.tex").write_text("years of work")
    with pytest.raises(OutputRefused, match="not a run directory cutcheck wrote"):
        check_output_dir(d, force=force)
    # a run.json someone else wrote does not make it cutcheck's
    (d / "run.json").write_text(json.dumps({"seed": 1}))
    with pytest.raises(OutputRefused):
        check_output_dir(d, force=force)


def test_an_empty_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(OutputRefused):
        check_output_dir(tmp_path / "empty", force=True)


def test_a_cutcheck_run_directory_needs_force(tmp_path: Path) -> None:
    d = _run_dir(tmp_path / "run")
    assert is_cutcheck_run_dir(d)
    with pytest.raises(OutputRefused, match="--force"):
        check_output_dir(d, force=False)
    assert check_output_dir(d, force=True) == d


def test_the_working_directory_and_its_parents_are_never_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inner = _run_dir(tmp_path / "run") / "sub"
    inner.mkdir()
    monkeypatch.chdir(inner)
    for target in (Path("."), Path(".."), tmp_path, Path("../..")):
        with pytest.raises(OutputRefused, match="working directory"):
            check_output_dir(target, force=True)


def test_a_file_is_not_a_directory(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(OutputRefused, match="a file of that name exists"):
        check_output_dir(f, force=True)
    with pytest.raises(OutputRefused, match="is a file, not a directory"):
        check_output_dir(f / "run", force=False)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere: permissions cannot be tested")
def test_an_unwritable_parent_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(OutputRefused, match="not writable"):
        check_output_dir(locked / "run", force=False)


def test_output_files(tmp_path: Path) -> None:
    assert check_output_file(None) is None
    with pytest.raises(OutputRefused, match="is a directory"):
        check_output_file(tmp_path, option="--json")
    theirs = tmp_path / "theirs.json"
    theirs.write_text('{"a": 1}')
    with pytest.raises(OutputRefused, match="cutcheck did not write it"):
        check_output_file(theirs, option="--json")
    ours = tmp_path / "ours.json"
    ours.write_text(json.dumps(mark({"a": 1})))
    assert check_output_file(ours) == ours
    not_json = tmp_path / "notes.txt"
    not_json.write_text("written_by cutcheck")
    with pytest.raises(OutputRefused):
        check_output_file(not_json)


def test_staging_is_removed_on_failure_and_interruption(tmp_path: Path) -> None:
    dest = tmp_path / "run"
    for exc in (RuntimeError("boom"), KeyboardInterrupt()):
        with pytest.raises(type(exc)), staging_dir(dest) as tmp:
            (tmp / "half").write_text("x")
            raise exc
        assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_replace_dir_replaces_only_a_cutcheck_run_with_force(tmp_path: Path) -> None:
    dest = _run_dir(tmp_path / "run")
    with staging_dir(dest) as tmp:
        (tmp / "run.json").write_text(json.dumps(mark({"seed": 2})))
    with pytest.raises(OutputRefused):
        replace_dir(tmp, dest, force=False)
    assert (dest / "data").read_text() == "old"
    assert not tmp.exists()
    with staging_dir(dest) as tmp:
        (tmp / "run.json").write_text(json.dumps(mark({"seed": 2})))
    replace_dir(tmp, dest, force=True)
    assert json.loads((dest / "run.json").read_text())["seed"] == 2
    assert not (dest / "data").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_in_place_writer_removes_its_run_and_puts_back_the_one_it_replaced(tmp_path: Path) -> None:
    from cutcheck.reference.logs import RunLogWriter

    old = _run_dir(tmp_path / "run")
    writer = RunLogWriter(old, force=True, in_place=True)
    assert writer.tmp == old and not (old / "data").exists()  # written where it stays
    assert is_cutcheck_run_dir(old)  # a provisional run.json, but no manifest until the run is whole:
    with pytest.raises(OutputRefused, match="no list of the files"):  # a crashed leftover is never replaced
        check_output_dir(old, force=True)
    writer.discard()
    assert (old / "data").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    writer = RunLogWriter(old, force=True, in_place=True)
    writer.finalize({"seed": 3})
    assert json.loads((old / "run.json").read_text())["seed"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    fresh = RunLogWriter(tmp_path / "new", in_place=True)
    fresh.discard()
    assert not (tmp_path / "new").exists()


def test_force_never_deletes_a_file_the_user_added_to_a_run_directory(tmp_path: Path) -> None:
    dest = _run_dir(tmp_path / "run")
    (dest / "sub").mkdir()
    (dest / "sub" / "analysis.ipynb").write_text("my notes")
    with pytest.raises(OutputRefused, match=r"sub/analysis.ipynb was not written by cutcheck"):
        check_output_dir(dest, force=True)
    with staging_dir(dest) as tmp:
        (tmp / "run.json").write_text(json.dumps(mark({"seed": 2})))
    with pytest.raises(OutputRefused, match="analysis.ipynb"):
        replace_dir(tmp, dest, force=True)
    assert (dest / "sub" / "analysis.ipynb").read_text() == "my notes"
    assert not tmp.exists()


def test_force_never_deletes_an_edit_or_an_empty_directory_the_user_made(tmp_path: Path) -> None:
    dest = _run_dir(tmp_path / "run")
    (dest / "data").write_text("edited by hand")
    with pytest.raises(OutputRefused, match="data was changed after cutcheck wrote it"):
        check_output_dir(dest, force=True)
    dest = _run_dir(tmp_path / "run2")
    (dest / "mine").mkdir()
    with pytest.raises(OutputRefused, match="mine was not made by cutcheck"):
        check_output_dir(dest, force=True)


def test_a_run_directory_without_a_manifest_is_never_replaced(tmp_path: Path) -> None:
    dest = _run_dir(tmp_path / "run")
    (dest / "cutcheck-files.json").unlink()
    with pytest.raises(OutputRefused, match="cannot tell its files from yours"):
        check_output_dir(dest, force=True)


def test_a_replaced_run_lists_what_it_holds_and_can_be_replaced_again(tmp_path: Path) -> None:
    dest = _run_dir(tmp_path / "run")
    for seed in (2, 3):
        with staging_dir(dest) as tmp:
            (tmp / "run.json").write_text(json.dumps(mark({"seed": seed})))
            (tmp / "part").mkdir()
            (tmp / "part" / "f").write_text("x")
        replace_dir(tmp, dest, force=True)
        listed = json.loads((dest / "cutcheck-files.json").read_text())["entries"]
        assert sorted(listed) == ["part", "part/f", "run.json"] and listed["part"] is None
