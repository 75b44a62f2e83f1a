"""The whole chain (``cutcheck verify``): proofs, a fuzz campaign, the mutation check, the example
scenarios and Spark validation of their logs.

Every stage runs and the table is printed whatever an earlier stage found; every finding (a fuzz
counterexample, a scenario that fails without any mutant while a mutant was hunted) is written as a
scenario and printed with its replay command, and the exit code is 1.
"""

from __future__ import annotations

import json
import multiprocessing
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import typer

from cutcheck.commands.campaign import (
    FUZZ_PROFILES,
    abstract_lines,
    check_mutants,
    progress_bar,
    replay_line,
    skipped_lines,
    usable_cpus,
    write_counterexample,
)
from cutcheck.commands.common import app, err, out, show, user_errors, write_json
from cutcheck.model.errors import CutcheckError
from cutcheck.model.outputs import check_output_dir, check_output_file, mark, replace_dir, staging_dir


def _example_scenarios(directory: Path | None) -> list[Path]:
    """The scenarios verify runs: --examples DIR, else the ones shipped with the package (package data,
    the same files in an editable checkout and an installed copy), whatever the working directory."""
    d = directory if directory else Path(str(resources.files("cutcheck") / "examples" / "scenarios"))
    found = sorted(d.glob("*.json")) if d.is_dir() else []
    if not found:
        raise CutcheckError(f"{d}: no example scenarios (*.json) to run; give --examples DIR with scenario files.")
    return found


SEED_STRIDE = 100_000  # scenario seeds between the mutation stages of two campaign seeds (max_seeds at most)
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
    seed: int = typer.Option(0, "--seed", min=0, help="Campaign seed: the fuzz stage's Hypothesis seed; each "
                             f"mutant's hunt starts at scenario seed SEED x {SEED_STRIDE}, so seeds never overlap."),
) -> None:
    """The whole chain: proofs and their negative controls, a fuzz campaign, the mutation check, the
    example scenarios, and Spark validation of their logs. Exit 0 when everything holds, 1 on any
    violation or counterexample."""
    if profile not in FUZZ_PROFILES:
        raise CutcheckError(f"--profile {profile!r}: use one of {', '.join(FUZZ_PROFILES)}.")
    scenarios = _example_scenarios(examples_dir)  # bad input is found before minutes of work
    mutants = tuple(mutant or ())
    check_mutants(mutants)
    check_output_file(json_path, option="--json")
    if work_dir is not None:
        check_output_dir(work_dir, force=force, option="--work-dir")
        with staging_dir(work_dir) as root:
            report = _verify(profile, scenarios, mutants, master, root, Path(work_dir), seed)
            (root / "run.json").write_text(json.dumps(mark(report), indent=2, sort_keys=True, default=str) + "\n")
            replace_dir(root, work_dir, force=force)
        out.print(f"example runs and report: {work_dir}", markup=False, highlight=False)
    else:
        root = Path(tempfile.mkdtemp(prefix="cutcheck-verify-"))
        report = _verify(profile, scenarios, mutants, master, root, root, seed)
    write_json(json_path, report)
    raise typer.Exit(0 if report["ok"] else 1)


