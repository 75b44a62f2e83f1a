"""validate(): read the two datasets, run the checks as one Spark job, and judge what came back.

Nothing is judged vacuously: an empty input or output, a `rid` that is not an integer and a
header-less CSV without column names are refused before Spark starts (one sentence each); a check
that examined no row is reported as skipped with the reason; a run whose run.json says it did not
finish is judged as a prefix (undelivered records are pending, duplicates and phantoms are faults).

The input may be given as id ranges (a sequence source: every id once, no file); columns may be
mapped onto the schema's (``--rid id``); datasets may be remote (copied locally through PyArrow
first, :mod:`.location`). When something is wrong, a second small job fetches each fault's
witnesses with their context (:mod:`.witness`); ``png`` draws where the faults sit (:mod:`.faultmap`).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cutcheck.model.errors import LogDataError

from . import columns as colmap
from .report import CHECKS, Report
from .sniff import Sniff, parse_columns, sniff

PathLike = str | os.PathLike[str]


def run_complete(run: dict[str, Any]) -> bool | None:
    """run.json's ``complete`` (top level, or in ``summary`` as Flink runs write it); None if absent."""
    for holder in (run, run.get("summary")):
        if isinstance(holder, dict) and isinstance(holder.get("complete"), bool):
            return bool(holder["complete"])
    return None


def _columns(value: str | Sequence[str] | None, option: str, renames: dict[str, str]) -> tuple[str, ...] | None:
    if value is None or isinstance(value, str):
        return parse_columns(value, option, renames)
    return parse_columns(",".join(value), option, renames)


def _nothing_to_check(name: str, path: Any, option: str) -> LogDataError:
    what = "records the job read" if name == "input" else "rows the job committed"
    return LogDataError(
        f"nothing to check: the {name} dataset {path} holds no rows, so exactly-once cannot be judged; "
        f"point {option} (or the run directory's {name}/) at the {what}."
    )


def _observed(obs: Any, fallback: Any) -> dict[str, int]:
    try:
        got = obs.get
    except Exception:  # the optimizer dropped the observing node (a plan it proved empty): count directly
        got = fallback()
    return {k: int(v or 0) for k, v in dict(got).items()}


def _skip_reason(check: str, columns: Sequence[str], counts: dict[str, int]) -> str:
    empty = [c for c in columns if counts.get(c, 0) == 0]
    if empty:
        cols = ", ".join(f"`{c}`" for c in empty)
        return f"no output row has a value in {cols}, so it examined 0 rows"
    cols = ", ".join(f"`{c}`" for c in columns)
    return f"no output row has values in all of {cols}, so it examined 0 rows"


def _range_input(spark: Any, ranges: Sequence[tuple[int, int]]) -> Any:
    """The input of a sequence source: one row per id of each half-open range."""
    from pyspark.sql import functions as F

    frame = None
    for lo, hi in ranges:
        part = spark.range(lo, hi).select(F.col("id").alias("rid"))
        frame = part if frame is None else frame.unionByName(part)
    return frame


def validate(
    run_dir: PathLike | None = None,
    input: PathLike | None = None,
    output: PathLike | None = None,
    master: str | None = None,
    driver_memory: str | None = None,
    sample: int = 20,
    input_columns: str | Sequence[str] | None = None,
    output_columns: str | Sequence[str] | None = None,
    prefix: bool | None = None,
    columns: Mapping[str, str | None] | None = None,
    input_ranges: Sequence[str] | None = None,
    endpoint_url: str | None = None,
    png: PathLike | None = None,
    input_header: bool | None = None,
    output_header: bool | None = None,
) -> Report:
    """Check that output holds every input record exactly as often as expected, in order.

    ``input_columns`` / ``output_columns`` name the columns of a header-less CSV dataset, in file
    order. ``prefix``: judge the output as the prefix of an unfinished run (None: when run.json says
    ``"complete": false``). ``columns``: schema column -> the user's column (``{"rid": "id"}``), on
    both datasets. ``input_ranges``: the input as half-open id ranges (``"0:1200000"``), instead of
    an input dataset. ``endpoint_url``: an S3-compatible endpoint for ``s3://`` datasets. ``png``:
    draw where the faults sit. ``input_header`` / ``output_header``: whether a CSV dataset's files start
    with a header row (None: guessed from the first line, and the guess is in ``Report.notes``).
    Raises LogDataError for empty, unreadable or ill-typed data or a
    missing required column, EnvironmentProblem when Java or Spark is unusable.
    """
    renames = colmap.mapping(columns or {})
    ranges = colmap.parse_ranges(input_ranges)
    if ranges and input is not None:
        raise LogDataError("--input-range and --input both give the input; give the ids as ranges or the dataset, not both.")
    if ranges and input_columns is not None:
        raise LogDataError("--input-columns names the columns of an input dataset, but --input-range gives the input "
                           "as ids; drop --input-columns.")
    with tempfile.TemporaryDirectory(prefix="cutcheck-validate-") as scratch:
        return _validate(run_dir, input, output, master, driver_memory, sample, input_columns, output_columns,
                         prefix, renames, ranges, endpoint_url, png, Path(scratch), (input_header, output_header))


