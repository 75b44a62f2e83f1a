"""`cutcheck graph ...`: validate, show (tables, DOT, PNG), regions, inflight; bad input is one sentence, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from strategies import job_graph_dicts
from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.model.execution import MAX_CHANNELS, ExecutionGraph
from cutcheck.model.graph import JobGraph
from cutcheck.model.inflight import NetworkConfig, worst_case_inflight_bytes
from cutcheck.model.regions import pipelined_regions

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
KEYED = str(EXAMPLES / "keyed-pipeline.json")
BATCH = str(EXAMPLES / "batch.json")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

runner = CliRunner()


def run(*args: str) -> object:
    return runner.invoke(app, ["graph", *args])


def assert_user_error(result: object, *fragments: str) -> str:
    """Exit 2, nothing on stdout, one 'error: ...' sentence on stderr, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    text = result.stderr.strip()
    assert "\n" not in text  # one line, not folded at the terminal width
    assert text.startswith("error: ") and text.endswith(".")
    assert "Traceback" not in result.stderr + result.stdout
    for fragment in fragments:
        assert fragment in text, (fragment, text)
    return text


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bad")
    files = {
        "not json": "{ nope",
        "cycle": json.dumps(
            {"vertices": [{"id": "s", "kind": "source", "records": 1}, {"id": "a", "kind": "map"}, {"id": "b", "kind": "map"},
                          {"id": "k", "kind": "sink"}],
             "edges": [{"from": "s", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "a"}, {"from": "b", "to": "k"}]}
        ),
        "hash into map": json.dumps(
            {"vertices": [{"id": "s", "kind": "source", "records": 1}, {"id": "m", "kind": "map"}, {"id": "k", "kind": "sink"}],
             "edges": [{"from": "s", "to": "m", "partitioner": "hash"}, {"from": "m", "to": "k"}]}
        ),
    }
    out = {}
    for name, text in files.items():
        path = d / (name.replace(" ", "-") + ".json")
        path.write_text(text)
        out[name] = path
    out["missing"] = d / "missing.json"
    out["directory"] = d
    return out


# ----------------------------------------------------------------------- validate
@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.name)
def test_validate_examples(path: Path) -> None:
    job = JobGraph.from_json(path)
    result = run("validate", str(path))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == f"ok: {job.name} ({len(job.vertices)} vertices, {len(job.edges)} edges)"


@pytest.mark.parametrize("case", ["not json", "cycle", "hash into map", "missing", "directory"])
@pytest.mark.parametrize("command", ["validate", "show", "regions", "inflight"])
def test_bad_file_is_one_sentence_exit_2(bad_files: dict[str, Path], case: str, command: str) -> None:
    path = bad_files[case]
    result = run(command, str(path))
    text = assert_user_error(result, path.name if case != "directory" else str(path))
    if case == "cycle":
        assert "cycle" in text
    if case == "hash into map":
        assert "edge #0 (s -> m)" in text


