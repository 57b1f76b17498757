"""Rows Spark evaluates on the driver (a seed's VALUES, cast to its column types), written without a Spark job.

Spark's optimizer folds casts and projections over an inline table into a local relation: collecting it runs no job,
and the values are Spark's own (its cast semantics, errors included). Writing a few rows as a Spark job costs a
quarter second or more per table (seeds: one job each); the lake's own Parquet writer (`lake.write.writer`, the
layout compaction writes) takes milliseconds. Anything else (a plan that needs executors, a partitioned table, NOT
NULL checks, types written through an encoding) goes the Spark way.

A result Spark must compute with executors but that is small (Spark's estimate of the optimized plan's output at
most SMALL_RESULT_BYTES, and at most SMALL_RESULT_ROWS rows, checked while collecting: an estimate is not a bound)
is collected as Arrow and written the same way: one collect costs Spark less than a write job (its commit protocol
and file moves: 0.16-0.23 s against 0.11-0.14 s for 20 rows on 2 cores), and the rows are Spark's own.

On Spark Connect the optimized plan is the server's: the caller says the DataFrame is a bounded inline table
(`bounded`: a seed's VALUES of at most `seeds.VALUES_CELLS` values), and it is collected as Arrow. The server answers a
local table scan from the driver too (no job), in the session's time zone (UTC, `session.REQUIRED_CONF`): zoned
timestamps arrive as UTC instants in micros, as the classic path collects them.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...lake.records import TableInfo
from ...lake.write.datafiles import DataFileSpec
from ...lake.write.layout import WriteOptions
from ...lake.write.writer import write_data_files
from ..env.session import is_classic
from ..sql_literals import ident
from .type_writings import needs_conversion

# Spark types whose collected Python values map to Arrow exactly (timestamps with a zone are collected as micros)
_ARROW = {
    T.BooleanType: pa.bool_(), T.ByteType: pa.int8(), T.ShortType: pa.int16(), T.IntegerType: pa.int32(),
    T.LongType: pa.int64(), T.FloatType: pa.float32(), T.DoubleType: pa.float64(), T.StringType: pa.string(),
    T.BinaryType: pa.binary(), T.DateType: pa.date32(), T.TimestampNTZType: pa.timestamp("us"),
    T.TimestampType: pa.timestamp("us", tz="UTC"),
}


SMALL_RESULT_BYTES = 8 * 2**20
SMALL_RESULT_ROWS = 100_000


def is_local(df: DataFrame) -> bool:
    """Whether Spark computes the DataFrame on the driver: its optimized plan is a local relation."""
    plan = df._jdf.queryExecution().optimizedPlan()  # noqa: SLF001 - classic sessions only (checked by callers)
    return plan.getClass().getSimpleName() == "LocalRelation"


def estimated_bytes(df: object) -> int | None:
    """Spark's estimate of the DataFrame's optimized plan's output size; None on Spark Connect (no plan here)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return None
    size = jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
    return size if isinstance(size, int) else int(size.toString())  # a Scala BigInt, or converted


def arrow_type(dt: T.DataType) -> pa.DataType | None:
    """The Arrow type the driver writes a Spark type's collected values as (None: Spark writes them)."""
    if isinstance(dt, T.DecimalType):
        return pa.decimal128(dt.precision, dt.scale)
    return _ARROW.get(type(dt))  # type: ignore[arg-type]  # any type not among the keys: None


