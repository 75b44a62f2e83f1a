"""Real Flink for cutcheck: run job graphs on a PyFlink MiniCluster, log them in cutcheck's recovery-log
schema, compare them with the engine, and read real Flink checkpoint directories.

Needs the ``flink`` extra (apache-flink); every entry point raises EnvironmentProblem (exit 2)
with the install command when it is missing. Nothing here prints.

* ``run_to_dir(graph, out, options)``: the job on Flink, then ``out`` as a cutcheck run directory;
  with ``options.release`` in that prepared apache-flink release (``cutcheck flink env``), through
  ``launch.run_in_release``, which is also the entry point for a bare run (no run directory).
* ``compare.compare(graph, options)``: the same graph on the engine and on Flink, side by side.
* ``checkpoints.referenced_files(chk_dir)`` / ``checkpoints.inspect_flink(root)``: what Flink's
  ``_metadata`` references, by scope, read with Flink's own loader;
  ``checkpoints.any_referenced_files`` is the reader ``cutcheck storage ls/orphans`` uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cutcheck.flink_bridge.env import INSTALL_HINT, flink_available, require_flink
from cutcheck.flink_bridge.launch import run_in_release
from cutcheck.flink_bridge.runner import FlinkRun, RunOptions

__all__ = ["INSTALL_HINT", "FlinkRun", "RunOptions", "RunOutcome", "flink_available", "require_flink", "run_in_release",
           "run_to_dir"]


@dataclass(slots=True)
class RunOutcome:
    run_dir: Path
    run: FlinkRun
    summary: dict[str, Any]

    @property
    def complete(self) -> bool:
        """The last job finished (not left failed by ``restart=False``), so the output can be judged."""
        return bool(self.summary["complete"])

    @property
    def exactly_once(self) -> bool:
        return bool(self.summary["exactly_once"]["ok"])


def run_to_dir(graph: Any, out: str | Path, options: RunOptions | None = None, progress: Any = None, *,
               force: bool = False) -> RunOutcome:
    """Run ``graph`` (a JobGraph or a path) on Flink and write ``out`` as a cutcheck run directory.

    ``out`` must be new, or a run directory cutcheck wrote and ``force`` given (model.outputs). It is
    written in place (see RunLogWriter) and removed on any failure or interruption, the run it
    replaces put back."""
    from cutcheck.flink_bridge import runlog, runner
    from cutcheck.reference.logs import RunLogWriter

    options = options or RunOptions()
    if options.release is None:
        require_flink()
    else:
        from cutcheck.flink_bridge.releases import require_prepared

        require_prepared(options.release)
    graph, _ = runner.prepare(graph, options)  # bad input fails before anything starts
    # In place: Flink's _metadata names shared files by absolute path, so the run must be written
    # where it stays; a renamed directory would hold checkpoints Flink cannot restore.
    writer = RunLogWriter(out, force=force, in_place=True)
    try:
        if options.release is None:
            run = runner.run(graph, writer.tmp / "flink", options, progress)
        else:  # in the release's own environment: this process needs no PyFlink
            run = run_in_release(options.release, graph, options, writer.tmp / "flink", progress)
        summary = runlog.write(writer, run)
    except BaseException:
        writer.discard()
        raise
    return RunOutcome(Path(out), run, summary)
