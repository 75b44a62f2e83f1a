"""Real-Flink tests: skipped with a reason when the flink extra (apache-flink) is not installed.

Flink runs one job at a time on this machine (flink_bridge.env.machine_lock), so xdist workers
that reach these tests at once queue rather than share the two cores.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark_for_flink() -> Iterator[Any]:
    """A small local Spark session for `cutcheck validate` on Flink's logs (the CLI reuses the running one)."""
    pytest.importorskip("pyspark")
    from model.errors import EnvironmentProblem
    from spark_validation.session import active_session, build_session, find_java

    try:
        find_java()
    except EnvironmentProblem as exc:
        pytest.skip(str(exc))
    running = active_session()
    if running is not None:
        yield running
        return
    session = build_session(master="local[2]", driver_memory="1g", app_name="cutcheck-flink-tests", shuffle_partitions=2)
    yield session
    session.stop()
