"""`cutcheck flink run` with a deadline, a checkpoint timeout, tolerated failures and further configuration; a run
that reaches its deadline judged stalled (exit 1) or still progressing (exit 2).

Most tests need no JVM: the options' parsing and refusals, the stall rule on synthetic timelines, the sampler on a
fake REST API, the worker's encoding, and the CLI's verdicts on a run handed back by a stand-in. The last test
runs the alignment-stall triangle on the installed Flink (marked like the other Flink tests)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from cutcheck import flink_bridge
from cutcheck.flink_bridge import runlog, settings, watch
from cutcheck.flink_bridge.env import Cluster
from cutcheck.flink_bridge.features import features
from cutcheck.flink_bridge.hunt.observe import failed_restore
from cutcheck.flink_bridge.liveness import Liveness, Sample, Timeline, judge, sink_counts, window_s
from cutcheck.flink_bridge.runner import FlinkRun, JobRun, RunOptions, job_config, prepare
from cutcheck.flink_bridge.translate import ProbeSpec
from cutcheck.flink_bridge.worker import decode_run, encode_run
from cutcheck.model.errors import CutcheckError
from cutcheck.model.graph import JobGraph
from tests.flink.helpers import FLINK_MARKS, ROOT, cli_error, invoke

TRIANGLE = ROOT / "tests" / "reference" / "regressions" / "alignment-stall-triangle.json"


def _error_line(result: Any) -> str:
    return cli_error(result)[0]


@pytest.fixture
def triangle(tmp_path: Path) -> Path:
    path = tmp_path / "triangle.json"
    path.write_text(json.dumps(json.loads(TRIANGLE.read_text())["graph"]))
    return path


# --- the options: parsing and refusals, before Flink starts ---------------------------------------------------


def test_conf_pairs_parse() -> None:
    assert settings.parse_conf(["taskmanager.memory.segment-size=32kb", " execution.buffer-timeout = 5ms",
                                "a.b=x=y", "a.b=x=y"]) == {"taskmanager.memory.segment-size": "32kb",
                                                          "execution.buffer-timeout": "5ms", "a.b": "x=y"}
    assert settings.parse_conf(None) == {}


@pytest.mark.parametrize(("pairs", "words"), [
    (["buffers"], "is not KEY=VALUE"),
    (["=2"], "is not KEY=VALUE"),
    (["taskmanager.memory.segment-size="], "is not KEY=VALUE"),
    (["a key=1"], "is not KEY=VALUE"),
    (["x.y=1", "x.y=2"], "given twice ('1' and '2')"),
])
def test_malformed_conf_is_refused(pairs: list[str], words: str) -> None:
    with pytest.raises(CutcheckError, match=words.replace("(", r"\(").replace(")", r"\)")):
        settings.parse_conf(pairs)


@pytest.mark.parametrize(("key", "words"), [
    ("execution.checkpointing.timeout", "from --checkpoint-timeout-ms"),
    ("execution.checkpointing.tolerable-failed-checkpoints", "from --tolerable-failed-checkpoints"),
    ("execution.checkpointing.aligned-checkpoint-timeout", "from --alignment-timeout-ms"),
    ("execution.checkpointing.unaligned.enabled", "from --mode"),
    ("execution.checkpointing.unaligned", "from --mode"),  # the 1.19 spelling (--flink 1.19.x)
    ("state.checkpoints.num-retained", "from --retained"),
    ("execution.checkpointing.interval", "from --interval-ms"),
    ("restart-strategy.type", "from --no-restart"),
    ("rest.port", "sets this key itself"),
    ("metrics.fetcher.update-interval", "sets this key itself"),
    ("execution.checkpointing.max-concurrent-checkpoints", "unaligned checkpoints need 1"),
])
def test_keys_the_bridge_sets_are_refused_naming_the_option(key: str, words: str) -> None:
    with pytest.raises(CutcheckError, match=words):
        settings.check_conf({key: "1"})


def test_keys_the_bridge_only_defaults_may_be_given() -> None:
    allowed = {"taskmanager.memory.segment-size": "32kb", "taskmanager.network.memory.buffers-per-channel": "2",
               "taskmanager.network.memory.floating-buffers-per-gate": "8", "restart-strategy.fixed-delay.attempts": "10",
               "execution.buffer-timeout": "1ms", "execution.checkpointing.unaligned.forced": "true"}
    settings.check_conf(allowed)
    settings.check_conf({"taskmanager.memory.segment-size": "32kb"}, process_cluster=True)
    with pytest.raises(CutcheckError, match="--kill-after-checkpoint"):
        settings.check_conf({"taskmanager.memory.network.max": "128m"}, process_cluster=True)
    with pytest.raises(CutcheckError, match="give true or false"):
        settings.check_conf({"execution.checkpointing.unaligned.forced": "yes"})


@pytest.mark.parametrize(("changes", "words"), [
    ({"timeout_s": 0.0}, "--deadline-s 0 must be positive"),
    ({"checkpoint_timeout_ms": 5}, "below Flink's least"),
    ({"tolerable_failed": -1}, "negative"),
    ({"conf": {"rest.address": "x"}}, "sets this key itself"),
])
def test_prepare_refuses_limits_and_conf(changes: dict[str, Any], words: str, triangle: Path) -> None:
    with pytest.raises(CutcheckError, match=words):
        prepare(triangle, RunOptions(**changes))


@pytest.mark.parametrize(("args", "words"), [
    (["--conf", "buffers"], "is not KEY=VALUE"),
    (["--conf", "execution.checkpointing.timeout=1s"], "from --checkpoint-timeout-ms"),
    (["--conf", "rest.bind-port=0"], "sets this key itself"),
    (["--alignment-timeout-ms", "100"], "applies to --mode aligned_timeout only"),
    (["--conf", "jobmanager.memory.process.size=1g", "--kill-after-checkpoint", "1"], "--kill-after-checkpoint"),
])
def test_cli_refuses_before_flink_starts(args: list[str], words: str, triangle: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flink_bridge, "require_flink", lambda: None)
    started: list[int] = []
    monkeypatch.setattr(flink_bridge.runner, "run", lambda *a, **k: started.append(1))
    result = invoke("flink", "run", str(triangle), "--out", str(tmp_path / "r"), *args)
    assert words in _error_line(result)
    assert not started and not (tmp_path / "r").exists()


def test_the_settings_reach_the_job_and_the_cluster(triangle: Path) -> None:
    opts = RunOptions(mode="aligned_timeout", alignment_timeout_ms=1500, checkpoint_timeout_ms=20000, tolerable_failed=7,
                      conf={"execution.buffer-timeout": "1ms", "restart-strategy.fixed-delay.attempts": "10",
                            "taskmanager.network.memory.buffers-per-channel": "1"}, judge_deadline=True)
    graph, _ = prepare(triangle, opts)
    for release in ("2.3.0", "1.19.0"):
        conf = job_config(Cluster(None, 1), opts, "/tmp/ck", True, None, None, graph, features(release))
        assert conf["execution.checkpointing.timeout"] == "20000ms"
        assert conf["execution.checkpointing.tolerable-failed-checkpoints"] == "7"
        assert conf["execution.checkpointing.aligned-checkpoint-timeout"] == "1500ms"
        assert conf["execution.buffer-timeout"] == "1ms" and conf["restart-strategy.fixed-delay.attempts"] == "10"
    plain = job_config(Cluster(None, 1), RunOptions(), "/tmp/ck", True, None, None, graph, features("2.3.0"))
    assert "execution.checkpointing.timeout" not in plain and "execution.checkpointing.tolerable-failed-checkpoints" not in plain
    pytest.importorskip("pyflink.version")  # the cluster's keys name the installed release's retention key
    from cutcheck.flink_bridge.runner import cluster_config

    extra = cluster_config(opts)
    assert extra["taskmanager.network.memory.buffers-per-channel"] == "1" and extra["metrics.fetcher.update-interval"] == "1000"
    assert settings.FETCHER_INTERVAL not in cluster_config(RunOptions())  # the hunt's held cluster compares these


def test_the_worker_carries_the_options_and_the_verdict(triangle: Path) -> None:
    """--flink VERSION: the options travel to the release's worker as JSON, the verdict comes back the same way."""
    opts = RunOptions(timeout_s=60.0, judge_deadline=True, checkpoint_timeout_ms=20000, tolerable_failed=3,
                      conf={"taskmanager.memory.segment-size": "4kb"})
    graph = JobGraph.from_json(triangle)
    live = judge(_stall_timeline(), 60.0)
    run = FlinkRun(graph, opts, [JobRun(0, graph, "j" * 32, 1)], 0, 60_000, "/w", "/w/ck", {"c": "/w/c"}, "c",
                   liveness=live)
    back = decode_run(json.loads(json.dumps(encode_run(run))))
    assert back.options == opts and back.liveness == live


