"""`cutcheck trace`: the space-time diagram's data model (buffers, barriers, channel state, failures) and PNG."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.reference import simulate
from cutcheck.reference.logs import arrow_schema
from cutcheck.reference.pictures import picture as pic_module
from cutcheck.reference.pictures.draw import draw_picture
from cutcheck.reference.pictures.picture import build_picture

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TINY_GRAPH = {
    "name": "tiny", "max_parallelism": 128,
    "vertices": [{"id": "src", "kind": "source", "parallelism": 1, "records": 40, "keys": 4, "splits": 2},
                 {"id": "map", "kind": "map", "parallelism": 2},
                 {"id": "sink", "kind": "sink", "parallelism": 1}],
    "edges": [{"from": "src", "to": "map", "partitioner": "rebalance"},
              {"from": "map", "to": "sink", "partitioner": "rebalance"}],
}
# Unaligned, a slow sink (backpressure, so buffers queue and become channel state), map[0] fails
# right after checkpoint 2 and the job restores from it.
TINY = {
    "graph": TINY_GRAPH, "seed": 3,
    "checkpoint": {"mode": "unaligned", "interval": 15},
    "network": {"buffer_bytes": 128, "record_bytes": 64, "exclusive": 2, "floating": 1},
    "schedule": {"policy": "backpressure", "slow": "sink", "slowdown": 20},
    "failures": [{"after_checkpoint": 2, "target": "map[0]"}],
    "max_steps": 100_000,
}
runner = CliRunner()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("picture") / "run"
    result = simulate(TINY, out_dir=out, trace=True)
    assert result.ok and result.restarts == 1
    return out


def trace_rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "trace.jsonl").read_text().splitlines()]


def events(run_dir: Path) -> list[dict[str, Any]]:
    return pq.read_table(run_dir / "events").to_pylist()


def test_tiny_run_picture(tiny_run: Path, tmp_path: Path) -> None:
    rows = trace_rows(tiny_run)
    last = max(e["step"] for e in events(tiny_run))
    pic = build_picture(tiny_run, end=last)  # the whole run, whatever its length
    assert [lane.label for lane in pic.lanes] == ["src[0]", "map[0]", "map[1]", "sink[0]"]
    assert (pic.start, pic.end) == (0, last) and not any("too large" in n for n in pic.notes)

    # One barrier arrow per channel that carried checkpoint 1, ending where it reached the consumer.
    carried = {(r["edge"], r["producer"], r["consumer"]): r["step"] for r in rows
               if r["event"][0] in ("priority_arrival", "barrier_processed") and r["event"][1] == 1}
    arrows = [b for b in pic.barriers if b.cp == 1 and b.arrived]
    assert len(arrows) == len(carried) == 4
    assert all(b.unaligned and b.points[-1][0] == carried[b.channel[1:]] for b in arrows)

    # Persisted buffers: every channel's input state of checkpoint 1 is in buffers marked with it,
    # and no buffer holds more than the channel state (input + output) the engine reported.
    persisted: Counter[tuple[int, int, int]] = Counter()
    for a in pic.data:
        persisted[a.channel[1:]] += a.persisted.get(1, 0)
    for r in rows:
        if r["event"][0] == "complete" and r["event"][1] == 1:
            obs = r["event"][2]
            key = (r["edge"], r["producer"], r["consumer"])
            assert obs["input_state"] <= persisted[key] <= obs["input_state"] + obs["output_state"], key
    assert sum(persisted.values()) > 0

    # The failure and the restore are vertical lines at the failure step; what was still queued
    # at a consumer was dropped there, and the restored input state starts there.
    failure = next(e for e in events(tiny_run) if e["kind"] == "failure")
    restore_steps = {r["step"] for r in rows if r["event"][0] == "restore"}
    assert [(v.kind, v.step) for v in pic.lines] == [("failure", failure["step"]), ("restore", failure["step"])]
    assert restore_steps == {failure["step"]} and "map[0]" in pic.lines[0].label
    assert any(a.lost_at == failure["step"] for a in pic.data)
    restored = [a for a in pic.data if a.kind == "restored_input"]
    assert restored and all(a.start == failure["step"] and a.persisted == {2: a.records} for a in restored)
    assert {s.cp: s.status for s in pic.spans}[1] == "completed"
    assert {(m.lane, m.cp) for m in pic.markers} >= {(lane.label, 1) for lane in pic.lanes}

    png = tmp_path / "tiny.png"
    draw_picture(pic, png)
    assert png.read_bytes().startswith(PNG_MAGIC)
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically: no temporary file left


def write_run(directory: Path, mode: str, trace: list[tuple[int, list[Any]]],
              evts: list[tuple[int, str, str]]) -> Path:
    """A hand-made run directory: one channel src[0] -> sink[0] with the given events."""
    graph = {"name": "hand", "vertices": [{"id": "src", "kind": "source", "parallelism": 1, "records": 10},
                                          {"id": "sink", "kind": "sink", "parallelism": 1}],
             "edges": [{"from": "src", "to": "sink", "partitioner": "forward"}]}
    directory.mkdir()
    (directory / "run.json").write_text(json.dumps({"scenario": {"graph": graph, "checkpoint": {"mode": mode}}}))
    (directory / "trace.jsonl").write_text("".join(
        json.dumps({"book": 0, "edge": 0, "producer": 0, "consumer": 0, "step": s, "event": ev}) + "\n"
        for s, ev in trace))
    rows = [{"step": s, "attempt": 0, "kind": k, "detail": d} for s, k, d in evts]
    (directory / "events").mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema("events")), directory / "events" / "part-0.parquet")
    return directory


def test_buffers_in_parts_channel_state_and_abort(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", "unaligned", [
        (1, ["emit", 4]), (2, ["transmit", 2]),  # buffer A: records 0, 1
        (3, ["snapshot_up", 1, "unaligned"]),  # overtakes records 2, 3: output state
        (4, ["priority_arrival", 1]), (5, ["snapshot_down", 1]),  # A is queued: input state
        (6, ["transmit", 2]),  # buffer B: records 2, 3 (after the barrier, but persisted)
        (7, ["complete", 1, {"input_state": 2, "output_state": 2}]),
        (8, ["process", 1]), (9, ["process", 3]),  # A in two parts, B in one
        (10, ["emit", 2]), (11, ["snapshot_up", 2, "unaligned"]), (12, ["abort", 2]),
        (13, ["transmit", 2]), (14, ["process", 2]),  # buffer C: checkpoint 2 was aborted, nothing persisted
    ], [(3, "trigger", "checkpoint 1 (checkpoint, unaligned)"), (7, "complete", "checkpoint 1"),
        (11, "trigger", "checkpoint 2 (checkpoint, unaligned)"), (12, "abort", "checkpoint 2")])
    pic = build_picture(run)
    a, b, c = pic.data
    assert (a.start, a.first, a.end, a.persisted) == (2, 8, 9, {1: 2})
    assert (b.start, b.first, b.end, b.persisted) == (6, 9, 9, {1: 2})
    assert (c.start, c.end, c.persisted) == (13, 14, {})
    one, two = sorted(pic.barriers, key=lambda x: x.cp)
    assert one.points == [(3, "src[0]"), (4, "sink[0]")] and one.unaligned and one.arrived and not one.aborted
    assert two.aborted and not two.arrived and two.points[-1] == (12, "src[0]")
    assert [(s.cp, s.status, s.start, s.end) for s in pic.spans] == [(1, "completed", 3, 7), (2, "aborted", 11, 12)]
    assert sorted((m.lane, m.cp, m.step) for m in pic.markers) == [("sink[0]", 1, 5), ("src[0]", 1, 3),
                                                                    ("src[0]", 2, 11)]


def test_aligned_barrier_waits_behind_the_data(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", "aligned", [
        (1, ["emit", 2]), (2, ["snapshot_up", 1, "aligned"]), (3, ["transmit", 2]),
        (4, ["transmit_barrier", 1]), (6, ["process", 2]), (7, ["barrier_processed", 1]), (8, ["snapshot_down", 1]),
        (9, ["complete", 1, {"input_state": 0, "output_state": 0}]),
    ], [])
    pic = build_picture(run)
    (barrier,) = pic.barriers
    # Snapshot, then queued behind the data on the producer, sent in order, taken by the consumer.
    assert barrier.points == [(2, "src[0]"), (4, "src[0]"), (7, "sink[0]")] and not barrier.unaligned
    assert [(a.start, a.end, a.persisted) for a in pic.data] == [(3, 6, {})]


def test_alignment_timeout_turns_the_barrier_into_a_priority_one(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", "aligned_timeout", [
        (1, ["emit", 2]), (2, ["snapshot_up", 1, "aligned"]),
        (4, ["timeout_switch", 1]),  # still in the output queue: it overtakes the 2 records there
        (5, ["priority_arrival", 1]), (6, ["snapshot_down", 1]), (7, ["transmit", 2]),
        (8, ["complete", 1, {"input_state": 0, "output_state": 2}]), (9, ["process", 2]),
    ], [])
    pic = build_picture(run)
    (barrier,) = pic.barriers
    assert barrier.points == [(2, "src[0]"), (4, "src[0]"), (5, "sink[0]")]
    assert barrier.unaligned and barrier.switched == 4 and barrier.arrived
    assert [(a.start, a.end, a.persisted) for a in pic.data] == [(7, 9, {1: 2})]
    draw_picture(pic, tmp_path / "timeout.png")


def test_windows_zoom_and_highlight(tiny_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pic = build_picture(tiny_run, checkpoint=2)
    span = next(s for s in pic.spans if s.cp == 2)
    assert pic.highlight == 2 and pic.start <= span.start and span.end <= pic.end
    assert all(a.start <= pic.end and (a.end or a.lost_at or pic.end) >= pic.start for a in pic.data)
    pic = build_picture(tiny_run, start=20, end=40)
    assert (pic.start, pic.end) == (20, 40) and all(20 <= m.step <= 40 for m in pic.markers)
    monkeypatch.setattr(pic_module, "WINDOW_STEPS", 50)
    pic = build_picture(tiny_run)
    note = next(n for n in pic.notes if "too large" in n)
    assert (pic.start, pic.end) == (0, 50) and "steps 0-50" in note and "--from/--to" in note


def test_cli(tiny_run: Path, tmp_path: Path) -> None:
    png = tmp_path / "out.png"
    result = runner.invoke(app, ["trace", str(tiny_run), "--png", str(png), "--checkpoint", "1"])
    assert result.exit_code == 0, result.output
    assert png.read_bytes().startswith(PNG_MAGIC) and "4 lanes" in result.stdout

    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "run.json").write_text((tiny_run / "run.json").read_text())
    for args, fragment in (([str(bare)], "--trace"), ([str(tiny_run), "--max-channels", "2"], "--max-channels"),
                           ([str(tiny_run), "--checkpoint", "99"], "not in this run")):
        result = runner.invoke(app, ["trace", *args, "--png", str(tmp_path / "x.png")])
        assert result.exit_code == 2 and fragment in result.stderr, result.output
        assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.output
    assert not (tmp_path / "x.png").exists()
