"""cutcheck's command line: the only place that parses arguments, prints, or exits.

Exit codes (DESIGN): 0 when everything checked holds, 1 when a violation or counterexample is
found, 2 on bad input or a broken environment, with one sentence saying what, where and how to fix.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from model.errors import CutcheckError

app = typer.Typer(
    name="cutcheck",
    help="An executable, proved model of Flink-style checkpointing.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
graph_app = typer.Typer(help="Inspect and validate job graphs.", no_args_is_help=True)
app.add_typer(graph_app, name="graph")

out = Console()
err = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


def user_errors(fn: F) -> F:
    """Turn the project's errors into one sentence on stderr and exit 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CutcheckError as exc:
            err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)  # one line, never folded
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def write_json(path: Path | None, payload: Any) -> None:
    """Write a machine-readable report atomically (write, then rename)."""
    if path is None:
        return
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise CutcheckError(f"{path}: cannot write the JSON report ({exc.strerror}); choose a writable path.") from None


def table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*[str(x) for x in r])
    return t


def show(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """Print a title line and a table; when stdout is not a terminal, nothing is clipped or folded."""
    from rich.measure import Measurement

    t = table("", columns, rows)
    t.title = None
    out.print(title, markup=False, highlight=False, soft_wrap=True)
    console = out
    if not out.is_terminal:
        needed = Measurement.get(out, out.options.update_width(10_000), t).maximum
        if needed > out.width:
            console = Console(file=out.file, width=needed, no_color=out.no_color)
    console.print(t)


# Each command group lives in its own module of ``commands``; importing them registers them on
# ``app``. Parsing and printing stay there, the work in the packages.
from commands import graph, simulate, validate, fuzz, flink, storage, prove, trace  # noqa: E402, F401, I001


def main() -> None:
    app(prog_name="cutcheck")  # the same usage lines for `cutcheck ...` and `python cli.py ...`


if __name__ == "__main__":
    # Run as a script this file is ``__main__``; the command modules register on ``cli.app``.
    import cli

    sys.exit(cli.main())
