"""The forced-aligned stall reproducer (examples/flink-findings/forced-aligned-stall/) stays standalone,
refuses bad arguments in one line, maps its modes to Flink's keys, and its README's commands are ones
the script accepts. No Flink runs here: the script imports PyFlink only after parsing its arguments."""

from __future__ import annotations

import ast
import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "examples" / "flink-findings" / "forced-aligned-stall"
SCRIPT = FOLDER / "forced_aligned_stall.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("forced_aligned_stall", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"line {node.lineno}: a relative import needs a package around the script"
            found.add((node.module or "").split(".")[0])
    return found


def readme_commands() -> list[list[str]]:
    """The argument lists of every `python forced_aligned_stall.py ...` line of the README (continuations joined)."""
    text = (FOLDER / "README.md").read_text().replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        if line.startswith("python forced_aligned_stall.py"):
            words = shlex.split(line.split("#", 1)[0])
            commands.append(words[2:])
    return commands


def test_the_reproducer_needs_only_the_standard_library_and_pyflink() -> None:
    modules = imported_modules(SCRIPT)
    assert "pyflink" in modules
    assert modules - set(sys.stdlib_module_names) == {"pyflink"}, "the reproducer must run without cutcheck"


def test_every_command_in_the_readme_is_accepted_by_the_script() -> None:
    commands = readme_commands()
    assert len(commands) >= 6, commands
    parse = load().parse
    parsed = [parse(argv) for argv in commands]  # argparse exits on an unknown or bad option
    assert {args.mode for args in parsed} == {"unaligned", "aligned", "aligned_timeout"}
    assert any(args.into_c == "rebalance" for args in parsed)


def test_the_modes_set_flinks_checkpointing_keys() -> None:
    module = load()
    conf = {mode: module.job_config(module.parse(["--mode", mode, "--alignment-timeout-ms", "1500"]), 1234, "/tmp/x")
            for mode in ("unaligned", "aligned", "aligned_timeout")}
    unaligned_key, timeout_key = "execution.checkpointing.unaligned.enabled", "execution.checkpointing.aligned-checkpoint-timeout"
    assert [conf[m][unaligned_key] for m in ("unaligned", "aligned", "aligned_timeout")] == ["true", "false", "true"]
    assert conf["unaligned"][timeout_key] == "0ms" and conf["aligned_timeout"][timeout_key] == "1500ms"
    tolerant = module.job_config(module.parse(["--tolerable-failed", "0", "--checkpoint-timeout-ms", "20000"]), 1, "/tmp/x")
    assert tolerant["execution.checkpointing.tolerable-failed-checkpoints"] == "0"
    assert tolerant["execution.checkpointing.timeout"] == "20000ms"
    assert tolerant["restart-strategy.type"] == "none"
    small = module.cluster_config(module.parse([]))
    assert small["taskmanager.memory.segment-size"] == "4kb"
    assert "taskmanager.memory.segment-size" not in module.cluster_config(module.parse(["--default-network"]))


def test_bad_arguments_exit_2_in_one_line_and_an_existing_json_file_is_kept(tmp_path: Path) -> None:
    bad = subprocess.run([sys.executable, str(SCRIPT), "--records", "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert "--records must be at least 1" in bad.stderr and "Traceback" not in bad.stderr
    existing = tmp_path / "out.json"
    existing.write_text("mine")
    kept = subprocess.run([sys.executable, str(SCRIPT), "--json", str(existing)], capture_output=True, text=True, timeout=60)
    assert kept.returncode == 2 and "never overwritten" in kept.stderr
    assert existing.read_text() == "mine"
