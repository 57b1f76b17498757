"""Apply one routed `Change` to a `LakeWork`: Spark computes the rows, the work stages the catalog change."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from dbt.adapters.events.logging import AdapterLogger
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .lake.records import Column, TableInfo
from .router import (
    AddColumns,
    Alter,
    AlterType,
    Change,
    Clone,
    ColumnPathChange,
    Comment,
    CreateSchema,
    CreateTable,
    CreateView,
    Ctas,
    Delete,
    DropColumn,
    DropSchema,
    DropTable,
    DropView,
    Insert,
    InsertOverwrite,
    Merge,
    Noop,
    Rename,
    RoutingError,
    SetLayout,
    SetNullable,
    Truncate,
    Update,
)
from .spark.types import columns_from_spark
from .spark.write.dml import When
from .spark.write.work import LakeWork

logger = AdapterLogger("DuckLake")
CLONE_KINDS = {"hard_link": "hard links of its data files (metadata only, no data copied)",
               "file_copy": "a copy of its data files (server-side on S3; locally where hard links are impossible)",
               "spark_copy": "a copy of its rows written by Spark (its files are neither local nor on S3)"}
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


Handler = Callable[[SparkSession, LakeWork, Any], int]
HANDLERS: dict[type[Change], Handler] = {}  # the one dispatch place: every concrete Change type of router has one


def _handles(*types: type[Change]) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for t in types:
            HANDLERS[t] = fn
        return fn
    return register


def _apply(spark: SparkSession, work: LakeWork, c: Change) -> int:
    handler = HANDLERS.get(type(c))  # the exact type: InsertOverwrite is an Insert but has its own handler
    if handler is None:
        # the bare base type has no kind label
        raise RoutingError(f"unsupported change {getattr(c, 'kind', type(c).__name__)!r}")
    return handler(spark, work, c)


@_handles(CreateSchema)
def _create_schema(spark: SparkSession, work: LakeWork, c: CreateSchema) -> int:
    work.create_schema(c.name, if_not_exists=c.if_not_exists)
    return -1


@_handles(DropSchema)
def _drop_schema(spark: SparkSession, work: LakeWork, c: DropSchema) -> int:
    work.drop_schema(c.name, cascade=c.cascade, if_exists=c.if_exists)
    return -1


@_handles(Ctas)
def _ctas(spark: SparkSession, work: LakeWork, c: Ctas) -> int:
    schema, name = c.schema or "", c.name
    df = spark.sql(c.query)
    if c.if_not_exists and work.exists(schema, name):
        return 0
    work.create_table_as(schema, name, df, partition_by=partition_fields(c.partition_by) or None, replace=c.replace,
                         comment=c.comment, not_null=c.not_null, types=dict(c.types), sorted_by=c.sorted_by,
                         table_options=dict(c.table_options))
    return -1


@_handles(Clone)
def _clone(spark: SparkSession, work: LakeWork, c: Clone) -> int:
    schema, name = c.schema or "", c.name
    if c.if_not_exists and work.exists(schema, name):
        return 0
    source_schema, source = c.source
    kind = work.clone_table(source_schema, source, schema, name, replace=c.replace)
    logger.info(f"clone of {source_schema}.{source} as {schema}.{name}: {CLONE_KINDS[kind]}")
    return -1


@_handles(CreateTable)
def _create_table(spark: SparkSession, work: LakeWork, c: CreateTable) -> int:
    schema, name = c.schema or "", c.name
    if c.if_not_exists and work.exists(schema, name):
        return 0
    work.create_table(schema, name, _columns(spark, c.columns_ddl, c.not_null, c.types),
                      partition_by=partition_fields(c.partition_by) or None, replace=c.replace, comment=c.comment,
                      sorted_by=c.sorted_by, table_options=dict(c.table_options))
    return -1


@_handles(CreateView)
def _create_view(spark: SparkSession, work: LakeWork, c: CreateView) -> int:
    work.create_view(c.schema or "", c.name, c.query, replace=c.replace, comment=c.comment)
    return -1


@_handles(DropTable, DropView)
def _drop(spark: SparkSession, work: LakeWork, c: DropTable | DropView) -> int:
    work.drop(c.schema or "", c.name, what="table" if isinstance(c, DropTable) else "view", if_exists=c.if_exists)
    return -1


@_handles(Insert)
def _insert(spark: SparkSession, work: LakeWork, c: Insert) -> int:
    schema, name = c.schema or "", c.name
    _info, df = _insert_rows(spark, work, c)
    return work.insert_rows(schema, name, df)  # dbt shows INSERT <rows>: 0 for a run that added nothing


@_handles(InsertOverwrite)
def _insert_overwrite(spark: SparkSession, work: LakeWork, c: InsertOverwrite) -> int:
    schema, name = c.schema or "", c.name
    info, df = _insert_rows(spark, work, c)
    return work.insert_overwrite(schema, name, df, dynamic_partitions=bool(c.partition_by) and info.partition is not None)


def _insert_rows(spark: SparkSession, work: LakeWork, c: Insert) -> tuple[TableInfo, DataFrame]:
    schema, name = c.schema or "", c.name
    info = work.table(schema, name)
    return info, _positional(spark.sql(c.query), [col.name for col in info.columns], c.columns, schema, name)


@_handles(Delete)
def _delete(spark: SparkSession, work: LakeWork, c: Delete) -> int:
    return work.delete(c.schema or "", c.name, c.condition)


@_handles(Update)
def _update(spark: SparkSession, work: LakeWork, c: Update) -> int:
    return work.update(c.schema or "", c.name, c.assignments, c.condition)


@_handles(Truncate)
def _truncate(spark: SparkSession, work: LakeWork, c: Truncate) -> int:
    work.truncate(c.schema or "", c.name)
    return -1


@_handles(Rename)
def _rename(spark: SparkSession, work: LakeWork, c: Rename) -> int:
    work.rename(c.schema or "", c.name, c.new_name)
    return -1


@_handles(AddColumns)
def _add_columns(spark: SparkSession, work: LakeWork, c: AddColumns) -> int:
    work.add_columns(c.schema or "", c.name, _columns(spark, c.columns_ddl, types=c.types))
    return -1


@_handles(DropColumn)
def _drop_column(spark: SparkSession, work: LakeWork, c: DropColumn) -> int:
    work.drop_column(c.schema or "", c.name, c.column)
    return -1


@_handles(ColumnPathChange)
def _column_path(spark: SparkSession, work: LakeWork, c: ColumnPathChange) -> int:
    schema = c.schema or ""
    if c.action == "add":
        (field,) = _columns(spark, f"`{c.path[-1]}` {c.type_ddl}")
        work.add_field(schema, c.name, c.path, field)
    elif c.action == "drop":
        work.drop_field(schema, c.name, c.path)
    else:
        work.rename_column(schema, c.name, c.path, c.new_name)
    return -1


@_handles(AlterType)
def _alter_type(spark: SparkSession, work: LakeWork, c: AlterType) -> int:
    work.alter_column_type(c.schema or "", c.name, c.column, c.new_type)
    return -1


@_handles(SetNullable)
def _set_nullable(spark: SparkSession, work: LakeWork, c: SetNullable) -> int:
    work.set_column_nullable(c.schema or "", c.name, c.column, c.nullable)
    return -1


@_handles(Comment)
def _comment(spark: SparkSession, work: LakeWork, c: Comment) -> int:
    return work.comment(c.schema or "", c.name, c.text, column=c.column)


@_handles(Alter)
def _alter(spark: SparkSession, work: LakeWork, c: Alter) -> int:
    for part in c.actions:
        _apply(spark, work, part)
    return -1


@_handles(SetLayout)
def _set_layout(spark: SparkSession, work: LakeWork, c: SetLayout) -> int:
    work.set_layout(c.schema or "", c.name, c.sorted_by, dict(c.table_options))
    return -1


@_handles(Noop)
def _noop(spark: SparkSession, work: LakeWork, c: Noop) -> int:
    return -1


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


@_handles(Merge)
def _merge(spark: SparkSession, work: LakeWork, c: Merge) -> int:
    schema, name = c.schema or "", c.name
    source = c.source
    df = spark.sql(source) if source.lstrip().lower().startswith(("select", "with", "(")) else spark.table(source)
    clauses = []
    for cl in c.clauses:
        cols: tuple[str, ...] = ()
        if cl.action == "insert" and cl.insert_columns:
            if any(v.lower() not in (f"s.{k}".lower(), f"s.`{k}`".lower())
                   for k, v in zip(cl.insert_columns, cl.insert_values, strict=False)):
                raise RoutingError(f"MERGE INTO {schema}.{name}: INSERT must take source columns by name "
                                   "(INSERT * or INSERT (a, b) VALUES (s.a, s.b))")
            cols = cl.insert_columns
        clauses.append(When(cl.when, cl.action, cl.condition, cl.assignments, cols))
    try:
        return work.merge(schema, name, df, c.on or "true", clauses)
    except ValueError as e:
        if "is not a valid clause" in str(e):
            raise RoutingError(str(e)) from e
        raise
