"""What every command module shares: the Typer app they register on, the consoles, the one error
boundary (``user_errors``), JSON reports and tables. ``cutcheck.cli`` imports the command modules and
runs the app; nothing here imports ``cli``.

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

from cutcheck.model.errors import CutcheckError
from cutcheck.model.outputs import check_output_file, mark

app = typer.Typer(
    name="cutcheck",
    help="An executable, proved model of Flink-style checkpointing.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
graph_app = typer.Typer(help="Inspect and validate job graphs.", no_args_is_help=True)
app.add_typer(graph_app, name="graph")

# Piped or redirected output is read by programs and people with wide windows: never cut it to 80
# columns. On a terminal, table cells fold onto a second line rather than lose characters.
out = Console() if sys.stdout.isatty() else Console(width=100_000)
err = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


def _one_sentence(exc: BaseException) -> tuple[str, int] | None:
    """The sentence and exit code for an error that is the user's or the machine's, not cutcheck's."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", 130
    if isinstance(exc, CutcheckError):
        return str(exc), 2
    if isinstance(exc, MemoryError):
        return ("out of memory; the input is larger than this machine can hold: make it smaller (fewer records, "
                "lower parallelism) or run on a machine with more memory."), 2
    if isinstance(exc, OSError):
        where = exc.filename if exc.filename is not None else "the file system"
        what = exc.strerror or type(exc).__name__
        return f"{where}: {what}; check the path, its permissions and the free space, then run again.", 2
    module = type(exc).__module__ or ""
    if module.startswith(("py4j", "pyspark")):  # the JVM side of Spark: never a stack of Java frames
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        return f"Spark failed: {first}; check Java 17 and the Spark settings (--master, --driver-memory).", 2
    return None


def user_errors(fn: F) -> F:
    """The CLI's error boundary: the project's errors, operating-system errors, running out of memory,
    Spark's failures and Ctrl-C each become one sentence on stderr (exit 2; 130 for Ctrl-C), never a
    traceback. Output files named by ``--json``/``--png`` are checked before any work starts."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            check_output_file(kwargs.get("json_path"), option="--json")
            check_output_file(kwargs.get("png"), option="--png")
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - the boundary: anything a user can cause ends here
            said = _one_sentence(exc)
            if said is None:
                raise  # a bug in cutcheck: the traceback is what a bug report needs
            message, code = said
            err.print("interrupted" if code == 130 else f"error: {message}",
                      markup=False, highlight=False, soft_wrap=True)  # one line, never folded
            raise typer.Exit(code) from None

    return wrapper  # type: ignore[return-value]


def write_json(path: Path | None, payload: dict[str, Any]) -> None:
    """Write a machine-readable report atomically (a temporary sibling, then rename), marked as
    cutcheck's (``written_by``) so that a later run may overwrite it and nothing else."""
    if path is None:
        return
    path = check_output_file(path, option="--json")
    assert path is not None
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(mark(payload), indent=2, sort_keys=True, default=str) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise CutcheckError(f"{path}: cannot write the JSON report ({exc.strerror}); choose a writable path.") from None
    finally:
        tmp.unlink(missing_ok=True)


def table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c, overflow="fold")  # never "…": a cut name is a wrong name
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
