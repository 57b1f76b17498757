"""Apply one routed `Change` to a `LakeWork`: Spark computes the rows, the work stages the catalog change."""

from __future__ import annotations

import re

from dbt.adapters.events.logging import AdapterLogger
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .lake.records import Column
from .router import Change, RoutingError
from .spark.dml import When
from .spark.types import columns_from_spark
from .spark.work import LakeWork

logger = AdapterLogger("DuckLake")
CLONE_KINDS = {"hard_link": "hard links of its data files (metadata only, no data copied)",
               "file_copy": "a copy of its data files (hard links are impossible there)",
               "spark_copy": "a copy of its rows written by Spark (its files are not on a local file system)"}
_TRANSFORM = re.compile(r"^\s*(year|month|day|hour|bucket)\s*\(\s*(?:(\d+)\s*,\s*)?`?([^`()]+?)`?\s*\)\s*$", re.I)


def partition_fields(entries: tuple[str, ...] | list[str]) -> list[tuple[str, str]]:
    """dbt's partition_by entries as DuckLake partition fields: `col`, `year(col)`… `hour(col)`, `bucket(N, col)`."""
    out = []
    for e in entries:
        m = _TRANSFORM.match(e)
        if m is None:
            out.append((e.strip().strip("`"), "identity"))
            continue
        fn, n, col = m.group(1).lower(), m.group(2), m.group(3).strip()
        if fn == "bucket":
            if n is None:
                raise RoutingError(f"partition_by {e!r}: bucket needs a count, e.g. bucket(8, {col})")
            out.append((col, f"bucket({n})"))
        else:
            out.append((col, fn))
    return out


def _columns(spark: SparkSession, ddl: str, not_null: tuple[str, ...] = (),
             types: tuple[tuple[str, str], ...] = ()) -> list[Column]:
    return columns_from_spark(spark.createDataFrame([], ddl).schema, not_null, dict(types))


def apply_change(spark: SparkSession, work: LakeWork, c: Change) -> int:
    """Stage the change in work; returns the number of rows it wrote or matched when known (-1 otherwise)."""
    try:
        return _apply(spark, work, c)
    finally:
        work.discard_unreferenced()  # files of objects this unit created, then dropped or replaced


def _apply(spark: SparkSession, work: LakeWork, c: Change) -> int:
    assert c.schema is not None or c.kind in ("create_schema", "drop_schema")
    schema, name = c.schema or "", c.name or ""
    if c.kind == "create_schema":
        work.create_schema(name, if_not_exists=c.if_exists)
        return -1
    if c.kind == "drop_schema":
        work.drop_schema(name, cascade=c.cascade, if_exists=c.if_exists)
        return -1
    if c.kind == "ctas":
        df = spark.sql(c.query or "")
        if c.if_exists and work.exists(schema, name):
            return 0
        work.create_table_as(schema, name, df, partition_by=partition_fields(c.partition_by) or None, replace=c.replace,
                             comment=c.comment, not_null=c.not_null, types=dict(c.types))
        return -1
    if c.kind == "clone":
        if c.if_exists and work.exists(schema, name):
            return 0
        source_schema, source = c.clone_of or ("", "")
        kind = work.clone_table(source_schema, source, schema, name, replace=c.replace)
        logger.info(f"clone of {source_schema}.{source} as {schema}.{name}: {CLONE_KINDS[kind]}")
        return -1
    if c.kind == "create_table":
        if c.if_exists and work.exists(schema, name):
            return 0
        work.create_table(schema, name, _columns(spark, c.columns_ddl or "", c.not_null, c.types),
                          partition_by=partition_fields(c.partition_by) or None, replace=c.replace, comment=c.comment)
        return -1
    if c.kind == "create_view":
        work.create_view(schema, name, c.query or "", replace=c.replace, comment=c.comment)
        return -1
    if c.kind in ("drop_table", "drop_view"):
        work.drop(schema, name, what=c.kind.split("_")[1], if_exists=c.if_exists)
        return -1
    if c.kind in ("insert", "insert_overwrite"):
        info = work.table(schema, name)
        df = _positional(spark.sql(c.query or ""), [col.name for col in info.columns], c.column_names, schema, name)
        if c.kind == "insert":
            return work.insert_rows(schema, name, df)  # dbt shows INSERT <rows>: 0 for a run that added nothing
        return work.insert_overwrite(schema, name, df,
                                     dynamic_partitions=bool(c.partition_by) and info.partition is not None)
    if c.kind == "delete":
        return work.delete(schema, name, c.condition)
    if c.kind == "update":
        return work.update(schema, name, c.assignments, c.condition)
    if c.kind == "truncate":
        work.truncate(schema, name)
        return -1
    if c.kind == "merge":
        return _merge(spark, work, c)
    if c.kind == "rename":
        work.rename(schema, name, c.new_name or "")
        return -1
    if c.kind == "add_columns":
        work.add_columns(schema, name, _columns(spark, c.columns_ddl or "", types=c.types))
        return -1
    if c.kind == "drop_column":
        work.drop_column(schema, name, c.column or "")
        return -1
    if c.kind == "alter_type":
        work.alter_column_type(schema, name, c.column or "", c.new_type or "")
        return -1
    if c.kind == "set_nullable":
        work.set_column_nullable(schema, name, c.column or "", c.new_type == "True")
        return -1
    if c.kind == "comment":
        return work.comment(schema, name, c.comment, column=c.column)
    if c.kind == "alter":
        for part in c.actions:
            _apply(spark, work, part)
        return -1
    if c.kind == "noop":
        return -1
    raise RoutingError(f"unsupported change {c.kind!r}")


def _positional(df: DataFrame, table_columns: list[str], names: tuple[str, ...], schema: str, table: str) -> DataFrame:
    """INSERT semantics: the query's columns by position (to the listed columns, or to every table column)."""
    targets = list(names) if names else table_columns
    if len(df.columns) != len(targets):
        raise RoutingError(f"INSERT into {schema}.{table}: the query has {len(df.columns)} columns but "
                           f"{len(targets)} are expected ({', '.join(targets)})")
    out = df.toDF(*[f"__c{i}" for i in range(len(targets))])
    cols = [F.col(f"__c{i}").alias(t) for i, t in enumerate(targets)]
    lower = {t.lower() for t in targets}
    cols += [F.lit(None).alias(t) for t in table_columns if t.lower() not in lower]
    return out.select(*cols)


def _merge(spark: SparkSession, work: LakeWork, c: Change) -> int:
    schema, name = c.schema or "", c.name or ""
    source = c.merge_source or ""
    df = spark.sql(source) if source.lstrip().lower().startswith(("select", "with", "(")) else spark.table(source)
    clauses = []
    for cl in c.merge_clauses:
        cols: tuple[str, ...] = ()
        if cl.action == "insert" and cl.insert_columns:
            if any(v.lower() not in (f"s.{k}".lower(), f"s.`{k}`".lower())
                   for k, v in zip(cl.insert_columns, cl.insert_values, strict=False)):
                raise RoutingError(f"MERGE INTO {schema}.{name}: INSERT must take source columns by name "
                                   "(INSERT * or INSERT (a, b) VALUES (s.a, s.b))")
            cols = cl.insert_columns
        clauses.append(When(cl.when, cl.action, cl.condition, cl.assignments, cols))
    try:
        return work.merge(schema, name, df, c.condition or "true", clauses)
    except ValueError as e:
        if "is not a valid clause" in str(e):
            raise RoutingError(str(e)) from e
        raise
