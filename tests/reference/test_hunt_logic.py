"""The hunt's logic (flink_bridge.hunt) with the reference engine standing in for Flink: a planted
catalogue fault (or Flink 1.19's per-vertex refusal rule) is "a Flink with a bug". No Flink needed."""

from __future__ import annotations

import json
from statistics import mean
from typing import Any

import pytest

from cutcheck.flink_bridge.hunt import EngineCaseRunner, Hunt, HuntCase, Kind, predict
from cutcheck.flink_bridge.hunt.case import replay_command
from cutcheck.flink_bridge.hunt.classify import compare
from cutcheck.flink_bridge.hunt.observe import Observation
from cutcheck.flink_bridge.hunt.risk import draw, features, score
from cutcheck.flink_bridge.hunt.runners import Prediction
from cutcheck.flink_bridge.hunt.shrink import shrink
from cutcheck.model.errors import InvalidArgument
from cutcheck.reference.recovery.rescale_refusal import RefusalRule


def mixed(records: int = 120, rescale: dict[str, int] | None = None) -> HuntCase:
    """A source feeding a keyBy and a forward edge (FLINK-38267's shape), its source side rescaled."""
    graph = {"name": "mixed", "vertices": [
        {"id": "src", "kind": "source", "parallelism": 2, "records": records, "keys": 8, "splits": 4},
        {"id": "count", "kind": "keyed_count", "parallelism": 2}, {"id": "map", "kind": "map", "parallelism": 2},
        {"id": "sink", "kind": "sink", "parallelism": 1}, {"id": "sink2", "kind": "sink", "parallelism": 1}],
        "edges": [{"from": "src", "to": "count", "partitioner": "hash"}, {"from": "src", "to": "map", "partitioner": "forward"},
                  {"from": "count", "to": "sink", "partitioner": "rebalance"},
                  {"from": "map", "to": "sink2", "partitioner": "rebalance"}]}
    return HuntCase(graph, "unaligned", 1, {"src": 3, "map": 3} if rescale is None else rescale)


def quiet(_msg: str) -> None:
    pass


# ---------------------------------------------------------------- prediction under the documented rule
def test_the_prediction_accepts_a_mixed_exchange_restore_that_the_per_vertex_rule_refuses() -> None:
    case = mixed()
    assert predict(case).refused is None and predict(case).exactly_once
    per_vertex = EngineCaseRunner(rule=RefusalRule.PER_VERTEX).run(case)
    assert per_vertex.restore_failed is not None and "forward edge" in per_vertex.restore_failed
    assert EngineCaseRunner().run(case).restore_failed is None


def _checkpoint(graph: Any, held_edge: int | None) -> Any:
    from cutcheck.model.execution import SubtaskId
    from cutcheck.reference.runtime.network import Buf
    from cutcheck.reference.runtime.tasks import TaskSnapshot
    from cutcheck.reference.storage.memory import CompletedCheckpoint

    snaps = {SubtaskId(v.id, i): TaskSnapshot(1, SubtaskId(v.id, i), {"x": 1}) for v in graph.vertices
             for i in range(v.parallelism)}
    snaps[SubtaskId("count", 0)].input_state[(0, 0, 0)] = [Buf([(0, 1, 0, 0, 0, 0, -1)], 0)]  # the hash edge holds data
    if held_edge is not None:
        target = graph.edge(held_edge).target
        snaps[SubtaskId(target, 0)].input_state[(held_edge, 0, 0)] = [Buf([(1, 1, 0, 0, 0, 0, -1)], 0)]
    return CompletedCheckpoint(1, "checkpoint", 0, {v.id: v.parallelism for v in graph.vertices}, snaps)


