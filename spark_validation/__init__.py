"""Exactly-once validation of recovery logs with PySpark.

``validate(run_dir=None, input=None, output=None, master=None, driver_memory=None, sample=20,
input_columns=None, output_columns=None, prefix=None)`` (in :mod:`spark_validation.validation`)
reads a cutcheck run directory (or any input/output datasets following model/logschema.py, as
Parquet, CSV or JSON lines) and returns a :class:`Report`. See :mod:`spark_validation.checks` for
how all the checks run as one Spark job.
"""

from __future__ import annotations

from .report import CHECKS, MEANING, Report

__all__ = ["CHECKS", "MEANING", "Report", "validate", "synthesize", "build_session", "get_session"]


def __getattr__(name: str):  # lazy: importing the package must not import pyspark
    if name in ("build_session", "get_session"):
        from . import session

        return getattr(session, name)
    if name == "validate":
        from .validation import validate

        return validate
    if name == "synthesize":
        from .synth import synthesize

        return synthesize
    raise AttributeError(name)
