"""Real Flink: flink run, flink compare, flink conform, and flink env (the releases they run in)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from cutcheck.commands.common import app, err, out, table, user_errors, write_json
from cutcheck.commands.simulate import _parse_assignments
from cutcheck.model.errors import CutcheckError
from cutcheck.model.outputs import check_output_dir

flink_app = typer.Typer(help="Run job graphs on a real Flink MiniCluster (needs the flink extra).", no_args_is_help=True)
app.add_typer(flink_app, name="flink")


def _flink_options(mode: str, fail_after: int | None, rescale: list[str] | None, records: int | None, interval: int,
                   slow: str | None, delay: float, no_restart: bool, incremental: bool, retained: int,
                   checkpoint_dir: Path | None, job_id: str | None, release: str | None = None) -> Any:
    from cutcheck import flink_bridge

    _require_release(release)  # one sentence and exit 2 without PyFlink or the release, before any other work
    return flink_bridge.RunOptions(
        mode=mode, interval_ms=interval, fail_after=fail_after, restart=not no_restart,
        rescale=_parse_assignments(rescale, "--rescale"), records=records, slow=slow, delay_ms=delay,
        retained=retained, incremental=incremental, checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None,
        job_id=job_id, release=release)


def _require_release(release: str | None) -> None:
    """The installed PyFlink (no --flink), or the prepared release --flink names (this process needs no PyFlink)."""
    if release is None:
        from cutcheck import flink_bridge

        flink_bridge.require_flink()
    else:
        from cutcheck.flink_bridge.releases import require_prepared

        require_prepared(release)


FLINK_HELP = "Run the job in this prepared apache-flink release (cutcheck flink env VERSION); default: the installed PyFlink."


def _flink_progress(message: str) -> None:
    err.print(f"[dim]flink:[/] {message}", highlight=False)


def _flink_run_table(outcome: Any) -> Table:
    s = outcome.summary
    eo = s["exactly_once"]
    rows: list[list[Any]] = []
    for j in outcome.run.jobs:
        par = ", ".join(f"{v.id}={v.parallelism}" for v in j.graph.vertices)
        rows.append([f"job {j.index}", f"{j.job_id} ({j.stats.state if j.stats else '?'}; {par})"])
    rows += [
        ["checkpoints completed / aborted", f"{s['checkpoints_completed']} / {s['checkpoints_aborted']}"],
        ["unaligned checkpoints", s["unaligned_checkpoints"]],
        ["in-flight bytes met / persisted", f"{s['inflight_bytes']} / {s['persisted_bytes']}"],
        ["alignment (ms, slowest subtask, summed)", s["alignment_ms"]],
        ["failure", f"{s['failure']['vertex_subtask']} after checkpoint {s['failure']['after_checkpoint']}" if s["failure"] else "none"],
        ["restores", "; ".join(f"checkpoint {r['checkpoint']}" + (" (rescaled)" if r["rescaled"] else "") for r in s["restores"]) or "none"],
        ["committed output rows", s["output_rows"]],
        ["EXACTLY_ONCE (engine oracle)", "not judged: the job was cancelled at its deadline, its output is a prefix"
         if outcome.run.liveness is not None else
         "not judged: the job was left failed (--no-restart), its output is a prefix" if not s["complete"] else "holds" if eo["ok"] else
         f"VIOLATED: lost {eo['lost']}, duplicated {eo['duplicated']}, phantom {eo['phantom']}, count gaps {eo['count_gaps']}"],
    ]
    return table(f"flink run: {outcome.run.graph.name} ({s['mode']}), {s['seconds']:.1f} s", ["", "value"], rows)


@flink_app.command("run")
@user_errors
def flink_run(
    graph: Path = typer.Argument(..., help="Job graph JSON file (or a scenario file: its graph section)."),
    out_dir: Path = typer.Option(..., "--out", help="Run directory to write (recovery logs and Flink's state)."),
    mode: str = typer.Option("unaligned", "--mode", help="unaligned, aligned or aligned_timeout."),
    fail_after: int = typer.Option(None, "--fail-after-checkpoint", help="Inject one failure once checkpoint N completed."),
    rescale: list[str] = typer.Option(None, "--rescale", help="VERTEX=P: restore after the failure at this parallelism (repeatable)."),
    records: int = typer.Option(None, "--records", min=1, help="Records per source (overrides the graph)."),
    interval: int = typer.Option(200, "--interval-ms", min=10, help="Checkpoint interval in milliseconds."),
    slow: str = typer.Option(None, "--slow", help="Vertex slowed down to build backpressure (default: last keyed_count, else the sink)."),
    delay: float = typer.Option(2.0, "--delay-ms", min=0.0, help="Delay per record at the slow vertex."),
    no_restart: bool = typer.Option(False, "--no-restart", help="Let the failed job stay failed (its checkpoints retained)."),
    incremental: bool = typer.Option(False, "--incremental", help="RocksDB incremental checkpoints (files in shared/)."),
    retained: int = typer.Option(3, "--retained", min=1, help="Checkpoints Flink retains."),
    checkpoint_dir: Path = typer.Option(None, "--checkpoint-dir", help="Flink checkpoint directory (default: RUN_DIR/flink/checkpoints)."),
    job_id: str = typer.Option(None, "--job-id", help="Pin the job id (32 hex digits), hence <checkpoint-dir>/<job-id>/."),
    savepoint: str = typer.Option(None, "--savepoint", help="canonical or native: stop with a savepoint after "
                                  "--stop-after-checkpoint N and restore from it (instead of a failure)."),
    stop_after: int = typer.Option(None, "--stop-after-checkpoint", help="With --savepoint: once checkpoint N completed."),
    claim_mode: str = typer.Option("no_claim", "--claim-mode", help="claim or no_claim: how every restore owns its snapshot."),
    kill_after: int = typer.Option(None, "--kill-after-checkpoint", help="SIGKILL the TaskManager JVM in the middle "
                                   "of a checkpoint once checkpoint N completed (the cluster then runs in JVMs of its own)."),
    no_chaining: bool = typer.Option(False, "--no-chaining", help="Every vertex starts an operator chain of its own."),
    json_path: Path = typer.Option(None, "--json", help="Write the summary as JSON."),
    force: bool = typer.Option(False, "--force", help="Replace OUT if it is a run directory cutcheck wrote "
                               "(anything else is never replaced)."),
    release: str = typer.Option(None, "--flink", metavar="VERSION", help=FLINK_HELP),
    deadline: float = typer.Option(900.0, "--deadline-s", min=1.0, help="Wall-clock limit of the whole run, from the "
                                   "cluster's start; then the job is cancelled and judged: stalled or still progressing."),
    checkpoint_timeout: int = typer.Option(None, "--checkpoint-timeout-ms", min=10, help="A checkpoint not complete "
                                           "after this long expires (execution.checkpointing.timeout; Flink: 10 min)."),
    tolerable: int = typer.Option(None, "--tolerable-failed-checkpoints", min=0, help="Failed checkpoints Flink "
                                  "tolerates before it fails the job over (Flink: 0)."),
    alignment_timeout: int = typer.Option(None, "--alignment-timeout-ms", min=0, help="With --mode aligned_timeout: "
                                          "a checkpoint starts aligned and goes unaligned after this long (default 20)."),
    conf: list[str] = typer.Option(None, "--conf", metavar="KEY=VALUE", help="Further Flink configuration for the job "
                                   "and its cluster, e.g. taskmanager.network.memory.buffers-per-channel=2 (repeatable)."),
) -> None:
    """Run a job graph on a local Flink MiniCluster and write its recovery logs; `cutcheck validate` checks them.

    Exit 0 when the committed output is exactly-once, 1 when it is not or when the job stalled (at the deadline, nothing reached its sinks and no checkpoint completed for the last max(30 s, a third of --deadline-s)), 2 on bad input, without the flink extra, or when the job was still progressing at the deadline.
    """
    from cutcheck import flink_bridge
    from cutcheck.flink_bridge.settings import parse_conf

    check_output_dir(out_dir, force=force)  # before Flink starts: a refusal costs nothing
    if alignment_timeout is not None and mode != "aligned_timeout":
        raise CutcheckError(f"--alignment-timeout-ms applies to --mode aligned_timeout only, not --mode {mode}; "
                            "leave it out or give --mode aligned_timeout.")
    extra = parse_conf(conf)
    opts = _flink_options(mode, fail_after, rescale, records, interval, slow, delay, no_restart, incremental, retained,
                          checkpoint_dir, job_id, release)
    # the topology options of issue 23: what the job is, beside the options every flink command shares
    opts.savepoint, opts.stop_after, opts.claim_mode = savepoint, stop_after, claim_mode
    opts.kill_after, opts.chaining = kill_after, not no_chaining
    # the run's limits and further configuration (issue 25's stall): a job that never ends is judged, not an error
    opts.timeout_s, opts.judge_deadline, opts.conf = deadline, True, extra
    opts.checkpoint_timeout_ms, opts.tolerable_failed = checkpoint_timeout, tolerable
    if alignment_timeout is not None:
        opts.alignment_timeout_ms = alignment_timeout
    outcome = flink_bridge.run_to_dir(_graph_of(graph), out_dir, opts, progress=_flink_progress, force=force)
    out.print(_flink_run_table(outcome))
    if outcome.run.liveness is not None:
        _judged_at_deadline(outcome, json_path)
    if outcome.complete:
        out.print(f"recovery logs: {outcome.run_dir}  (check them with: cutcheck validate {outcome.run_dir})")
    else:
        out.print(f"retained checkpoints: {outcome.run.checkpoint_dir}  (cutcheck storage ls / orphans)")
    write_json(json_path, outcome.summary)
    raise typer.Exit(0 if outcome.exactly_once or not outcome.complete else 1)


def _graph_of(path: Path) -> Any:
    """A job-graph file, or a scenario file's ``graph`` section (a regression's scenario runs on Flink as it is)."""
    from cutcheck.model.errors import GraphError
    from cutcheck.model.graph import JobGraph
    from cutcheck.model.jsontext import read_json

    data = read_json(path, GraphError, "job-graph file")
    if isinstance(data, dict) and "vertices" not in data and isinstance(data.get("graph"), dict):
        return JobGraph.from_json({"name": path.stem, **data["graph"]})
    return path


def _judged_at_deadline(outcome: Any, json_path: Path | None) -> None:
    """A run cancelled at its deadline: what was seen, then exit 1 (stalled) or 2 (still progressing)."""
    live = outcome.run.liveness
    rows: list[list[Any]] = []
    for sink, grew in sorted(live.grew_s.items()):
        rows.append([f"sink {sink}: received / committed", f"{live.received.get(sink, 0)} / {live.committed.get(sink, 0)}"
                     + (f", last grew at {grew:.1f} s" if grew is not None else ", never grew")])
    rows += [
        ["checkpoints completed / failed", f"{live.completed} / {live.failed}"],
        ["restarts", live.restarts],
        ["state at the deadline", live.state],
        ["last progress", f"at {live.last_progress_s:.1f} s" if live.last_progress_s is not None else "none"],
        ["without progress at the end", f"{live.quiet_s:.1f} s (a stall needs {live.window_s:.0f} s)"],
        ["verdict", "STALLED" if live.stalled else "still progressing"],
    ]
    out.print(table(f"deadline of {live.deadline_s:.0f} s reached: the job was cancelled", ["", "value"], rows))
    out.print(f"retained checkpoints: {outcome.run.checkpoint_dir}  (cutcheck storage ls / orphans)",
              markup=False, highlight=False, soft_wrap=True)
    out.print(f"recovery logs of the output so far: {outcome.run_dir}  (cutcheck validate judges them as a prefix)",
              markup=False, highlight=False, soft_wrap=True)
    write_json(json_path, outcome.summary)
    sentence = live.sentence(outcome.run.flink_version or "unknown")
    if live.stalled:
        out.print(sentence, markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    raise CutcheckError(sentence)


def _side_by_side(cmp: Any) -> list[Table]:
    from cutcheck.flink_bridge.compare import NOT_COMPARABLE, TOLERANCE

    e, f = cmp.engine, cmp.flink

    def verdict(side: Any) -> str:
        if side.refused is not None:
            return "restore refused"
        eo = side.exactly_once
        return "holds" if eo["ok"] else f"VIOLATED (lost {eo['lost']}, duplicated {eo['duplicated']}, phantom {eo['phantom']})"

    def total(pairs: list[tuple[int, int]]) -> int:
        return sum(b for _, b in pairs)

    ratio = "-" if cmp.ratio is None else f"{cmp.ratio:.2f}"
    within = "within" if cmp.calibrated else "NOT within"
    no = "no: "
    rows = [
        ["exactly-once", verdict(e), verdict(f), "yes"],
        ["restore refused (as Flink refuses it)", "yes" if e.refused else "no", "yes" if f.refused else "no", "yes"],
        ["checkpoints completed", e.completed, f.completed,
         f"yes: engine/Flink {ratio}, {within} {TOLERANCE:.0%}"],
        ["restarts", e.restarts, f.restarts, "yes"],
        ["share of in-flight data persisted", e.persisted_share if e.persisted_share is not None else "-",
         f.persisted_share if f.persisted_share is not None else "-", "yes"],
        ["checkpoints aborted", e.aborted, f.aborted, no + NOT_COMPARABLE["aborted"]],
        ["unaligned checkpoints", "-", f.unaligned, "no: the engine does not count them"],
        ["in-flight bytes (all completed checkpoints)", total(e.inflight), total(f.inflight), no + NOT_COMPARABLE["inflight"]],
        ["channel state persisted (bytes)", total(e.persisted), total(f.persisted), no + NOT_COMPARABLE["persisted"]],
        [f"alignment ({e.time_unit} / {f.time_unit})", total(e.alignment), total(f.alignment), no + NOT_COMPARABLE["alignment"]],
        ["checkpoint interval (steps / ms)", cmp.engine_interval, cmp.flink_interval, no + NOT_COMPARABLE["interval"]],
    ]
    tried = ", ".join(f"{i} steps: {c}" for i, c in cmp.calibration)
    title = (f"flink compare: {cmp.graph} ({cmp.mode}); engine interval {cmp.engine_interval} steps, "
             f"calibrated on the engine's runs ({tried})")
    summary = table(title, ["", "engine", "Flink", "comparable"], rows)

    def cells(side: Any, i: int) -> list[Any]:
        if i >= len(side.inflight):
            return ["", "", "", ""]
        return [side.inflight[i][0], side.inflight[i][1], side.persisted[i][1], side.alignment[i][1]]

    per = [[i + 1, *cells(e, i), *cells(f, i)] for i in range(max(len(e.inflight), len(f.inflight)))]
    detail = table("per completed checkpoint (bytes; engine alignment in steps, Flink's in ms: not comparable)",
                   ["#", "engine id", "in-flight", "persisted", "alignment", "Flink id", "in-flight", "persisted",
                    "alignment"], per)
    return [summary, detail]


@flink_app.command("compare")
@user_errors
def flink_compare(
    graph: Path = typer.Argument(..., help="Job graph JSON file."),
    mode: str = typer.Option("unaligned", "--mode", help="unaligned, aligned or aligned_timeout."),
    fail_after: int = typer.Option(None, "--fail-after-checkpoint", help="Inject one failure once checkpoint N completed."),
    rescale: list[str] = typer.Option(None, "--rescale", help="VERTEX=P: restore after the failure at this parallelism (repeatable)."),
    records: int = typer.Option(None, "--records", min=1, help="Records per source (overrides the graph)."),
    interval: int = typer.Option(200, "--interval-ms", min=10, help="Flink's checkpoint interval in milliseconds."),
    out_dir: Path = typer.Option(None, "--out", help="Keep Flink's run directory here."),
    json_path: Path = typer.Option(None, "--json", help="Write the comparison as JSON."),
    force: bool = typer.Option(False, "--force", help="Replace OUT if it is a run directory cutcheck wrote."),
    release: str = typer.Option(None, "--flink", metavar="VERSION", help=FLINK_HELP),
) -> None:
    """Run a job graph on real Flink, then on the reference engine calibrated to as many completed checkpoints
    (within 20 %); print which figures compare (verdicts, checkpoints, restarts, refusals, share persisted) and which do not.

    Exit 0 when no side violates exactly-once and both give the same verdict (a restore refused on both sides
    agrees), 1 otherwise, 2 on bad input or without the flink extra.
    """
    from cutcheck.flink_bridge.compare import compare

    if out_dir is not None:
        check_output_dir(out_dir, force=force)
    opts = _flink_options(mode, fail_after, rescale, records, interval, None, 2.0, False, False, 3, None, None, release)
    cmp = compare(graph, opts, out_dir, progress=_flink_progress, force=force)
    for t in _side_by_side(cmp):
        out.print(t)
    write_json(json_path, cmp.to_json())
    if not cmp.calibrated:
        err.print(f"[yellow]warning:[/] completed checkpoints are not within 20 % (engine {cmp.engine.completed}, "
                  f"Flink {cmp.flink.completed}) after {len(cmp.calibration)} engine runs.", highlight=False)
    raise typer.Exit(0 if cmp.ok else 1)


@flink_app.command("conform")
@user_errors
def flink_conform(
    graphs: int = typer.Option(5, "--graphs", min=1, help="How many generated graphs to run."),
    seed: int = typer.Option(0, "--seed", min=0, help="First generator seed (seeds Flink cannot run are skipped)."),
    out_dir: Path = typer.Option(..., "--out", help="Directory for the graphs' JSON (replay them with flink compare)."),
    records: int = typer.Option(None, "--records", min=10, help="Records per source (default: per graph, about "
                                "2000 per subtask of the slow vertex)."),
    interval: int = typer.Option(200, "--interval-ms", min=10, help="Flink's checkpoint interval in milliseconds."),
    json_path: Path = typer.Option(None, "--json", help="Write the report as JSON."),
    force: bool = typer.Option(False, "--force", help="Replace OUT if cutcheck wrote it."),
    release: str = typer.Option(None, "--flink", metavar="VERSION", help=FLINK_HELP),
) -> None:
    """Run N generated graphs (within what Flink supports) on the engine and on Flink, each with a failure and,
    where Flink allows one, a rescale; report whether the verdicts and the refusals agree.

    Exit 0 when all agree, 1 when any disagrees (a replay command per disagreement), 2 on bad input.
    """
    from cutcheck.flink_bridge.conform import conform
    from cutcheck.model.outputs import mark, replace_dir, staging_dir

    check_output_dir(out_dir, force=force)
    _require_release(release)
    with staging_dir(out_dir) as tmp:
        report = conform(graphs, seed, tmp, out_dir, records=records, interval_ms=interval, progress=_flink_progress,
                         release=release)
        (tmp / "run.json").write_text(json.dumps(mark({"command": "flink conform", **report.to_json()}), indent=1,
                                                  default=str) + "\n")
        replace_dir(tmp, out_dir, force=force)
    rows = []
    for r in report.rows:
        j = r.to_json()
        refused = "/".join("yes" if x else "no" for x in (j["engine_refused"], j["flink_refused"]))
        checkpoints = "-" if j["checkpoints"] is None else "{} / {}".format(*j["checkpoints"])
        rows.append([r.case.seed, r.case.summary(), r.case.options(), j["engine_verdict"], j["flink_verdict"],
                     refused, checkpoints, "yes" if r.agree else "inconclusive" if r.inconclusive else "NO"])
    unjudged = len(report.rows) - report.agreed - report.disagreed
    out.print(table(f"flink conform: {len(report.rows)} graphs from seed {seed}, {report.agreed} agree, "
                    f"{report.disagreed} disagree" + (f", {unjudged} inconclusive" if unjudged else "")
                    + f" ({report.graphs_per_minute} graphs per minute)",
                    ["seed", "graph", "failure, rescale", "engine", "Flink", "refused (engine/Flink)",
                     "checkpoints (engine / Flink)", "agree"], rows))
    for r in report.rows:
        if not r.agree:
            why = r.error or "verdicts differ"
            what = "is inconclusive" if r.inconclusive else "disagrees"
            out.print(f"seed {r.case.seed} {what} ({why}); replay: {r.case.replay(r.graph_path)}",
                      markup=False, highlight=False, soft_wrap=True)
    write_json(json_path, report.to_json())
    if report.agreed == 0 and report.disagreed == 0:
        raise CutcheckError(f"none of the {len(report.rows)} graphs could be judged (each job ended before its failure); "
                            "give more --records.")
    raise typer.Exit(0 if report.disagreed == 0 else 1)


@flink_app.command("env")
@user_errors
def flink_env(
    version: str = typer.Argument(None, metavar="[VERSION]", help="The apache-flink release to prepare, e.g. 2.1.0."),
    list_: bool = typer.Option(False, "--list", help="Show the prepared releases and their sizes."),
    remove: str = typer.Option(None, "--remove", metavar="VERSION", help="Delete this prepared release."),
    python: str = typer.Option(None, "--python", help="Interpreter for the release's environment (default: this one)."),
    find_links: Path = typer.Option(None, "--find-links", help="Install from this directory of wheels alone "
                                    "(no package index), e.g. one filled by pip download elsewhere."),
) -> None:
    """Prepare an apache-flink release for --flink VERSION: an isolated virtualenv in the cache directory
    ($CUTCHECK_CACHE, else $XDG_CACHE_HOME/cutcheck, else ~/.cache/cutcheck), checked first against the
    Python and Java versions the release runs on.

    Exit 0 when the release is prepared (or listed, or removed), 2 when it cannot run here, with the fix.
    """
    from cutcheck.flink_bridge import releases

    asked = [name for name, given in (("VERSION", version is not None), ("--list", list_), ("--remove", remove is not None))
             if given]
    if len(asked) != 1:
        raise CutcheckError("flink env takes one of VERSION (prepare it), --list or --remove VERSION"
                            + (f", not {' and '.join(asked)}" if asked else "") + ".")
    if list_:
        found = releases.list_prepared()
        out.print(table(f"prepared apache-flink releases in {releases.releases_dir()}", ["release", "Python", "size",
                        "prepared", "path"], [[p.version, p.python, f"{p.size_bytes / 2**20:.0f} MB", p.created, str(p.path)]
                                              for p in found]))
        if not found:
            out.print("none prepared; cutcheck flink env VERSION prepares one.")
        return
    if remove is not None:
        gone = releases.remove(remove)
        out.print(f"removed apache-flink {gone.version} ({gone.size_bytes / 2**20:.0f} MB) from {gone.path}")
        return
    if find_links is not None and not find_links.is_dir():
        raise CutcheckError(f"--find-links {find_links}: no such directory; give a directory of wheels.")
    env, made = releases.prepare(version, python=python, find_links=str(find_links) if find_links else None,
                                 progress=_flink_progress)
    state = "prepared" if made else "already prepared"
    out.print(f"apache-flink {env.version} {state} in {env.path} (Python {env.python}, {env.size_bytes / 2**20:.0f} MB); "
              f"run a job in it with: cutcheck flink run GRAPH --out DIR --flink {env.version}", soft_wrap=True)


from cutcheck.commands import flink_hunt  # noqa: E402,F401 (registers `flink hunt`)
