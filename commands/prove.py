"""The Z3 proofs: prove."""

from __future__ import annotations

from pathlib import Path

import typer

from cutcheck.commands.common import app, err, out, table, user_errors, write_json


@app.command()
@user_errors
def prove(
    names: list[str] | None = typer.Argument(None, help="Proof names (default: all); see the list printed."),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the results as JSON to this file."),
) -> None:
    """Run the Z3 proofs: positives must be proved, negative controls must give their counterexample.

    Each result says how it was obtained: proved (unbounded induction), proved for all values up to
    N, proved under assumptions (printed below the table), or a bounded search (negative controls'
    traces)."""
    from rich.markup import escape  # proof names have brackets, which rich would read as markup

    from cutcheck import proofs

    with err.status("proving …"):
        results = proofs.run(names or None)
    rows = [[escape(r.name), r.expected, r.label if r.as_expected else f"{r.label} (!)", r.bound, f"{r.seconds:.2f}"]
            for r in results]
    out.print(table("proofs", ["name", "expected", "result", "bound", "seconds"], rows))
    for r in results:  # what a proof "under assumptions" assumes is part of its result
        for a in r.assumptions:
            out.print(f"\n[bold]{escape(r.name)}[/bold] assumes: {escape(a)}", highlight=False)
    for r in results:
        if r.counterexample and (r.expected == "counterexample" or not r.as_expected):
            out.print(f"\n[bold]{escape(r.name)}[/bold] counterexample:", highlight=False)
            out.print(r.counterexample, markup=False, highlight=False)
    bad = [r.name for r in results if not r.as_expected]
    write_json(json_path, {"ok": not bad, "results": [r.to_dict() for r in results]})
    if bad:
        err.print(f"not as expected: {', '.join(bad)}", markup=False, highlight=False)
        raise typer.Exit(1)
