"""Shared by the real-Flink tests: paths and the skip marker."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cutcheck.flink_bridge.env import flink_available

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
NEEDS_FLINK = pytest.mark.skipif(
    not flink_available(), reason="apache-flink is not installed (pip install '.[flink]' adds the flink extra)"
)
# PyFlink 2.x warns about its own deprecated APIs while it imports; not ours to fix.
FLINK_MARKS = [pytest.mark.flink, pytest.mark.slow, NEEDS_FLINK, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def tree(root: Path) -> dict[str, str]:
    """sha256 of every file under root (what the destructive-operations tests compare before and after)."""
    return {os.path.join(d, f): hashlib.sha256(Path(d, f).read_bytes()).hexdigest()
            for d, _, files in os.walk(root) for f in files}


def restore_each(graph: Path, checkpoints: list[str], scratch: Path, opts: Callable[..., Any]) -> list[int]:
    """Start a Flink job from each checkpoint (default no_claim: Flink never changes the snapshot),
    each with its own checkpoint and sink directories under ``scratch``; return the restored ids.
    A restore succeeded when Flink reports the job restored from that checkpoint and it finished.
    (FileSink resumes the in-progress part files the checkpoint names, in the sink directory of the
    run that wrote it: restores from older checkpoints change that run's output, not its checkpoints.)"""
    from cutcheck.flink_bridge import runner

    ids = []
    for n, path in enumerate(checkpoints):
        work = scratch / f"r{n}"
        run = runner.run(graph, work, opts(work / "checkpoints", restore=path))
        assert [j.stats.state for j in run.jobs] == ["FINISHED"], (path, [j.stats.state for j in run.jobs])
        ids.append(int((run.jobs[0].stats.restored or {}).get("id", -1)))
    return ids


def invoke(*args: str) -> Any:
    """Run the CLI in-process (Typer's runner), as a user would type ``cutcheck ARGS``."""
    from typer.testing import CliRunner

    from cutcheck.cli import app

    return CliRunner().invoke(app, list(args))


def cli_error(result: Any) -> tuple[str, str]:
    """A refusal as users see it: exit 2, no traceback, one ``error:`` line. Returns that line and the
    whole output with its whitespace folded (rich wraps long sentences)."""
    text = result.output.strip()
    assert result.exit_code == 2, text
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, text
    return lines[0], " ".join(text.split())
