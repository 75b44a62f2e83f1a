"""What works without a Flink cluster: the missing-extra message, refusals of what the translation
does not cover (exit 2, one sentence), and the file-level helpers. These run with or without apache-flink."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import flink_bridge
from cli import app
from flink_bridge import env as flink_env
from flink_bridge.checkpoints import MAGIC, is_flink_checkpoint_dir, relocate
from flink_bridge.runlog import committed_files
from flink_bridge.translate import check_supported
from model.errors import GraphError
from model.graph import JobGraph
from tests.flink.helpers import EXAMPLES


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def _error_line(result: Any) -> str:
    text = result.output.strip()  # click 8.2+: stdout and stderr together
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, text
    return lines[0]


@pytest.mark.parametrize("command", ["run", "compare"])
def test_without_the_extra_says_how_to_install(command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(flink_env, "flink_available", lambda: False)
    args = ["flink", command, str(EXAMPLES / "keyed-pipeline.json")] + (["--out", str(tmp_path / "r")] if command == "run" else [])
    result = _invoke(*args)
    assert result.exit_code == 2
    line = _error_line(result)
    assert "pip install 'cutcheck[flink]'" in line and "pip install '.[flink]'" in line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("graph", "words"), [
    ("co-map.json", "kind co_map is not supported on real Flink"),
    ("multi-edge.json", "kind co_map is not supported on real Flink"),
    ("broadcast-state.json", "kind broadcast_state is not supported on real Flink"),
    ("batch.json", "blocking exchanges are not supported on real Flink"),
])
def test_unsupported_graphs_exit_2_in_one_sentence(graph: str, words: str, monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.setattr(flink_bridge, "require_flink", lambda: None)  # the refusal comes before Flink is needed
    result = _invoke("flink", "run", str(EXAMPLES / graph), "--out", str(tmp_path / "r"))
    assert result.exit_code == 2
    assert words in _error_line(result)
    assert not (tmp_path / "r").exists() and not list(tmp_path.glob("r.tmp-*"))


@pytest.mark.parametrize(("args", "words"), [
    (["--rescale", "count=3"], "--rescale needs --fail-after-checkpoint"),
    (["--mode", "at_least_once"], "--mode 'at_least_once' is not one of"),
    (["--fail-after-checkpoint", "1", "--rescale", "count=0"], "--rescale 'count=0'"),
    (["--fail-after-checkpoint", "1", "--rescale", "nope=2"], "vertex 'nope': no such vertex to rescale"),
    (["--fail-after-checkpoint", "1", "--rescale", "map=3"], "forward"),
])
def test_bad_options_exit_2(args: list[str], words: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(flink_bridge, "require_flink", lambda: None)
    data = JobGraph.from_json(EXAMPLES / "keyed-pipeline.json").to_json()
    data["vertices"][1]["parallelism"] = 2
    data["edges"][0]["partitioner"] = "forward"  # src -> map: rescaling map alone breaks the forward edge
    graph = tmp_path / "g.json"
    graph.write_text(json.dumps(data))
    result = _invoke("flink", "run", str(graph), "--out", str(tmp_path / "r"), *args)
    assert result.exit_code == 2
    assert words in _error_line(result)


@pytest.mark.parametrize("graph", ["keyed-pipeline.json", "union.json"])
def test_supported_examples(graph: str) -> None:
    check_supported(JobGraph.from_json(EXAMPLES / graph))


def test_at_least_once_sink_refused() -> None:
    data = JobGraph.from_json(EXAMPLES / "keyed-pipeline.json").to_json()
    data["vertices"][-1]["delivery"] = "at_least_once"
    with pytest.raises(GraphError, match="only exactly_once sinks"):
        check_supported(JobGraph.from_json(data))


def test_committed_files_skip_in_progress_and_pending(tmp_path: Path) -> None:
    for name in ("part-a-0.csv", "part-a-1.csv", ".part-a-2.csv.inprogress.3f1c", "_SUCCESS"):
        (tmp_path / name).write_text("1,2,3,4,5,6,0\n")
    assert [os.path.basename(p) for p in committed_files(str(tmp_path))] in (
        ["part-a-0.csv", "part-a-1.csv"], ["part-a-1.csv", "part-a-0.csv"])
    assert committed_files(str(tmp_path / "missing")) == []


def test_relocate_reroots_moved_job_directories(tmp_path: Path) -> None:
    job = "ab" * 16
    moved = tmp_path / "new" / job
    (moved / "shared").mkdir(parents=True)
    (moved / "shared" / "f1").write_text("x")
    old = str(tmp_path / "old.tmp-7" / job / "shared" / "f1")
    assert relocate(old, str(moved)) == str(moved / "shared" / "f1")
    gone = str(tmp_path / "old.tmp-7" / job / "shared" / "f2")
    assert relocate(gone, str(moved)) == gone  # nothing to re-root to: stays missing
    original = tmp_path / "orig" / job / "shared" / "f1"
    original.parent.mkdir(parents=True)
    original.write_text("x")  # a copy, not a move: the copy's own file is the one its checkpoint uses
    assert relocate(str(original), str(moved)) == str(moved / "shared" / "f1")
    inside = str(moved / "shared" / "f3")
    assert relocate(inside, str(moved)) == inside


def test_flink_metadata_is_detected_by_its_magic(tmp_path: Path) -> None:
    (tmp_path / "j" / "chk-1").mkdir(parents=True)
    (tmp_path / "j" / "chk-1" / "_metadata").write_bytes(MAGIC + b"\0\0\0\6")
    assert is_flink_checkpoint_dir(tmp_path)
    (tmp_path / "j" / "chk-1" / "_metadata").write_text('{"format": "cutcheck-checkpoint/1"}')
    assert not is_flink_checkpoint_dir(tmp_path)