@pytest.mark.parametrize(("rule", "held_edge", "refused"), [
    (RefusalRule.PER_VERTEX, None, True),  # Flink 1.19: the forward edge is asked although it holds nothing
    (RefusalRule.PER_EXCHANGE, None, False),  # documented (and FLINK-38267's fix): only data-holding exchanges
    (RefusalRule.PER_EXCHANGE, 1, True),  # the forward edge itself holds data: no mapper can rescale it
])
def test_the_refusal_rules(rule: RefusalRule, held_edge: int | None, refused: bool) -> None:
    from cutcheck.model.errors import RestoreRefused
    from cutcheck.reference.checks.restore_judgement import flink_refusal
    from cutcheck.reference.recovery.rescale_refusal import refusal_rule, refuse_if_flink_would

    graph = mixed().job_graph()
    done = _checkpoint(graph, held_edge)
    new = {**done.parallelism, "src": 3, "map": 3}
    with refusal_rule(rule):
        try:
            refuse_if_flink_would(graph, done, new)
            got = False
        except RestoreRefused:
            got = True
        judged = flink_refusal(graph, done, new) is not None  # RESTORE_JUDGED states the same rule again
    assert got is refused and judged is refused


# ---------------------------------------------------------------- risk weighting
def test_a_rescale_that_remaps_a_side_with_an_unmappable_exchange_scores_higher() -> None:
    rescaled, kept = features(mixed()), features(mixed(rescale={}))
    assert rescaled["inflight_edges"] > 0 and rescaled["remapped_sides"] > 0
    assert rescaled["unmappable_on_remapped_side"] > 0 and kept["unmappable_on_remapped_side"] == 0
    assert rescaled["mixed_exchanges"] > 0
    assert score(rescaled) > score(kept)
    aligned = HuntCase(mixed().graph, "aligned", 1, {"src": 3, "map": 3})
    assert features(aligned)["inflight_edges"] == 0 and features(aligned)["remapped_sides"] == 0


def test_draws_are_deterministic_and_favour_risky_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = EngineCaseRunner()
    a = draw(7, runner.records, runner.accepts)
    b = draw(7, runner.records, runner.accepts)
    assert a is not None and b is not None and a.to_json() == b.to_json()
    pools: list[list[float]] = []
    import cutcheck.flink_bridge.hunt.risk as risk

    real_choices = risk.random.Random.choices

    def spy(self: Any, population: list[HuntCase], weights: list[float]) -> list[HuntCase]:
        pools.append(list(weights))
        return real_choices(self, population, weights=weights)

    monkeypatch.setattr(risk.random.Random, "choices", spy)
    chosen = [draw(s, runner.records, runner.accepts) for s in range(40)]
    picked = mean(c.risk for c in chosen if c is not None)
    assert picked > mean(w for pool in pools for w in pool)  # weighted, not uniform


# ---------------------------------------------------------------- comparison and classification
def _pred(**kw: Any) -> Prediction:
    base: dict[str, Any] = {"refused": None, "unaligned_edges": ["#0 src -> count"], "exactly_once": True,
                            "counts_hold": True}
    return Prediction(**{**base, **kw})


EO_OK = {"ok": True, "lost": 0, "duplicated": 0, "phantom": 0, "count_gaps": 0, "samples": {}}


@pytest.mark.parametrize(("obs", "pred", "kind"), [
    (Observation(restore_failed="Flink job x ended FAILED (java.lang.UnsupportedOperationException: Cannot rescale)"),
     _pred(), Kind.RESTORE_FAILED),
    (Observation(exactly_once=EO_OK, completed=3), _pred(refused="edge #1 holds data"), Kind.RESTORE_NOT_REFUSED),
    (Observation(exactly_once=EO_OK, completed=3, unaligned_checkpoints=0), _pred(), Kind.ALIGNED_WHERE_UNALIGNED),
    (Observation(exactly_once=EO_OK, completed=3, persisted_bytes=4096), _pred(unaligned_edges=[]),
     Kind.UNALIGNED_WHERE_ALIGNED),
    (Observation(exactly_once={**EO_OK, "ok": False, "lost": 2, "samples": {"lost": [4, 9]}}), _pred(), Kind.OUTPUT),
    (Observation(exactly_once={**EO_OK, "ok": False, "count_gaps": 1}), _pred(), Kind.KEY_STATE),
    (Observation(exactly_once=EO_OK, missing_files=["job/chk-3: /x/shared/a"]), _pred(), Kind.MISSING_FILE),
    (Observation(exactly_once=EO_OK, violations=[{"invariant": "OWNERSHIP", "detail": "key 3 outside", "step": "9"}]),
     _pred(), Kind.KEY_STATE),
])
def test_each_disagreement_gets_its_class(obs: Observation, pred: Prediction, kind: Kind) -> None:
    found = compare(mixed(), pred, obs)
    assert [d.kind for d in found] == [kind]
    assert found[0].evidence