def write_local(spark: SparkSession, df: DataFrame, table: TableInfo, table_dir: str, *,
                bounded: bool = False, row_ids: bool = False, options: WriteOptions | None = None
                ) -> list[DataFileSpec] | None:
    """The conformed DataFrame's rows written as the table's data files by the driver, when Spark evaluates them on
    the driver or the result is small (see the module); None when the write must go through Spark.

    bounded: the DataFrame is an inline table of a bounded size (a seed's VALUES), which Spark Connect may collect;
    ignored on a classic session, whose optimized plan tells. row_ids: its last column holds the rows' preserved
    row ids (an UPDATE's post-images), written as the lake's row id column as the Spark writer does. options: the
    table's write options (the files are laid out and sorted as DuckDB lays them out)."""
    classic = is_classic(spark)
    if (not classic and not bounded) or not driver_writable(table):
        return None
    fields = df.schema.fields
    types = [arrow_type(f.dataType) for f in fields]
    if len(fields) != len(table.columns) + row_ids or any(t is None for t in types):
        return None
    if not classic:
        return _written(table, table_dir, _connect_rows(df, types), row_ids, options)
    if not is_local(df):
        return _write_small(df, table, table_dir, types, row_ids, options)
    # a zoned timestamp collects as the local wall time of the Python process: take its micros instead
    proj = [F.unix_micros(F.col(ident(f.name))) if isinstance(f.dataType, T.TimestampType) else F.col(ident(f.name))
            for f in fields]
    local = df.select(*proj)
    if not is_local(local):
        return None
    rows = local.collect()  # a local relation: no job
    arrays = []
    for i, t in enumerate(types):
        values = [r[i] for r in rows]
        if t == pa.binary():
            values = [None if v is None else bytes(v) for v in values]
        arrays.append(pa.array(values, type=t))
    return _written(table, table_dir, pa.Table.from_arrays(arrays, names=[f.name for f in fields]), row_ids, options)


def driver_writable(table: TableInfo) -> bool:
    """Whether the driver's writer can write the table's files: not partitioned, no NOT NULL column (checked by the
    executors as they write), no type written through an encoding."""
    return (table.partition is None and all(c.nullable for c in table.columns)
            and not any(needs_conversion(c) for c in table.columns))


def write_collected(table: TableInfo, table_dir: str, got: pa.Table, types: list[pa.DataType], row_ids: bool,
                    options: WriteOptions | None) -> list[DataFileSpec]:
    """Rows collected from a conformed DataFrame as Arrow (table columns, then the row ids when row_ids), cast to
    `types` (arrow_type of its fields), written by the driver."""
    return _written(table, table_dir, _cast(got, list(types)), row_ids, options)


def _written(table: TableInfo, table_dir: str, data: pa.Table, row_ids: bool, options: WriteOptions | None
             ) -> list[DataFileSpec]:
    """The collected rows (in table column order, then the row ids when row_ids) written by the lake's writer."""
    n = len(table.columns)
    rows = pa.Table.from_arrays(data.columns[:n], names=[c.name for c in table.columns])
    return write_data_files(table, table_dir, rows, row_ids=data.column(n) if row_ids else None, options=options)


def _write_small(df: DataFrame, table: TableInfo, table_dir: str, types: list[pa.DataType | None], row_ids: bool,
                 options: WriteOptions | None) -> list[DataFileSpec] | None:
    """A small result (see the module) collected as Arrow (zoned timestamps as UTC instants) and written by the
    driver; None when Spark estimates it larger or it has more rows than that."""
    size = estimated_bytes(df)
    if size is None or size > SMALL_RESULT_BYTES:
        return None
    got = df.limit(SMALL_RESULT_ROWS + 1).toArrow()  # the limit bounds what a wrong estimate costs the driver
    if got.num_rows > SMALL_RESULT_ROWS:
        return None
    return _written(table, table_dir, _cast(got, types), row_ids, options)


def _cast(got: pa.Table, types: list[pa.DataType | None]) -> pa.Table:
    return pa.Table.from_arrays([got.column(i).cast(t) for i, t in enumerate(types)], names=got.column_names)


def _connect_rows(df: DataFrame, types: list[pa.DataType | None]) -> pa.Table:
    """A Connect DataFrame's rows as Arrow in the types the classic path writes (zoned timestamps relabelled UTC, the
    same instants; plain strings)."""
    return _cast(df.toArrow(), types)