def _validate(
    run_dir: PathLike | None,
    input: PathLike | None,
    output: PathLike | None,
    master: str | None,
    driver_memory: str | None,
    sample: int,
    input_columns: str | Sequence[str] | None,
    output_columns: str | Sequence[str] | None,
    prefix: bool | None,
    renames: dict[str, str],
    ranges: tuple[tuple[int, int], ...],
    endpoint_url: str | None,
    png: PathLike | None,
    scratch: Path,
    headers: tuple[bool | None, bool | None],
) -> Report:
    from . import cells, checks, datasets, session, witness

    started = time.perf_counter()
    cols = {"input": _columns(input_columns, "--input-columns", renames),
            "output": _columns(output_columns, "--columns", renames)}
    hints = ("csv" if cols["input"] else None, "csv" if cols["output"] else None)
    src = datasets.resolve(run_dir, input, output, hints, scratch, endpoint_url, ranges=bool(ranges))
    sniffs: dict[str, Sniff] = {}
    asked = {"input": (headers[0], "--input-header"), "output": (headers[1], "--header")}
    for ds, option, path_option in ((src.input, "--input-columns", "--input"), (src.output, "--columns", "--output")):
        if ds is None:
            continue
        sniffs[ds.name] = sniff(ds, cols[ds.name], option, renames, *asked[ds.name])
        if sniffs[ds.name].empty:
            raise _nothing_to_check(ds.name, ds.where, path_option)
    complete = run_complete(src.run)
    if prefix is None:
        prefix = complete is False
        reason = "run.json says \"complete\": false"
    else:
        reason = "--prefix was given"
    spark = session.get_session(master=master, driver_memory=driver_memory, app_name="cutcheck-validate")
    if src.input is None:
        inp = _range_input(spark, ranges)
        in_bytes = colmap.range_size(ranges) * 8
    else:
        inp = datasets.read(spark, src.input, sniffs["input"].columns, sniffs["input"].header, renames)
        in_bytes = src.input.bytes
    out_args = (src.output, sniffs["output"].columns, sniffs["output"].header, renames)
    out = datasets.read(spark, *out_args)
    plan = checks.plan(inp, out, sample, prefix=prefix)
    partitions = session.shuffle_partitions(in_bytes + src.output.bytes, session.cores(spark))
    conf = {**session.VALIDATION_CONF, "spark.sql.shuffle.partitions": str(partitions)}

    def run(job: Any) -> Any:
        try:
            with session.sql_conf(spark, conf):
                return job()
        except Exception as exc:
            reason_read = datasets.read_failure(exc)
            if reason_read is None:
                raise
            found = [cells.first_bad_value(ds, sniffs[ds.name].columns, sniffs[ds.name].header, renames,
                                           " ".join(datasets._chain(exc)) + str(exc))
                     for ds in (src.input, src.output) if ds is not None]
            said = sorted((s for s in found if s is not None), key=lambda s: not s[1])  # quoted by Spark first
            if said:  # a value its integer column cannot hold: say where
                raise LogDataError(said[0][0]) from None
            raise LogDataError(f"cannot read the logs: {reason_read}; fix or remove that file.") from None

    rows = run(plan.frame.collect)
    totals, samples = checks.summarise(rows, sample)

    def direct() -> dict[str, int]:
        return {"records_in": inp.count(), "records_out": out.count(),
                "null_in": inp.where(inp.rid.isNull()).count(), "null_out": out.where(out.rid.isNull()).count()}

    observed = _observed(plan.records, direct)
    if observed["records_in"] == 0:
        raise _nothing_to_check("input", src.input.where if src.input else "", "--input")
    if observed["records_out"] == 0:
        raise _nothing_to_check("output", src.output.where, "--output")
    examined = {
        "lost": observed["records_in"] - observed["null_in"],
        "duplicated": observed["records_out"] - observed["null_out"],
        "phantom": observed["records_out"] - observed["null_out"],
        "null_rid": observed["records_in"] + observed["records_out"],
    }
    skipped = dict(plan.checks_skipped)
    for check, obs in plan.examined.items():
        cols = checks.examined_columns(check, out.columns)

        def count_direct(cols: Sequence[str] = cols) -> dict[str, int]:
            from pyspark.sql import functions as F

            every = F.lit(True)
            for c in cols:
                every = every & F.col(c).isNotNull()
            row = out.agg(F.count(F.when(every, 1)).alias(checks.EXAMINED),
                          *[F.count(F.col(c)).alias(c) for c in cols]).first()
            return row.asDict() if row is not None else {}

        counts = _observed(obs, count_direct)
        examined[check] = counts.get(checks.EXAMINED, 0)
        if examined[check] == 0:
            skipped[check] = _skip_reason(check, cols, counts)
    for check in ("lost", "duplicated", "phantom"):
        if examined[check] == 0:
            side = "input" if check == "lost" else "output"
            skipped[check] = f"every {side} row has a null rid, so it examined 0 rows"
    checks_run = tuple(c for c in plan.checks_run if c not in skipped)

    def count(check: str) -> int:
        t = totals.get(check)
        return t.rows if t is not None and check not in skipped else 0

    details: dict[str, int] = {}
    for c in ("lost", "duplicated", "phantom", checks.PENDING):
        details[f"{c}_rids"] = totals[c].entries if c in totals else 0
    nulls = totals.get(checks.NULL_RID, checks.Totals())
    details.update(null_rid_input_rows=nulls.d1, null_rid_output_rows=nulls.d2)
    if "count_gaps" in checks_run:
        t = totals.get("count_gaps", checks.Totals())
        details.update(count_gap_rows=t.d1, count_missing=t.d2, count_extra_rows=t.d3)
    if "double_commits" in checks_run:
        t = totals.get("double_commits", checks.Totals())
        details.update(double_commit_extra_commits=t.d1, double_commit_rows=t.d2)
    counts = {c: count(c) for c in CHECKS}
    pending = totals[checks.PENDING].rows if checks.PENDING in totals else 0
    keep = {c: samples.get(c, []) for c in checks_run}
    if prefix:
        keep[checks.PENDING] = samples.get(checks.PENDING, [])
    faults = {c: v for c, v in checks.fault_rows(rows, sample).items() if c in keep and sample > 0}
    nulls_out = details["null_rid_output_rows"] if sample > 0 else 0
    ranges_text = colmap.describe_ranges(ranges)
    out_ctx = None
    witnesses: dict[str, list[dict[str, Any]]] = {}
    if faults or nulls_out or png is not None:
        out_ctx = datasets.read(spark, *out_args, file_column=witness.FILE)
    if faults or nulls_out:
        assert out_ctx is not None
        ctx = out_ctx
        witnesses = run(lambda: witness.collect(ctx, inp if src.input is not None else None, faults,
                                                nulls_out, sample, ranges_text))
    report = Report(
        ok=not any(counts.values()),
        lost=counts["lost"],
        duplicated=counts["duplicated"],
        phantom=counts["phantom"],
        reordered=counts["reordered"],
        count_gaps=counts["count_gaps"],
        double_commits=counts["double_commits"],
        records_in=observed["records_in"],
        records_out=observed["records_out"],
        samples=keep,
        checks_run=checks_run,
        checks_skipped={c: skipped[c] for c in CHECKS if c in skipped},
        details=details,
        input=src.input.where if src.input is not None else f"id ranges {ranges_text}",
        output=src.output.where,
        input_format=src.input.format if src.input is not None else "ranges",
        output_format=src.output.format,
        run=src.run,
        seconds=round(time.perf_counter() - started, 3),
        null_rid=counts["null_rid"],
        pending=pending,
        examined={c: examined.get(c, 0) for c in CHECKS},
        prefix=prefix,
        prefix_reason=reason if prefix else "",
        witnesses=witnesses,
        input_ranges=[f"{a}:{b}" for a, b in ranges],
        columns={t: s for s, t in renames.items()},
        notes=[s.note for s in sniffs.values() if s.note is not None],
    )
    if png is not None:
        from . import faultmap

        assert out_ctx is not None
        ctx = out_ctx
        faulty = not report.ok or report.pending > 0
        files = faultmap.file_order(src.output)
        fm = (run(lambda: faultmap.compute(inp, ctx, list(ranges), bool(prefix), files)) if faulty
              else faultmap.FaultMap(files=files))
        faultmap.draw(fm, report, png)
    return report
