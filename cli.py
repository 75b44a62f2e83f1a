"""cutcheck's command line: the only place that parses arguments, prints, or exits.

Exit codes: 0 when everything checked holds, 1 when a violation or counterexample is found, 2 on bad
input or a broken environment, with one sentence saying what, where and how to fix; 130 on Ctrl-C.
Each command group lives in its own module of ``cutcheck.commands`` and registers itself on the app
of ``cutcheck.commands.common`` when imported; this module only imports them and runs the app.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer

from cutcheck.commands import (  # noqa: F401 (registers)
    flink,
    flink_script,
    fuzz,
    graph,
    prove,
    simulate,
    storage,
    trace,
    validate,
    verify,
)
from cutcheck.commands.common import app, err


def _click_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """click's usage errors and "no arguments, show help", from every click Typer may raise them
    from: Typer up to 0.2x runs on click, later releases carry their own copy of it, and click may
    be installed beside that copy (another package needs it) without being the one Typer uses."""
    usage: list[type[BaseException]] = []
    no_args: list[type[BaseException]] = []
    for module in ("click", "typer._click"):
        try:
            exceptions = importlib.import_module(f"{module}.exceptions")
        except ImportError:
            continue
        usage.append(exceptions.ClickException)
        no_args.append(exceptions.NoArgsIsHelpError)
    return tuple(usage), tuple(no_args)


CLICK_ERRORS, NO_ARGS_IS_HELP = _click_errors()

__all__ = ["app", "main"]


def main() -> None:
    """The console script: usage mistakes are one line too (click's own errors included), Ctrl-C is
    "interrupted" with exit 130, and a closed pipe (`cutcheck ... | head`) ends quietly."""
    try:
        # standalone_mode=False: click's usage errors reach us instead of a framed, multi-line box
        code = app(prog_name="cutcheck", standalone_mode=False)  # the same usage for `python -m cutcheck`
    except NO_ARGS_IS_HELP as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx else exc.format_message())
        code = 2
    except CLICK_ERRORS as exc:
        ctx = getattr(exc, "ctx", None)
        hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
        err.print(f"error: {exc.format_message()}{hint}", markup=False, highlight=False, soft_wrap=True)
        code = exc.exit_code
    except (KeyboardInterrupt, typer.Abort):  # Ctrl-C before a command's own boundary (importing, parsing)
        err.print("interrupted", markup=False, highlight=False)
        code = 130
    except BrokenPipeError:  # the reader of our output left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
