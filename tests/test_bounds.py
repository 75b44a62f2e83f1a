"""Bounds (issue 26, item 6): worker counts capped at the machine's CPUs, said in one line; graphs and
jobs beyond what cutcheck holds refused from the JSON's counts before anything is built; malformed,
deeply nested or otherwise unreadable JSON one sentence with exit 2 wherever JSON is read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.commands import fuzz as fuzz_cmd
from cutcheck.flink_bridge.env import flink_available
from cutcheck.model.graph import MAX_EDGES, MAX_VERTICES
from cutcheck.reference.scenario_limits import MAX_ROUTES, MAX_SUBTASKS
from tests.test_bad_input_simulate_fuzz import EXAMPLES, assert_refused, cutcheck, tree_hashes

# flink run checks for PyFlink (or the --flink release) before it reads the graph: without the flink
# extra it refuses in one sentence that names the extra, which tests/flink covers.
FLINK_RUN = pytest.param(["flink", "run"], marks=pytest.mark.skipif(not flink_available(), reason="needs the flink extra"))


class _SerialPool:
    """Stands for multiprocessing's pool: records how many processes were asked for, runs in this one."""

    asked: list[int] = []

    def __init__(self, processes: int):
        _SerialPool.asked.append(processes)

    def __enter__(self) -> _SerialPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def starmap(self, fn: Any, args: list[tuple[Any, ...]]) -> list[Any]:
        return [fn(*a) for a in args]


class _Context:
    Pool = _SerialPool


@pytest.mark.parametrize(("asked", "cpus", "used"), [(10_000, 2, 2), (2, 4, 2)])
def test_workers_are_capped_at_the_cpus_and_the_cap_is_said(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                            asked: int, cpus: int, used: int) -> None:
    import multiprocessing

    _SerialPool.asked = []
    monkeypatch.setattr(multiprocessing, "get_context", lambda method: _Context())
    monkeypatch.setattr(fuzz_cmd, "usable_cpus", lambda: cpus)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["fuzz", "--workers", str(asked), "--examples", "2"])
    assert res.exit_code == 0, res.output
    assert _SerialPool.asked == [used]
    said = [line for line in res.stderr.splitlines() if "--workers" in line]
    assert said == ([f"--workers {asked}: this machine runs {cpus} processes at once (the CPUs cutcheck may use); "
                     f"using {cpus} workers."] if asked > cpus else []), res.stderr


def test_usable_cpus_is_the_affinity_mask() -> None:
    import os

    assert fuzz_cmd.usable_cpus() == len(os.sched_getaffinity(0))


def _chain(n: int) -> dict[str, Any]:
    vertices = [{"id": "src", "kind": "source", "parallelism": 1, "records": 10}]
    vertices += [{"id": f"m{i}", "kind": "map", "parallelism": 1} for i in range(n - 2)]
    vertices.append({"id": "sink", "kind": "sink", "parallelism": 1})
    edges = [{"from": a["id"], "to": b["id"], "partitioner": "forward"} for a, b in zip(vertices, vertices[1:], strict=False)]
    return {"name": f"chain-{n}", "vertices": vertices, "edges": edges}


def _many_edges(n: int) -> dict[str, Any]:
    """Two vertices and ``n`` parallel edges between them."""
    return {"name": "fan", "vertices": [{"id": "src", "kind": "source", "parallelism": 1, "records": 10},
                                        {"id": "sink", "kind": "sink", "parallelism": 1}],
            "edges": [{"from": "src", "to": "sink", "partitioner": "forward"}] * n}


@pytest.mark.parametrize(("graph", "words"), [
    (_chain(100_000), ["100000 vertices", str(MAX_VERTICES)]),
    (_many_edges(MAX_EDGES + 1), [f"{MAX_EDGES + 1} edges", str(MAX_EDGES)]),
])
@pytest.mark.parametrize("command", [["graph", "validate"], ["graph", "show"], ["graph", "regions"],
                                     ["graph", "inflight"], ["simulate"], FLINK_RUN])
def test_a_graph_beyond_the_bounds_is_refused_from_its_counts(tmp_path: Path, graph: dict[str, Any],
                                                              words: list[str], command: list[str]) -> None:
    (tmp_path / "g.json").write_text(json.dumps(graph))
    (tmp_path / "s.json").write_text(json.dumps({"graph": "g.json", "seed": 1}))
    args = {"simulate": ["s.json"], "run": ["g.json", "--out", "run"]}.get(command[-1], ["g.json"])
    before = tree_hashes(tmp_path)
    assert_refused(cutcheck([*command, *args], tmp_path, timeout=60), *words)
    assert tree_hashes(tmp_path) == before


