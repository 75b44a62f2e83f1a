"""Fuzz campaigns and the whole chain: fuzz, verify."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer

from cli import app, err, out, table, user_errors, write_json
from model.errors import CutcheckError

FUZZ_PROFILES: dict[str, dict[str, Any]] = {
    # examples: Hypothesis fuzz scenarios; kill_seconds: budget per mutant; spark: validate the example logs
    "quick": {"examples": 20, "kill_seconds": 60.0, "max_seeds": 300},
    "ci": {"examples": 80, "kill_seconds": 60.0, "max_seeds": 400},
    "deep": {"examples": 2000, "kill_seconds": 300.0, "max_seeds": 5000},
}


def _write_counterexample(verdict: Any, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"counterexample-{verdict.scenario.get('seed', 0)}.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(verdict.scenario, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def _spark_verdicts(seeds: list[int], mutants: tuple[str, ...], master: str) -> list[dict[str, Any]]:
    """Each seed is one Spark task running the engine (executors need this project installed)."""
    import functools as ft

    from reference.fuzz import verdict_of_seed
    from spark_validation.session import get_session

    spark = get_session(master)  # its Python workers run this interpreter (spark_validation.session)
    rdd = spark.sparkContext.parallelize(seeds, max(1, min(len(seeds), 64)))
    verdicts = rdd.map(ft.partial(verdict_of_seed, mutants=mutants)).collect()
    return sorted(verdicts, key=lambda v: v["seed"])


def _progress(description: str, total: int) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=err, transient=True)
    return progress, progress.add_task(description, total=total)


@app.command()
@user_errors
def fuzz(
    seconds: float = typer.Option(None, "--seconds", help="Stop after this many seconds."),
    examples: int = typer.Option(100, "--examples", help="Scenarios to try (Hypothesis examples or seeds)."),
    mutant: list[str] = typer.Option(None, "--mutant", help="Switch on a named fault; the campaign should find it."),
    workers: int = typer.Option(1, "--workers", help="Run seed campaigns in this many local processes."),
    spark: str = typer.Option(None, "--spark", help="Run the seeds as Spark tasks on this master (e.g. local[*])."),
    seed: int = typer.Option(0, "--seed", help="Campaign seed (the first scenario seed for seed campaigns)."),
    seeds: bool = typer.Option(False, "--seeds", help="A seed campaign in this process (what --workers and --spark run)."),
    out_dir: Path = typer.Option(Path("."), "--out", help="Where a counterexample scenario is written."),
    json_path: Path = typer.Option(None, "--json", help="Write the campaign report as JSON."),
) -> None:
    """Fuzz the engine: random graphs, modes, failures, rescales and schedules; shrink any violation."""
    from reference import fuzz as fz

    mutants = tuple(mutant or ())
    if spark or workers > 1 or seeds:
        seed_list = list(range(seed, seed + examples))
        if spark:
            with err.status(f"running {len(seed_list)} scenarios as Spark tasks on {spark} …"):
                verdicts = _spark_verdicts(seed_list, mutants, spark)
        elif workers > 1:
            from multiprocessing import get_context

            with get_context("spawn").Pool(workers) as pool:
                verdicts = pool.starmap(fz.verdict_of_seed, [(s, mutants) for s in seed_list])
        else:
            verdicts = fz.seed_campaign(seed_list, mutants=mutants).verdicts
        result = fz.CampaignResult(examples=len(verdicts), refused=sum(v["refused"] for v in verdicts), verdicts=verdicts)
        bad = [v for v in verdicts if not v["ok"]]
        out.print(table("fuzz (seed campaign)", ["scenarios", "refused restores", "violations"],
                        [[result.examples, result.refused, len(bad)]]))
        for v in bad[:5]:
            path = _write_counterexample(fz.Verdict(False, False, v["violations"], fz.scenario_from_seed(v["seed"], mutants=mutants)), out_dir)
            out.print(f"seed {v['seed']}: {v['violations'][0]['invariant']}: {v['violations'][0]['detail']}", markup=False)
            out.print(f"replay: cutcheck simulate {path}", markup=False, highlight=False)
        write_json(json_path, {"examples": result.examples, "refused": result.refused, "verdicts": verdicts})
        raise typer.Exit(1 if bad else 0)
    progress, task = _progress("fuzzing", examples)
    with progress:
        result = fz.hypothesis_campaign(examples=examples, seconds=seconds, mutants=mutants, seed=seed,
                                        progress=lambda n: progress.advance(task, n))
    rows = [[result.examples, result.refused, f"{result.seconds:.1f}", "none" if result.ok else "FOUND"]]
    out.print(table("fuzz", ["scenarios", "refused restores", "seconds", "violation"], rows))
    report: dict[str, Any] = {"examples": result.examples, "refused": result.refused, "seconds": result.seconds}
    if result.failure is not None:
        path = _write_counterexample(result.failure, out_dir)
        v = result.failure.violations[0]
        g = result.failure.scenario["graph"]
        out.print(f"{v['invariant']}: {v['detail']}", markup=False, highlight=False)
        out.print(f"shrunk to {len(g['vertices'])} vertices, {len(g['edges'])} edges, "
                  f"{len(result.failure.scenario['schedule'].get('choices', []))} scripted choices")
        out.print(f"replay: cutcheck simulate {path}", markup=False, highlight=False)
        report["counterexample"] = str(path)
        report["violation"] = v
    write_json(json_path, report)
    raise typer.Exit(0 if result.ok else 1)


def _example_scenarios(directory: Path | None) -> list[Path]:
    """The scenarios verify runs: --examples DIR, else examples/scenarios of the working directory
    (the repository, where the README runs it), else the repository's beside the commands package (an editable install)."""
    candidates = [directory] if directory else [Path.cwd() / "examples" / "scenarios",
                                                 Path(__file__).resolve().parents[1] / "examples" / "scenarios"]
    for d in candidates:
        found = sorted(d.glob("*.json")) if d and d.is_dir() else []
        if found:
            return found
    where = directory or candidates[0]
    raise CutcheckError(f"{where}: no example scenarios (*.json) to run; run verify from the repository root or "
                        "give --examples DIR.")


