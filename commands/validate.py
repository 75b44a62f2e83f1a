"""Spark validation of recovery logs: validate, logs synth."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import typer

from cutcheck.commands.common import app, err, out, show, table, user_errors, write_json
from cutcheck.model.errors import CutcheckError

logs_app = typer.Typer(help="Make recovery logs (synthetic, with planted faults).", no_args_is_help=True)
app.add_typer(logs_app, name="logs")

T = TypeVar("T")

COLUMNS_HELP = (
    "Names of the columns of a header-less CSV output (Flink's csv format writes no header), in file "
    "order, comma-separated; names cutcheck does not know are ignored. cutcheck's Flink sink files: "
    "--columns rid,key,value,count,split,offset,subtask. Applies to the output dataset only."
)
INPUT_COLUMNS_HELP = "Like --columns, for a header-less CSV input dataset."
HEADER_HELP = (
    "Whether the files of a CSV output start with a header row. Default: guessed from the first line (with "
    "--columns: a header when its rid cell is not an integer; without: when it names the rid column or holds "
    "text), and the guess is printed as a note. With --header and --columns the names of --columns win."
)
WHERE = ("A local path, a file: URI, or a URI of a filesystem PyArrow reads (s3://bucket/prefix, gs://, hdfs://: "
         "copied to a local temporary directory first).")


def _mapped(option: str, target: str) -> Any:
    return typer.Option(None, option, help=f"The column that holds `{target}` (in both datasets), if named otherwise.")


@contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C: one line and exit 130, after Spark's JVM is stopped (so nothing is left writing)."""
    try:
        yield
    except KeyboardInterrupt:
        err.print("interrupted", markup=False, highlight=False)
        raise typer.Exit(130) from None


def _spark(fn: Callable[[], T]) -> T:
    """Run Spark work: its failures become one sentence (exit 2), Ctrl-C one line (exit 130)."""
    from cutcheck.spark_validation import session
    from cutcheck.spark_validation.guard import spark_guard

    own_jvm = not session.jvm_started()  # started by this command: stopped by it, so its scratch goes too
    with _interruptible(), spark_guard():
        try:
            return fn()
        finally:
            if own_jvm:
                session.stop_jvm()


def _sample(report: Any, check: str) -> str:
    if check == "null_rid":
        d = report.details
        return f"input {d.get('null_rid_input_rows', 0)}, output {d.get('null_rid_output_rows', 0)} rows"
    key = "pending" if check == "lost" and report.prefix else check
    return ", ".join(str(r) for r in report.samples.get(key, [])[:5])


def _result(report: Any, check: str) -> str:
    status = report.status(check)
    if status == "skipped":
        return f"skipped ({report.checks_skipped[check]})"
    if status == "pending":
        return f"pending: {report.pending} (not yet delivered; not lost in an incomplete run)"
    return "ok" if status == "ok" else f"FAULT: {report.count(check)}"


def _show_validation(report: Any) -> None:
    """The verdict on one line (never folded), then one row per check with the rows it examined,
    then the witnesses of each fault class with their context."""
    from cutcheck.spark_validation import CHECKS
    from cutcheck.spark_validation.witness import describe

    rows = [[c, _result(report, c), report.examined.get(c, 0), _sample(report, c)] for c in CHECKS]
    title = (f"validate: {report.verdict()}\n{report.records_in} records in, {report.records_out} out, "
             f"{report.seconds:.1f} s; 'rows examined' is how many rows each check looked at")
    show(title, ["check", "result", "rows examined", "sample rids"], rows)
    order = [c for c in ("lost", "pending", *CHECKS) if c in report.witnesses]
    found = [[c, "-" if w["rid"] is None else w["rid"], describe(c, w)]
             for c in dict.fromkeys(order) for w in report.witnesses[c]]
    if found:
        show("witnesses: per fault class, the smallest offending rids and where their rows are "
             "(file: relative to the output; part: the FileSink part counter in its name)",
             ["class", "rid", "context"], found)