# --- the rule, on synthetic timelines ---------------------------------------------------------------------------


def _s(at: float, received: int, completed: int = 0, failed: int = 0, restarts: int = 0, committed: int = 0,
       job: int = 0, state: str = "RUNNING") -> Sample:
    return Sample(at, job, restarts, state, {"c": received}, {"c": committed}, completed, failed)


def _stall_timeline() -> list[Sample]:
    """The finding's shape: records flow, checkpoint 1 completes at 5 s, c stops at 11 s, nothing after."""
    grow = [_s(t, 200 * t, completed=1 if t >= 5 else 0, committed=800 if t >= 5 else 0) for t in range(1, 12)]
    flat = [_s(t, 2200, completed=1, failed=t // 20, committed=800) for t in range(12, 61)]
    return grow + flat


def test_window_is_thirty_seconds_or_a_third_of_the_deadline() -> None:
    assert window_s(60) == 30 and window_s(90) == 30 and window_s(900) == 300


def test_a_job_that_stops_for_good_stalled() -> None:
    live = judge(_stall_timeline(), 60.0)
    assert live.stalled and live.last_progress_s == 11 and live.quiet_s == 49
    assert live.received == {"c": 2200} and live.committed == {"c": 800} and live.grew_s == {"c": 11}
    assert (live.completed, live.failed, live.restarts) == (1, 3, 0)
    assert live.sentence("2.3.0").startswith("the job stalled: ") and "LIVENESS" in live.sentence("2.3.0")
    assert len(live.timeline) < len(_stall_timeline())  # only the samples where a figure changed, and the last


def test_records_flowing_without_any_checkpoint_are_progress() -> None:
    """Every checkpoint times out (say, a timeout too short for the backpressure), yet data moves: not a stall."""
    live = judge([_s(t, 100 * t, failed=t // 10) for t in range(1, 61)], 60.0)
    assert not live.stalled and live.last_progress_s == 60 and live.completed == 0
    assert "still making progress" in live.sentence("2.3.0") and "raise --deadline-s" in live.sentence("2.3.0")


def test_a_quiet_spell_shorter_than_the_window_is_not_a_stall() -> None:
    samples = [_s(t, 100 * min(t, 35)) for t in range(1, 61)]  # quiet for the last 25 s: under the 30 s window
    assert not judge(samples, 60.0).stalled
    assert judge(samples + [_s(t, 3500) for t in range(61, 66)], 65.0).stalled  # 30 s: now it is


def test_stopping_and_moving_again_before_the_deadline_is_progress() -> None:
    samples = [_s(t, 100 * min(t, 10)) for t in range(1, 50)] + [_s(t, 1000 + 10 * (t - 49)) for t in range(50, 61)]
    live = judge(samples, 60.0)
    assert not live.stalled and live.last_progress_s == 60


def test_committed_rows_and_completed_checkpoints_are_progress() -> None:
    flat = [_s(t, 500, completed=1, committed=100) for t in range(1, 61)]
    assert judge(flat, 60.0).stalled
    assert not judge(flat[:-5] + [_s(t, 500, completed=1, committed=600) for t in range(56, 61)], 60.0).stalled
    assert not judge(flat[:-5] + [_s(t, 500, completed=2, committed=100) for t in range(56, 61)], 60.0).stalled


def test_a_failover_loop_that_replays_the_same_records_is_a_stall() -> None:
    """tolerable 0: each expiry fails the job over; each attempt restores checkpoint 1 (at 500 records received)
    and re-reads what the first attempt had already received, then stops again, short of where it stopped."""
    first = [_s(t, 200 * t, completed=1 if t >= 3 else 0) for t in range(1, 11)]  # ckpt 1 at 600; stops at 2000
    first += [_s(t, 2000, completed=1, failed=1) for t in range(11, 30)]
    again = []
    for k, start in enumerate((30, 55, 80)):  # restarted attempts: count from 0, stop at 1300 (< 2000 - 600)
        again += [_s(t, min(1300, 300 * (t - start + 1)), completed=1, failed=1 + k, restarts=k + 1)
                  for t in range(start, start + 25)]
    live = judge(first + again, 105.0)
    assert live.stalled and live.last_progress_s == 10 and live.restarts == 3
    naive = [s for s in first + again if s.restarts == 0] + [_s(104.0, 5000, completed=1, restarts=3)]
    assert not judge(naive, 105.0).stalled  # while an attempt that gets further than the others is progress


def test_a_restart_that_gets_further_is_progress() -> None:
    first = [_s(t, 200 * t, completed=1 if t >= 3 else 0) for t in range(1, 11)] + \
        [_s(t, 2000, completed=1) for t in range(11, 40)]
    later = [_s(t, min(3000, 400 * (t - 39)), completed=1, restarts=1) for t in range(40, 61)]
    live = judge(first + later, 60.0)
    assert not live.stalled and live.last_progress_s is not None and live.last_progress_s > 40


def test_a_resubmitted_job_counts_from_zero() -> None:
    first = [_s(t, 100 * t, completed=t // 5) for t in range(1, 21)]
    second = [_s(t, 50 * (t - 20), completed=4, job=1) for t in range(21, 61)]
    assert not judge(first + second, 60.0).stalled


def test_too_short_to_tell_says_so() -> None:
    live = judge([_s(t, 0) for t in range(1, 21)], 20.0)
    assert not live.stalled and live.last_progress_s is None
    assert "too briefly to judge" in live.sentence("2.3.0") and "30 s" in live.sentence("2.3.0")


# --- the sampler, on a fake REST API and real part files ---------------------------------------------------------


class FakeRest:
    """``/jobs/<id>``, its checkpoints and its numRestarts metric, as the test sets them; cancel is recorded."""

    def __init__(self, state: str = "RUNNING") -> None:
        self.base = "http://127.0.0.1:1"
        self.state_now = state
        self.read: dict[str, int] = {}
        self.counts = {"completed": 0, "failed": 0}
        self.restarts = 0
        self.complete = True  # read-records-complete

    def get(self, path: str) -> Any:
        if path.endswith("/checkpoints"):
            return {"counts": dict(self.counts), "latest": {}}
        if "metrics?get=numRestarts" in path:
            return [{"id": "numRestarts", "value": str(self.restarts)}]
        names = {"s1": "s1/seq -> s1", "a": "a", "c": "c/format -> c: Writer -> c: Committer"}
        return {"state": self.state_now, "vertices": [
            {"name": names[k], "metrics": {"read-records": n, "read-records-complete": self.complete}}
            for k, n in self.read.items()]}

    def state(self, job: str) -> str:
        return self.state_now

    def latest_completed(self, job: str) -> tuple[int, str | None]:
        return self.counts["completed"], None


def test_sink_counts_read_the_vertex_that_holds_the_sink() -> None:
    vertices = [{"name": "s1/seq -> s1", "metrics": {"read-records": 7}},
                {"name": "c/format -> c: Writer -> c: Committer", "metrics": {"read-records": 41}},
                {"name": "cc/format -> cc: Writer", "metrics": {"read-records": 5}},
                {"name": "d/format -> d: Writer", "metrics": {"read-records": 3, "read-records-complete": False}}]
    assert sink_counts(vertices, ["c", "cc", "d", "gone"]) == {"c": 41, "cc": 5, "d": None, "gone": 0}


def test_timeline_samples_counts_rows_and_jobs(tmp_path: Path) -> None:
    sink = tmp_path / "c"
    sink.mkdir()
    (sink / "part-0-0.csv").write_text("1\n2\n3\n")
    (sink / ".part-0-1.csv.inprogress.x").write_text("4\n5\n")  # not committed
    clock = [100.0]
    timeline = Timeline({"c": str(sink)}, 100.0, lambda: clock[0])
    rest = FakeRest()
    rest.read, rest.counts, rest.restarts = {"s1": 50, "c": 20}, {"completed": 1, "failed": 2}, 1
    timeline.poll(rest, 0, "j0")
    clock[0] = 100.5
    timeline.poll(rest, 0, "j0")  # within a second: no sample
    clock[0] = 101.0
    rest.counts = {"completed": 2, "failed": 2}
    timeline.poll(rest, 0, "j0")
    clock[0] = 101.1
    rest.complete, rest.read = False, {"c": 0}  # a subtask's count not fetched: the last one stands, no drop to 0
    timeline.poll(rest, 0, "j0", force=True)
    rest.complete = True
    clock[0] = 101.2
    rest.read, rest.counts, rest.restarts = {"c": 4}, {"completed": 1, "failed": 0}, 0  # job 1: its own counts
    (sink / "part-0-2.csv").write_text("6\n")
    timeline.poll(rest, 1, "j1", force=True)
    assert [(s.at_s, s.job, s.received, s.committed, s.completed, s.failed, s.restarts) for s in timeline.samples] == [
        (0.0, 0, {"c": 20}, {"c": 3}, 1, 2, 1), (1.0, 0, {"c": 20}, {"c": 3}, 2, 2, 1),
        (1.1, 0, {"c": 20}, {"c": 3}, 2, 2, 1), (1.2, 1, {"c": 4}, {"c": 4}, 3, 2, 1)]


# --- the driver at the deadline -----------------------------------------------------------------------------------


def _result(graph: JobGraph, opts: RunOptions, work: Path) -> FlinkRun:
    return FlinkRun(graph, opts, [JobRun(0, graph, "j" * 32, 1)], 0, 0, str(work), str(work / "ck"), {"c": str(work / "c")})


def test_watch_at_the_deadline_judges_or_raises_as_before(triangle: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    graph = JobGraph.from_json(triangle)
    cancelled: list[str] = []

    def cancel(rest: FakeRest, job: str) -> None:
        cancelled.append(job)
        rest.state_now = "CANCELED"

    monkeypatch.setattr(watch, "rest_cancel", cancel)
    probes = ProbeSpec({"c": 0.0}, None, None, None)
    rest = FakeRest()
    rest.read = {"c": 10}
    opts = RunOptions(timeout_s=45.0)
    # Not judged (compare, conform, the hunt): the same error as ever, which the hunt counts as inconclusive.
    with pytest.raises(CutcheckError, match="did not end within 45 s; it was cancelled") as raised:
        watch.watch(rest, "j" * 32, opts, probes, _result(graph, opts, tmp_path), time.monotonic() - 1, lambda m: None)
    assert not failed_restore(str(raised.value)) and cancelled == ["j" * 32]
    # Judged (`cutcheck flink run`): cancelled, and the verdict kept on the run.
    rest.state_now = "RUNNING"
    opts = RunOptions(timeout_s=45.0, judge_deadline=True)
    result = _result(graph, opts, tmp_path)
    timeline = Timeline({"c": str(tmp_path / "c")}, time.monotonic() - 45.0, time.monotonic)
    timeline.samples.append(_s(0.0, 10))  # c had its 10 records from the start: nothing since
    said: list[str] = []
    state = watch.watch(rest, "j" * 32, opts, probes, result, time.monotonic() - 1, said.append, None, timeline)
    assert state == watch.DEADLINE and cancelled == ["j" * 32] * 2
    assert result.liveness is not None and result.liveness.stalled and result.liveness.received == {"c": 10}
    assert [e[1] for e in result.events] == ["deadline"] and "stalled" in said[-1]


# --- the command's verdicts -------------------------------------------------------------------------------------


def _fake_run(monkeypatch: pytest.MonkeyPatch, live: Liveness | None, seen: list[RunOptions]) -> None:
    def run_to_dir(graph: Any, out: Path, opts: RunOptions, progress: Any = None, force: bool = False) -> Any:
        seen.append(opts)
        g, _ = prepare(graph, opts)
        out.mkdir()
        run = FlinkRun(g, opts, [JobRun(0, g, "j" * 32, 1)], 0, 60_000, str(out / "flink"), str(out / "flink" / "ck"),
                       {"c": str(out / "flink" / "c")}, "c", flink_version="2.3.0", liveness=live)
        return flink_bridge.RunOutcome(out, run, runlog.summary(run))

    monkeypatch.setattr(flink_bridge, "require_flink", lambda: None)
    monkeypatch.setattr(flink_bridge, "run_to_dir", run_to_dir)


def test_a_stalled_run_exits_1_with_what_was_seen(triangle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[RunOptions] = []
    _fake_run(monkeypatch, judge(_stall_timeline(), 60.0), seen)
    result = invoke("flink", "run", str(TRIANGLE), "--out", str(tmp_path / "r"), "--deadline-s", "60",
                     "--checkpoint-timeout-ms", "20000", "--tolerable-failed-checkpoints", "1000",
                     "--conf", "taskmanager.network.memory.buffers-per-channel=1", "--json", str(tmp_path / "s.json"))
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert "the job stalled: " in text and "LIVENESS" in text and "Flink 2.3.0" in text
    assert "2200 records received, 800 committed, last grew at 11 s" in text and "STALLED" in text
    assert "retained checkpoints:" in text
    opts = seen[0]  # the scenario file's graph section is the job
    assert "flink run: triangle (unaligned)" in text
    assert (opts.timeout_s, opts.judge_deadline, opts.checkpoint_timeout_ms, opts.tolerable_failed) == (60.0, True, 20000, 1000)
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["settings"]["conf"] == {"taskmanager.network.memory.buffers-per-channel": "1"}
    assert summary["settings"]["deadline_s"] == 60.0 and summary["settings"]["checkpoint_timeout_ms"] == 20000
    assert summary["liveness"]["stalled"] is True and summary["liveness"]["last_progress_s"] == 11


def test_a_run_still_progressing_exits_2_and_says_raise_the_deadline(triangle: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_run(monkeypatch, judge([_s(t, 100 * t) for t in range(1, 61)], 60.0), [])
    result = invoke("flink", "run", str(triangle), "--out", str(tmp_path / "r"), "--deadline-s", "60",
                     "--json", str(tmp_path / "s.json"))
    line = _error_line(result)
    assert "did not finish within 60 s while still making progress" in line and "raise --deadline-s" in line
    assert json.loads((tmp_path / "s.json").read_text())["liveness"]["stalled"] is False
    assert (tmp_path / "r").is_dir()  # the run directory is kept


def test_a_finished_run_exits_as_before(triangle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_run(monkeypatch, None, [])
    result = invoke("flink", "run", str(triangle), "--out", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output  # no job FINISHED here: not complete, so not judged
    assert "stalled" not in result.output and "deadline" not in result.output


# --- real Flink ---------------------------------------------------------------------------------------------------


def _flink(test: Any) -> Any:
    for mark in FLINK_MARKS:  # the other Flink tests' marks (flink, slow, skipped without the extra)
        test = mark(test)
    return test


@_flink
def test_the_triangle_stalls_on_flink_and_is_judged(triangle: Path, tmp_path: Path) -> None:
    """The forced-aligned stall through the bridge: unaligned checkpoints, the bridge's small network buffers,
    a slow c; the deadline ends it and the verdict is a stall. The aligned control finishes."""
    result = invoke("flink", "run", str(TRIANGLE), "--out", str(tmp_path / "u"), "--mode", "unaligned",
                     "--slow", "c", "--delay-ms", "2", "--deadline-s", "60", "--checkpoint-timeout-ms", "20000",
                     "--tolerable-failed-checkpoints", "1000", "--json", str(tmp_path / "u.json"))
    assert result.exit_code == 1, result.output
    assert "the job stalled: " in " ".join(result.output.split())
    live = json.loads((tmp_path / "u.json").read_text())["liveness"]
    assert live["stalled"] and live["received"]["c"] < 9000 and live["quiet_s"] >= 30
    assert list((tmp_path / "u" / "flink" / "checkpoints").iterdir())  # the checkpoints are retained
    control = invoke("flink", "run", str(triangle), "--out", str(tmp_path / "a"), "--mode", "aligned",
                      "--slow", "c", "--delay-ms", "2", "--deadline-s", "90")
    assert control.exit_code == 0, control.output