def _ladder(diamonds: int) -> dict[str, Any]:
    """A source, then ``diamonds`` times: split into two maps and join again; 2^diamonds routes."""
    vertices = [{"id": "j0", "kind": "source", "parallelism": 1, "records": 10}]
    edges = []
    for i in range(diamonds):
        vertices += [{"id": f"a{i}", "kind": "map", "parallelism": 1}, {"id": f"b{i}", "kind": "map", "parallelism": 1},
                     {"id": f"j{i + 1}", "kind": "map", "parallelism": 1}]
        edges += [{"from": f"j{i}", "to": f"a{i}", "partitioner": "forward"},
                  {"from": f"j{i}", "to": f"b{i}", "partitioner": "forward"},
                  {"from": f"a{i}", "to": f"j{i + 1}", "partitioner": "forward"},
                  {"from": f"b{i}", "to": f"j{i + 1}", "partitioner": "forward"}]
    vertices.append({"id": "sink", "kind": "sink", "parallelism": 1})
    edges.append({"from": f"j{diamonds}", "to": "sink", "partitioner": "forward"})
    return {"name": "ladder", "vertices": vertices, "edges": edges}


def _wide(p: int) -> dict[str, Any]:
    return {"name": "wide", "max_parallelism": 32768,
            "vertices": [{"id": "src", "kind": "source", "parallelism": p, "records": 10, "splits": p},
                         {"id": "sink", "kind": "sink", "parallelism": p}],
            "edges": [{"from": "src", "to": "sink", "partitioner": "forward"}]}


@pytest.mark.parametrize(("scenario", "words"), [
    ({"graph": _ladder(20), "seed": 1}, [str(2**20), "routes", str(MAX_ROUTES)]),
    ({"graph": _wide(MAX_SUBTASKS), "seed": 1}, [f"{2 * MAX_SUBTASKS} subtasks", str(MAX_SUBTASKS)]),
    ({"graph": _wide(100), "seed": 1, "failures": [{"target": "src[0]", "after_checkpoint": 1}],
      "rescales": [{"on_failure": 0, "parallelism": {"src": 4000, "sink": 4000}}]}, ["rescales[0]", "8000 subtasks"]),
])
def test_a_job_beyond_the_engine_is_refused_before_it_runs(tmp_path: Path, scenario: dict[str, Any],
                                                           words: list[str]) -> None:
    (tmp_path / "s.json").write_text(json.dumps(scenario))
    assert_refused(cutcheck(["simulate", "s.json"], tmp_path, timeout=60), *words)


NESTED = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(("text", "words"), [
    (NESTED, ["nested deeper"]),
    ('{"graph": ' + NESTED + "}", ["nested deeper"]),
    ('{"seed": ' + "9" * 5000 + "}", ["not JSON cutcheck can read"]),
    ('{"seed": 1,', ["not valid JSON", "line 1"]),
    (b"\xff\xfe{}", ["not UTF-8"]),
])
@pytest.mark.parametrize("command", [["simulate"], ["graph", "validate"], ["graph", "show"], FLINK_RUN])
def test_unreadable_json_is_one_sentence(tmp_path: Path, text: str | bytes, words: list[str],
                                         command: list[str]) -> None:
    path = tmp_path / "in.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    extra = ["--out", "run"] if command[0] == "flink" else []
    assert_refused(cutcheck([*command, "in.json", *extra], tmp_path), "in.json", *words)


def test_a_graph_file_a_scenario_names_is_read_the_same_way(tmp_path: Path) -> None:
    (tmp_path / "g.json").write_text(NESTED)
    (tmp_path / "s.json").write_text(json.dumps({"graph": "g.json", "seed": 1}))
    assert_refused(cutcheck(["simulate", "s.json"], tmp_path), "g.json", "nested deeper")


def test_a_deeply_nested_file_in_the_way_of_an_output_is_not_cutchecks(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text(NESTED)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text(NESTED)
    scenario = str(EXAMPLES / "scenarios" / "keyed-unaligned.json")
    before = tree_hashes(tmp_path)
    assert_refused(cutcheck(["simulate", scenario, "--json", "report.json"], tmp_path), "cutcheck did not write it")
    assert_refused(cutcheck(["simulate", scenario, "--out", "run", "--force"], tmp_path), "not a run directory")
    assert tree_hashes(tmp_path) == before


def test_a_trace_line_nested_too_deep_is_one_sentence(tmp_path: Path) -> None:
    scenario = str(EXAMPLES / "scenarios" / "keyed-unaligned.json")
    assert cutcheck(["simulate", scenario, "--out", "run", "--trace"], tmp_path).returncode == 0
    with open(tmp_path / "run" / "trace.jsonl", "a") as fh:
        fh.write(NESTED + "\n")
    assert_refused(cutcheck(["trace", "run", "--png", "t.png"], tmp_path), "trace.jsonl", "nested deeper")


def test_validate_inputs_nested_too_deep_are_one_sentence(tmp_path: Path) -> None:
    """Refused while the datasets are looked at, before Spark starts."""
    pytest.importorskip("pyspark")
    (tmp_path / "in.csv").write_text("rid\n1\n")
    (tmp_path / "out.json").write_text('{"rid": 1}\n' + NESTED + "\n")
    assert_refused(cutcheck(["validate", "--input", "in.csv", "--output", "out.json"], tmp_path), "out.json",
                   "nests deeper")
    run = tmp_path / "run"
    (run / "input").mkdir(parents=True)
    (run / "output").mkdir()
    (run / "input" / "a.csv").write_text("rid\n1\n")
    (run / "output" / "a.csv").write_text("rid\n1\n")
    (run / "run.json").write_text(NESTED)
    assert_refused(cutcheck(["validate", "run"], tmp_path), "run.json", "nested deeper")
