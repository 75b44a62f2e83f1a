"""Running scenarios: simulate.

``--out`` is checked before the run (``model.outputs``): an existing directory is replaced only when
it is a run directory cutcheck wrote and ``--force`` is given. On long runs a status line on stderr
(only when stderr is a terminal) shows the step. ``--strict`` makes a scheduled failure or rescale
that never happened an error (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from cutcheck.commands.common import app, err, out, show, user_errors, write_json
from cutcheck.model.errors import CutcheckError
from cutcheck.model.outputs import check_output_dir, check_output_file


def _parse_assignments(items: list[str] | None, option: str) -> dict[str, int]:
    result: dict[str, int] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name or not value.isdigit() or int(value) < 1:
            raise CutcheckError(f"{option} {item!r}: expected VERTEX=P with P a positive integer, e.g. {option} count=3.")
        result[name] = int(value)
    return result


def _print_restore(r: dict[str, Any]) -> None:
    """Per edge: in-flight records restored, where they moved (old producer→consumer ⇒ new), and
    how many the rescaling filter dropped."""
    rows = []
    for key, d in sorted(r.get("edges", {}).items(), key=lambda kv: int(kv[0])):
        moves = d.get("moves") or []
        moved = "\n".join(moves) if moves else ("in place" if d["input_records"] + d["output_records"] else "")
        rows.append([d.get("edge", f"#{key}"), d.get("mapper", "1:1"), d["input_records"], d["output_records"],
                     d.get("filtered", 0), moved])
    if not rows:
        return
    title = f"restore from checkpoint {r['checkpoint']}"
    if r.get("rescaled"):
        changes = ", ".join(f"{v} {old}→{new}" for v, (old, new) in sorted(r.get("parallelism", {}).items()))
        title += f" (rescaled: {changes})"
    if r.get("region"):
        title += f" (region failover: {', '.join(r['region'])})"
    show(title, ["edge", "mapper (input / output)", "input-state records", "output-state records",
                  "dropped by filter", "moved (old producer→consumer ⇒ new): records"], rows)
    if r.get("order_unchecked_edges"):
        out.print("ORDER is no longer checked on edge(s) " + ", ".join(f"#{k}" for k in r["order_unchecked_edges"])
                  + ": the rescale merged several old subtasks' in-flight slices of a split into one new subtask.",
                  markup=False, highlight=False, soft_wrap=True)


def _exactly_once_row(s: dict[str, Any], verdict: Any) -> str:
    eo = s["exactly_once"]
    faults = f"duplicated {eo['duplicated']}, phantom {eo['phantom']}, count gaps {eo['count_gaps']}"
    from cutcheck.reference.judge import Check, State

    held = verdict.check(Check.EXACTLY_ONCE)
    if not eo["ok"] and held is not None and held.state is State.HELD:  # at-least-once: what it promises
        return f"at least once holds ({faults}: what AT_LEAST_ONCE checkpointing promises after a failover)"
    if eo.get("prefix"):
        verdict = "holds so far" if eo["ok"] else "VIOLATED so far"
        return (f"{verdict} (the run stopped at step {s['steps']}, so only its output up to there is judged: "
                f"{faults}; {eo['pending']} records not committed yet, pending, not lost)")
    return "holds" if eo["ok"] else f"VIOLATED: lost {eo['lost']}, {faults}"


def _never_fired_row(result: Any) -> list[str] | None:
    sc = result.scenario
    if not sc.failures and not sc.rescales:
        return None
    missed = [d["what"] for d in result.never_fired["failures"] + result.never_fired["rescales"]]
    if not missed:
        return ["scheduled failures / rescales", f"all fired ({len(sc.failures)} / {len(sc.rescales)})"]
    return ["NEVER FIRED", "; ".join(missed)]


def _print_run(result: Any, verdict: Any) -> None:
    from cutcheck.reference.judge import Outcome

    s = result.summary()
    rows = [
        ["mode", s["mode"]],
        ["steps", s["steps"]],
        ["checkpoints completed", s["checkpoints_completed"]],
        ["checkpoints aborted", s["checkpoints_aborted"]],
        ["alignment steps", s["alignment_steps"]],
        ["channel-state records (input / output)", f"{s['input_state_records']} / {s['output_state_records']}"],
        ["restarts", s["restarts"]],
        ["EXACTLY_ONCE", _exactly_once_row(s, verdict)],
    ]
    if "batch" in s:  # a batch job: regions instead of checkpoints (reference.batch)
        b = s["batch"]
        rows[0] = ["execution", f"batch: {b['regions']} regions on {b['workers']} workers, no checkpoints"]
        rows[2:6] = [["failover strategy", b["failover_strategy"]], ["regions restarted", b["regions_restarted"]],
                     ["records recomputed", b["records_recomputed"]],
                     ["blocking partitions (persisted / bytes)", f"{b['partitions_persisted']} / {b['bytes_persisted']}"]]
    if "debloat" in s:
        d = s["debloat"]
        rows.insert(-1, ["buffer debloating", f"{d['announcements']} announcements, buffer {d['buffer_size_now']} B now "
                                              f"(min {d['min_buffer_size']}), estimated time to consume "
                                              f"{d['estimated_time_to_consume_mean']} steps (max {d['estimated_time_to_consume_max']})"])
    fired = _never_fired_row(result)
    if fired is not None:
        rows.append(fired)
    show(f"simulate (seed {s['seed']})", ["", "value"], rows)
    for f in s.get("batch", {}).get("failovers", []):
        out.print(f"failover at step {f['step']} ({f['target']}): restarted "
                  + "; ".join("{" + ", ".join(r) + "}" for r in f["regions_restarted"])
                  + f"; {f['records_recomputed']} records recomputed", highlight=False, markup=False)
    for r in s["restores"]:
        _print_restore(r)
    for v in verdict.findings:  # the judge's findings; trace rejections are listed by _print_trace
        if "step" in v:
            out.print(f"[bold red]{v['invariant']} violated[/] at step {v['step']}: {v['detail']}", highlight=False)
    if verdict.outcome is Outcome.RESTART_LOOP:
        out.print(f"restart loop (not a finding): {verdict.reason}", markup=False, highlight=False, soft_wrap=True)
    if verdict.outcome is Outcome.ALIGNMENT_STALL:
        out.print(f"the protocol stalls here, as Flink's does (a finding against Flink, not the engine): {verdict.reason}",
                  markup=False, highlight=False, soft_wrap=True)
    if result.run_dir:
        out.print(f"recovery logs: {result.run_dir}")


def _print_trace(result: Any, verdict: Any) -> None:
    """What trace validation found, or why it was skipped (only when --trace asked for it)."""
    from cutcheck.reference.judge import Check, State

    trace = verdict.check(Check.TRACE)
    if trace is None or not result.traces:
        return
    if trace.state is State.SKIPPED:
        out.print(f"trace validation: skipped: {trace.note}", markup=False, highlight=False, soft_wrap=True)
        return
    rejected = verdict.trace_findings
    channels = sum(len(book) for book in result.traces)
    out.print(f"trace validation: {channels} channel traces, "
              + ("all accepted by the protocol" if not rejected else f"{len(rejected)} rejected"))
    for f in rejected[:5]:
        out.print(f"  channel {f.key} event #{f.index} {f.event}: {f.reason}", markup=False, highlight=False)


class _StatusLine:
    """``step N of at most M`` on stderr while a long run goes; nothing unless stderr is a terminal."""

    def __init__(self) -> None:
        self.status: Any = None

    def __call__(self, step: int, max_steps: int) -> None:
        text = f"simulating: step {step:,} (at most {max_steps:,}) …"
        if self.status is None:
            self.status = err.status(text)
            self.status.start()
        else:
            self.status.update(text)

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()


@app.command()
@user_errors
def simulate(
    scenario: Path = typer.Argument(..., help="Scenario JSON file (its format: docs/scenarios.md)."),
    out_dir: Path = typer.Option(None, "--out", help="Write the recovery logs (Parquet) to this new run directory."),
    force: bool = typer.Option(False, "--force", help="Replace --out if it is a run directory cutcheck wrote earlier "
                               "(nothing else is ever replaced)."),
    strict: bool = typer.Option(False, "--strict", help="Exit 2 when a scheduled failure or rescale never fired."),
    seed: int = typer.Option(None, "--seed", help="Override the scenario's seed."),
    mode: str = typer.Option(None, "--mode", help="Override the checkpoint mode: aligned, unaligned, aligned_timeout, at_least_once."),
    mutant: list[str] = typer.Option(None, "--mutant", help="Switch on a named protocol fault (repeatable)."),
    json_path: Path = typer.Option(None, "--json", help="Write the summary as JSON."),
    rescale: list[str] = typer.Option(None, "--rescale", help="VERTEX=P: restore at this parallelism after the first failure (repeatable)."),
    checkpoint_dir: Path = typer.Option(None, "--checkpoint-dir", help="Write checkpoints to this directory (the scenario's storage.dir)."),
    restore: Path = typer.Option(None, "--restore", help="Start from this chk-N or savepoint directory of an earlier run."),
    restore_mode: str = typer.Option(None, "--restore-mode", help="claim or no_claim (default: the scenario's, else no_claim)."),
    trace: bool = typer.Option(False, "--trace", help="Record every channel's protocol events (trace.jsonl in the run "
                               "directory, for `cutcheck trace`) and validate them against the proved protocol."),
) -> None:
    """Run a scenario on the reference engine, write its recovery logs, and check every invariant.

    A restore Flink would refuse (rescaling in-flight data of a pointwise, broadcast or custom edge)
    ends the run with exit 2 and the reason; a job that stalls on a barrier alignment, as Flink's
    protocol does, exits 1."""
    from cutcheck.reference import Scenario
    from cutcheck.reference import simulate as run
    from cutcheck.reference.judge import Outcome, judge

    check_output_file(json_path, option="--json")  # every output is checked before any work
    if out_dir is not None:
        check_output_dir(out_dir, force=force, option="--out")
    if seed is not None and seed < 0:
        raise CutcheckError(f"--seed {seed}: a seed is a non-negative integer.")
    scen = Scenario.from_json(scenario).with_overrides(seed=seed, mode=mode, mutants=tuple(mutant) if mutant else None)
    if rescale:
        parallelism = _parse_assignments(rescale, "--rescale")
        if not scen.failures:
            raise CutcheckError(f"{scenario}: --rescale applies to the restore after the first failure, but the scenario "
                                "has no failures; add one under 'failures'.")
        scen = scen.with_rescale(parallelism, on_failure=0, label="--rescale")
    status = _StatusLine() if err.is_terminal else None
    try:
        result = run(scen, out_dir=out_dir, checkpoint_dir=checkpoint_dir, restore=restore, restore_mode=restore_mode,
                     trace=trace, force=force, progress=status)
    finally:
        if status is not None:
            status.stop()
    if result.run_dir is None:
        # Without --out the replay names the scenario file as given, with every override.
        flags = [f"--seed {scen.seed}"] + ([f"--mode {mode}"] if mode else []) + [f"--mutant {m}" for m in mutant or []]
        flags += [f"--rescale {r}" for r in rescale or []] + (["--trace"] if trace else [])
        result.replay = f"cutcheck simulate {scenario} " + " ".join(flags)
    verdict = judge(result)  # the same judgement fuzz, verify and the mutation check make
    _print_run(result, verdict)
    _print_trace(result, verdict)
    out.print(verdict.describe(), markup=False, highlight=False, soft_wrap=True)
    # A stall is no bug of the engine (campaigns count it apart), but it is this job's: it never ends,
    # as it would not in Flink. A user who asked about their own job gets exit 1 and the replay.
    stalled = verdict.outcome is Outcome.ALIGNMENT_STALL
    if not verdict.ok or stalled:
        out.print(f"replay: {result.replay}", highlight=False, markup=False)
    write_json(json_path, result.summary() | {"verdict": verdict.to_json()})
    if verdict.ok and strict and not result.all_fired:
        missed = [d["what"] for d in result.never_fired["failures"] + result.never_fired["rescales"]]
        raise CutcheckError(f"--strict: {'; '.join(missed)} never fired (the run ended at step {result.steps}); "
                            "schedule it earlier or raise max_steps.")
    raise typer.Exit(0 if verdict.ok and not stalled else 1)
