"""SHOW TABLES / SHOW VIEWS / SHOW TABLE EXTENDED answered from the lake catalog, in Spark's result shape.

Spark's session catalog holds only the lake objects that earlier statements registered as views, so its own answer
would depend on what ran before (macro packages list relations this way, e.g. unions of relations by prefix).
The rows have Spark's columns; EXTENDED's `information` text has the lines dbt-spark parses (`Type: VIEW` or
`Type: MANAGED`, `Provider:`, the ` |-- name: type (nullable = ...)` schema lines).
"""

from __future__ import annotations

import re

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from .lake.catalog.lookups import ci_lookup
from .lake.catalog.state import LakeState
from .lake.errors import DuckLakeError, NoSuchSchemaError
from .lake.records import Column
from .router import ShowRelations
from .spark.types import to_spark


def pattern_matcher(pattern: str | None) -> re.Pattern[str] | None:
    """Spark's SHOW pattern: '|' separates alternatives, '*' is any characters, matched case-insensitively."""
    if pattern is None:
        return None
    parts = []
    for alt in pattern.split("|"):
        alt = alt.strip()
        try:
            re.compile(alt.replace("*", ".*"))
            parts.append(alt.replace("*", ".*"))
        except re.error:  # Spark would fail on it; a literal match is the useful reading
            parts.append(re.escape(alt).replace(r"\*", ".*"))
    return re.compile("|".join(f"(?:{p})" for p in parts), re.IGNORECASE)


def _type_text(col: Column) -> str:
    try:
        return to_spark(col).simpleString()
    except DuckLakeError:
        return col.type  # a type Spark cannot hold: its DuckLake name


def _information(state: LakeState, schema: str, name: str, is_view: bool, columns: tuple[Column, ...]) -> str:
    lines = ["Catalog: spark_catalog", f"Database: {schema}", f"Table: {name}",
             f"Type: {'VIEW' if is_view else 'MANAGED'}", "Provider: ducklake",
             f"DuckLake snapshot: {state.snapshot_id}"]
    if columns:
        lines.append("Schema: root")
        lines += [f" |-- {c.name}: {_type_text(c)} (nullable = {'true' if c.nullable else 'false'})" for c in columns]
    return "\n".join(lines) + "\n"


def show_relations(spark: SparkSession, state: LakeState, show: ShowRelations, current_schema: str) -> DataFrame:
    """The lake's tables and views of the schema (or only views), plus Spark's temporary views, as Spark lists them.

    Raises:
        NoSuchSchemaError: the schema is not in the lake (Spark's SCHEMA_NOT_FOUND).
    """
    schema_name = show.schema or current_schema
    schema = ci_lookup(state.schemas, schema_name)
    if schema is None:
        raise NoSuchSchemaError(f"[SCHEMA_NOT_FOUND] The schema `{schema_name}` cannot be found "
                                f"(lake snapshot {state.snapshot_id})")
    match = pattern_matcher(show.pattern)
    rows: list[tuple] = []
    objects: list[tuple[str, bool, tuple[Column, ...]]] = []
    if show.kind != "views":
        objects += [(t.name, False, t.columns) for t in state.tables.values() if t.schema_id == schema.schema_id]
    objects += [(v.name, True, ()) for v in state.views.values() if v.schema_id == schema.schema_id]
    for name, is_view, columns in sorted(objects):
        if match is None or match.fullmatch(name):
            info = (_information(state, schema.name, name, is_view, columns),) if show.kind == "extended" else ()
            rows.append((schema.name, name, False, *info))
    for t in spark.catalog.listTables():  # the session's temporary views, listed in every namespace as in Spark
        if t.isTemporary and (match is None or match.fullmatch(t.name)):
            info = (f"Table: {t.name}\nType: VIEW\n",) if show.kind == "extended" else ()
            rows.append(("", t.name, True, *info))
    fields = [T.StructField("namespace", T.StringType(), False),
              T.StructField("viewName" if show.kind == "views" else "tableName", T.StringType(), False),
              T.StructField("isTemporary", T.BooleanType(), False)]
    if show.kind == "extended":
        fields.append(T.StructField("information", T.StringType(), False))
    return spark.createDataFrame(rows, T.StructType(fields))