def test_output_witnesses_are_record_ids() -> None:
    obs = Observation(exactly_once={**EO_OK, "ok": False, "duplicated": 1, "samples": {"duplicated": [17]}})
    assert compare(mixed(), _pred(), obs)[0].witnesses == ("rid 17",)


def test_agreement_and_inconclusive_runs_are_no_disagreement() -> None:
    assert compare(mixed(), _pred(), Observation(exactly_once=EO_OK, completed=3, unaligned_checkpoints=3)) == []
    assert compare(mixed(), _pred(), Observation(inconclusive="the failure never fired", restore_failed="x")) == []


def test_a_documented_departure_is_classed_as_such() -> None:
    """A custom exchange beside a rebalance one into the same vertex: the model keeps both aligned (README row)."""
    case = mixed()
    case.graph["vertices"] += [{"id": "co", "kind": "co_map", "parallelism": 2}, {"id": "s3", "kind": "sink", "parallelism": 1}]
    case.graph["edges"] += [{"from": "src", "to": "co", "partitioner": "custom", "gate": 0},
                            {"from": "map", "to": "co", "partitioner": "rebalance", "gate": 1},
                            {"from": "co", "to": "s3", "partitioner": "rebalance"}]
    found = compare(case, _pred(unaligned_edges=[]), Observation(exactly_once=EO_OK, completed=2, persisted_bytes=512))
    assert [d.kind for d in found] == [Kind.MODEL_DEPARTURE]
    assert found[0].departure and found[0].departure.startswith("A custom partitioner")


# ---------------------------------------------------------------- shrinking
def test_shrinking_keeps_only_steps_that_still_disagree_and_runs_each() -> None:
    case = mixed(records=160)
    calls: list[HuntCase] = []

    def has_forward(c: HuntCase) -> bool:
        return any(e["partitioner"] == "forward" for e in c.graph["edges"])

    def check(c: HuntCase) -> bool:
        calls.append(c)
        return has_forward(c)

    small, log = shrink(case, check, lambda c: True)
    assert log.runs == len(calls) == len(log.steps)
    assert [s["kept"] for s in log.steps] == [has_forward(c) for c in calls]
    assert {v["id"]: v["parallelism"] for v in small.graph["vertices"]} == {"src": 1, "map": 1, "sink2": 1}
    assert max(v.get("records", 0) for v in small.graph["vertices"]) == 20  # MIN_RECORDS
    assert small.rescale == {"src": 3, "map": 3}


# ---------------------------------------------------------------- campaigns
def test_the_unfaulted_engine_reports_nothing() -> None:
    report = Hunt(EngineCaseRunner(), seed=0, minutes=5, max_cases=25, progress=quiet).run()
    assert report.cases == 25 and report.conclusive >= 20
    assert report.findings == []


def test_a_planted_fault_is_found_shrunk_and_reproduced() -> None:
    runner = EngineCaseRunner(fault="skip-stateless-reassignment")
    report = Hunt(runner, seed=0, minutes=5, max_cases=20, reruns=3, progress=quiet).run()
    assert report.findings, "the planted fault was not found"
    f = report.findings[0]
    assert "output" in f.kinds and f.reproduced == f.reruns == 3
    assert f.shrunk is not None and f.shrunk.size() <= f.case.size() and f.shrink_log is not None
    assert f.shrink_log.runs == len(f.shrink_log.steps)
    kept = [s for s in f.shrink_log.steps if s["kept"]]
    assert not kept or tuple(kept[-1]["size"]) == f.shrunk.size()
    again = compare(f.shrunk, predict(f.shrunk), runner.run(f.shrunk))
    assert {d.kind for d in again} >= {Kind.OUTPUT}


