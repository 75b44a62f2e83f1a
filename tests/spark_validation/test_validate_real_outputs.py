"""validate on a real job's outputs (issue 18, item 4): a FileSink's own header-less CSV part files,
the input as id ranges, columns named otherwise, witnesses with context, a PNG, and datasets on S3
(a real S3 API from moto's server mode) or named by file: URIs.

The layout is Flink FileSink's: a bucket directory, committed ``part-<writer>-<counter>[.csv]`` files
(with and without a suffix), and a hidden in-progress file whose rows would be duplicates and a
phantom if it were read. Faults are planted exactly; count gaps are computed here independently.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cutcheck.cli import app

pytestmark = pytest.mark.spark

N = 600
KEYS = 7
LOST = [100, 101, 102, 103, 104]
DUPLICATED = [200, 201]
PHANTOMS = [(5000, 3, 1), (5001, 4, 1), (7777, 0, 99)]
A = "0a1b2c3d-0000-4000-8000-00000000000a"
B = "0a1b2c3d-0000-4000-8000-00000000000b"
BUCKET = "2026-11-23--13"


def _filesink(root: Path) -> dict[str, Any]:
    """Header-less CSV id,key,count: ids 0..N-1 of a sequence source, key id % 7, a running count per key,
    written by two writers (A without a suffix, B with .csv) one part per 100 ids; then a replayed part 9
    of writer A re-commits ids 200 and 201 and three ids the source never had."""
    counts: dict[int, int] = {}
    rows = []
    for i in range(N):
        counts[i % KEYS] = counts.get(i % KEYS, 0) + 1
        rows.append((i, i % KEYS, counts[i % KEYS]))
    kept = [r for r in rows if r[0] not in LOST]
    parts: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    for r in kept:
        parts.setdefault((A if r[0] % 2 == 0 else B, r[0] // 100), []).append(r)
    parts[(A, 9)] = [r for r in kept if r[0] in DUPLICATED] + PHANTOMS
    d = root / BUCKET
    d.mkdir(parents=True)
    for (writer, part), rs in parts.items():
        name = f"part-{writer}-{part}" + (".csv" if writer == B else "")
        (d / name).write_text("".join(f"{a},{b},{c}\n" for a, b, c in rs))
    # In progress (or pending): never committed, so never read.
    (d / f".part-{A}-10.inprogress.5f1c").write_text("".join(f"{i},{i % KEYS},1\n" for i in range(50)) + "9999,1,1\n")
    committed = [r for rs in parts.values() for r in rs]
    by_key: dict[int, list[int]] = {}
    for _, k, c in committed:
        by_key.setdefault(k, []).append(c)
    gaps = sum(1 for cs in by_key.values() if sorted(cs) != list(range(1, len(cs) + 1)))
    return {"rows_out": len(committed), "count_gaps": gaps}


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def _check_planted(data: dict[str, Any], planted: dict[str, Any], sample: int) -> None:
    assert (data["lost"], data["duplicated"], data["phantom"], data["null_rid"]) == (5, 2, 3, 0)
    assert data["count_gaps"] == planted["count_gaps"]
    assert data["records_in"] == N and data["records_out"] == planted["rows_out"]
    assert data["input_ranges"] == [f"0:{N}"] and data["columns"] == {"rid": "id"}
    w = data["witnesses"]
    assert [x["rid"] for x in w["lost"]] == LOST[:sample]
    assert all(x["input_range"] == f"0:{N}" and x["rows"] == [] and x["missing"] == 1 for x in w["lost"])
    dup = {x["rid"]: x for x in w["duplicated"]}
    assert sorted(dup) == DUPLICATED and all(x["extra_rows"] == 1 for x in dup.values())
    rows = dup[200]["rows"]
    assert sorted(r["part"] for r in rows) == [2, 9] and {r["writer"] for r in rows} == {A}
    assert {(r["key"], r["count"]) for r in rows} == {(4, 29)}
    assert {r["file"] for r in rows} == {f"{BUCKET}/part-{A}-2", f"{BUCKET}/part-{A}-9"}
    assert {r["file"] for r in dup[201]["rows"]} == {f"{BUCKET}/part-{A}-9", f"{BUCKET}/part-{B}-2.csv"}
    phantom = {x["rid"]: x for x in w["phantom"]}
    assert sorted(phantom) == [p[0] for p in PHANTOMS][:sample]
    (row,) = phantom[5000]["rows"]
    assert row == {"key": 3, "count": 1, "file": f"{BUCKET}/part-{A}-9", "writer": A, "part": 9}
    assert len(w["count_gaps"]) == min(sample, planted["count_gaps"])
    assert all(x["counts_missing"] + x["rows_repeating_or_invalid"] > 0 and x["rows"] for x in w["count_gaps"])
    every = [r["file"] for ws in w.values() for x in ws for r in x["rows"]]
    assert every and not [f for f in every if "inprogress" in f or f.split("/")[-1].startswith(".")]


def test_filesink_part_files_with_input_range_witnesses_and_png(tmp_path: Path, spark: Any) -> None:
    planted = _filesink(tmp_path / "sink")
    report, png = tmp_path / "r.json", tmp_path / "faults.png"
    # The output named as Flink reports paths (file:/...), its id column mapped to rid.
    result = _invoke("validate", "--input-range", f"0:{N}", "--output", f"file:{tmp_path / 'sink'}",
                     "--columns", "id,key,count", "--rid", "id", "--sample", "5", "--json", str(report),
                     "--png", str(png))
    assert result.exit_code == 1, result.output
    data = json.loads(report.read_text())
    _check_planted(data, planted, 5)
    assert data["checks"]["reordered"]["status"] == "skipped"  # no split/offset/commit_seq: not judged
    assert data["input"] == f"id ranges 0:{N}" and data["input_format"] == "ranges"
    assert "witnesses" in result.output and f"part-{A}-9 (part 9)" in result.output
    assert "in input range 0:600; no output row" in result.output
    head = png.read_bytes()[:4096]
    assert head.startswith(b"\x89PNG") and b"cutcheck" in head  # save_png marks it as cutcheck's
    # --sample 2: two witnesses per class, no more.
    again = _invoke("validate", "--input-range", f"0:{N}", "--output", str(tmp_path / "sink"), "--columns",
                    "id,key,count", "--rid", "id", "--sample", "2", "--json", str(report))
    assert again.exit_code == 1
    data = json.loads(report.read_text())
    assert all(len(ws) <= 2 for ws in data["witnesses"].values()) and data["lost"] == 5


def test_ranges_and_mapped_columns_on_json_lines(tmp_path: Path, spark: Any) -> None:
    """A Kafka export's field names (id, k, partition, offset) mapped; the input is two id ranges."""
    ids = [*range(0, 50), *range(100, 150)]
    out = [{"id": i, "k": i % 5, "partition": i % 3, "offset": i // 3} for i in ids if i != 120]
    out.append({"id": 30, "k": 0, "partition": 2, "offset": 77})  # 30 delivered twice, the copy from elsewhere
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "totals-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out))
    report = tmp_path / "r.json"
    result = _invoke("validate", "--input-range", "100:150", "--input-range", "0:50", "--output",
                     str(tmp_path / "out"), "--rid", "id", "--key", "k", "--split", "partition", "--offset",
                     "offset", "--json", str(report))
    assert result.exit_code == 1, result.output
    data = json.loads(report.read_text())
    assert (data["lost"], data["duplicated"], data["phantom"]) == (1, 1, 0)
    assert data["records_in"] == 100 and data["input_ranges"] == ["0:50", "100:150"]
    (lost,) = data["witnesses"]["lost"]
    assert lost["rid"] == 120 and lost["input_range"] == "0:50, 100:150"
    (dup,) = data["witnesses"]["duplicated"]
    assert [(r["split"], r["offset"], r["key"]) for r in dup["rows"]] == [(0, 10, 0), (2, 77, 0)]
    assert all(r["file"] == "totals-0.jsonl" for r in dup["rows"])


# --- refused before Spark starts -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--input-range", "0:10", "--input-range", "5:20"], ["overlap", "5:10"]),
        (["--input-range", "10"], ["START:END"]),
        (["--input-range", "7:7"], ["holds no id"]),
        (["--input-range", "0:10", "--input", "in.csv"], ["--input-range and --input"]),
        (["--input-range", "0:10", "--columns", "a,b", "--rid", "id"], ["`id` (given by --rid)"]),
        (["--input-range", "0:10", "--rid", "x", "--key", "x"], ["--rid and --key"]),
    ],
)
def test_bad_ranges_and_mappings_are_one_sentence(tmp_path: Path, args: list[str], words: list[str]) -> None:
    (tmp_path / "sink").mkdir()
    (tmp_path / "sink" / f"part-{A}-0").write_text("1,2\n")
    result = CliRunner().invoke(app, ["validate", "--output", str(tmp_path / "sink"), *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_extensionless_part_files_need_column_names(tmp_path: Path) -> None:
    (tmp_path / "sink").mkdir()
    (tmp_path / "sink" / f"part-{A}-0").write_text("1,2,1\n")
    result = CliRunner().invoke(app, ["validate", "--input-range", "0:2", "--output", str(tmp_path / "sink")])
    assert result.exit_code == 2 and "--columns" in result.stderr and f"part-{A}-0" in result.stderr


# --- s3:// through PyArrow, against a real S3 API on localhost ---------------------------------------


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    pytest.importorskip("moto.server")
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_s3_output_read_through_pyarrow(tmp_path: Path, spark: Any, s3_endpoint: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                 "AWS_ENDPOINT_URL": s3_endpoint}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    planted = _filesink(tmp_path / "sink")
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="flink-out")
    for f in (tmp_path / "sink").rglob("*"):
        if f.is_file():  # the in-progress file goes up too: validate must skip it on S3 as well
            client.put_object(Bucket="flink-out", Key=f"jobs/sink/{f.relative_to(tmp_path / 'sink')}", Body=f.read_bytes())
    report = tmp_path / "r.json"
    result = _invoke("validate", "--input-range", f"0:{N}", "--output", "s3://flink-out/jobs/sink",
                     "--columns", "id,key,count", "--rid", "id", "--sample", "5", "--json", str(report))
    assert result.exit_code == 1, result.output
    data = json.loads(report.read_text())
    _check_planted(data, planted, 5)
    assert data["output"] == "s3://flink-out/jobs/sink"
    missing = _invoke("validate", "--input-range", "0:5", "--output", "s3://flink-out/nothing-here",
                      "--columns", "id,key,count", "--rid", "id")
    assert missing.exit_code == 2 and "does not exist" in missing.stderr