@app.command()
@user_errors
def verify(
    profile: str = typer.Option("quick", "--profile", help="quick (minutes), ci, or deep (long campaigns)."),
    json_path: Path = typer.Option(None, "--json", help="Write the whole report as JSON."),
    master: str = typer.Option(None, "--master", help="Spark master for validating the example logs (default local[*])."),
    work_dir: Path = typer.Option(None, "--work-dir", help="Keep the example runs' recovery logs here."),
    mutant: list[str] = typer.Option(None, "--mutant", help="Switch a fault on everywhere (verify must then fail)."),
    examples_dir: Path = typer.Option(None, "--examples", help="Directory of scenarios to run (default examples/scenarios)."),
) -> None:
    """The whole chain: proofs, a fuzz campaign, the mutation check, the example scenarios, and Spark
    validation of their logs. Exit 0 when everything holds, 1 on any violation or counterexample."""
    import tempfile

    import proofs
    from reference import Scenario
    from reference import fuzz as fz
    from reference import simulate as run
    from reference.mutations import MUTANTS

    if profile not in FUZZ_PROFILES:
        raise CutcheckError(f"--profile {profile!r}: use one of {', '.join(FUZZ_PROFILES)}.")
    _example_scenarios(examples_dir)  # bad input is found before minutes of work
    mutants = tuple(mutant or ())
    for m in mutants:
        if m not in MUTANTS:
            raise CutcheckError(f"--mutant {m!r}: unknown; known mutants are {', '.join(MUTANTS)}.")
    budget = FUZZ_PROFILES[profile]
    rows: list[list[Any]] = []
    report: dict[str, Any] = {"profile": profile}
    failed = False

    with err.status("proving …"):
        results = proofs.run()
    unexpected = [r for r in results if r.status != ("counterexample" if "[" in r.name else "proved")]
    rows.append(["proofs", f"{len(results) - len(unexpected)}/{len(results)} as expected "
                 f"({sum(r.seconds for r in results):.1f} s)", "ok" if not unexpected else "FAIL"])
    report["proofs"] = [{"name": r.name, "status": r.status, "bound": r.bound, "seconds": r.seconds} for r in results]
    failed |= bool(unexpected)

    progress, task = _progress("fuzzing", budget["examples"])
    with progress:
        campaign = fz.hypothesis_campaign(examples=budget["examples"], mutants=mutants,
                                          gen=fz.KILL_GEN.get(mutants[0], {}) if mutants else None,
                                          progress=lambda n: progress.advance(task, n))
    detail = f"{campaign.examples} scenarios, {campaign.refused} refused restores ({campaign.seconds:.1f} s)"
    if campaign.failure is not None:
        path = _write_counterexample(campaign.failure, work_dir or Path("."))
        detail += f"; replay: cutcheck simulate {path}"
    rows.append(["fuzz", detail, "ok" if campaign.ok else "FAIL"])
    report["fuzz"] = {"examples": campaign.examples, "ok": campaign.ok, "seconds": campaign.seconds}
    failed |= not campaign.ok

    kills = []
    progress, task = _progress("mutation check", len(MUTANTS))
    with progress:
        for m in MUTANTS:
            kills.append(fz.kill(m, seconds=budget["kill_seconds"], max_seeds=budget["max_seeds"]))
            progress.advance(task, 1)
    score = sum(k.killed for k in kills)
    survivors = [k.mutant for k in kills if not k.killed]
    rows.append(["mutation score", f"{score}/{len(kills)} killed ({100 * score // max(1, len(kills))}%)"
                 + (f"; survivors: {', '.join(survivors)}" if survivors else ""), "ok" if not survivors else "FAIL"])
    report["mutants"] = [{"mutant": k.mutant, "killed": k.killed, "seconds": k.seconds, "examples": k.examples,
                          "violation": k.violation, "seed": k.seed} for k in kills]
    failed |= bool(survivors)

    root = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="cutcheck-verify-"))
    examples_ok, run_dirs = True, []
    for path in _example_scenarios(examples_dir):
        result = run(Scenario.from_json(path).with_overrides(mutants=mutants or None), out_dir=root / path.stem)
        run_dirs.append((path.stem, result))
        examples_ok &= result.ok
    rows.append(["example scenarios", ", ".join(f"{n}: {'ok' if r.ok else 'VIOLATION'}" for n, r in run_dirs),
                 "ok" if examples_ok else "FAIL"])
    report["examples"] = {n: r.summary() for n, r in run_dirs}
    failed |= not examples_ok

    import spark_validation

    agree = True
    with err.status("validating the example logs with Spark …"):
        for name, result in run_dirs:
            rep = spark_validation.validate(run_dir=result.run_dir, master=master)
            eo = result.exactly_once
            # The same verdict and the same figures (one definition of each, DESIGN "EXACTLY_ONCE").
            agree &= rep.ok == eo.ok and (rep.lost, rep.duplicated, rep.phantom, rep.count_gaps) == (
                eo.lost, eo.duplicated, eo.phantom, eo.count_gaps)
            report.setdefault("spark", {})[name] = rep.to_json()
    rows.append(["spark validation", f"{len(run_dirs)} run(s); verdicts and figures {'agree' if agree else 'DISAGREE'} with the engine",
                 "ok" if agree else "FAIL"])
    failed |= not agree

    out.print(table(f"cutcheck verify --profile {profile}", ["stage", "result", "verdict"], rows))
    report["ok"] = not failed
    write_json(json_path, report)
    raise typer.Exit(1 if failed else 0)
