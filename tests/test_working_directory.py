"""No command leaves files in the working directory (issue 26, item 5): Hypothesis's cache and
database go to a temporary home that is removed however a campaign ends, Ctrl-C included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.interrupts import interruptible
from tests.test_bad_input_simulate_fuzz import EXAMPLES

SCENARIO = str(EXAMPLES / "scenarios" / "keyed-unaligned.json")
GRAPH = str(EXAMPLES / "keyed-pipeline.json")


def _env(tmp: Path) -> dict[str, str]:
    """The process's temporary directory is ``tmp``, so what it leaves there can be seen too."""
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp)}


@pytest.mark.parametrize("args", [
    ["fuzz", "--examples", "3"],
    ["fuzz", "--seeds", "--examples", "2"],
    ["simulate", SCENARIO],
    ["graph", "validate", GRAPH],
])
def test_a_command_leaves_nothing_in_the_working_directory(tmp_path: Path, args: list[str]) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    res = subprocess.run([sys.executable, "-m", "cutcheck", *args], cwd=cwd, env=_env(tmp_path / "tmp"),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(os.listdir(cwd)) == []
    assert not list((tmp_path / "tmp").glob("cutcheck-hypothesis-*"))


def test_ctrl_c_on_fuzz_leaves_no_hypothesis_directory(tmp_path: Path) -> None:
    cwd, tmp = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    proc = interruptible([sys.executable, "-m", "cutcheck", "fuzz", "--seconds", "120"], cwd=cwd, env=_env(tmp),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 90
    # The campaign's Hypothesis home exists once the campaign has started. (Hypothesis writes its cache of
    # constants only for code outside site-packages: an editable install, not an installed wheel.)
    while not list(tmp.glob("cutcheck-hypothesis-*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(tmp.glob("cutcheck-hypothesis-*")), "the campaign never started"
    time.sleep(2)  # inside the campaign, examples running
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines() == ["interrupted"], stderr
    assert sorted(os.listdir(cwd)) == []
    assert not list(tmp.glob("cutcheck-hypothesis-*"))


def test_part_files_are_ordered_by_modification_time_not_by_counter(tmp_path: Path) -> None:
    """Counters of different writers are unrelated (issue 26, item 9): writer b's part 5 was committed
    before writer a's part 0, and the fault map's order across files says so."""
    pytest.importorskip("pyspark")
    from cutcheck.spark_validation.datasets import discover
    from cutcheck.spark_validation.faultmap import file_order

    sink = tmp_path / "sink"
    sink.mkdir()
    for i, name in enumerate(["part-b-5", "part-a-0", "part-b-6"]):
        f = sink / name
        f.write_text("1,0\n")
        os.utime(f, ns=(10**18 + i * 10**9, 10**18 + i * 10**9))
    ds = discover("output", sink, hint="csv")
    assert file_order(ds) == {"part-b-5": 0, "part-a-0": 1, "part-b-6": 2}
