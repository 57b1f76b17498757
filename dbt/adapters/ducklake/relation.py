"""Relations are two-part names (schema.identifier), as in Spark and in a DuckLake's schemas."""

from __future__ import annotations

from dataclasses import dataclass

from dbt.adapters.spark.relation import SparkRelation


@dataclass(frozen=True, eq=False, repr=False)
class DuckLakeRelation(SparkRelation):
    pass