def test_the_per_vertex_refusal_class_is_found_and_shrunk_small() -> None:
    """FLINK-38267's class offline: a "Flink" that refuses per vertex, hunted with the documented prediction."""
    runner = EngineCaseRunner(rule=RefusalRule.PER_VERTEX)
    report = Hunt(runner, seed=1, minutes=5, max_cases=20, reruns=3, progress=quiet).run()
    hits = [f for f in report.findings if "restore-failed" in f.kinds]
    assert hits, [f.key for f in report.findings]
    f = hits[0]
    assert f.shrunk is not None and len(f.shrunk.graph["vertices"]) <= 4 and f.reproduced == 3
    assert Hunt(EngineCaseRunner(), seed=1, minutes=5, max_cases=20, progress=quiet).run().findings == []


def test_one_seed_draws_one_sequence_of_cases() -> None:
    def names(seed: int) -> list[str]:
        seen: list[str] = []
        Hunt(EngineCaseRunner(), seed=seed, minutes=5, max_cases=4, progress=seen.append).run()
        return seen

    assert names(3) == names(3) and names(3) != names(4)


def test_workers_run_the_same_cases_in_the_same_order() -> None:
    """Two worker processes (spawned, each its own engine) judge the same cases as one process, in draw order."""
    def lines(workers: int) -> list[str]:
        seen: list[str] = []
        Hunt(EngineCaseRunner(), seed=5, minutes=5, max_cases=4, workers=workers, progress=seen.append).run()
        return seen

    assert lines(2) == lines(1)


# ---------------------------------------------------------------- JSON and replay
def test_report_json_names_the_finding_and_its_replay(tmp_path: Any) -> None:
    from cutcheck.flink_bridge.hunt.artifacts import write_findings

    report = Hunt(EngineCaseRunner(rule=RefusalRule.PER_VERTEX), seed=1, minutes=5, max_cases=20,
                  reruns=2, progress=quiet).run()
    write_findings(report, tmp_path / "hunt.json", "2.1.0", 2)
    data = json.loads(json.dumps(report.to_json()))
    f = data["findings"][0]
    assert f["rate"] == "2/2" and f["kinds"] and f["disagreements"][0]["evidence"]
    assert f["replay"].startswith("cutcheck flink hunt --flink 2.1.0 --replay ") and f["case_file"] in f["replay"]
    assert HuntCase.load(f["case_file"]).to_json() == f["shrunk"]
    assert set(data["time"]) >= {"predict", "run", "compare", "shrink", "rerun"} and data["graphs_per_minute"] > 0


def test_an_inline_replay_command_carries_the_whole_case() -> None:
    import shlex

    line = replay_command(None, mixed(), 3)
    args = shlex.split(line)
    assert args[:3] == ["cutcheck", "flink", "hunt"] and args[-2:] == ["--reruns", "3"]
    assert HuntCase.load(args[args.index("--replay") + 1]).to_json() == mixed().to_json()


@pytest.mark.parametrize("bad", ['{"graph": {}}', '{"cutcheck_hunt_case": 1, "graph": {"name": "x"}}', "{nope"])
def test_a_bad_case_is_one_sentence(bad: str) -> None:
    with pytest.raises(InvalidArgument) as exc:
        HuntCase.load(bad)
    assert "\n" not in str(exc.value)


