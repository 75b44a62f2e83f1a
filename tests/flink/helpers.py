"""Shared by the real-Flink tests: paths and the skip marker."""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_bridge.env import flink_available

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
NEEDS_FLINK = pytest.mark.skipif(
    not flink_available(), reason="apache-flink is not installed (pip install '.[flink]' adds the flink extra)"
)
# PyFlink 2.x warns about its own deprecated APIs while it imports; not ours to fix.
FLINK_MARKS = [pytest.mark.flink, pytest.mark.slow, NEEDS_FLINK, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
