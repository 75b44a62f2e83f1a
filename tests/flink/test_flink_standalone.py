"""The standalone reproducer on the installed Flink: the rendered script runs the case without cutcheck,
prints PASS on a correct run, and FAIL (exit 1) once its committed output is tampered with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cutcheck.flink_bridge.env import machine_lock
from cutcheck.flink_bridge.runner import RunOptions
from cutcheck.flink_bridge.standalone import render
from tests.flink.helpers import FLINK_MARKS

pytestmark = FLINK_MARKS

CASE = {
    "name": "standalone",
    "vertices": [
        {"id": "a", "kind": "source", "parallelism": 2, "records": 300, "keys": 6, "splits": 2},
        {"id": "b", "kind": "source", "parallelism": 1, "records": 30, "keys": 6, "seed": 3},
        {"id": "cm", "kind": "co_map", "parallelism": 2},
        {"id": "bs", "kind": "broadcast_state", "parallelism": 2},
        {"id": "c", "kind": "keyed_count", "parallelism": 2},
        {"id": "k", "kind": "sink", "parallelism": 2}],
    "edges": [
        {"from": "a", "to": "cm", "partitioner": "rebalance"},
        {"from": "b", "to": "cm", "partitioner": "rescale"},
        {"from": "cm", "to": "bs", "partitioner": "custom"},
        {"from": "b", "to": "bs", "partitioner": "broadcast"},
        {"from": "bs", "to": "c", "partitioner": "hash"},
        {"from": "c", "to": "k", "partitioner": "rebalance"}]}


def test_rendered_script_passes_then_fails_on_a_duplicated_row(tmp_path: Path) -> None:
    opts = RunOptions(mode="unaligned", fail_after=1, rescale={"c": 1}, delay_ms=1.0)
    script = tmp_path / "case.py"
    script.write_text(render(CASE, opts))
    work = tmp_path / "work"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of cutcheck on the path
    # The driver runs with cutcheck made unimportable: any import of it would fail the run.
    blocked = ("import runpy, sys; sys.modules['cutcheck'] = None; sys.argv = sys.argv[1:]; "
               "runpy.run_path(sys.argv[0], run_name='__main__')")
    with machine_lock():
        done = subprocess.run([sys.executable, "-c", blocked, str(script), "--work", str(work), "--keep"], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "PASS" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert "restoring" in done.stdout and "failure armed" in done.stdout
    part = next(p for p in sorted((work / "sink" / "k").iterdir()) if not p.name.startswith("."))
    part.write_text(part.read_text() + part.read_text().splitlines()[0] + "\n")  # one committed row twice
    again = subprocess.run([sys.executable, str(script), "--work", str(work), "--check-only"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 1 and "FAIL" in again.stdout, again.stdout[-2000:]
    dup = int(part.read_text().splitlines()[0].split(",")[0])
    assert f"record {dup} " in again.stdout and "times, expected" in again.stdout
    assert part.exists(), "a FAIL keeps the work directory (the evidence)"
