"""What works without a Flink cluster: the missing-extra message, refusals of what the translation
does not cover (exit 2, one sentence), and the file-level helpers. These run with or without apache-flink."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cutcheck import flink_bridge
from cutcheck.cli import app
from cutcheck.flink_bridge import env as flink_env
from cutcheck.flink_bridge.checkpoints import MAGIC, is_flink_checkpoint_dir, relocate
from cutcheck.flink_bridge.runlog import committed_files
from cutcheck.flink_bridge.translate import check_supported
from cutcheck.model.errors import GraphError
from cutcheck.model.graph import JobGraph
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


# --- flink compare's calibration and flink conform's graph filter (no Flink needed) ---------------------------

def test_within_is_symmetric_and_twenty_percent() -> None:
    from cutcheck.flink_bridge.compare import within

    assert within(8, 10) and within(10, 8) and within(0, 0) and within(12, 10)
    assert not within(7, 10) and not within(10, 13) and not within(0, 3)


def test_next_interval_scales_and_bisects_a_bracket() -> None:
    from cutcheck.flink_bridge.compare import MIN_INTERVAL, next_interval

    assert next_interval(50, 20, 10, {50: 20}) == 100  # twice the checkpoints wanted: twice the interval
    assert next_interval(100, 5, 10, {100: 5}) == 50
    assert next_interval(3, 1, 100, {3: 1}) == MIN_INTERVAL
    # 40 gave too many, 90 too few: their geometric midpoint, whatever the proportional guess
    assert next_interval(90, 2, 10, {40: 14, 90: 2}) == 60
    assert next_interval(41, 2, 10, {40: 14, 41: 2}) == 8  # nothing left between: scale (the caller then scans)


def test_calibrate_reaches_the_target_on_a_non_proportional_count() -> None:
    from cutcheck.flink_bridge.compare import calibrate, within

    def count(interval: int) -> int:  # checkpoints fall faster than 1/interval, as a job lengthens with them
        return int(3000 / interval ** 1.3)

    interval, got, trials = calibrate(lambda i: count(i), lambda c: c, 12, 20)
    assert within(got, 12) and got == count(interval)
    assert len(trials) <= 8 and trials[0][0] == 20


def test_calibrate_returns_the_closest_run_when_it_cannot_match() -> None:
    from cutcheck.flink_bridge.compare import calibrate

    def count(interval: int) -> int:  # a cliff: 30 checkpoints below 15 steps, 2 from there on
        return 30 if interval < 15 else 2

    interval, got, trials = calibrate(count, lambda c: c, 10, 10, rounds=4)
    assert [i for i, _ in trials] == [10, 30, 17, 13]  # proportional, then bisecting the bracket
    assert (interval, got) == (17, 2)  # the closest count; among equals the shortest interval


def test_engine_calibration_on_keyed_pipeline_with_a_failure_and_a_rescale() -> None:
    """The engine's real run (checkpoints, failure, rescale) is what is calibrated, not a dry run."""
    from cutcheck.flink_bridge.compare import calibrate, engine_steps, run_engine, within
    from cutcheck.flink_bridge.runner import RunOptions, prepare, slow_vertex

    opts = RunOptions(mode="unaligned", fail_after=2, rescale={"count": 3}, records=1000)
    graph, _ = prepare(EXAMPLES / "keyed-pipeline.json", opts)
    slow = slow_vertex(graph, opts)
    for want in (3, 6, 10):
        _, side, trials = calibrate(lambda i: run_engine(graph, opts, i, slow, slow), lambda s: s.completed, want,
                                    engine_steps(graph, opts, slow) // want)
        assert within(side.completed, want), (want, trials)
        assert side.verdict == "holds" and side.restarts == 1


def test_conform_draws_only_graphs_flink_runs_deterministically() -> None:
    from cutcheck.flink_bridge.conform import MAX_PARALLELISM, cases, draw_case, rescalable
    from cutcheck.flink_bridge.runner import prepare

    drawn = list(cases(0, 20))
    assert [c.seed for c in drawn] == [c.seed for c in cases(0, 20)], "deterministic by seed"
    assert len({c.seed for c in drawn}) == 20
    for case in drawn:
        graph = JobGraph.from_json(case.graph)
        check_supported(graph)
        prepare(graph, case.opts)  # the options drawn are accepted too
        assert case.opts.fail_after in (1, 2)
        movable = rescalable(graph)
        assert bool(case.opts.rescale) == bool(movable), "a rescale wherever the graph allows one"
        for vid, p in case.opts.rescale.items():
            assert vid in movable and p != graph.vertex(vid).parallelism and 1 <= p <= MAX_PARALLELISM
    # the limits lifted (issue 23): custom edges under unaligned modes, two-input and broadcast vertices
    assert any(c.opts.mode != "aligned" and any(e["partitioner"] == "custom" for e in c.graph["edges"]) for c in drawn)
    kinds = {v["kind"] for c in drawn for v in c.graph["vertices"]}
    assert {"co_map", "broadcast_state"} <= kinds
    skipped = [s for s in range(drawn[-1].seed) if s not in {c.seed for c in drawn}]
    for s in skipped:
        assert draw_case(s) is None


def test_conform_replay_is_a_compare_command(tmp_path: Path) -> None:
    from cutcheck.flink_bridge.conform import draw_case

    case = next(c for c in map(draw_case, range(50)) if c is not None and c.opts.rescale)
    replay = case.replay(tmp_path / "g.json")
    assert replay.startswith(f"cutcheck flink compare {tmp_path / 'g.json'} --mode {case.opts.mode}")
    assert f"--fail-after-checkpoint {case.opts.fail_after}" in replay and "--rescale" in replay


def _fake_compare(verdicts: tuple[str, str]) -> Any:
    from cutcheck.flink_bridge.compare import Comparison, Side

    def side(name: str, verdict: str) -> Side:
        s = Side(name, "steps" if name == "engine" else "ms", 5, 0, 1, {"ok": verdict == "holds", "lost": 1,
                 "duplicated": 0, "phantom": 0}, [(1, 100)], [(1, 50)], [(1, 3)])
        s.refused = "restore refused" if verdict == "refused" else None
        return s

    def compare(graph: Any, opts: Any, out: Any = None, progress: Any = None, **_: Any) -> Comparison:
        return Comparison(graph.name if hasattr(graph, "name") else "g", opts.mode, side("engine", verdicts[0]),
                          side("flink", verdicts[1]), 40, [(20, 9), (40, 5)], opts.interval_ms)

    return compare


@pytest.mark.parametrize(("verdicts", "code"), [(("holds", "holds"), 0), (("refused", "refused"), 0),
                                                (("holds", "refused"), 1), (("violated", "holds"), 1)])
def test_conform_cli_exit_codes_and_replay(verdicts: tuple[str, str], code: int, monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    import cutcheck.flink_bridge.conform as conform_mod

    monkeypatch.setattr(flink_bridge, "require_flink", lambda: None)
    monkeypatch.setattr(conform_mod, "compare", _fake_compare(verdicts))
    out = tmp_path / "conform"
    result = _invoke("flink", "conform", "--graphs", "2", "--seed", "3", "--out", str(out),
                     "--json", str(tmp_path / "c.json"))
    assert result.exit_code == code, result.output
    report = json.loads((tmp_path / "c.json").read_text())
    assert report["graphs"] == 2 and report["all_agree"] == (code == 0)
    for row in report["rows"]:
        assert Path(row["graph_file"]).parent == out and Path(row["graph_file"]).exists()
        JobGraph.from_json(Path(row["graph_file"]))
        assert (row["replay"] is None) == row["agree"]
    assert result.output.count("replay: cutcheck flink compare") == (0 if code == 0 else 2)
    assert json.loads((out / "run.json").read_text())["written_by"] == "cutcheck"
    again = _invoke("flink", "conform", "--graphs", "2", "--seed", "3", "--out", str(out))
    assert again.exit_code == 2 and "--force" in _error_line(again)


@pytest.mark.parametrize("args", [["--graphs", "0"], ["--out", "."], ["--records", "1"]])
def test_conform_bad_input_exits_2(args: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(flink_bridge, "require_flink", lambda: None)
    base = ["--out", str(tmp_path / "c")] if "--out" not in args else []
    result = _invoke("flink", "conform", *base, *args)
    assert result.exit_code == 2, result.output


def test_compare_table_marks_what_is_comparable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import cutcheck.flink_bridge.compare as compare_mod

    monkeypatch.setattr(flink_bridge, "require_flink", lambda: None)
    monkeypatch.setattr(compare_mod, "compare", _fake_compare(("holds", "holds")))
    result = _invoke("flink", "compare", str(EXAMPLES / "keyed-pipeline.json"), "--json", str(tmp_path / "c.json"))
    assert result.exit_code == 0, result.output
    for words in ("comparable", "engine/Flink 1.00, within 20%", "no: steps against milliseconds",
                  "share of in-flight data persisted", "restore refused"):
        assert words in result.output
    cmp = json.loads((tmp_path / "c.json").read_text())
    assert cmp["checkpoint_ratio"] == 1.0 and cmp["calibrated"] and "alignment" in cmp["not_comparable"]
    assert set(cmp["comparable"]) >= {"verdict", "completed", "restarts", "refused", "persisted_share"}


@pytest.mark.parametrize("graph", ["co-map.json", "multi-edge.json", "broadcast-state.json"])
def test_two_input_and_broadcast_graphs_are_translated(graph: str) -> None:
    check_supported(JobGraph.from_json(EXAMPLES / graph))  # refused before this branch: co_map, broadcast_state


def test_a_co_map_with_three_inputs_is_refused_in_one_sentence() -> None:
    data = JobGraph.from_json(EXAMPLES / "co-map.json").to_json()
    data["edges"].append({"from": "orders", "to": "join", "partitioner": "rebalance"})
    data["edges"][-1].pop("gate", None)
    with pytest.raises(GraphError, match="co_map with 3 inputs is not supported on real Flink"):
        check_supported(JobGraph.from_json(data))


def test_release_table_keys_and_custom_partitioner_rules() -> None:
    from cutcheck.flink_bridge.features import Key, features
    from cutcheck.model.errors import CutcheckError

    old, new, two = features("1.19.1"), features("1.20"), features("2.3.0")
    assert old.key(Key.RESTORE_PATH) == "execution.savepoint.path" and old.key(Key.CLAIM_MODE) == "execution.savepoint-restore-mode"
    assert new.key(Key.RESTORE_PATH) == "execution.state-recovery.path" == two.key(Key.RESTORE_PATH)
    assert all(f.custom_needs_forced for f in (old, new, two))
    assert (old.custom_edge_aligned, new.custom_edge_aligned, two.custom_edge_aligned) == (False, False, True)
    for bad, words in (("1.18.1", "older than 1.19"), ("two", "not a version")):
        with pytest.raises(CutcheckError, match=words):
            features(bad)


def test_custom_partitioner_under_unaligned_is_forced_not_refused() -> None:
    from cutcheck.flink_bridge.env import Cluster
    from cutcheck.flink_bridge.features import features
    from cutcheck.flink_bridge.runner import RunOptions, job_config, prepare

    data = JobGraph.from_json(EXAMPLES / "co-map.json").to_json()
    data["edges"][2]["partitioner"] = "custom"  # join -> sink
    for mode, forced in (("unaligned", "true"), ("aligned_timeout", "true"), ("aligned", "false")):
        opts = RunOptions(mode=mode)
        graph, _ = prepare(data, opts)
        conf = job_config(Cluster(None, 1), opts, "/tmp/ck", True, "/tmp/ck/x/chk-1", None, graph, features("2.3.0"))
        assert conf["execution.checkpointing.unaligned.forced"] == forced, mode
        assert conf["execution.state-recovery.claim-mode"] == "NO_CLAIM"


def test_standalone_script_imports_nothing_of_cutcheck_and_carries_the_case() -> None:
    import ast

    from cutcheck.flink_bridge.runner import RunOptions
    from cutcheck.flink_bridge.standalone import render

    opts = RunOptions(mode="unaligned", fail_after=1, rescale={"apply": 2}, claim_mode="claim", records=200)
    data = JobGraph.from_json(EXAMPLES / "broadcast-state.json").to_json()
    data["edges"][1]["partitioner"] = "broadcast"
    with pytest.raises(GraphError, match="broadcast"):  # rescaling a broadcast consumer stays refused
        render(data, opts, release="1.19.0")
    opts.rescale = {"sink": 2}
    text = render(data, opts, release="1.19.0")
    tree = ast.parse(text)
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported and not any(m.split(".")[0] == "cutcheck" for m in imported), imported
    assert {m.split(".")[0] for m in imported} <= {"__future__", "json", "os", "shutil", "sys", "tempfile", "time",
                                                    "urllib", "pyflink"}
    case = json.loads(text.split("json.loads(r\'\'\'", 1)[1].split("\'\'\')", 1)[0])
    assert case["keys"]["restore_path"] == "execution.savepoint.path" and case["release"] == "1.19.0"
    assert case["options"]["rescale"] == {"sink": 2} and case["options"]["claim_mode"] == "claim"
    assert sum(case["expect"]["events"]["copies"]) == len(case["expect"]["events"]["copies"])  # one copy per event
    assert set(case["expect"]["rules"]["copies"]) == {3}  # a broadcast copy per consumer subtask


@pytest.mark.parametrize(("changes", "words"), [
    ({"savepoint": "native"}, "--savepoint needs --stop-after-checkpoint"),
    ({"savepoint": "json", "stop_after": 1}, "--savepoint 'json' is not one of canonical, native"),
    ({"claim_mode": "legacy"}, "--claim-mode 'legacy' is not one of claim, no_claim"),
    ({"kill_after": 1, "rescale": {"count": 1}}, "a fault of its own, restarted in place"),
    ({"kill_after": 0}, "at least 1"),
])
def test_run_option_combinations_are_refused_in_one_sentence(changes: dict[str, Any], words: str) -> None:
    from cutcheck.flink_bridge.runner import RunOptions, prepare
    from cutcheck.model.errors import CutcheckError

    with pytest.raises(CutcheckError, match=words):
        prepare(EXAMPLES / "keyed-pipeline.json", RunOptions(**changes))
    prepare(EXAMPLES / "keyed-pipeline.json", RunOptions(savepoint="canonical", stop_after=2, rescale={"count": 1}))


def test_flink_script_writes_a_new_file_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "case.py"
    result = _invoke("flink", "script", str(EXAMPLES / "co-map.json"), "--out", str(out), "--fail-after-checkpoint", "1",
                     "--release", "1.20.1")
    assert result.exit_code == 0, result.output
    assert "execution.state-recovery.claim-mode" in out.read_text() and "cutcheck import" not in out.read_text()
    before = out.read_text()
    again = _invoke("flink", "script", str(EXAMPLES / "co-map.json"), "--out", str(out))
    assert again.exit_code == 2 and "already exists" in _error_line(again) and out.read_text() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".case.py")], "no temporary left behind"


def test_unaligned_edges_per_release_and_the_engine_rule_for_2x() -> None:
    from cutcheck.flink_bridge.features import features, unaligned_edges
    from cutcheck.model.execution import edge_supports_unaligned

    data = {"name": "mixed", "vertices": [
        {"id": "a", "kind": "source", "parallelism": 2, "records": 10},
        {"id": "b", "kind": "source", "parallelism": 2, "records": 10},
        {"id": "u", "kind": "co_map", "parallelism": 2},
        {"id": "m", "kind": "map", "parallelism": 2},
        {"id": "k", "kind": "sink", "parallelism": 2}],
        "edges": [{"from": "a", "to": "u", "partitioner": "custom"}, {"from": "b", "to": "u", "partitioner": "rebalance"},
                  {"from": "u", "to": "m", "partitioner": "rebalance"}, {"from": "m", "to": "k", "partitioner": "rescale"}]}
    graph = JobGraph.from_json(data)
    two = unaligned_edges(graph, features("2.3.0"))
    assert two == {2} == {e.key for e in graph.edges if edge_supports_unaligned(graph, e.key)}, "2.x is the engine's rule"
    assert unaligned_edges(graph, features("1.19.0")) == {0, 1, 2}, "1.19 forced: the custom edge goes unaligned"
    assert unaligned_edges(graph, features("1.19.0"), forced=False) == {2}


def test_conform_a_run_that_never_failed_is_inconclusive_not_a_disagreement(monkeypatch: pytest.MonkeyPatch,
                                                                           tmp_path: Path) -> None:
    """A job that ends before its failure fires judges neither side: counted apart, exit 0 beside an agreeing
    graph, exit 2 when nothing could be judged (a disagreement is still exit 1: the test above)."""
    import cutcheck.flink_bridge.conform as conform_mod
    from cutcheck.model.errors import CutcheckError

    agreeing = _fake_compare(("holds", "holds"))
    calls: list[int] = []

    def compare(graph: Any, opts: Any, out: Any = None, progress: Any = None, **kw: Any) -> Any:
        calls.append(1)
        if len(calls) == 1 or only_inconclusive:
            raise CutcheckError("the job finished before the failure after checkpoint 1 could fire; give more --records.")
        return agreeing(graph, opts, out, progress, **kw)

    monkeypatch.setattr(flink_bridge, "require_flink", lambda: None)
    monkeypatch.setattr(conform_mod, "compare", compare)
    only_inconclusive = False
    result = _invoke("flink", "conform", "--graphs", "2", "--seed", "3", "--out", str(tmp_path / "a"),
                     "--json", str(tmp_path / "a.json"))
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "a.json").read_text())
    assert (report["agreed"], report["disagreed"], report["inconclusive"]) == (1, 0, 1) and report["all_agree"]
    assert "is inconclusive" in result.output and "disagrees" not in result.output
    only_inconclusive = True
    none = _invoke("flink", "conform", "--graphs", "2", "--seed", "3", "--out", str(tmp_path / "b"))
    assert none.exit_code == 2 and "could be judged" in _error_line(none)
