"""validate(): planted faults found exactly, each check's semantics, inputs of every format, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cutcheck.model.errors import LogDataError
from cutcheck.spark_validation import CHECKS, validate

pytestmark = pytest.mark.spark


def test_planted_faults_are_reported_exactly(planted_run: Path) -> None:
    planted = json.loads((planted_run / "planted.json").read_text())
    report = validate(planted_run)
    for check in CHECKS:
        if check == "null_rid":  # synthetic logs always carry a rid
            assert report.null_rid == 0
            continue
        assert report.count(check) == planted[check], check
        assert planted[check] > 0, f"the fixture should plant some {check}"
    assert not report.ok
    assert report.checks_run == CHECKS and report.checks_skipped == {}
    assert report.records_in == planted["records"] and report.records_out == planted["output_rows"]
    assert report.samples["phantom"] == list(range(3000, 3004))
    assert all(len(v) <= 20 for v in report.samples.values())
    assert report.details["lost_rids"] == planted["lost"]  # one row lost per lost rid
    assert report.details["count_missing"] == planted["count_gaps"]  # each gap key misses count 1
    assert report.run["kind"] == "synthetic"
    json.loads(report.to_json())


def test_clean_logs_pass(clean_run: Path) -> None:
    report = validate(clean_run, sample=3)
    assert report.ok, report.to_json()
    assert report.faults() == dict.fromkeys(CHECKS, 0)
    assert report.records_in == report.records_out == 1500
    assert report.samples == {c: [] for c in CHECKS}


def test_copies_semantics(write_logs: Any) -> None:
    inp = [{"rid": r, "copies": c} for r, c in [(1, 1), (2, 0), (3, 2), (4, 2), (5, 0), (6, None), (7, 3)]]
    out_rids = [1, 3, 3, 4, 5, 6, 6, 99, 99, 99]  # 2 absent (copies 0: fine), 7 absent (3 lost)
    run = write_logs(inp, [{"rid": r} for r in out_rids])
    report = validate(run)
    assert (report.lost, report.duplicated, report.phantom) == (1 + 3, 1 + 1, 3)
    assert report.samples["lost"] == [4, 7]
    assert report.samples["duplicated"] == [5, 6]
    assert report.samples["phantom"] == [99]
    assert report.records_in == 7 and report.records_out == 10
    assert set(report.checks_skipped) == {"count_gaps", "reordered", "double_commits"}
    assert "`commit_seq`" in report.checks_skipped["reordered"]


def _row(rid: int, **kw: Any) -> dict[str, Any]:
    return {"rid": rid, **kw}


def test_order_counts_and_commits(write_logs: Any) -> None:
    out = [
        # lane L, key 1, split 0: one commit may hold offsets in any order (5 then 3) ...
        _row(1, lane="L", key=1, split=0, offset=5, commit_seq=10),
        _row(2, lane="L", key=1, split=0, offset=3, commit_seq=10),
        # ... but a later commit may not go below an earlier commit's highest offset (5): rid 3 is
        # reordered; an equal offset is not "lower"; rid 5 (7) is fine.
        _row(3, lane="L", key=1, split=0, offset=4, commit_seq=11),
        _row(4, lane="L", key=1, split=0, offset=5, commit_seq=12),
        _row(5, lane="L", key=1, split=0, offset=7, commit_seq=12),
        # another lane, same key and split: its own order.
        _row(6, lane="M", key=1, split=0, offset=1, commit_seq=13),
        # another split: its own order; rid 8 is reordered (2 < 9).
        _row(7, lane="L", key=1, split=1, offset=9, commit_seq=1),
        _row(8, lane="L", key=1, split=1, offset=2, commit_seq=2),
        # rows without a lane or a key are out of the order check.
        _row(9, lane=None, key=1, split=0, offset=0, commit_seq=99),
        _row(10, lane="L", key=None, split=0, offset=0, commit_seq=99),
    ]
    rows = [dict(r, counter=None, count=None, txn=None, sink_subtask=None) for r in out]
    counts = [
        ("a", 1, [1, 2, 3]),  # fine
        ("a", 2, [1, 3]),  # gap: 2 missing
        ("b", 1, [2, 1, 1]),  # repeat
        ("a", 3, [3, 1, 2]),  # order does not matter
        (None, 4, [5, 9]),  # no counter: not counted
    ]
    rid = 100
    for counter, key, values in counts:
        for c in values:
            rows.append(_row(rid, counter=counter, key=key, count=c))
            rid += 1
    txns = [("t1", "0", 5), ("t1", "0", 5), ("t1", "0", 7), ("t1", "1", 6), ("t2", "0", 8), (None, "0", 9)]
    for txn, sink, seq in txns:
        rows.append(_row(rid, txn=txn, sink_subtask=sink, commit_seq=seq))
        rid += 1
    run = write_logs([{"rid": r["rid"]} for r in rows], rows)
    report = validate(run)
    assert report.reordered == 2 and report.samples["reordered"] == [3, 8]
    assert report.count_gaps == 2
    assert report.details["count_missing"] == 1 and report.details["count_extra_rows"] == 1
    assert report.details["count_gap_rows"] == 5
    assert report.double_commits == 1 and report.samples["double_commits"] == [rid - 4]
    assert (report.lost, report.duplicated, report.phantom) == (0, 0, 0)
    assert report.checks_run == CHECKS


def test_count_groups_by_key_without_counter(write_logs: Any) -> None:
    rows = [_row(i, key=k, count=c) for i, (k, c) in enumerate([(1, 1), (1, 2), (2, 1), (2, 1), (3, 2)])]
    report = validate(write_logs([{"rid": r["rid"]} for r in rows], rows))
    assert report.count_gaps == 2  # key 2 repeats 1, key 3 lacks 1
    assert report.checks_run == ("lost", "duplicated", "phantom", "null_rid", "count_gaps")


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_text_formats(fmt: str, tmp_path: Path, spark: Any) -> None:
    from cutcheck.spark_validation import synthesize

    planted = synthesize(
        tmp_path / "logs",
        800,
        keys=6,
        splits=2,
        loss_rate=0.03,
        dup_rate=0.03,
        reorder_rate=0.03,
        phantoms=2,
        count_gaps=1,
        seed=2,
        format=fmt,
    )
    report = validate(input=tmp_path / "logs" / "input", output=tmp_path / "logs" / "output")
    assert report.input_format == report.output_format == fmt
    for check, n in planted.faults().items():
        assert report.count(check) == n, check
    assert report.records_out == planted.output_rows


def test_missing_required_column_names_it(write_logs: Any) -> None:
    run = write_logs([{"rid": 1}], [{"key": 1}], output_columns=["key"])
    with pytest.raises(LogDataError, match="`rid`") as info:
        validate(run)
    assert "output" in str(info.value) and "\n" not in str(info.value)


def test_unreadable_parquet(tmp_path: Path, spark: Any) -> None:
    for name in ("input", "output"):
        (tmp_path / name).mkdir()
    pq.write_table(pa.table({"rid": pa.array([1], pa.int64())}), tmp_path / "input" / "a.parquet")
    (tmp_path / "output" / "a.parquet").write_bytes(b"this is not parquet at all")
    with pytest.raises(LogDataError, match="output"):
        validate(tmp_path)


def test_malformed_csv_value(tmp_path: Path, spark: Any) -> None:
    (tmp_path / "in.csv").write_text("rid,key\n1,2\nnot-a-number,3\n")
    (tmp_path / "out.csv").write_text("rid\n1\n")
    with pytest.raises(LogDataError):
        validate(input=tmp_path / "in.csv", output=tmp_path / "out.csv")


def test_format_detection_errors(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("rid\n1\n")
    (tmp_path / "in" / "b.json").write_text('{"rid": 1}\n')
    (tmp_path / "out.txt").write_text("rid\n1\n")
    with pytest.raises(LogDataError, match="mixes formats"):
        validate(input=tmp_path / "in", output=tmp_path / "in")
    with pytest.raises(LogDataError, match="out.txt"):
        validate(input=tmp_path / "in" / "a.csv", output=tmp_path / "out.txt")
    with pytest.raises(LogDataError, match="does not exist"):
        validate(tmp_path / "nope")
    with pytest.raises(LogDataError, match="--input and --output"):
        validate(input=tmp_path / "in" / "a.csv")


def test_empty_datasets_are_nothing_to_check(tmp_path: Path) -> None:
    """Refused before Spark starts: an empty dataset would make every check hold vacuously."""
    for name in ("input", "output"):
        (tmp_path / "a" / name).mkdir(parents=True)  # no files at all
    with pytest.raises(LogDataError, match="nothing to check: the input dataset"):
        validate(tmp_path / "a")
    (tmp_path / "h.csv").write_text("rid,copies\n")
    (tmp_path / "one.csv").write_text("rid\n1\n")
    empty = pa.table({"rid": pa.array([], pa.int64())})
    pq.write_table(empty, tmp_path / "e.parquet")
    with pytest.raises(LogDataError, match="nothing to check: the input dataset .*h.csv"):
        validate(input=tmp_path / "h.csv", output=tmp_path / "e.parquet")
    with pytest.raises(LogDataError, match="nothing to check: the output dataset .*e.parquet"):
        validate(input=tmp_path / "one.csv", output=tmp_path / "e.parquet")