@app.command("validate")
@user_errors
def validate_cmd(
    run_dir: str = typer.Argument(None, help="A run directory holding input/ and output/ (and run.json)."),
    input_path: str = typer.Option(None, "--input", help="Input dataset: Parquet, CSV or JSON lines. " + WHERE),
    output_path: str = typer.Option(
        None, "--output", help="Output dataset: Parquet, CSV or JSON lines, or the directory of a Flink FileSink "
        "(committed part files only; in-progress and pending ones are hidden and skipped). " + WHERE),
    input_range: list[str] = typer.Option(
        None, "--input-range", help="The input as ids START:END (half-open; repeatable) when the source is a "
        "sequence: each id expected exactly once, no input file needed."),
    columns: str = typer.Option(None, "--columns", "--output-columns", help=COLUMNS_HELP),
    input_columns: str = typer.Option(None, "--input-columns", help=INPUT_COLUMNS_HELP),
    header: bool = typer.Option(None, "--header/--no-header", help=HEADER_HELP),
    input_header: bool = typer.Option(None, "--input-header/--no-input-header", help="Like --header, for a CSV "
                                      "input dataset."),
    rid_col: str = _mapped("--rid", "rid"),
    key_col: str = _mapped("--key", "key"),
    count_col: str = _mapped("--count", "count"),
    split_col: str = _mapped("--split", "split"),
    offset_col: str = _mapped("--offset", "offset"),
    subtask_col: str = _mapped("--subtask", "sink_subtask"),
    endpoint_url: str = typer.Option(
        None, "--endpoint-url", help="S3-compatible endpoint for s3:// datasets (default: AWS_ENDPOINT_URL_S3 or "
        "AWS_ENDPOINT_URL; credentials and region from the usual AWS variables)."),
    png: Path = typer.Option(None, "--png", help="Draw where the faults sit (along the input ids, and by commit "
                             "order and key in the output) as a PNG; costs one more pass over the data."),
    prefix: bool = typer.Option(
        None, "--prefix/--complete",
        help="Judge the output as the prefix of an unfinished run (records not yet delivered are pending, "
             "not lost), or as a finished run. Default: a prefix when run.json says \"complete\": false.",
    ),
    master: str = typer.Option(None, "--master", help="Spark master URL (default local[*])."),
    driver_memory: str = typer.Option(None, "--driver-memory", help="Spark driver memory, e.g. 4g."),
    sample: int = typer.Option(20, "--sample", min=0, help="Offending rids kept per check, each shown as a witness "
                               "with its context (key, split, offset, file and part, commit, sink subtask)."),
    json_path: Path = typer.Option(None, "--json", help="Write the report as JSON."),
) -> None:
    """Check recovery logs for exactly-once with Spark: nothing lost, duplicated or invented, order kept.

    Exit 0 when every check that ran holds, 1 when a check finds a fault, 2 on bad input (an empty input or output: "nothing to check"; a rid that is not an integer; header-less CSV without --columns), 130 on Ctrl-C.

    A check that examined no row is shown as skipped with the reason, never as ok, and every check shows how many rows it examined. Rows without a rid are their own fault, null_rid. A run whose run.json says "complete": false is judged as a prefix: duplicates and phantoms are faults, records not yet delivered are "pending", not lost.

    Header-less CSV (Flink's csv format): name its columns in file order with --columns (output) or --input-columns (input). Whether a CSV's first line is a header is guessed and said in a note; --header/--no-header (output) and --input-header/--no-input-header (input) decide instead. Columns named otherwise than cutcheck's are mapped with --rid/--key/--count/--split/--offset/--subtask COL. A sequence source needs no input file: --input-range 0:N. Every fault class shows up to --sample witnesses with their context; --png draws where the faults sit.
    """
    from cutcheck.model.outputs import check_output_file, mark

    if run_dir is None and ((input_path is None and not input_range) or output_path is None):
        raise CutcheckError("give a run directory, or --output with --input or --input-range.")
    mapping = {"rid": rid_col, "key": key_col, "count": count_col, "split": split_col, "offset": offset_col,
               "sink_subtask": subtask_col}
    check_output_file(json_path, option="--json")

    def work() -> Any:
        from cutcheck.spark_validation import validate as run_validate

        with err.status("Spark is checking the logs (lost, duplicated, phantom, counts, order, commits)..."):
            return run_validate(run_dir, input=input_path, output=output_path, master=master,
                                driver_memory=driver_memory, sample=sample, input_columns=input_columns,
                                output_columns=columns, prefix=prefix, columns=mapping,
                                input_ranges=input_range or None, endpoint_url=endpoint_url, png=png,
                                input_header=input_header, output_header=header)

    report = _spark(work)
    for note in report.notes:  # a guess about the data is never silent: part of the report, on stdout
        out.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    _show_validation(report)
    write_json(json_path, mark(report.to_dict()))
    raise typer.Exit(0 if report.ok else 1)


@logs_app.command("synth")
@user_errors
def logs_synth(
    out_dir: Path = typer.Argument(..., help="Run directory to create (input/, output/, run.json, planted.json)."),
    records: int = typer.Option(..., "--records", min=0, help="Input records."),
    keys: int = typer.Option(1000, "--keys", min=1),
    splits: int = typer.Option(8, "--splits", min=1),
    dup_rate: float = typer.Option(0.0, "--dup-rate", min=0.0, max=1.0, help="About this share of records duplicated."),
    loss_rate: float = typer.Option(0.0, "--loss-rate", min=0.0, max=1.0, help="About this share of records lost."),
    reorder_rate: float = typer.Option(0.0, "--reorder-rate", min=0.0, max=1.0, help="About this share reordered."),
    phantoms: int = typer.Option(0, "--phantoms", min=0, help="Output rows with rids not in the input."),
    count_gaps: int = typer.Option(0, "--count-gaps", min=0, help="Keys whose counts get a gap."),
    double_commits: int = typer.Option(0, "--double-commits", min=0, help="Transactions committed twice."),
    seed: int = typer.Option(0, "--seed"),
    fmt: str = typer.Option("parquet", "--format", help="parquet, csv or json (JSON lines)."),
    master: str = typer.Option(None, "--master", help="Spark master URL (default local[*])."),
    driver_memory: str = typer.Option(None, "--driver-memory", help="Spark driver memory, e.g. 4g."),
    force: bool = typer.Option(
        False, "--force", help="Replace OUT if it is a run directory cutcheck wrote (never any other directory)."
    ),
) -> None:
    """Generate input/output logs with Spark, with exactly known planted faults (OUT/planted.json).

    OUT must be a new path, or a run directory cutcheck wrote together with --force; the working directory, its parents, files and other directories are refused before any work. The logs are written into a hidden sibling that is renamed into place at the end, and removed on failure or Ctrl-C.
    """

    def work() -> Any:
        from cutcheck.spark_validation import synthesize

        with err.status(f"Spark is writing {records} records to {out_dir}..."):
            return synthesize(out_dir, records, keys=keys, splits=splits, dup_rate=dup_rate, loss_rate=loss_rate,
                              reorder_rate=reorder_rate, phantoms=phantoms, count_gaps=count_gaps,
                              double_commits=double_commits, seed=seed, format=fmt, master=master,
                              driver_memory=driver_memory, force=force)

    planted = _spark(work)
    rows = [[k, v] for k, v in planted.faults().items()]
    title = f"planted in {planted.path}\n{planted.records} records in, {planted.output_rows} rows out ({planted.format})"
    out.print(table(title, ["fault", "planted"], rows))
