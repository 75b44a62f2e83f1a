"""``cutcheck flink script``: a case as a standalone PyFlink script (flink_bridge.standalone)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import typer

from cutcheck.commands.common import out, user_errors
from cutcheck.commands.flink import flink_app
from cutcheck.commands.simulate import _parse_assignments
from cutcheck.model.errors import CutcheckError


@flink_app.command("script")
@user_errors
def flink_script(
    graph: Path = typer.Argument(..., help="Job graph JSON file."),
    out_path: Path = typer.Option(..., "--out", help="Python file to write (never replaces an existing file)."),
    mode: str = typer.Option("unaligned", "--mode", help="unaligned, aligned or aligned_timeout."),
    fail_after: int = typer.Option(None, "--fail-after-checkpoint", help="Inject one failure once checkpoint N completed."),
    savepoint: str = typer.Option(None, "--savepoint", help="canonical or native: stop with a savepoint instead of a failure."),
    stop_after: int = typer.Option(None, "--stop-after-checkpoint", help="With --savepoint: stop once checkpoint N completed."),
    rescale: list[str] = typer.Option(None, "--rescale", help="VERTEX=P: the restore's parallelism (repeatable)."),
    claim_mode: str = typer.Option("no_claim", "--claim-mode", help="claim or no_claim: how the restore owns the snapshot."),
    records: int = typer.Option(None, "--records", min=1, help="Records per source (overrides the graph)."),
    interval: int = typer.Option(200, "--interval-ms", min=10, help="Checkpoint interval in milliseconds."),
    slow: str = typer.Option(None, "--slow", help="Vertex slowed down to build backpressure."),
    delay: float = typer.Option(2.0, "--delay-ms", min=0.0, help="Delay per record at the slow vertex."),
    incremental: bool = typer.Option(False, "--incremental", help="RocksDB incremental checkpoints."),
    no_chaining: bool = typer.Option(False, "--no-chaining", help="Every vertex starts an operator chain of its own."),
    release: str = typer.Option(None, "--release", help="Flink release whose configuration keys to use (default: the installed one)."),
) -> None:
    """Write a self-contained PyFlink script that runs this case and checks its own output (PASS/FAIL).

    The script imports nothing of cutcheck; run it with the Python of any environment that has apache-flink."""
    from cutcheck.flink_bridge.runner import RunOptions
    from cutcheck.flink_bridge.standalone import render

    if out_path.exists():
        raise CutcheckError(f"{out_path}: already exists; cutcheck never replaces a file it did not write, give another --out.")
    opts = RunOptions(mode=mode, interval_ms=interval, fail_after=fail_after, savepoint=savepoint, stop_after=stop_after,
                      rescale=_parse_assignments(rescale, "--rescale"), claim_mode=claim_mode, records=records,
                      slow=slow, delay_ms=delay, incremental=incremental, chaining=not no_chaining)
    text = render(graph, opts, release=release)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out_path.name}.", dir=out_path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.link(tmp, out_path)  # fails if OUT appeared meanwhile: never replaced
    finally:
        os.unlink(tmp)
    out.print(f"wrote {out_path}; run it with: python {out_path}")
