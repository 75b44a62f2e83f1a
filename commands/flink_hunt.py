"""``cutcheck flink hunt``: a differential campaign of a Flink release against the model."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from cutcheck.commands.common import err, out, table, user_errors, write_json
from cutcheck.commands.flink import flink_app


def _progress(message: str) -> None:
    err.print("hunt: " + message, highlight=False, markup=False)


def _print_report(report: Any, version: str | None, reruns: int) -> None:
    from cutcheck.flink_bridge.hunt.case import replay_command

    phases = ", ".join(f"{k} {v:.1f} s" for k, v in report.phases.items())
    out.print(f"flink hunt on {report.runner}, seed {report.seed}: {report.cases} cases in {report.seconds:.0f} s "
              f"({report.graphs_per_minute} graphs per minute; {report.workers} worker(s)); "
              f"{report.conclusive} conclusive, {len(report.inconclusive)} inconclusive", markup=False, highlight=False)
    out.print(f"where the time went: {phases}", markup=False, highlight=False)
    problems = [r for r in report.inconclusive if "model problem" in r]
    for r in problems[:5]:
        out.print(f"not judged, {r}", markup=False, highlight=False, soft_wrap=True)
    if not report.findings:
        out.print("no findings: every conclusive case agreed with the model", markup=False, highlight=False)
        return
    rows = []
    for i, f in enumerate(report.findings, 1):
        shrunk = f.shrunk or f.case
        rows.append([i, ", ".join(f.kinds), "; ".join(d.evidence[:160] for d in f.found), shrunk.summary(),
                     f"{f.reproduced}/{f.reruns}", f.occurrences])
    out.print(table("findings", ["#", "class", "evidence", "shrunk reproducer", "rate", "cases"], rows))
    for i, f in enumerate(report.findings, 1):
        line = f.replay or replay_command(version, f.shrunk or f.case, reruns)
        out.print(f"finding {i} replay: {line}", markup=False, highlight=False, soft_wrap=True)
        if f.script_file:
            out.print(f"finding {i} standalone script: {f.script_file}", markup=False, highlight=False)
        elif f.script_note:
            out.print(f"finding {i} standalone script: none ({f.script_note})", markup=False, highlight=False)


@flink_app.command("hunt")
@user_errors
def flink_hunt(
    flink: str = typer.Option(None, "--flink", help="Flink release to hunt (default: the installed one); "
                              "others need `cutcheck flink env VERSION` first."),
    minutes: float = typer.Option(5.0, "--minutes", min=0.05, help="Stop drawing new cases after this long."),
    cases: int = typer.Option(None, "--cases", min=1, help="Stop drawing after this many cases, even before --minutes."),
    seed: int = typer.Option(0, "--seed", min=0, help="Campaign seed: one seed draws one sequence of cases."),
    reruns: int = typer.Option(3, "--reruns", min=1, help="Reruns of each shrunk finding (its rate is k of these)."),
    workers: int = typer.Option(None, "--workers", min=1, help="Cases at once, in worker processes, each with "
                                "its own JVM (default: --clusters, at most the machine's cores)."),
    clusters: int = typer.Option(1, "--clusters", min=1, help="Flink MiniClusters allowed at once on this machine "
                                 "(each worker starts its own; more than 1 only when the machine has room)."),
    replay: str = typer.Option(None, "--replay", help="Run one case (a finding's case file, or the case as JSON) "
                               "--reruns times and compare each run with the model."),
    json_path: Path = typer.Option(None, "--json", help="Write the report here, and each finding's shrunk case "
                                   "(and standalone script) beside it."),
) -> None:
    """Draw cases where the model knows checkpointing is risky, predict each with the model under Flink's
    documented rules, run it on Flink, and report every disagreement classed, shrunk and rerun.

    Exit 0 when nothing disagrees (or only documented model departures), 1 with a finding, 2 on bad input,
    without Flink, or when no case could be judged.
    """
    from cutcheck.flink_bridge.env import CLUSTERS_VAR
    from cutcheck.flink_bridge.hunt import FlinkCaseRunner, Hunt, HuntCase
    from cutcheck.flink_bridge.hunt import replay as replay_case
    from cutcheck.flink_bridge.hunt.artifacts import check_report_path, write_findings
    from cutcheck.model.errors import CutcheckError

    if json_path is not None:
        check_report_path(json_path)
    case = HuntCase.load(replay) if replay is not None else None  # bad input before Flink starts
    os.environ[CLUSTERS_VAR] = str(clusters)  # read by flink_bridge.env.machine_lock, in workers too
    n_workers = workers or min(clusters, os.cpu_count() or 1)
    # One process running every case keeps its MiniCluster from case to case; worker processes each
    # start their own per case (a held cluster holds the machine lock, which the others would wait for).
    runner = FlinkCaseRunner(flink, reuse=n_workers == 1)
    if case is not None:
        try:
            pred, runs = replay_case(runner, case, reruns)
        finally:
            runner.close()
        rows = [[i + 1, "inconclusive: " + o.inconclusive if o.inconclusive else
                 ("; ".join(f"{d.kind.value}: {d.evidence[:200]}" for d in found) or "agrees")]
                for i, (o, found) in enumerate(runs)]
        out.print(f"flink hunt --replay on {runner.name}: {case.summary()}", markup=False, highlight=False)
        out.print(table("runs", ["run", "result"], rows))
        disagree = sum(bool(found) for _, found in runs)
        out.print(f"the model predicts: restore {'refused' if pred.refused else 'accepted'}, exactly-once "
                  f"{'holds' if pred.exactly_once else 'violated'}; {disagree}/{len(runs)} runs disagree",
                  markup=False, highlight=False)
        write_json(json_path, {"command": "flink hunt --replay", "runner": runner.name, "case": case.to_json(),
                               "prediction": pred.to_json(),
                               "runs": [{"observation": o.to_json(), "disagreements": [d.to_json() for d in found]}
                                        for o, found in runs]})
        if all(o.inconclusive for o, _ in runs):
            raise CutcheckError(f"no run of the case could be judged ({runs[0][0].inconclusive}); nothing to compare.")
        raise typer.Exit(1 if disagree else 0)
    hunt = Hunt(runner, seed=seed, minutes=minutes, reruns=reruns,
                workers=n_workers, max_cases=cases, progress=_progress)
    report = hunt.run()
    if json_path is not None:
        write_findings(report, json_path, flink, reruns)
    _print_report(report, flink, reruns)
    write_json(json_path, report.to_json())
    if report.conclusive == 0:
        raise CutcheckError(f"none of the {report.cases} cases could be judged (first: "
                            f"{report.inconclusive[0] if report.inconclusive else 'none ran'}); give more --minutes.")
    raise typer.Exit(1 if any(not f.departure for f in report.findings) else 0)
