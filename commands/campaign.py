"""What ``fuzz`` and ``verify`` share: the campaign profiles, mutant names, the progress bar, and
counterexample files with their replay command (each command imports this; neither imports the other).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cutcheck.commands.common import err
from cutcheck.model.errors import CutcheckError

FUZZ_PROFILES: dict[str, dict[str, Any]] = {
    # examples: Hypothesis fuzz scenarios; kill_seconds: budget per mutant; spark: validate the example logs
    "quick": {"examples": 20, "kill_seconds": 60.0, "max_seeds": 100_000},
    # ci: a fuzz example of the cycle's small jobs takes about 0.1 s; 300 of them reach the at-least-once,
    # savepoint, recovery and refusal cells that 80 missed.
    "ci": {"examples": 600, "kill_seconds": 60.0, "max_seeds": 100_000},
    "deep": {"examples": 2000, "kill_seconds": 300.0, "max_seeds": 5000},
}


def write_counterexample(scenario: dict[str, Any], directory: Path, name: str = "") -> Path:
    """A counterexample scenario in ``directory`` (a staging directory or a fresh temporary one)."""
    path = directory / f"counterexample-{name or scenario.get('seed', 0)}.json"
    path.write_text(json.dumps(scenario, indent=2) + "\n")
    return path


def replay_line(path: Path | str) -> str:
    """How to replay a counterexample: with --trace, since trace validation is part of every verdict."""
    return f"replay: cutcheck simulate {path} --trace"


def abstract_lines(coverage: Any) -> list[str]:
    """The abstract-state coverage summary (reference.fuzzing.abstract_coverage), the unreachable cells
    listed under their reasons."""
    from cutcheck.reference.fuzzing.abstract_coverage import abstract_lines as lines

    return lines(coverage, unreachable=True)


def coverage_lines(coverage: Any) -> list[str]:
    """The coverage summary and the reachable cells no run reached, by name."""
    missed = coverage.missed()
    from cutcheck.reference.core.coverage import cell_name

    lines = [f"coverage: {coverage.describe()}"]
    if missed:
        lines.append("not reached: " + ", ".join(cell_name(c) for c in missed))
    return lines


def check_mutants(mutants: tuple[str, ...]) -> None:
    from cutcheck.reference.faults.catalogue import MUTANTS

    for m in mutants:
        if m not in MUTANTS:
            raise CutcheckError(f"--mutant {m!r}: unknown; known mutants are {', '.join(MUTANTS)}.")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, which containers and taskset narrow)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no sched_getaffinity (macOS, Windows)
        return max(1, os.cpu_count() or 1)


def progress_bar(description: str, total: int | None) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=err, transient=True)
    return progress, progress.add_task(description, total=total)


def skipped_lines(skipped: dict[str, int]) -> list[str]:
    """A campaign's skipped checks (``CampaignResult.skipped``: runs per "check: why"), one line each."""
    lines = []
    for key, n in sorted(skipped.items()):
        check, _, why = key.partition(": ")
        lines.append(f"{check} skipped in {n} run{'s' if n != 1 else ''}: {why}")
    return lines
