"""Spark types for the recovery-log schema, built from :mod:`model.logschema` (the single source)."""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql.types import DataType, IntegerType, LongType, StringType, StructField, StructType

from cutcheck.model import logschema

_TYPES: dict[str, DataType] = {"int64": LongType(), "int32": IntegerType(), "string": StringType()}


def spark_type(type_name: str) -> DataType:
    return _TYPES[type_name]


def column_types(dataset: str) -> dict[str, DataType]:
    return {name: spark_type(t) for name, t, _ in logschema.DATASETS[dataset]}


def spark_schema(dataset: str, columns: Iterable[str] | None = None) -> StructType:
    """The Spark schema of ``dataset``, restricted to ``columns`` (in schema order) when given."""
    keep = None if columns is None else set(columns)
    return StructType(
        [
            StructField(name, spark_type(t), nullable)
            for name, t, nullable in logschema.DATASETS[dataset]
            if keep is None or name in keep
        ]
    )
