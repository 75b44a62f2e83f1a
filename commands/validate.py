"""Spark validation of recovery logs: validate, logs synth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from cli import app, err, out, table, user_errors, write_json
from model.errors import CutcheckError

logs_app = typer.Typer(help="Make recovery logs (synthetic, with planted faults).", no_args_is_help=True)
app.add_typer(logs_app, name="logs")


def _validation_table(report: Any) -> Table:
    from spark_validation import CHECKS

    rows = []
    for check in CHECKS:
        if check in report.checks_skipped:
            rows.append([check, f"skipped: {report.checks_skipped[check]}", ""])
            continue
        n = report.count(check)
        sample = ", ".join(str(r) for r in report.samples.get(check, [])[:5])
        rows.append([check, "ok" if n == 0 else f"FAULT: {n}", sample])
    verdict = "exactly-once holds" if report.ok else "exactly-once VIOLATED"
    title = f"validate: {verdict}\n{report.records_in} records in, {report.records_out} out, {report.seconds:.1f} s"
    return table(title, ["check", "result", "sample rids"], rows)


@app.command("validate")
@user_errors
def validate_cmd(
    run_dir: Path = typer.Argument(None, help="A run directory holding input/ and output/ (and run.json)."),
    input_path: Path = typer.Option(None, "--input", help="Input dataset: Parquet, CSV (with header) or JSON lines."),
    output_path: Path = typer.Option(None, "--output", help="Output dataset: Parquet, CSV (with header) or JSON lines."),
    master: str = typer.Option(None, "--master", help="Spark master URL (default local[*])."),
    driver_memory: str = typer.Option(None, "--driver-memory", help="Spark driver memory, e.g. 4g."),
    sample: int = typer.Option(20, "--sample", min=0, help="Offending rids kept per check."),
    json_path: Path = typer.Option(None, "--json", help="Write the report as JSON."),
) -> None:
    """Check recovery logs for exactly-once with Spark: nothing lost, duplicated or invented, order kept.

    Exit 0 when every check that ran holds, 1 when a check finds a fault, 2 on bad input.
    """
    from spark_validation import validate as run_validate

    if run_dir is None and (input_path is None or output_path is None):
        raise CutcheckError("give a run directory, or both --input and --output.")
    with err.status("Spark is checking the logs (lost, duplicated, phantom, counts, order, commits)..."):
        report = run_validate(run_dir, input=input_path, output=output_path, master=master,
                              driver_memory=driver_memory, sample=sample)
    out.print(_validation_table(report))
    write_json(json_path, report.to_dict())
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
    force: bool = typer.Option(False, "--force", help="Replace OUT if it exists."),
) -> None:
    """Generate input/output logs with Spark, with exactly known planted faults (OUT/planted.json)."""
    from spark_validation import synthesize

    with err.status(f"Spark is writing {records} records to {out_dir}..."):
        planted = synthesize(out_dir, records, keys=keys, splits=splits, dup_rate=dup_rate, loss_rate=loss_rate,
                             reorder_rate=reorder_rate, phantoms=phantoms, count_gaps=count_gaps,
                             double_commits=double_commits, seed=seed, format=fmt, master=master,
                             driver_memory=driver_memory, force=force)
    rows = [[k, v] for k, v in planted.faults().items()]
    title = f"planted in {planted.path}\n{planted.records} records in, {planted.output_rows} rows out ({planted.format})"
    out.print(table(title, ["fault", "planted"], rows))
