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
    from cutcheck.model.errors import EnvironmentProblem
    from cutcheck.spark_validation.session import active_session, build_session, find_java

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


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """shared_dir(name, build) -> Path: ``build(path)`` runs once across xdist workers, the others wait and reuse it.

    pytest -n 2 may hand one module's tests to both workers; a module fixture would then run the
    same Flink job twice. Read-only results are built once under the workers' common base temp.
    """
    import fcntl
    import os
    from pathlib import Path

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base

    def get(name: str, build: Any) -> Path:
        path, done = root / name, root / f"{name}.done"
        with open(root / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                build(path)
                done.write_text("ok")
        return path

    return get
