"""Fuzz campaigns and the whole chain: fuzz, verify.

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
from importlib import resources
from pathlib import Path
from typing import Any

import typer

from cutcheck.commands.common import app, err, out, show, user_errors, write_json
from cutcheck.model.errors import CutcheckError
from cutcheck.model.outputs import check_output_dir, check_output_file, mark, replace_dir, staging_dir

FUZZ_PROFILES: dict[str, dict[str, Any]] = {
    # examples: Hypothesis fuzz scenarios; kill_seconds: budget per mutant; spark: validate the example logs
    "quick": {"examples": 20, "kill_seconds": 60.0, "max_seeds": 300},
    "ci": {"examples": 80, "kill_seconds": 60.0, "max_seeds": 400},
    "deep": {"examples": 2000, "kill_seconds": 300.0, "max_seeds": 5000},
}


def _write_counterexample(scenario: dict[str, Any], directory: Path) -> Path:
    """A counterexample scenario in ``directory`` (a staging directory or a fresh temporary one)."""
    path = directory / f"counterexample-{scenario.get('seed', 0)}.json"
    path.write_text(json.dumps(scenario, indent=2) + "\n")
    return path


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
        return [_write_counterexample(sc, root) for sc in scenarios]
    with staging_dir(dest) as tmp:
        names = [_write_counterexample(sc, tmp).name for sc in scenarios]
        (tmp / "run.json").write_text(json.dumps(mark(report), indent=2, sort_keys=True, default=str) + "\n")
        replace_dir(tmp, dest, force=force)
    return [dest / n for n in names]


def _check_mutants(mutants: tuple[str, ...]) -> None:
    from cutcheck.reference.faults.catalogue import MUTANTS

    for m in mutants:
        if m not in MUTANTS:
            raise CutcheckError(f"--mutant {m!r}: unknown; known mutants are {', '.join(MUTANTS)}.")


def _check_campaign(examples: int, seconds: float | None, workers: int, spark: str | None) -> None:
    """Refuse a campaign that would run nothing (and so prove nothing) before it starts."""
    if examples < 1:
        raise CutcheckError(f"--examples {examples}: a campaign needs at least one scenario; give --examples 1 or more.")
    if seconds is not None and not seconds > 0:
        raise CutcheckError(f"--seconds {seconds}: a time budget must be more than 0 seconds.")
    if workers < 1:
        raise CutcheckError(f"--workers {workers}: at least one worker process is needed; give --workers 1 or more.")
    if seconds is not None and (spark or workers > 1):
        raise CutcheckError("--seconds applies to campaigns in this process; with --workers or --spark bound the "
                            "campaign by --examples instead.")


def _spark_verdicts(seeds: list[int], mutants: tuple[str, ...], master: str) -> list[dict[str, Any]]:
    """Each seed is one Spark task running the engine (executors need this project installed)."""
    import functools as ft

    from cutcheck.reference.fuzzing.campaigns import verdict_of_seed
    from cutcheck.spark_validation.session import get_session

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
    seconds: float = typer.Option(None, "--seconds", help="Stop after this many seconds (more than 0)."),
    examples: int = typer.Option(100, "--examples", help="Scenarios to try, at least 1 (Hypothesis examples or seeds)."),
    mutant: list[str] = typer.Option(None, "--mutant", help="Switch on a named fault; the campaign should find it."),
    workers: int = typer.Option(1, "--workers", help="Run seed campaigns in this many local processes (at least 1)."),
    spark: str = typer.Option(None, "--spark", help="Run the seeds as Spark tasks on this master (e.g. local[*])."),
    seed: int = typer.Option(0, "--seed", help="Campaign seed (the first scenario seed for seed campaigns)."),
    seeds: bool = typer.Option(False, "--seeds", help="A seed campaign in this process (what --workers and --spark run)."),
    out_dir: Path = typer.Option(None, "--out", help="Write the campaign (run.json, counterexample-SEED.json) to this "
                                 "new directory; default: a counterexample goes to a new temporary directory."),
    force: bool = typer.Option(False, "--force", help="Replace --out if it is a directory cutcheck wrote earlier."),
    json_path: Path = typer.Option(None, "--json", help="Write the campaign report as JSON."),
) -> None:
    """Fuzz the engine: random graphs, modes, failures, rescales and schedules; shrink any violation."""
    from cutcheck.reference.fuzzing import campaigns as fz

    mutants = tuple(mutant or ())
    _check_campaign(examples, seconds, workers, spark)
    _check_mutants(mutants)
    check_output_file(json_path, option="--json")
    if out_dir is not None:
        check_output_dir(out_dir, force=force, option="--out")
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
            progress, task = _progress("fuzzing", examples)
            with progress:
                verdicts = fz.seed_campaign(seed_list, mutants=mutants, seconds=seconds,
                                            progress=lambda n: progress.advance(task, n)).verdicts
        refused = sum(v["refused"] for v in verdicts)
        bad = [v for v in verdicts if not v["ok"]]
        show(f"fuzz (seed campaign): {len(verdicts)} scenarios ran", ["scenarios run", "refused restores", "violations"],
             [[len(verdicts), refused, len(bad)]])
        report = {"scenarios_run": len(verdicts), "examples": len(verdicts), "refused": refused, "verdicts": verdicts}
        found = [fz.scenario_from_seed(v["seed"], mutants=mutants) for v in bad[:5]]
        paths = _write_run_dir(out_dir, force, report, found, "cutcheck-fuzz-")
        for v, path in zip(bad[:5], paths, strict=False):
            out.print(f"seed {v['seed']}: {v['violations'][0]['invariant']}: {v['violations'][0]['detail']}", markup=False)
            out.print(f"replay: cutcheck simulate {path}", markup=False, highlight=False)
        report["counterexamples"] = [str(p) for p in paths]
        write_json(json_path, report)
        raise typer.Exit(1 if bad else 0)
    progress, task = _progress("fuzzing", examples)
    with progress:
        result = fz.hypothesis_campaign(examples=examples, seconds=seconds, mutants=mutants, seed=seed,
                                        progress=lambda n: progress.advance(task, n))
    rows = [[result.examples, result.refused, f"{result.seconds:.1f}", "none" if result.ok else "FOUND"]]
    show(f"fuzz: {result.examples} scenarios ran ({result.covered.describe()})",
         ["scenarios run", "refused restores", "seconds", "violation"], rows)
    report: dict[str, Any] = {"scenarios_run": result.examples, "examples": result.examples, "refused": result.refused,
                              "seconds": result.seconds, "covered": result.covered.to_json()}
    if result.failure is not None:
        v = result.failure.violations[0]
        report["violation"] = v
    paths = _write_run_dir(out_dir, force, report, [result.failure.scenario] if result.failure else [], "cutcheck-fuzz-")
    if result.failure is not None:
        g = result.failure.scenario["graph"]
        out.print(f"{v['invariant']}: {v['detail']}", markup=False, highlight=False)
        out.print(f"shrunk to {len(g['vertices'])} vertices, {len(g['edges'])} edges, "
                  f"{len(result.failure.scenario['schedule'].get('choices', []))} scripted choices")
        out.print(f"replay: cutcheck simulate {paths[0]}", markup=False, highlight=False)
        report["counterexample"] = str(paths[0])
    write_json(json_path, report)
    raise typer.Exit(0 if result.ok else 1)


def _example_scenarios(directory: Path | None) -> list[Path]:
    """The scenarios verify runs: --examples DIR, else the ones shipped with the package (package data,
    the same files in an editable checkout and an installed copy), whatever the working directory."""
    d = directory if directory else Path(str(resources.files("cutcheck") / "examples" / "scenarios"))
    found = sorted(d.glob("*.json")) if d.is_dir() else []
    if not found:
        raise CutcheckError(f"{d}: no example scenarios (*.json) to run; give --examples DIR with scenario files.")
    return found


EXAMPLE_ASSERTS = ("ran to the end with every invariant checked at each step (cuts, order, liveness), every scheduled "
                   "failure and rescale fired, and the committed output is exactly once: no record lost, duplicated "
                   "or phantom, per-key counts without gaps")


@app.command()
@user_errors
def verify(
    profile: str = typer.Option("quick", "--profile", help="quick (minutes), ci, or deep (long campaigns)."),
    json_path: Path = typer.Option(None, "--json", help="Write the whole report as JSON."),
    master: str = typer.Option(None, "--master", help="Spark master for validating the example logs (default local[*])."),
    work_dir: Path = typer.Option(None, "--work-dir", help="Keep the example runs' recovery logs (and any "
                                  "counterexample) in this new directory."),
    force: bool = typer.Option(False, "--force", help="Replace --work-dir if it is a directory cutcheck wrote earlier."),
    mutant: list[str] = typer.Option(None, "--mutant", help="Switch a fault on everywhere (verify must then fail)."),
    examples_dir: Path = typer.Option(None, "--examples", help="Directory of scenarios to run (default examples/scenarios)."),
) -> None:
    """The whole chain: proofs and their negative controls, a fuzz campaign, the mutation check, the
    example scenarios, and Spark validation of their logs. Exit 0 when everything holds, 1 on any
    violation or counterexample."""
    if profile not in FUZZ_PROFILES:
        raise CutcheckError(f"--profile {profile!r}: use one of {', '.join(FUZZ_PROFILES)}.")
    scenarios = _example_scenarios(examples_dir)  # bad input is found before minutes of work
    mutants = tuple(mutant or ())
    _check_mutants(mutants)
    check_output_file(json_path, option="--json")
    if work_dir is not None:
        check_output_dir(work_dir, force=force, option="--work-dir")
        with staging_dir(work_dir) as root:
            report = _verify(profile, scenarios, mutants, master, root, Path(work_dir))
            (root / "run.json").write_text(json.dumps(mark(report), indent=2, sort_keys=True, default=str) + "\n")
            replace_dir(root, work_dir, force=force)
        out.print(f"example runs and report: {work_dir}", markup=False, highlight=False)
    else:
        root = Path(tempfile.mkdtemp(prefix="cutcheck-verify-"))
        report = _verify(profile, scenarios, mutants, master, root, root)
    write_json(json_path, report)
    raise typer.Exit(0 if report["ok"] else 1)


def _verify(profile: str, scenarios: list[Path], mutants: tuple[str, ...], master: str | None, root: Path,
            final: Path) -> dict[str, Any]:
    """Run every stage into ``root`` (renamed to ``final`` afterwards); print the summary; return the
    report (values only, no JSON strings inside)."""
    from cutcheck import proofs
    from cutcheck.reference import Scenario
    from cutcheck.reference import simulate as run
    from cutcheck.reference.faults.catalogue import MUTANTS
    from cutcheck.reference.fuzzing import campaigns as fz

    started = time.monotonic()
    budget = FUZZ_PROFILES[profile]
    rows: list[list[Any]] = []
    report: dict[str, Any] = {"profile": profile, "mutants_switched_on": list(mutants)}

    def row(check: str, what: str, result: str, ok: bool) -> None:
        rows.append([check, what, result, "ok" if ok else "FAIL"])
        report.setdefault("rows", []).append({"check": check, "what": what, "result": result, "ok": ok})

    with err.status("proving …"):
        results = proofs.run()
    positive = [r for r in results if r.expected != "counterexample"]
    controls = [r for r in results if r.expected == "counterexample"]
    good_p, good_c = sum(r.as_expected for r in positive), sum(r.as_expected for r in controls)
    row("proofs", "Z3 proofs that the protocol's rules (cut, replay, key groups, rescale, in-flight data) hold",
        f"{good_p} of {len(positive)} proved ({sum(r.seconds for r in positive):.1f} s)"
        + _names_not(positive, "proved"), bool(positive) and good_p == len(positive))
    row("negative controls", "the same proofs over deliberately broken rules; each must yield a counterexample "
        "(shows the proofs can fail)", f"{good_c} of {len(controls)} refuted" + _names_not(controls, "refuted"),
        bool(controls) and good_c == len(controls))
    report["proofs"] = [r.to_dict() for r in results]

    progress, task = _progress("fuzzing", budget["examples"])
    with progress:
        campaign = fz.hypothesis_campaign(examples=budget["examples"], mutants=mutants,
                                          gen=fz.KILL_GEN.get(mutants[0], {}) if mutants else None,
                                          progress=lambda n: progress.advance(task, n))
    detail = (f"{campaign.examples} scenarios ran in {campaign.seconds:.1f} s ({campaign.covered.describe()}); "
              f"{campaign.refused} restores refused as Flink would")
    if campaign.failure is not None:
        path = final / _write_counterexample(campaign.failure.scenario, root).name
        detail += f"; VIOLATION {campaign.failure.violations[0]['invariant']}, replay: cutcheck simulate {path}"
    row("fuzz", "random jobs, checkpoint modes, failures, rescales and schedules on the engine, every invariant "
        "checked; a violation is shrunk to a replayable scenario", detail, campaign.ok and campaign.examples > 0)
    report["fuzz"] = {"scenarios_run": campaign.examples, "ok": campaign.ok, "seconds": campaign.seconds,
                      "refused": campaign.refused, "covered": campaign.covered.to_json()}

    kills = []
    progress, task = _progress("mutation check", len(MUTANTS))
    with progress:
        for m in MUTANTS:
            kills.append(fz.kill(m, seconds=budget["kill_seconds"], max_seeds=budget["max_seeds"]))
            progress.advance(task, 1)
    found = [k for k in kills if k.killed]
    survivors = [k.mutant for k in kills if not k.killed]
    row("mutants", "protocol bugs injected one at a time (mutants); each must make some scenario violate an "
        "invariant, else the checks would miss that bug",
        f"{len(found)} of {len(kills)} found in {sum(k.examples for k in kills)} scenarios (each below)"
        + (f"; NOT FOUND: {', '.join(survivors)}" if survivors else ""), bool(kills) and not survivors)
    report["mutants"] = [{"mutant": k.mutant, "found": k.killed, "seconds": k.seconds, "scenarios_run": k.examples,
                          "violation": k.violation, "seed": k.seed} for k in kills]

    run_dirs = []
    for path in scenarios:
        result = run(Scenario.from_json(path).with_overrides(mutants=mutants or None), out_dir=root / path.stem)
        run_dirs.append((path.stem, result))
        ok = result.ok and result.complete and result.all_fired
        s = result.summary()
        got = (f"{s['steps']} steps, {s['checkpoints_completed']} checkpoints, {s['restarts']} restart(s)"
               + ("" if result.ok else f"; VIOLATION {(result.violations or [{'invariant': 'EXACTLY_ONCE'}])[0]['invariant']}")
               + ("" if result.all_fired else "; a scheduled failure or rescale NEVER FIRED"))
        row(f"example {path.stem}", f"the scenario (examples/scenarios/<name>.json or --examples) {EXAMPLE_ASSERTS}",
            got, ok)
    report["examples"] = {n: r.summary() for n, r in run_dirs}

    from cutcheck import spark_validation

    agree = True
    with err.status("validating the example logs with Spark …"):
        for name, result in run_dirs:
            rep = spark_validation.validate(run_dir=result.run_dir, master=master)
            eo = result.exactly_once
            # The same verdict and the same figures (one definition of each, DESIGN "EXACTLY_ONCE").
            agree &= rep.ok == eo.ok and (rep.lost, rep.duplicated, rep.phantom, rep.count_gaps) == (
                eo.lost, eo.duplicated, eo.phantom, eo.count_gaps)
            report.setdefault("spark", {})[name] = rep.to_dict()
    row("spark validation", "Spark reads each example's recovery logs and recomputes the exactly-once verdict "
        "independently of the engine", f"{len(run_dirs)} run(s): verdict and figures (lost, duplicated, phantom, count "
        f"gaps) {'equal' if agree else 'DIFFER from'} the engine's", agree and bool(run_dirs))

    report["seconds"] = round(time.monotonic() - started, 1)
    report["ok"] = all(r["ok"] for r in report["rows"])
    show(f"cutcheck verify --profile {profile}: {'everything holds' if report['ok'] else 'FAILED'} "
         f"in {report['seconds']:.1f} s", ["check", "result", "verdict"], [[c, r, v] for c, _, r, v in rows])
    out.print("What each check asserts (ok: it ran and held; FAIL: it did not):", markup=False, highlight=False)
    seen: set[str] = set()
    for check, what, _, _ in rows:
        name = "example <name>" if check.startswith("example ") else check
        if name not in seen:
            seen.add(name)
            out.print(f"  {name}: {what}", markup=False, highlight=False, soft_wrap=True)
    for m in report["mutants"]:
        out.print(f"  mutant {m['mutant']}: " + (f"found by {m['violation']} at seed {m['seed']}" if m["found"] else
                  "NOT FOUND") + f" ({m['scenarios_run']} scenarios, {m['seconds']:.1f} s)",
                  markup=False, highlight=False, soft_wrap=True)
    return report


def _names_not(results: list[Any], word: str) -> str:
    bad = [r.name for r in results if not r.as_expected]
    return f"; not {word}: {', '.join(bad)}" if bad else ""
