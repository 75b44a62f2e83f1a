"""The worker that runs a job in a release's interpreter, here the installed release (the flink extra):
what it sends back is the same FlinkRun runner.run returns in-process, a CutcheckError inside it is the
same error outside, and Ctrl-C leaves no process of it behind. No other release is downloaded."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cutcheck.flink_bridge import launch
from cutcheck.flink_bridge.features import installed as installed_release
from cutcheck.flink_bridge.runner import RunOptions
from cutcheck.model.errors import CutcheckError
from cutcheck.model.graph import JobGraph
from tests.flink.helpers import EXAMPLES, FLINK_MARKS

pytestmark = FLINK_MARKS


def _gone(pid: int) -> bool:
    """No process is left in the worker's group (the worker, the JVM it started), within 10 s (a killed JVM
    is reaped by init, not by us)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def test_a_run_in_the_worker_comes_back_whole(tmp_path: Path) -> None:
    graph = JobGraph.from_json(EXAMPLES / "keyed-pipeline.json")
    said: list[str] = []
    opts = RunOptions(fail_after=1, records=400, release=None)
    run = launch.run_in_release(None, graph, opts, tmp_path / "work", said.append)
    assert run.flink_version == installed_release().name
    assert [j.stats.state for j in run.jobs if j.stats] == ["FINISHED"]
    assert run.fired is not None and run.fired.startswith("count[")
    assert any(kind == "arm" for _, kind, _ in run.events) and any("armed" in m for m in said)
    assert run.jobs[0].stats and any(cp.status == "COMPLETED" for cp in run.jobs[0].stats.checkpoints)
    assert run.checkpoint_dir == str(tmp_path / "work" / "checkpoints")
    # the parent turns it into a run directory the in-process path would write
    [worker] = launch.workers(None)
    pid = worker.proc.pid if worker.proc else -1
    assert worker.alive() and worker.served == 1
    from cutcheck.flink_bridge import runlog
    from cutcheck.reference.logs import RunLogWriter

    writer = RunLogWriter(tmp_path / "run", in_place=True)
    summary = runlog.write(writer, launch.run_in_release(None, graph, RunOptions(records=300), writer.tmp / "flink"))
    assert summary["exactly_once"]["ok"] and summary["output_rows"] == 300
    assert worker.served == 2 and worker.proc is not None and worker.proc.pid == pid  # one worker, one JVM, two runs
    launch.close_all()
    assert _gone(pid)


def test_an_error_in_the_worker_is_the_same_error_here(tmp_path: Path) -> None:
    worker = launch.Worker(launch.sys.executable, "installed PyFlink")
    try:
        with pytest.raises(CutcheckError, match=r"--mode 'sideways' is not one of unaligned"):
            worker.run(JobGraph.from_json(EXAMPLES / "keyed-pipeline.json"), RunOptions(mode="sideways"), tmp_path)
        assert worker.alive()  # a user mistake does not end the worker
    finally:
        worker.stop()


def test_ctrl_c_stops_the_worker_and_its_jvm(tmp_path: Path) -> None:
    worker = launch.Worker(launch.sys.executable, "installed PyFlink")

    def interrupt(message: str) -> None:
        if "running" in message:  # the JVM and the MiniCluster are up, the job submitted
            raise KeyboardInterrupt

    worker.start()
    pid = worker.proc.pid if worker.proc else -1
    with pytest.raises(KeyboardInterrupt):
        worker.run(JobGraph.from_json(EXAMPLES / "keyed-pipeline.json"), RunOptions(records=3000), tmp_path, interrupt)
    assert worker.proc is None and _gone(pid)  # no process of its group (the worker, the JVM) is left


def test_an_environment_that_imports_another_release_is_refused() -> None:
    worker = launch.Worker(launch.sys.executable, "apache-flink 1.20.3", expect="1.20.3")
    with pytest.raises(CutcheckError, match=rf"imports PyFlink {installed_release().name}; remove it .*--remove 1.20.3"):
        worker.start()
    assert worker.proc is None



def test_a_call_in_the_worker_answers_json_and_keeps_errors_whole() -> None:
    from cutcheck.flink_bridge.worker import observe_in_release

    try:
        assert launch.call_in_release(None, "cutcheck.flink_bridge.versions:parse", "2.1.0") == [2, 1, 0]
        assert observe_in_release(None, "cutcheck.flink_bridge.versions:parse", "1.20.3") == [1, 20, 3]
        with pytest.raises(CutcheckError, match="not an apache-flink release number"):
            launch.call_in_release(None, "cutcheck.flink_bridge.versions:parse", "two")
        with pytest.raises(CutcheckError, match="only functions of cutcheck"):
            launch.call_in_release(None, "os:getcwd", None)
        with pytest.raises(CutcheckError, match="no such function"):
            launch.call_in_release(None, "cutcheck.flink_bridge.versions:nothing", None)
        [worker] = launch.workers(None)
        assert worker.alive() and worker.served == 5  # one worker answered all five, one after another
        with launch.worker_for(None) as busy, launch.worker_for(None) as other:  # two threads at once get two
            assert busy is worker and other is not worker
            assert other.call("cutcheck.flink_bridge.versions:parse", "2.3.0") == [2, 3, 0]
        assert len(launch.workers(None)) == 2
    finally:
        launch.close_all()
