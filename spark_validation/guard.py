"""Spark's failures and Ctrl-C as one sentence: the boundary around every Spark command.

PySpark surfaces trouble as Py4J exceptions (the JVM died or stopped answering), Java exceptions
wrapped in ``Py4JJavaError``, or its own ``PySparkException`` family (``AnalysisException`` ...),
each with pages of stack. :func:`spark_guard` turns them into :class:`LogDataError` (the data cannot
be read) or :class:`EnvironmentProblem` (Spark itself failed), one sentence each, and turns
everything that follows a Ctrl-C into a plain ``KeyboardInterrupt`` after stopping the JVM, so that
nothing keeps writing into a directory the caller removes and Spark's temporary files go with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from cutcheck.model.errors import CutcheckError, EnvironmentProblem, LogDataError

from . import session


def _first_line(text: str) -> str:
    for line in text.strip().splitlines():
        line = re.sub(r"\s*SQLSTATE: \w+", "", line.strip())
        if line:
            return line[:300].rstrip(".")
    return ""


def _root(exc: BaseException) -> str:
    """The deepest message of the Java cause chain (or the Python message)."""
    from .datasets import _chain

    try:
        lines = _chain(exc)
    except Exception:  # a dead gateway cannot be asked for the chain
        lines = []
    return _first_line(lines[-1]) if lines else _first_line(str(exc)) or type(exc).__name__


def translate(exc: BaseException) -> CutcheckError | None:
    """One sentence for a Spark or Py4J failure, or None when ``exc`` is neither."""
    from py4j.protocol import Py4JError, Py4JJavaError, Py4JNetworkError
    from pyspark.errors import AnalysisException, PySparkException

    from .datasets import read_failure

    if isinstance(exc, CutcheckError):
        return exc
    if isinstance(exc, Py4JNetworkError) or (
        isinstance(exc, Py4JError) and not isinstance(exc, Py4JJavaError)
    ):
        log = session.keep_jvm_log()
        return EnvironmentProblem(
            f"Spark's JVM stopped answering ({_first_line(str(exc)) or type(exc).__name__}); it may have run "
            f"out of memory or been killed: rerun with a larger --driver-memory and see {log}."
        )
    if isinstance(exc, AnalysisException):
        return LogDataError(
            f"Spark cannot use the logs as given ({_root(exc)}); check the dataset paths and their columns."
        )
    if isinstance(exc, Py4JJavaError | PySparkException):
        reason = read_failure(exc)
        if reason is not None:
            return LogDataError(f"cannot read the logs: {reason}; fix or remove that file.")
        root = _root(exc)
        log = session.keep_jvm_log()
        if "Java heap space" in root or "OutOfMemory" in root:
            return EnvironmentProblem(
                f"Spark ran out of memory ({root}); rerun with a larger --driver-memory, e.g. 8g (log: {log})."
            )
        return EnvironmentProblem(f"Spark failed: {root}; see {log} for Spark's own log.")
    return None


@contextmanager
def spark_guard() -> Iterator[None]:
    """Run Spark work; re-raise its failures as one-sentence errors, and Ctrl-C as KeyboardInterrupt."""
    session.INTERRUPTED.clear()
    try:
        yield
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt) or session.INTERRUPTED.is_set():
            session.stop_jvm()
            raise KeyboardInterrupt from None
        if isinstance(exc, Exception):
            err = translate(exc)
            if err is not None and err is not exc:
                raise err from None
        raise
