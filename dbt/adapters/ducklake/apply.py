"""Apply one routed `Change` to a `LakeWork`: Spark computes the rows, the work stages the catalog change."""

from __future__ import annotations

import re

import sqlglot
from dbt.adapters.events.logging import AdapterLogger
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from sqlglot.errors import ParseError

from .lake.errors import NoSuchTableError
from .lake.records import Column
from .lake.state import ci_lookup
from .router import Change, RoutingError
from .spark.dml import When
from .spark.names import SPARK_SQL_TAG
from .spark.types import columns_from_spark, from_spark
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
    tx = work.tx
    if c.kind == "create_schema":
        if not (c.if_exists and tx.has_schema(name)):
            tx.create_schema(name)
        return -1
    if c.kind == "drop_schema":
        tx.drop_schema(name, cascade=c.cascade, if_exists=c.if_exists)
        return -1
    if c.kind == "ctas":
        df = spark.sql(c.query or "")
        if c.if_exists and _exists(work, schema, name):
            return 0
        if c.replace and ci_lookup(tx.base.views, (schema, name)) is not None:
            tx.drop_view(schema, name)  # a model switching from view to table: one snapshot still
        work.create_table_as(schema, name, df, partition_by=partition_fields(c.partition_by) or None, replace=c.replace,
                             comment=c.comment, not_null=c.not_null, types=dict(c.types))
        return -1
    if c.kind == "clone":
        if c.if_exists and _exists(work, schema, name):
            return 0
        source_schema, source = c.clone_of or ("", "")
        kind = work.clone_table(source_schema, source, schema, name, replace=c.replace)
        logger.info(f"clone of {source_schema}.{source} as {schema}.{name}: {CLONE_KINDS[kind]}")
        return -1
    if c.kind == "create_table":
        if c.if_exists and _exists(work, schema, name):
            return 0
        work.create_table(schema, name, _columns(spark, c.columns_ddl or "", c.not_null, c.types),
                          partition_by=partition_fields(c.partition_by) or None, replace=c.replace, comment=c.comment)
        return -1
    if c.kind == "create_view":
        _create_view(spark, work, c)
        return -1
    if c.kind in ("drop_table", "drop_view"):
        _drop(work, c)
        return -1
    if c.kind in ("insert", "insert_overwrite"):
        info = tx.table(schema, name)
        df = _positional(spark.sql(c.query or ""), [col.name for col in info.columns], c.column_names, schema, name)
        if c.kind == "insert":
            return work.insert_rows(schema, name, df)  # dbt shows INSERT <rows>: 0 for a run that added nothing
        else:
            work.insert_overwrite(schema, name, df, dynamic_partitions=bool(c.partition_by) and info.partition is not None)
        return -1
    if c.kind == "delete":
        work.delete(schema, name, c.condition)
        return -1
    if c.kind == "update":
        work.update(schema, name, c.assignments, c.condition)
        return -1
    if c.kind == "truncate":
        work.truncate(schema, name)
        return -1
    if c.kind == "merge":
        _merge(spark, work, c)
        return -1
    if c.kind == "rename":
        if ci_lookup(tx.base.views, (schema, name)) is not None:
            tx.rename_view(schema, name, c.new_name or "")
        else:
            tx.rename_table(schema, name, c.new_name or "")
        work.touched.add((schema.lower(), (c.new_name or "").lower()))
        work.touched.add((schema.lower(), name.lower()))
        return -1
    if c.kind == "add_columns":
        for col in _columns(spark, c.columns_ddl or "", types=c.types):
            tx.add_column(schema, name, col)
        return -1
    if c.kind == "drop_column":
        tx.drop_column(schema, name, c.column or "")
        return -1
    if c.kind == "alter_type":
        field = spark.createDataFrame([], f"x {c.new_type}").schema.fields[0]
        tx.alter_column_type(schema, name, c.column or "", from_spark(field, iter(range(1, 10**6)).__next__).type)
        return -1
    if c.kind == "set_nullable":
        tx.set_column_nullable(schema, name, c.column or "", c.new_type == "True")
        return -1
    if c.kind == "comment":
        if c.column is not None and not _has_column(work, schema, name, c.column):
            return 0  # dbt documents columns a model may not have: nothing to comment on
        if _comment_of(work, schema, name, c.column) != c.comment:  # an unchanged comment is no change (no snapshot)
            tx.set_comment(schema, name, c.comment, column=c.column)
        return -1
    if c.kind == "noop":
        return -1
    raise RoutingError(f"unsupported change {c.kind!r}")


def _has_column(work: LakeWork, schema: str, name: str, column: str) -> bool:
    try:
        return any(c.name.lower() == column.lower() for c in work.tx.table(schema, name).columns)
    except NoSuchTableError:
        return False


def _comment_of(work: LakeWork, schema: str, name: str, column: str | None) -> str | None:
    tx = work.tx
    try:
        info = tx.table(schema, name)
    except NoSuchTableError:
        view = ci_lookup(tx.base.views, (schema, name))
        return view.comment if view is not None and column is None else None
    if column is None:
        return info.comment
    col = next((c for c in info.columns if c.name.lower() == column.lower()), None)
    return info.column_tags.get(col.column_id, {}).get("comment") if col is not None else None


def _exists(work: LakeWork, schema: str, name: str) -> bool:
    try:
        work.tx.table(schema, name)
        return True
    except NoSuchTableError:
        return False


def _drop(work: LakeWork, c: Change) -> None:
    schema, name, tx = c.schema or "", c.name or "", work.tx
    is_view = ci_lookup(tx.base.views, (schema, name)) is not None
    is_table = ci_lookup(tx.base.tables, (schema, name)) is not None or _exists(work, schema, name)
    if is_view and not is_table:
        tx.drop_view(schema, name, if_exists=c.if_exists)
    elif is_table:
        tx.drop_table(schema, name, if_exists=c.if_exists)
    elif not c.if_exists:
        raise NoSuchTableError(f"{c.kind.split('_')[1]} {schema}.{name} does not exist")
    work.touched.add((schema.lower(), name.lower()))


def _create_view(spark: SparkSession, work: LakeWork, c: Change) -> None:
    schema, name, query = c.schema or "", c.name or "", c.query or ""
    spark.sql(query).schema  # noqa: B018 - analyse now: a broken view fails before anything is staged
    try:
        duck_sql = sqlglot.transpile(query, read="spark", write="duckdb")[0]
        dialect = "duckdb"
    except (ParseError, ValueError):
        duck_sql, dialect = query, "spark"
    tx = work.tx
    if c.replace and ci_lookup(tx.base.tables, (schema, name)) is not None:
        tx.drop_table(schema, name)  # CREATE OR REPLACE VIEW over a table (a model switching materialization)
    tx.create_view(schema, name, duck_sql, dialect=dialect, replace=c.replace, comment=c.comment)
    tx.set_tag(schema, name, SPARK_SQL_TAG, query)
    work.touched.add((schema.lower(), name.lower()))


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


def _merge(spark: SparkSession, work: LakeWork, c: Change) -> None:
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
        work.merge(schema, name, df, c.condition or "true", clauses)
    except ValueError as e:
        if "is not a valid clause" in str(e):
            raise RoutingError(str(e)) from e
        raise