def test_cli_replay_of_a_bad_case_file_exits_2(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from cutcheck.cli import app

    path = tmp_path / "case.json"
    path.write_text('{"not": "a case"}')
    result = CliRunner().invoke(app, ["flink", "hunt", "--replay", str(path)])
    assert result.exit_code == 2, result.output
    assert "not a hunt case" in result.output


def test_a_release_that_cannot_run_here_is_one_sentence_and_exit_2() -> None:
    from typer.testing import CliRunner

    from cutcheck.cli import app

    result = CliRunner().invoke(app, ["flink", "hunt", "--flink", "0.0.1", "--cases", "1"])
    assert result.exit_code == 2, result.output
    assert "0.0.1" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(("error", "restore"), [
    ("Flink did not accept job 'cutcheck g #1': Caused by: java.lang.UnsupportedOperationException: Cannot rescale "
     "the given pointwise partitioner..", True),  # FLINK-38267 on 2.1.0: the rescaled resubmission is refused
    ("Flink job 0123 ended FAILED (java.lang.IllegalStateException: x); see the logs in /tmp.", True),
    ("Flink did not accept job 'cutcheck g #0': Caused by: IllegalConfigurationException: bad", False),
    ("the job finished before the failure after checkpoint 1 could fire; give more --records.", False),
])
def test_which_flink_errors_are_failed_restores(error: str, restore: bool) -> None:
    from cutcheck.flink_bridge.hunt.observe import failed_restore

    assert failed_restore(error) is restore


def test_a_model_run_that_breaks_an_invariant_predicts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the engine itself does not finish (LIVENESS), the case is not judged and says why."""
    import cutcheck.flink_bridge.hunt.runners as runners

    real = runners.engine_run

    def stuck(case: HuntCase, mutants: tuple[str, ...] = (), rule: RefusalRule = RefusalRule.PER_EXCHANGE) -> Any:
        result = real(case, mutants, rule)
        result.violations = [{"invariant": "LIVENESS", "detail": "the job did not finish within 10 steps"}]
        return result

    monkeypatch.setattr(runners, "engine_run", stuck)
    pred = predict(mixed())
    assert pred.inconclusive is not None and "model problem" in pred.inconclusive and "LIVENESS" in pred.inconclusive
    assert compare(mixed(), pred, Observation(exactly_once={**EO_OK, "ok": False, "lost": 3})) == []


# ---------------------------------------------------------------- the restore's dimensions
def test_a_savepoint_only_fault_is_found_by_savepoint_draws_and_not_without_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """FLINK-18252's class: a "Flink" whose savepoints take the checkpoints' unaligned options. Only a case
    that restores from a savepoint exposes it; with the dimension switched off the same hunt is clean."""
    import cutcheck.flink_bridge.hunt.risk as risk

    runner = EngineCaseRunner(fault="savepoint-as-priority-barrier")
    report = Hunt(runner, seed=0, minutes=5, max_cases=12, reruns=2, progress=quiet).run()
    assert report.findings, "the savepoint fault was not found"
    f = report.findings[0]
    assert f.case.savepoint is not None and f.shrunk is not None and f.shrunk.savepoint is not None
    assert f.reproduced == 2 and "unaligned-where-aligned" in f.kinds
    monkeypatch.setattr(risk, "P_SAVEPOINT", 0.0)
    assert Hunt(runner, seed=0, minutes=5, max_cases=12, progress=quiet).run().findings == []


def test_savepoint_cases_restore_from_the_savepoint_and_fail_again_after_it() -> None:
    """The model's reading of a savepoint case: snapshot N + 1 is the savepoint, the rescaled restore is from
    it (never refused: a savepoint holds no channel state), and the failure after the restore comes later."""
    case = mixed()
    case.mode, case.savepoint, case.claim_mode, case.fail_restored = "unaligned", "native", "claim", 1
    pred = predict(case)
    assert pred.refused is None and pred.exactly_once and pred.inconclusive is None
    from cutcheck.flink_bridge.hunt.runners import engine_run

    result = engine_run(case)
    kinds = [(c["id"], c["kind"]) for c in result.checkpoints if c["status"] == "completed"]
    assert (case.fail_after + 1, "savepoint") in kinds
    assert result.summary()["restarts"] == 2
    opts = case.options()
    assert (opts.savepoint, opts.stop_after, opts.fail_after, opts.claim_mode) == ("native", case.fail_after, 1, "claim")
    from cutcheck.flink_bridge.runner import prepare, resubmits

    _, target = prepare(case.graph, opts)  # the runner takes a savepoint with a failure after the restore
    assert target.vertex("src").parallelism == 3 and resubmits(opts)
    again = HuntCase.from_json(json.loads(json.dumps(case.to_json())))
    assert again.to_json() == case.to_json() and "native savepoint" in again.summary()


@pytest.mark.parametrize(("field", "value"), [("savepoint", "binary"), ("claim_mode", "legacy"), ("incremental", "yes"),
                                              ("fail_restored", 0)])
def test_a_case_with_a_bad_dimension_is_one_sentence(field: str, value: Any) -> None:
    data = {**mixed().to_json(), "savepoint": "canonical", field: value}
    with pytest.raises(InvalidArgument) as exc:
        HuntCase.from_json(data)
    assert "\n" not in str(exc.value) and field in str(exc.value)


def test_the_drawn_dimensions_score_where_the_model_says_files_or_exchanges_are_at_stake() -> None:
    case = mixed()
    base = features(case)
    assert base["claimed_shared"] == base["shared_state"] == base["exposed_exchanges"] == 0
    case.incremental, case.claim_mode = True, "claim"
    case.chaining = False
    feats = features(case)
    assert feats["claimed_shared"] == 1.0 and score(feats) > score(base)


def keyed_case(max_after: int | None) -> HuntCase:
    graph = {"name": "keyed", "vertices": [
        {"id": "src", "kind": "source", "parallelism": 2, "records": 120, "keys": 8, "splits": 4},
        {"id": "count", "kind": "keyed_count", "parallelism": 2}, {"id": "sink", "kind": "sink", "parallelism": 1}],
        "edges": [{"from": "src", "to": "count", "partitioner": "hash"},
                  {"from": "count", "to": "sink", "partitioner": "rebalance"}]}
    return HuntCase(graph, "aligned", 1, {"count": 3}, max_parallelism_after={} if max_after is None else {"count": max_after})


def test_a_changed_max_parallelism_of_keyed_state_is_predicted_refused() -> None:
    """Flink's rule: explicitly set max parallelism (the translation sets every operator's) that changed on the
    restore of a task with state is refused; the same max parallelism is accepted."""
    refused = predict(keyed_case(64))
    assert refused.refused is not None and "count (128 -> 64)" in refused.refused
    assert predict(keyed_case(128)).refused is None and predict(keyed_case(None)).refused is None
    opts = keyed_case(64).options()
    assert opts.restore_max_parallelism == {"count": 64}
    from cutcheck.flink_bridge.runner import prepare

    _, target = prepare(keyed_case(64).graph, opts)
    assert target.max_parallelism("count") == 64 and target.vertex("count").parallelism == 3


def test_a_flink_that_restores_at_a_changed_max_parallelism_is_found_and_not_without_the_dimension(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import cutcheck.flink_bridge.hunt.risk as risk

    runner = EngineCaseRunner(keeps_max_parallelism=True)
    monkeypatch.setattr(risk, "P_MAX_PARALLELISM", 1.0)
    report = Hunt(runner, seed=0, minutes=5, max_cases=6, reruns=2, progress=quiet).run()
    hits = [f for f in report.findings if "restore-not-refused" in f.kinds]
    assert hits and hits[0].reproduced == 2 and hits[0].shrunk is not None and hits[0].shrunk.max_parallelism_after
    monkeypatch.setattr(risk, "P_MAX_PARALLELISM", 0.0)
    assert Hunt(runner, seed=0, minutes=5, max_cases=6, progress=quiet).run().findings == []


def test_a_case_the_standalone_script_cannot_carry_says_so() -> None:
    from cutcheck.flink_bridge.hunt.artifacts import render_script

    text, note = render_script(keyed_case(64))
    assert text is None and "max parallelism" in note