def test_bad_file_in_a_real_process(bad_files: dict[str, Path]) -> None:
    bad = bad_files["not json"]
    proc = subprocess.run(
        [sys.executable, "-m", "cutcheck", "graph", "validate", str(bad)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    text = proc.stderr.strip()
    assert "\n" not in text
    assert text.startswith("error: ") and str(bad) in text and "not valid JSON" in text


def test_python_cli_py_matches_the_app() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cutcheck", "graph", "show", KEYED],
        cwd=ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == run("show", KEYED).stdout
    assert "hash" in proc.stdout and "ALL_TO_ALL" in proc.stdout
    usage = subprocess.run(
        [sys.executable, "-m", "cutcheck", "graph", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert usage.returncode == 0 and "Usage: cutcheck graph" in usage.stdout


# ----------------------------------------------------------------------- show
def test_show_tables() -> None:
    result = run("show", str(EXAMPLES / "broadcast-state.json"))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    row = {line.split()[1]: line for line in lines if line.startswith("│")}
    assert "broadcast_state" in row["apply"] and " 3 " in row["apply"] and "128" in row["apply"]
    edges = [line for line in lines if line.startswith("│ #")]
    assert len(edges) == 3
    assert "hash" in edges[0] and "ALL_TO_ALL" in edges[0] and " no " in edges[0]
    assert "broadcast" in edges[1] and " 1 " in edges[1]
    assert "rebalance" in edges[2] and " yes " in edges[2]
    assert "…" not in result.stdout  # nothing clipped when not on a terminal


def test_show_pointwise_and_blocking() -> None:
    result = run("show", BATCH)
    assert result.exit_code == 0
    edges = [line for line in result.stdout.splitlines() if line.startswith("│ #")]
    assert "POINTWISE" in edges[0] and "pipelined" in edges[0]
    assert "blocking" in edges[1] and "ALL_TO_ALL" in edges[1]


def test_show_dot() -> None:
    result = run("show", str(EXAMPLES / "multi-edge.json"), "--dot")
    assert result.exit_code == 0
    text = result.stdout
    assert text.startswith('digraph "multi-edge" {') and text.rstrip().endswith("}")
    assert text.count('"src" -> "both"') == 2  # the multi-edge stays two edges
    for vid in ("src", "both", "sink"):
        assert f'"{vid}" [label=' in text
    assert "╇" not in text  # no tables mixed into the DOT text


def test_show_dot_marks_blocking() -> None:
    text = run("show", BATCH, "--dot").stdout
    assert text.count("style=dashed") == 2


@pytest.mark.parametrize("example", ["multi-edge.json", "batch.json", "broadcast-state.json"])
def test_show_png(tmp_path: Path, example: str) -> None:
    png = tmp_path / "graph.png"
    result = run("show", str(EXAMPLES / example), "--png", str(png))
    assert result.exit_code == 0, result.stderr
    data = png.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000
    assert [p.name for p in tmp_path.iterdir()] == ["graph.png"]  # no temporary file left
    import matplotlib.image

    height, width = matplotlib.image.imread(png).shape[:2]
    assert width >= 600 and height >= 300


def test_png_into_missing_folder(tmp_path: Path) -> None:
    target = tmp_path / "nope" / "g.png"
    assert_user_error(run("show", KEYED, "--png", str(target)), str(target))


def test_png_onto_a_directory(tmp_path: Path) -> None:
    assert_user_error(run("show", KEYED, "--png", str(tmp_path)), str(tmp_path))


# ----------------------------------------------------------------------- regions
def region_rows(stdout: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("│").split("│")] for line in stdout.splitlines() if line.startswith("│")]


def test_regions_table() -> None:
    result = run("regions", BATCH)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == "batch: 7 pipelined region(s) over 11 subtasks"
    rows = region_rows(result.stdout)
    assert rows[0] == ["0", "2", "src[0], clean[0]"]
    assert rows[2] == ["2", "1", "count[0]"]
    assert len(rows) == 7


def test_regions_with_parallelism_and_json(tmp_path: Path) -> None:
    report = tmp_path / "out" / "regions.json"
    result = run("regions", BATCH, "--parallelism", "count=1", "-p", "map=3", "-p", "sink=3", "--json", str(report))
    assert result.exit_code == 0, result.stderr
    data = json.loads(report.read_text())
    assert data["job"] == "batch"
    assert len(data["regions"]) == 2 + 1 + 3
    assert ["count[0]"] in data["regions"]


def test_regions_streaming_is_one() -> None:
    rows = region_rows(run("regions", KEYED).stdout)
    assert rows == [["0", "8", "src[0-1], map[0-2], count[0-1], sink[0]"]]


@pytest.mark.parametrize(
    ("option", "fragment"),
    [("count", "VERTEX=P"), ("count=x", "VERTEX=P"), ("=3", "VERTEX=P"), ("nope=2", "'nope'"), ("count=0", "count")],
)
def test_regions_bad_parallelism(option: str, fragment: str) -> None:
    assert_user_error(run("regions", KEYED, "--parallelism", option), fragment)


def test_forward_broken_by_parallelism() -> None:
    assert_user_error(run("regions", BATCH, "-p", "clean=3"), "edge #0 (src -> clean)", "forward")


# ----------------------------------------------------------------------- inflight
def test_inflight_totals_match_model(tmp_path: Path) -> None:
    report = tmp_path / "inflight.json"
    result = run("inflight", KEYED, "--buffer-bytes", "1024", "--exclusive", "3", "--floating", "4", "--json", str(report))
    assert result.exit_code == 0, result.stderr
    bound = worst_case_inflight_bytes(
        ExecutionGraph(JobGraph.from_json(KEYED)), NetworkConfig(buffer_bytes=1024, exclusive=3, floating=4)
    )
    last = result.stdout.strip().splitlines()[-1]
    assert last == (
        f"worst-case in-flight bytes: upstream {bound.upstream}, downstream {bound.downstream}, total {bound.total}"
    )
    data = json.loads(report.read_text())
    assert data["total"] == bound.total
    assert data["network"] == {"buffer_bytes": 1024, "record_bytes": 64, "exclusive": 3, "floating": 4}
    assert len(data["partitions"]) == len(bound.partitions) and len(data["gates"]) == len(bound.gates)


def test_inflight_rows() -> None:
    result = run("inflight", KEYED, "--output-pool", "4")
    assert result.exit_code == 0
    rows = region_rows(result.stdout)
    src0 = next(r for r in rows if r[0] == "src[0]")
    assert src0[2:] == ["3", "4", str(4 * 4096)]
    count1_gate = next(r for r in rows if r[0] == "count[1]" and r[1] == "0")
    assert count1_gate[2:] == ["3", str(3 * 2 + 8), str((3 * 2 + 8) * 4096)]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--buffer-bytes", "0"], "'buffer_bytes'"),
        (["--exclusive", "-1"], "'exclusive'"),
        (["--floating", "0"], "'floating'"),
        (["--output-pool", "0"], "'output_pool'"),
        (["--record-bytes", "5000"], "record_bytes"),
    ],
)
def test_inflight_bad_network(args: list[str], fragment: str) -> None:
    assert_user_error(run("inflight", KEYED, *args), fragment)


def test_json_report_to_unwritable_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_user_error(run("inflight", KEYED, "--json", str(blocker / "r.json")), "r.json")


# ----------------------------------------------------------------------- large graphs: per job edge, summarised
def write_job(path: Path, data: dict) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def pair_job(s: int, t: int, partitioner: str = "rebalance") -> dict:
    return {"name": "big", "max_parallelism": 32768,
            "vertices": [{"id": "src", "kind": "source", "parallelism": s, "records": 1},
                         {"id": "sink", "kind": "sink", "parallelism": t}],
            "edges": [{"from": "src", "to": "sink", "partitioner": partitioner}]}


def test_5000_by_5000_all_to_all_answers(tmp_path: Path) -> None:
    """25 million channels: answered per job edge (it used to run past two minutes at 6 GB)."""
    big = write_job(tmp_path / "big.json", pair_job(5000, 5000))
    shown = run("show", big).stdout.splitlines()
    edges = [line for line in shown if line.startswith("│ #")]
    assert len(edges) == 1 and "ALL_TO_ALL" in edges[0] and " 25000000 " in edges[0]
    assert shown[-1] == (f"25000000 channels in all: more than the engine's budget of {MAX_CHANNELS}, so simulate "
                         "refuses this job at these parallelisms.")
    result = run("regions", big, "--json", str(tmp_path / "regions.json"))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == "big: 1 pipelined region(s) over 10000 subtasks"
    assert region_rows(result.stdout) == [["0", "10000", "src[0-4999], sink[0-4999]"]]
    assert len(json.loads((tmp_path / "regions.json").read_text())["regions"][0]) == 10_000
    result = run("inflight", big, "--json", str(tmp_path / "inflight.json"))
    assert result.exit_code == 0, result.stderr
    buffers = 5000 * 2 + 8
    assert region_rows(result.stdout) == [
        ["src[0-4999]", "edge #0 (src -> sink)", "5000", str(buffers), str(buffers * 4096)],
        ["sink[0-4999]", "0", "5000", str(buffers), str(buffers * 4096)],
    ]
    side = 5000 * buffers * 4096
    assert result.stdout.strip().splitlines()[-1] == (
        f"worst-case in-flight bytes: upstream {side}, downstream {side}, total {2 * side}"
    )
    data = json.loads((tmp_path / "inflight.json").read_text())
    assert len(data["partitions"]) == len(data["gates"]) == 5000 and data["total"] == 2 * side


def test_many_regions_share_rows(tmp_path: Path) -> None:
    job = write_job(tmp_path / "fwd.json", pair_job(300, 300, "forward"))
    result = run("regions", job, "--json", str(tmp_path / "r.json"))
    assert result.stdout.splitlines()[0] == "big: 300 pipelined region(s) over 600 subtasks"
    assert region_rows(result.stdout) == [["0-299", "2 each", "src[0-299], sink[0-299]"]]
    assert json.loads((tmp_path / "r.json").read_text())["regions"][7] == ["src[7]", "sink[7]"]
    small = region_rows(run("regions", write_job(tmp_path / "f.json", pair_job(3, 3, "forward"))).stdout)
    assert small == [["0", "2", "src[0], sink[0]"], ["1", "2", "src[1], sink[1]"], ["2", "2", "src[2], sink[2]"]]


def test_inflight_rows_merge_only_above_the_limit(tmp_path: Path) -> None:
    job = write_job(tmp_path / "up.json", pair_job(250, 500, "rescale"))  # each producer feeds 2 consumers
    rows = region_rows(run("inflight", job).stdout)
    assert rows == [["src[0-249]", "edge #0 (src -> sink)", "2", "12", str(12 * 4096)],
                    ["sink[0-499]", "0", "1", "10", str(10 * 4096)]]
    rows = region_rows(run("inflight", write_job(tmp_path / "m.json", pair_job(150, 300, "rescale"))).stdout)
    assert len(rows) == 150 + 1 and rows[0][0] == "src[0]"  # each table on its own: 150 rows stay, 300 merge
    assert rows[-1] == ["sink[0-299]", "0", "1", "10", str(10 * 4096)]
    uneven = region_rows(run("inflight", write_job(tmp_path / "u.json", pair_job(3, 5, "rescale"))).stdout)
    assert [r[:3] for r in uneven[:3]] == [["src[0]", "edge #0 (src -> sink)", "2"],
                                           ["src[1]", "edge #0 (src -> sink)", "2"],
                                           ["src[2]", "edge #0 (src -> sink)", "1"]]


def test_subtask_list_elides_long_runs() -> None:
    from cutcheck.commands.graph import _subtask_list
    from cutcheck.model.execution import SubtaskId

    assert _subtask_list([SubtaskId("m", i) for i in (0, 1, 3, 5, 6)]) == "m[0-1,3,5-6]"
    text = _subtask_list([SubtaskId("m", i) for i in range(0, 100, 2)] + [SubtaskId("k", 0)])
    assert text == "m[0,2,4,6,8,10,12,14,16,18,20,22,…,94,96,98], k[0]"


@given(job_graph_dicts())
def test_cli_figures_equal_the_per_channel_computation(graph: dict) -> None:
    """What show, regions and inflight print (computed per job edge) is what ExecutionGraph says."""
    job = JobGraph.from_json(graph)
    eg = ExecutionGraph(job)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_job(Path(tmp) / "g.json", graph)
        shown = [line for line in run("show", path).stdout.splitlines() if line.startswith("│ #")]
        assert [int(line.strip("│").split("│")[-1]) for line in shown] == [len(eg.channels_of_edge(e.key)) for e in job.edges]
        assert "budget" not in run("show", path).stdout
        assert run("regions", path, "--json", f"{tmp}/r.json").exit_code == 0
        order = {s: i for i, s in enumerate(eg.subtasks)}
        expected = [[str(s) for s in sorted(r, key=order.__getitem__)] for r in pipelined_regions(eg)]
        assert json.loads(Path(f"{tmp}/r.json").read_text())["regions"] == expected
        result = run("inflight", path, "--exclusive", "3", "--json", f"{tmp}/i.json")
        bound = worst_case_inflight_bytes(eg, NetworkConfig(exclusive=3))
        data = json.loads(Path(f"{tmp}/i.json").read_text())
        assert data["partitions"] == [{"producer": str(s), "edge": e, "bytes": b} for (s, e), b in bound.partitions.items()]
        assert data["gates"] == [{"consumer": str(s), "gate": g, "bytes": b} for (s, g), b in bound.gates.items()]
        rows = region_rows(result.stdout)
        assert rows[: len(eg.partitions)] == [
            [str(s), job.edge(e).describe(), str(len(chs)), str(3 * len(chs) + 8), str(bound.partitions[(s, e)])]
            for (s, e), chs in eg.partitions.items()
        ]


def test_irregular_listings_are_capped(tmp_path: Path) -> None:
    """src[2i..] pairs alternate between 1 and 2 producers per map: rows cannot merge, so the table
    stops at 200 rows and says how many more the JSON holds."""
    graph = pair_job(1000, 600, "rescale")
    graph["vertices"][1] = {"id": "map", "kind": "map", "parallelism": 600}
    graph["vertices"].append({"id": "sink", "kind": "sink", "parallelism": 600})
    graph["edges"] = [{"from": "src", "to": "map", "partitioner": "rescale"},
                      {"from": "map", "to": "sink", "partitioner": "forward", "exchange": "blocking"}]
    path = write_job(tmp_path / "irregular.json", graph)
    result = run("regions", path, "--json", str(tmp_path / "r.json"))
    rows = region_rows(result.stdout)
    assert result.stdout.splitlines()[0] == "big: 1200 pipelined region(s) over 2200 subtasks"
    assert len(rows) == 200 and rows[0] == ["0", "2", "src[0], map[0]"] and rows[-1][1:] == ["", ""]
    hidden = int(rows[-1][0].split()[1])
    assert rows[-1][0] == f"… {hidden} more rows (--json lists all)" and hidden > 100
    assert len(json.loads((tmp_path / "r.json").read_text())["regions"]) == 1200
    gates = region_rows(run("inflight", path).stdout)
    assert gates[0] == ["src[0-999]", "edge #0 (src -> map)", "1", "10", str(10 * 4096)]
    assert any(row[0].startswith("… ") for row in gates)