def _verify(profile: str, scenarios: list[Path], mutants: tuple[str, ...], master: str | None, root: Path,
            final: Path, seed: int = 0) -> dict[str, Any]:
    """Run every stage into ``root`` (renamed to ``final`` afterwards); print the summary; return the
    report (values only, no JSON strings inside)."""
    from cutcheck import proofs
    from cutcheck.reference import Scenario
    from cutcheck.reference import simulate as run
    from cutcheck.reference.faults.catalogue import MUTANTS
    from cutcheck.reference.fuzzing import campaigns as fz
    from cutcheck.reference.judge import Outcome, judge

    started = time.monotonic()
    budget = FUZZ_PROFILES[profile]
    rows: list[list[Any]] = []
    report: dict[str, Any] = {"profile": profile, "seed": seed, "mutants_switched_on": list(mutants)}

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

    progress, task = progress_bar("fuzzing", budget["examples"])
    with progress:
        campaign = fz.hypothesis_campaign(examples=budget["examples"], mutants=mutants, seed=seed,
                                          progress=lambda n: progress.advance(task, n))
    detail = (f"{campaign.examples} scenarios ran in {campaign.seconds:.1f} s ({campaign.describe_split()}; "
              f"{campaign.covered.describe()}; {campaign.abstract.describe()}"
              + (f"; {campaign.describe_guidance()}" if campaign.guidance else "") + "); "
              f"{campaign.refused} restores refused, {campaign.looped} jobs restarting for ever on failed "
              f"checkpoints, as Flink would, and {campaign.stalled} jobs stalled on a barrier alignment, as Flink's "
              "protocol stalls")
    detail += "".join(f"; {line}" for line in skipped_lines(campaign.skipped))  # a skip is said, never silent
    counterexamples: list[dict[str, Any]] = []
    if campaign.failure is not None:
        path = final / write_counterexample(campaign.failure.scenario, root, "fuzz").name
        v = campaign.failure.violations[0]
        counterexamples.append({"stage": "fuzz", "invariant": v["invariant"], "detail": v["detail"], "path": str(path)})
        detail += f"; FOUND {v['invariant']}, see the counterexamples below"
    row("fuzz", "random jobs, checkpoint modes, failures, rescales and schedules on the engine, every invariant "
        "checked and every channel trace validated; a violation or engine exception is shrunk to a replayable "
        "scenario", detail, campaign.ok and campaign.examples > 0)
    report["fuzz"] = campaign.to_json() | {"ok": campaign.ok}
    report["coverage"] = campaign.coverage.to_json()
    report["abstract_coverage"] = campaign.abstract.to_json()

    kills = []
    progress, task = progress_bar("mutation check", len(MUTANTS))
    # The mutants are hunted independently (each by the same seeds, so the results do not depend on
    # how many run at once): one per core this process may use (its affinity), at most two.
    workers = min(2, usable_cpus())
    with progress, ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        n = len(MUTANTS)
        for k in pool.map(_kill, MUTANTS, [budget["kill_seconds"]] * n, [budget["max_seeds"]] * n,
                          [seed * SEED_STRIDE] * n):
            kills.append(k)
            progress.advance(task, 1)
    found = [k for k in kills if k.killed]
    survivors = [k.mutant for k in kills if not k.killed and k.engine_finding is None]
    faults = [k for k in kills if k.engine_finding is not None]
    for k in faults:
        path = final / write_counterexample(k.scenario or {}, root, f"engine-{k.seed}").name
        f = k.engine_finding or {}
        counterexamples.append({"stage": f"mutants ({k.mutant})", "invariant": f.get("invariant", ""),
                                "detail": f"seed {k.seed} fails without any mutant: {f.get('detail', '')}",
                                "path": str(path)})
    row("mutants", "protocol bugs injected one at a time (mutants); each must make some scenario violate an "
        "invariant, else the checks would miss that bug",
        f"{len(found)} of {len(kills)} found in {sum(k.examples for k in kills)} scenarios (each below)"
        + (f"; NOT FOUND: {', '.join(survivors)}" if survivors else "")
        + (f"; ENGINE FAULT while hunting {', '.join(k.mutant for k in faults)}" if faults else ""),
        bool(kills) and not survivors and not faults)
    report["mutants"] = [k.to_json() for k in kills]
    report["counterexamples"] = counterexamples

    run_dirs = []
    example_skips: list[str] = []
    verdicts: dict[str, Any] = {}
    for path in scenarios:
        result = run(Scenario.from_json(path).with_overrides(mutants=mutants or None), out_dir=root / path.stem)
        run_dirs.append((path.stem, result))
        verdict = verdicts[path.stem] = judge(result)  # the judgement simulate, fuzz and the mutation check make
        ok = verdict.outcome is Outcome.HOLDS and result.all_fired
        s = result.summary()
        got = (f"{s['steps']} steps, {s['checkpoints_completed']} checkpoints, {s['restarts']} restart(s)"
               + ("" if verdict.outcome is Outcome.HOLDS else f"; {_not_held(verdict)}")
               + ("" if result.all_fired else "; a scheduled failure or rescale NEVER FIRED"))
        example_skips += [f"  example {path.stem}: {c.check.value} skipped ({c.note})" for c in verdict.skipped()]
        row(f"example {path.stem}", f"the scenario (examples/scenarios/<name>.json or --examples) {EXAMPLE_ASSERTS}",
            got, ok)
    report["examples"] = {n: r.summary() for n, r in run_dirs}
    report["example_verdicts"] = {n: v.to_json() for n, v in verdicts.items()}

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
        verdict = (f"found by {m['violation']} at seed {m['seed']}" if m["found"] else
                   f"ENGINE FAULT at seed {m['seed']} (fails without the mutant)" if m["engine_finding"] else "NOT FOUND")
        out.print(f"  mutant {m['mutant']}: {verdict} ({m['scenarios_run']} scenarios, {m['seconds']:.1f} s)",
                  markup=False, highlight=False, soft_wrap=True)
    for line in example_skips:
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    cov = campaign.coverage
    out.print(f"coverage of the fuzz stage: {cov.describe()}", markup=False, highlight=False, soft_wrap=True)
    if report["coverage"]["missed"]:
        out.print("  not reached: " + ", ".join(report["coverage"]["missed"]), markup=False, highlight=False,
                  soft_wrap=True)
    for line in abstract_lines(campaign.abstract):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    for c in counterexamples:
        out.print(f"counterexample ({c['stage']}): {c['invariant']}: {c['detail']}", markup=False, highlight=False,
                  soft_wrap=True)
        out.print(f"  {replay_line(c['path'])}", markup=False, highlight=False, soft_wrap=True)
    return report


def _not_held(verdict: Any) -> str:
    """What an example's verdict says instead of "holds" (as the row said it before the judge)."""
    from cutcheck.reference.judge import Outcome

    if verdict.outcome is Outcome.VIOLATED:
        return f"VIOLATION {verdict.invariant}"
    return f"{verdict.outcome.value.upper().replace('_', ' ')}: {verdict.reason}"


def _names_not(results: list[Any], word: str) -> str:
    bad = [r.name for r in results if not r.as_expected]
    return f"; not {word}: {', '.join(bad)}" if bad else ""


def _kill(mutant: str, seconds: float, max_seeds: int, first_seed: int) -> Any:
    """One mutant's hunt, in a worker process of the mutation stage."""
    from cutcheck.reference.fuzzing import campaigns as fz

    return fz.kill(mutant, seconds=seconds, max_seeds=max_seeds, first_seed=first_seed)
