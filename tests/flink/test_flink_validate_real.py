"""`cutcheck validate` on a real Flink job's own sink files (issue 18, item 4 acceptance):
``validate --input-range 0:N --output SINK --columns rid,key,value,count,split,offset,subtask`` reads
FileSink's committed header-less CSV part files directly (no run directory, no input file) and
gives the same verdict as the job's own check (the engine's oracle over the committed files, in
run.json); faults planted into a copy of the sink are counted exactly, with witnesses naming the
part files that hold them. The run is test_flink_run's (unaligned checkpoints, a failover and a
2 -> 3 rescale), built once per session.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from cutcheck.cli import app
from tests.flink.helpers import FLINK_MARKS
from tests.flink.test_flink_run import RECORDS, flink_run  # noqa: F401  (the shared run)

pytestmark = FLINK_MARKS

SINK_COLUMNS = "rid,key,value,count,split,offset,subtask"
PHANTOM = 10**9 + 7


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output
    return result


def _sink(run_dir: Path) -> Path:
    sink = run_dir / "flink" / "sink" / "sink"
    assert sink.is_dir() and any(p.name.startswith("part-") for p in sink.iterdir()), sink
    return sink


def _committed(sink: Path) -> list[Path]:
    return sorted(p for p in sink.iterdir() if p.is_file() and not p.name.startswith((".", "_")))


def _validate(sink: Path, report: Path, *extra: str) -> tuple[Any, dict[str, Any]]:
    result = _invoke("validate", "--input-range", f"0:{RECORDS}", "--output", str(sink), "--columns", SINK_COLUMNS,
                     "--subtask", "subtask", "--json", str(report), *extra)
    assert result.exit_code in (0, 1), result.output + str(result.stderr)
    return result, json.loads(report.read_text())


def _count_gaps(sink: Path) -> int:
    """Keys whose committed counts are not exactly 1..n, computed from the files (independently of Spark)."""
    by_key: dict[int, list[int]] = {}
    for f in _committed(sink):
        for line in f.read_text().splitlines():
            if line.strip():
                _, key, _, count, *_ = (int(x) for x in line.split(","))
                by_key.setdefault(key, []).append(count)
    return sum(1 for cs in by_key.values() if sorted(cs) != list(range(1, len(cs) + 1)))


def test_validate_on_flinks_own_sink_files_agrees_with_the_jobs_check(
    flink_run: tuple[Path, dict[str, Any]], spark_for_flink: Any, tmp_path: Path  # noqa: F811
) -> None:
    run_dir, summary = flink_run
    own = summary["exactly_once"]
    result, data = _validate(_sink(run_dir), tmp_path / "r.json")
    assert (result.exit_code == 0) == own["ok"] and data["ok"] == own["ok"]
    for check in ("lost", "duplicated", "phantom", "count_gaps"):
        assert data[check] == own[check], check
    assert data["records_in"] == RECORDS and data["records_out"] == summary["output_rows"]
    assert "count_gaps" in data["checks_run"] and data["examined"]["count_gaps"] == summary["output_rows"]


def test_planted_faults_in_a_real_sink_are_counted_with_witnesses(
    flink_run: tuple[Path, dict[str, Any]], spark_for_flink: Any, tmp_path: Path  # noqa: F811
) -> None:
    run_dir, summary = flink_run
    own = summary["exactly_once"]
    sink = tmp_path / "sink"
    shutil.copytree(_sink(run_dir), sink)
    files = [f for f in _committed(sink) if f.read_text().strip()]
    assert len(files) >= 2, "the run committed several part files"
    first, last = files[0], files[-1]
    lines = first.read_text().splitlines()
    lost_rid = int(lines[0].split(",")[0])
    first.write_text("\n".join(lines[1:]) + "\n")  # one committed row removed: lost
    dup_line = last.read_text().splitlines()[0]
    dup_rid, key = int(dup_line.split(",")[0]), int(dup_line.split(",")[1])
    with first.open("a") as fh:  # re-committed in another part file, as a replay would: duplicated
        fh.write(dup_line + "\n")
        fh.write(f"{PHANTOM},{key},0,1,0,0,0\n")  # an id the sequence never had: phantom
    (sink / f".{first.name}.inprogress.0badc0de").write_text(dup_line + f"\n{PHANTOM + 1},1,0,1,0,0,0\n")
    report, png = tmp_path / "r.json", tmp_path / "faults.png"
    result, data = _validate(sink, report, "--sample", "5", "--png", str(png))
    assert result.exit_code == 1
    assert data["lost"] == own["lost"] + 1 and data["duplicated"] == own["duplicated"] + 1
    assert data["phantom"] == own["phantom"] + 1 and data["count_gaps"] == _count_gaps(sink)
    assert data["records_out"] == summary["output_rows"] + 1  # -1 lost, +1 duplicate, +1 phantom; in-progress unread
    w = data["witnesses"]
    lost = next(x for x in w["lost"] if x["rid"] == lost_rid)
    assert lost["input_range"] == f"0:{RECORDS}" and lost["rows"] == []
    dup = next(x for x in w["duplicated"] if x["rid"] == dup_rid)
    assert sorted(r["file"] for r in dup["rows"]) == sorted([first.name, last.name])
    assert all(r["key"] == key and "sink_subtask" in r and "offset" in r and "part" in r for r in dup["rows"])
    (phantom,) = [x for x in w["phantom"] if x["rid"] == PHANTOM]
    assert [r["file"] for r in phantom["rows"]] == [first.name]
    assert PHANTOM + 1 not in [x["rid"] for x in w["phantom"]]
    assert png.read_bytes().startswith(b"\x89PNG") and f"{first.name} (part" in result.output
