"""Fuzz campaigns (``fuzz``); what ``verify`` shares with them is ``commands.campaign``.

Both write only where cutcheck may (``model.outputs``): ``fuzz --out DIR`` and ``verify --work-dir
DIR`` are run directories (``run.json`` marked as cutcheck's, counterexample scenarios beside it),
checked before the campaign starts and renamed into place at the end; an existing one is replaced
only when cutcheck wrote it and ``--force`` is given. Without them a counterexample goes to a new
temporary directory, never into the working directory.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import typer

from cutcheck.commands.campaign import (
    FUZZ_PROFILES,
    abstract_lines,
    check_mutants,
    coverage_lines,
    progress_bar,
    replay_line,
    skipped_lines,
    usable_cpus,
    write_counterexample,
)
from cutcheck.commands.common import app, err, out, show, user_errors, write_json
from cutcheck.model.errors import CutcheckError
from cutcheck.model.outputs import check_output_dir, check_output_file, mark, replace_dir, staging_dir

__all__ = ["FUZZ_PROFILES", "fuzz", "usable_cpus"]  # the profiles stay importable here (benchmarks/bench_fuzz.py)

def _write_run_dir(dest: Path | None, force: bool, report: dict[str, Any], scenarios: list[dict[str, Any]],
                   prefix: str) -> list[Path]:
    """Write ``report`` (run.json) and the counterexample ``scenarios``; returns their final paths.

    With ``dest``: staged beside it and renamed into place. Without: only when there is a
    counterexample, into a new temporary directory."""
    if dest is None:
        if not scenarios:
            return []
        root = Path(tempfile.mkdtemp(prefix=prefix))
        (root / "run.json").write_text(json.dumps(mark(report), indent=2, sort_keys=True, default=str) + "\n")
        return [write_counterexample(sc, root) for sc in scenarios]
    with staging_dir(dest) as tmp:
        names = [write_counterexample(sc, tmp).name for sc in scenarios]
        (tmp / "run.json").write_text(json.dumps(mark(report), indent=2, sort_keys=True, default=str) + "\n")
        replace_dir(tmp, dest, force=force)
    return [dest / n for n in names]


def _check_campaign(examples: int | None, seconds: float | None, workers: int, spark: str | None) -> None:
    """Refuse a campaign that would run nothing (and so prove nothing) before it starts."""
    if examples is not None and examples < 1:
        raise CutcheckError(f"--examples {examples}: a campaign needs at least one scenario; give --examples 1 or more.")
    if seconds is not None and not seconds > 0:
        raise CutcheckError(f"--seconds {seconds}: a time budget must be more than 0 seconds.")
    if workers < 1:
        raise CutcheckError(f"--workers {workers}: at least one worker process is needed; give --workers 1 or more.")
    if seconds is not None and (spark or workers > 1):
        raise CutcheckError("--seconds applies to campaigns in this process; with --workers or --spark bound the "
                            "campaign by --examples instead.")


def _usable_workers(asked: int) -> int:
    """``asked`` worker processes, or as many as the machine runs at once, said in one line: each worker
    is a whole interpreter, and 10 000 of them forked the machine to a halt."""
    cpus = usable_cpus()
    if asked <= cpus:
        return asked
    err.print(f"--workers {asked}: this machine runs {cpus} processes at once (the CPUs cutcheck may use); "
              f"using {cpus} workers.", markup=False, highlight=False, soft_wrap=True)
    return cpus


def _spark_verdicts(seeds: list[int], mutants: tuple[str, ...], master: str) -> list[dict[str, Any]]:
    """Each seed is one Spark task running the engine (executors need this project installed)."""
    import functools as ft

    from cutcheck.reference.fuzzing.guided import guided_verdict_of_seed
    from cutcheck.spark_validation.session import get_session

    spark = get_session(master)  # its Python workers run this interpreter (spark_validation.session)
    rdd = spark.sparkContext.parallelize(seeds, max(1, min(len(seeds), 64)))
    verdicts = rdd.map(ft.partial(guided_verdict_of_seed, mutants=mutants)).collect()  # each with its coverage
    return sorted(verdicts, key=lambda v: v["seed"])


@app.command()
@user_errors
def fuzz(
    seconds: float = typer.Option(None, "--seconds", help="Bound the whole campaign, shrinking included, to this "
                                  "many seconds (more than 0); without --examples it runs until then."),
    examples: int = typer.Option(None, "--examples", help="Scenarios to try, at least 1 (Hypothesis examples or "
                                 "seeds); default 100, or unlimited under --seconds."),
    mutant: list[str] = typer.Option(None, "--mutant", help="Switch on a named fault; the campaign should find it."),
    workers: int = typer.Option(1, "--workers", help="Run seed campaigns in this many local processes (at least 1; at most the CPUs "
                         "cutcheck may use, which it says when it lowers the number)."),
    spark: str = typer.Option(None, "--spark", help="Run the seeds as Spark tasks on this master (e.g. local[*])."),
    seed: int = typer.Option(0, "--seed", help="Campaign seed (the first scenario seed for seed campaigns)."),
    seeds: bool = typer.Option(False, "--seeds", help="A seed campaign in this process (what --workers and --spark run)."),
    out_dir: Path = typer.Option(None, "--out", help="Write the campaign (run.json, counterexample-SEED.json) to this "
                                 "new directory; default: a counterexample goes to a new temporary directory."),
    force: bool = typer.Option(False, "--force", help="Replace --out if it is a directory cutcheck wrote earlier."),
    json_path: Path = typer.Option(None, "--json", help="Write the campaign report as JSON."),
) -> None:
    """Fuzz the engine: random graphs, modes, failures, rescales and schedules, every run traced and its
    traces validated; any violation, trace mismatch or engine exception is shrunk and written."""
    from cutcheck.reference.fuzzing import campaigns as fz

    mutants = tuple(mutant or ())
    _check_campaign(examples, seconds, workers, spark)
    check_mutants(mutants)
    check_output_file(json_path, option="--json")
    if out_dir is not None:
        check_output_dir(out_dir, force=force, option="--out")
    if examples is None:
        examples = UNBOUNDED if seconds is not None else DEFAULT_EXAMPLES
    if spark or workers > 1 or seeds:
        raise typer.Exit(_seed_campaign(fz, examples, seconds, mutants, workers, spark, seed, out_dir, force,
                                        json_path))
    progress, task = progress_bar("fuzzing", examples if examples != UNBOUNDED else None)
    with progress:
        result = fz.hypothesis_campaign(examples=examples, seconds=seconds, mutants=mutants, seed=seed,
                                        progress=lambda n: progress.advance(task, n))
    _check_judged(result, seconds)
    rows = [[result.examples, result.refused, result.looped, result.stalled, f"{result.seconds:.1f}",
             "none" if result.ok else "FOUND"]]
    show(f"fuzz: {result.examples} scenarios ran ({result.covered.describe()})",
         ["scenarios run", "refused restores", "restart loops", "alignment stalls", "seconds", "finding"], rows)
    out.print(result.describe_split(), markup=False, highlight=False, soft_wrap=True)
    if result.guidance:
        out.print(result.describe_guidance(), markup=False, highlight=False, soft_wrap=True)
    out.print("phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in result.phases.items())
              + f"; limits: {result.limits}", markup=False, highlight=False, soft_wrap=True)
    for line in coverage_lines(result.coverage) + abstract_lines(result.abstract) + skipped_lines(result.skipped):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    report: dict[str, Any] = result.to_json()
    paths = _write_run_dir(out_dir, force, report, [result.failure.scenario] if result.failure else [], "cutcheck-fuzz-")
    if result.failure is not None:
        v = result.failure.violations[0]
        size = report["size"]
        out.print(f"{v['invariant']}: {v['detail']}", markup=False, highlight=False, soft_wrap=True)
        out.print(f"shrunk to {size['vertices']} vertices, {size['edges']} edges, {size['records']} records, "
                  f"{size['choices']} scripted choices, {size['failures']} failures")
        out.print(replay_line(paths[0]), markup=False, highlight=False)
        report["counterexample"] = str(paths[0])
    write_json(json_path, report)
    raise typer.Exit(0 if result.ok else 1)


def _check_judged(result: Any, seconds: float | None) -> None:
    """A campaign whose every scenario the wall cut checked nothing: exit 2, saying so."""
    if result.examples == 0 and seconds is not None:
        raise CutcheckError(f"--seconds {seconds:g}: no scenario finished within the budget ({result.cut_by_wall} "
                            "cut by it, unjudged), so nothing was checked; give a larger --seconds.")


DEFAULT_EXAMPLES = 100
UNBOUNDED = 2**31 - 1  # scenarios: the time budget ends the campaign


def _seed_campaign(fz: Any, examples: int, seconds: float | None, mutants: tuple[str, ...], workers: int,
                   spark: str | None, seed: int, out_dir: Path | None, force: bool, json_path: Path | None) -> int:
    """A seed campaign here, in worker processes or on Spark; every finding (violation, trace mismatch,
    engine exception) is written as its scenario and printed with its replay command. Returns the exit code."""
    seed_list = range(seed, seed + examples)
    if spark:
        with err.status(f"running {examples} scenarios as Spark tasks on {spark} …"):
            verdicts = _spark_verdicts(list(seed_list), mutants, spark)
    elif workers > 1:
        from multiprocessing import get_context

        workers = _usable_workers(workers)
        with get_context("spawn").Pool(workers) as pool:
            from cutcheck.reference.fuzzing.guided import guided_verdict_of_seed

            verdicts = pool.starmap(guided_verdict_of_seed, [(s, mutants) for s in seed_list])
    else:
        verdicts = None
    start = time.monotonic()
    if verdicts is None:
        progress, task = progress_bar("fuzzing", examples if examples != UNBOUNDED else None)
        with progress:
            result = fz.seed_campaign(seed_list, mutants=mutants, seconds=seconds, start=start,
                                      keep_for_shrinking=True, progress=lambda n: progress.advance(task, n))
        _check_judged(result, seconds)
    else:
        result = fz.CampaignResult()
        for v in verdicts:
            fz.add_seed_verdict(result, v)
    bad = [v for v in result.verdicts if not v["ok"]]
    show(f"fuzz (seed campaign): {result.examples} scenarios ran", ["scenarios run", "refused restores", "restart loops",
         "alignment stalls", "findings"], [[result.examples, result.refused, result.looped, result.stalled, len(bad)]])
    for line in coverage_lines(result.coverage) + abstract_lines(result.abstract) + skipped_lines(result.skipped):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    found = [fz.scenario_of_seed(v["seed"], mutants, fz.seed_gen(v["seed"])) for v in bad[:5]]
    shrunk = None
    if bad:  # the first finding is shrunk too, within what is left of the budget (the same wall)
        deadline = start + seconds if seconds is not None else time.monotonic() + fz.SHRINK_SECONDS
        shrink_start = time.monotonic()
        with err.status(f"shrinking the scenario of seed {bad[0]['seed']} …"):
            shrunk, complete = fz.shrink_seed_finding(bad[0]["seed"], mutants, deadline)
        result.phases["scenario_shrink"] = time.monotonic() - shrink_start
        result.limits["shrink_stopped_by"] = "done" if complete else "budget"
        result.seconds = time.monotonic() - start
    report = result.to_json() | {"verdicts": result.verdicts}
    if shrunk is not None and not shrunk.ok and shrunk.invariant == bad[0]["violations"][0]["invariant"]:
        found[0] = shrunk.scenario
        report["size"] = fz.size_of(shrunk.scenario)
    if verdicts is None:
        out.print(result.describe_split(), markup=False, highlight=False, soft_wrap=True)
    paths = _write_run_dir(out_dir, force, report, found, "cutcheck-fuzz-")
    for v, path in zip(bad[:5], paths, strict=False):
        out.print(f"seed {v['seed']}: {v['violations'][0]['invariant']}: {v['violations'][0]['detail']}",
                  markup=False, highlight=False, soft_wrap=True)
        out.print(replay_line(path), markup=False, highlight=False)
    report["counterexamples"] = [str(p) for p in paths]
    write_json(json_path, report)
    return 1 if bad else 0

