"""The files a hunt leaves beside its JSON report: per finding, the shrunk case and a standalone script.

``REPORT.json`` -> ``REPORT.finding-N.case.json`` (what ``--replay`` reads) and ``REPORT.finding-N.py`` (a
PyFlink script that reproduces the finding without cutcheck, rendered by flink_bridge.standalone when
this cutcheck has it). Every file is written to a temporary sibling and renamed; nothing a user
wrote is replaced (only files this command names and writes itself).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cutcheck.flink_bridge.hunt.case import HuntCase, replay_command
from cutcheck.model.errors import CutcheckError, InvalidArgument


def render_script(case: HuntCase, version: str | None = None) -> tuple[str | None, str]:
    """(script text, note): the standalone PyFlink script of ``case`` (flink_bridge.standalone), which checks
    the model's expectations on whatever Flink runs it: FAIL (exit 1) where that Flink disagrees."""
    from cutcheck.flink_bridge import standalone

    if case.fail_restored or case.max_parallelism_after:  # flink_bridge.standalone's script has neither yet
        what = "fail the job restored from a savepoint" if case.fail_restored else "change a max parallelism on the restore"
        return None, f"no standalone script: the script cannot {what}; the case file replays it with cutcheck"
    try:
        text = standalone.render(case.job_graph(), case.options(), release=version)
    except CutcheckError as exc:  # an option the script cannot carry (e.g. a JVM kill): the case file replays it
        return None, f"no standalone script: {exc}"
    return text, "renders the shrunk case as a PyFlink job that checks the model's expectations itself"


def _ours(path: Path) -> bool:
    """A file this command may replace: absent, or one a hunt wrote (a case file or a rendered script)."""
    if not path.exists():
        return True
    try:
        head = path.read_text(errors="replace")[:2000]
    except OSError:
        return False
    return '"cutcheck_hunt_case"' in head or "cutcheck" in head


def _write(path: Path, text: str) -> None:
    if not _ours(path):
        raise InvalidArgument(f"{path} exists and cutcheck did not write it; move it away or give --json another name.")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def check_report_path(path: Path) -> None:
    """Refuse a --json path whose directory is missing, before the hunt spends its minutes."""
    if not path.parent.exists():
        raise InvalidArgument(f"--json {path}: the directory {path.parent} does not exist; create it or pick another path.")
    if path.is_dir():
        raise InvalidArgument(f"--json {path}: is a directory; give a file name.")


def write_findings(report: Any, json_path: Path, version: str | None, reruns: int) -> None:
    """Write each finding's case (and script) beside ``json_path``; fill in their paths and replay commands."""
    for i, f in enumerate(report.findings, 1):
        case = f.shrunk or f.case
        case_path = json_path.with_name(f"{json_path.stem}.finding-{i}.case.json")
        _write(case_path, json.dumps(case.to_json(), indent=1) + "\n")
        f.case_file = str(case_path)
        f.replay = replay_command(version, case_path, reruns)
        script, note = render_script(case, version)
        f.script_note = note
        if script is not None:
            script_path = json_path.with_name(f"{json_path.stem}.finding-{i}.py")
            _write(script_path, script)
            f.script_file = str(script_path)
