"""Spark DataFrames -> DuckLake data files, written by the executors, registered by one lake transaction.

Order of a write (style: spark/ 3): Spark writes Parquet into a fresh staging directory under the table's directory;
the driver lists the written files, reads their footers into DataFileSpecs, and moves each file to DuckDB's layout
(`<table>/<key>=<value>/…/ducklake-<uuidv7>.parquet`); `lake.Transaction` commits them. No table data passes through
the driver.

Choices (see the module's functions for details):
- Field ids: Spark writes `parquet.field.id` on top-level and struct fields only; a table with a list or map anywhere
  is registered with a DuckLake name mapping instead (DuckDB would read unlabelled list elements and map entries as
  NULL). An UPDATE's post-images cannot be: DuckDB reads no row id through a name mapping. Their footers are given
  the missing field ids after the write (lake.write.footer_ids), and they are registered by field id.
- Partition keys are computed by Spark expressions (no Python UDF, so nothing of this package has to be importable on
  executors): one STRING key column per partition field, holding a lossless text from which the driver derives the
  exact value DuckDB stores. bucket(N) reproduces murmur3_32 on the reference's byte encoding with Spark's own hash().
- NaN: parquet-mr orders floats with Float.compare, so a chunk holding a NaN always has a NaN max; a float column whose
  footer bounds are all present and not NaN holds no NaN (exact, no extra pass). Otherwise it is "maybe" (True).
"""

from __future__ import annotations

import dataclasses
import os
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING
from urllib.parse import quote

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...lake.errors import InvalidDataFileError, UnsupportedTypeError
from ...lake.faults import fault_point
from ...lake.paths import as_dir, data_file_name, discard_dir, discard_files, file_io, join_path, to_local, uuid7
from ...lake.read.deletes import ROW_ID_COLUMN, ROW_ID_FIELD_ID
from ...lake.records import Column, TableInfo
from ...lake.types import format_value, parse_type
from ...lake.write.datafiles import DataFileSpec, describe_parquet, read_footer
from ...lake.write.footer_ids import label_field_ids
from ...lake.write.layout import WriteOptions
from ...lake.write.partitioning import EPOCH_TRANSFORMS, validate_transform
from ...lake.write.writer import NULL_PARTITION_DIR, write_data_files
from ..env import s3a
from ..sql_literals import ident
from ..types import columns_from_spark, spark_field, spark_schema, to_spark
from .local_write import write_local
from .type_writings import needs_conversion, write_sql, write_type
from .write_layout import parquet_options, sort_columns

if TYPE_CHECKING:
    from ...lake.write.transaction import Transaction

# Spark's hash() is murmur3_32 with seed 42, chaining each argument's hash as the next seed. The seed-42 hash of this
# int is 0, so hash(_SEED0, x) = murmur3_32(x, seed=0): the reference's bucket hash for an 8-byte long or 4k bytes.
_SEED0 = -1693959553
_M32 = 0xFFFFFFFF
_C1, _C2 = 0xCC9E2D51, 0x1B873593
_F1, _F2 = 0x85EBCA6B, 0xC2B2AE35
_BUCKET = re.compile(r"^bucket\((\d+)\)$")
_MICROS_PER_DAY, _MICROS_PER_HOUR = 86_400_000_000, 3_600_000_000
# Types whose bucket hash is the murmur3 of the value as an 8-byte little-endian long, as DuckDB 1.5 computes it
# (checked against DuckDB: ints, booleans as 0/1, dates as days, timestamps as micros, decimal(p<=18) as unscaled).
_LONG_BUCKET = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "boolean"}
_BYTES_BUCKET = {"varchar", "json", "blob"}
_SHORT_KEY = 32  # bytes of a string/blob partition value that go into a Spark directory name as they are
_WRITER_OPTIONS = {
    "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",  # no _SUCCESS marker (options reach Hadoop conf)
    "parquet.summary.metadata.level": "NONE",  # no _metadata/_common_metadata summary files
}
_REQUIRED = {"spark.sql.parquet.fieldId.write.enabled": "true",
             "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}


# ---------------------------------------------------------------------------------------------------- public API

def write_files(spark: SparkSession, df: DataFrame, table: TableInfo, table_dir: str, *,
                row_ids: str | None = None, bounded: bool = False,
                options: WriteOptions | None = None) -> list[DataFileSpec]:
    """Write the DataFrame's rows as data files of the table (Spark executors), returning specs for add_data_files.

    row_ids names a column of df holding preserved row ids (an UPDATE's post-images); it is written as
    _ducklake_internal_row_id so the rows keep their ids, as the reference does. bounded: df is an inline table of a
    bounded size (a seed's VALUES), which the driver may collect and write on Spark Connect too (spark/write/local_write).
    options: the table's write options (`Transaction.write_options`; DuckDB's defaults when None), see
    spark/write/write_layout. Each file's rows are sorted by the table's SET SORTED BY.

    Files land under table_dir in DuckDB's layout; empty files are dropped. The caller owns the returned files: it
    registers them, or removes them (lake.paths.discard_files) after a definite failure: `Transaction.own_files`.

    Raises:
        InvalidDataFileError: the DataFrame lacks a table column, has extra columns, or a column cannot be cast.
        UnsupportedTypeError: the table has a type Spark cannot hold, or a bucket transform of an unsupported type.
        ValueError: the session lacks a setting the layer needs (field ids, microsecond timestamps), or table_dir
            is not on a file system the driver can reach.
    """
    _check_session(spark)
    if "://" in table_dir and not table_dir.startswith("file://") and not s3a.is_object_store(table_dir):
        raise ValueError(f"the Spark writer needs the table directory on a file system the driver can list and move "
                         f"files in (a local or shared path, or s3://); got {table_dir!r}")
    options = options or WriteOptions()
    conformed = conform(df, table, keep=row_ids)
    local = write_local(spark, conformed, table, table_dir, bounded=bounded, row_ids=row_ids is not None,
                        options=options)
    if local is not None:
        fault_point("spark_write")
        return local
    keys = _partition_keys(table, conformed)
    staging = join_path(as_dir(table_dir), f"ducklake-write-{uuid7()}")
    moved: list[DataFileSpec] = []
    try:
        out = conformed
        for key in keys:
            out = key.add(out)
        extra = [F.col(ident(ROW_ID_COLUMN))] if row_ids else []
        out = out.select(*[F.col(ident(c.name)) for c in table.columns], *extra, *[F.col(k.name) for k in keys])
        if table.sort is not None and options.sort_on_insert:
            # one order over the whole write, as DuckDB sorts an insert before it splits it into files: Spark's range
            # partitioning gives each task (each file) its own stretch of keys, so files prune by their min/max.
            # Partition keys first: the partitioned write then keeps this order instead of sorting again.
            out = out.orderBy(*[F.col(k.name) for k in keys], *sort_columns(table.sort.fields))
        # "error", not "errorifexists": the same mode for classic Spark, and the only spelling Spark Connect's
        # client accepts (pyspark 4.0 raises UNSUPPORTED_OPERATION for "errorifexists")
        writer = out.write.options(**{**parquet_options(options, table), **_WRITER_OPTIONS}).mode("error")
        if keys:
            writer = writer.partitionBy(*[k.name for k in keys])
        writer.parquet(_uri(staging))
        fault_point("spark_write")
        # files with lists or maps are name-mapped, except an UPDATE's post-images: DuckDB cannot read their row ids
        # through a name mapping, so their footers get the field ids Spark could not write (lake.write.footer_ids)
        nested = any(_has_list_or_map(c) for c in table.columns)
        labelled = nested and row_ids is not None
        by = "name" if nested and not labelled else "field_id"
        for path, key_texts in _written_files(staging, [k.name for k in keys]):
            if labelled:
                label_field_ids(path, table.columns)
            spec = _describe(path, table, keys, key_texts, by)
            if spec is None:
                continue
            moved.append(_move(spec, table, keys, table_dir))
    except BaseException:
        discard_files([f.path for f in moved], table_dir)
        raise
    finally:
        discard_dir(staging)  # best effort: a failure to remove it must not hide the write's own error
    return moved


def stage_append(spark: SparkSession, txn: Transaction, schema: str, table: str, df: DataFrame
                 ) -> list[DataFileSpec]:
    """Write the DataFrame's rows as files of the table (staged or committed) and stage them in txn, which owns
    them (removes them if it does not commit)."""
    info = txn.table(schema, table)
    return _stage_files(spark, txn, schema, table, info, df)


def _stage_files(spark: SparkSession, txn: Transaction, schema: str, table: str, info: TableInfo, df: DataFrame,
                 bounded: bool = False) -> list[DataFileSpec]:
    table_dir = txn.table_path(info)
    files = write_files(spark, df, info, table_dir, bounded=bounded, options=txn.write_options(info))
    return _stage_written(txn, schema, table, table_dir, files)


def _stage_written(txn: Transaction, schema: str, table: str, table_dir: str, files: list[DataFileSpec]
                   ) -> list[DataFileSpec]:
    """Files just written into the table's directory, staged in txn (owned: removed if it rolls back)."""
    txn.own_files([f.path for f in files], table_dir)
    if files:
        txn.add_data_files(schema, table, files)
    return files


def stage_create_table_as(spark: SparkSession, txn: Transaction, schema: str, table: str, df: DataFrame, *,
                          partition_by: Sequence[tuple[str, str]] | None = None, replace: bool = False,
                          comment: str | None = None, not_null: Sequence[str] = (),
                          types: Mapping[str, str] | None = None, bounded: bool = False,
                          sorted_by: str | None = None, table_options: Mapping[str, str] | None = None
                          ) -> list[DataFileSpec]:
    """Stage CREATE [OR REPLACE] TABLE ... AS the DataFrame in txn (files written, table and files staged).

    Columns are nullable (as DuckDB's CTAS makes them) except those in not_null, which the write then enforces.
    types: DuckLake types of columns by path (types.from_spark), e.g. {"id": "uuid"} for a text column of UUIDs.
    bounded: see `write_files`. sorted_by, table_options: the new table's sort keys and write options
    (`Transaction.set_layout`), which its first files already follow.
    """
    columns = columns_from_spark(df.schema, not_null, types)
    txn.create_table(schema, table, columns, partition_by=partition_by, comment=comment, replace=replace)
    txn.set_layout(schema, table, sorted_by, table_options)
    staged = txn.table(schema, table)
    return _stage_files(spark, txn, schema, table, staged, df, bounded)


def stage_create_table_from_arrow(txn: Transaction, schema: str, table: str, spark_types: T.StructType,
                                  data: pa.Table, *, replace: bool = False, sorted_by: str | None = None,
                                  table_options: Mapping[str, str] | None = None) -> list[DataFileSpec]:
    """Stage CREATE [OR REPLACE] TABLE ... AS rows the driver holds (a seed's values) as `stage_create_table_as` would
    stage a DataFrame of that Spark schema whose rows Spark evaluates on the driver (`local_write`): the same columns,
    the same layout, the same files, no Spark.

    Raises:
        ValueError: a column Spark writes in another type than its values' (`needs_conversion`): give a DataFrame.
    """
    columns = columns_from_spark(spark_types)
    if any(needs_conversion(c) for c in columns):
        raise ValueError(f"columns {[c.name for c in columns if needs_conversion(c)]} are written by Spark")
    txn.create_table(schema, table, columns, replace=replace)
    txn.set_layout(schema, table, sorted_by, table_options)
    staged = txn.table(schema, table)
    table_dir = txn.table_path(staged)
    return _stage_written(txn, schema, table, table_dir,
                          write_data_files(staged, table_dir, data.rename_columns([c.name for c in staged.columns]),
                                           options=txn.write_options(staged)))


# ------------------------------------------------------------------------------------------ conforming the data

def conform(df: DataFrame, table: TableInfo, keep: str | None = None) -> DataFrame:
    """The DataFrame as the table's columns: matched by name (case-insensitive), in table order, cast to the
    table's Spark types, carrying field ids.

    Raises:
        InvalidDataFileError: a missing, ambiguous or extra column, or a cast Spark cannot do (named with both types).
        UnsupportedTypeError: a table column has a type Spark cannot hold.
    """
    target = spark_schema(table.columns)
    by_name: dict[str, list[T.StructField]] = {}
    for f in df.schema.fields:
        by_name.setdefault(f.name.lower(), []).append(f)
    where = f"table {table.schema_name}.{table.name}"
    extra = [f.name for f in df.schema.fields
             if f.name.lower() not in {c.name.lower() for c in table.columns} and f.name != keep]
    if extra:
        raise InvalidDataFileError(f"the data has columns {extra} that {where} does not have "
                                   f"(its columns: {[c.name for c in table.columns]})")
    exprs, sources = [], []
    for field in target.fields:
        found = by_name.get(field.name.lower(), [])
        if not found:
            raise InvalidDataFileError(f"the data has no column {field.name!r} of {where} "
                                       f"(type {field.dataType.simpleString()}; data columns: {df.columns})")
        if len(found) > 1:
            raise InvalidDataFileError(f"the data has several columns named like {field.name!r}: "
                                       f"{[f.name for f in found]}")
        src = found[0]
        sources.append(src)
        value = conformed_value(F.col(ident(src.name)), src.dataType, field, f"{where} column {field.name!r}")
        if not field.nullable:
            # NOT NULL is checked by the executors as they write (the job fails, nothing is committed)
            msg = f"NOT NULL constraint failed: {where} column {field.name!r} got a NULL"
            # coalesce(assert, value): the assert always runs first (IsNull(assert) would be optimised away)
            value = F.coalesce(F.assert_true(value.isNotNull(), F.lit(msg)).cast(field.dataType), value)
        exprs.append(value.alias(field.name, metadata=field.metadata))
    if keep:
        meta = {"parquet.field.id": ROW_ID_FIELD_ID}
        exprs.append(F.col(ident(keep)).cast("bigint").alias(ROW_ID_COLUMN, metadata=meta))
    try:
        out = _encoded(df.select(*exprs), table, keep)
        out.schema  # noqa: B018 - analyse now (Spark Connect analyses lazily) so a bad cast is reported here
    except AnalysisException as e:
        for src, field, expr in zip(sources, target.fields, exprs, strict=True):
            try:
                df.select(expr).schema  # noqa: B018
            except AnalysisException:
                raise InvalidDataFileError(
                    f"column {field.name!r} of {where}: Spark cannot cast the data's {src.dataType.simpleString()} "
                    f"to the table's {field.dataType.simpleString()}"
                ) from e
        raise InvalidDataFileError(f"the data does not fit {where}: {e}") from e
    return out


def conformed_value(value: SparkColumn, src: T.DataType, field: T.StructField, where: str) -> SparkColumn:
    """A value of type src for the table column `field`, as conform makes it: struct fields matched by name (see
    _by_name), then cast to the column's type."""
    return _by_name(value, src, field.dataType, where).cast(field.dataType)


def _encoded(df: DataFrame, table: TableInfo, keep: str | None) -> DataFrame:
    """Columns of types Spark cannot write as such (uuid, time, interval, ...) in the encoding DuckDB reads back as
    them (see type_writings); others as they are."""
    if not any(needs_conversion(c) for c in table.columns):
        return df
    where = f"table {table.schema_name}.{table.name}"
    cols = []
    for c in table.columns:
        field = spark_field(c)
        if needs_conversion(c):
            sql = write_sql(c, ident(c.name), f"{where} column {c.name!r}")
            # the cast to the written type (raises for types this adapter cannot write) carries nested field ids
            cols.append(F.expr(sql).cast(write_type(c)).alias(c.name, metadata=field.metadata))
        else:
            cols.append(F.col(ident(c.name)))
    if keep:
        cols.append(F.col(ident(ROW_ID_COLUMN)))
    return df.select(*cols)


def structs_by_name(df: DataFrame, table: TableInfo) -> DataFrame:
    """The DataFrame with the fields of its struct columns matched by name to the table's column of the same name
    (see _by_name), other columns as they are: a MERGE's source, whose values are assigned to the table's columns
    in Spark expressions before any write conforms them.

    Raises:
        InvalidDataFileError: a struct field the table's column lacks.
    """
    # only the table's columns with structs inside (others may be of types Spark cannot hold, read another way)
    nested = {c.name.lower(): c for c in table.columns if any(n.type == "struct" for n in c.walk())}
    where = f"table {table.schema_name}.{table.name}"
    cols, changed = [], False
    for f in df.schema.fields:
        c = nested.get(f.name.lower())
        try:
            target = to_spark(c) if c is not None else None
        except UnsupportedTypeError:
            target = None
        if c is not None and target is not None and _reordered(f.dataType, target):
            cols.append(_by_name(F.col(ident(f.name)), f.dataType, target, f"{where} column {c.name!r}")
                        .alias(f.name))
            changed = True
        else:
            cols.append(F.col(ident(f.name)))
    return df.select(*cols) if changed else df


def _by_name(value: SparkColumn, src: T.DataType, dst: T.DataType, where: str) -> SparkColumn:
    """The value with its struct fields matched to the table's by name (case-insensitive), at any depth: Spark casts
    structs by position. A table field the data lacks is NULL (as a column the INSERT does not list); a data field
    the table lacks is refused rather than lost.

    Raises:
        InvalidDataFileError: naming the struct and both field lists.
    """
    if not _reordered(src, dst):
        return value
    if isinstance(src, T.StructType) and isinstance(dst, T.StructType):
        wanted = {f.name.lower() for f in dst.fields}
        extra = [f.name for f in src.fields if f.name.lower() not in wanted]
        if extra:
            raise InvalidDataFileError(
                f"{where}: the data's struct fields {extra} are not fields of the table's struct "
                f"{dst.fieldNames()} (add them first: on_schema_change append_new_columns or sync_all_columns)")
        have = {f.name.lower(): f for f in src.fields}
        parts = []
        for d in dst.fields:
            s = have.get(d.name.lower())
            v = (_by_name(value.getField(s.name), s.dataType, d.dataType, f"{where}.{d.name}") if s is not None
                 else F.lit(None))
            parts.append(v.cast(d.dataType).alias(d.name))
        return F.when(value.isNull(), F.lit(None)).otherwise(F.struct(*parts))
    if isinstance(src, T.ArrayType) and isinstance(dst, T.ArrayType):
        return F.transform(value, lambda e: _by_name(e, src.elementType, dst.elementType, f"{where}.element"))
    if isinstance(src, T.MapType) and isinstance(dst, T.MapType):
        if _reordered(src.keyType, dst.keyType):
            value = F.transform_keys(value, lambda k, _v: _by_name(k, src.keyType, dst.keyType, f"{where}.key"))
        if _reordered(src.valueType, dst.valueType):
            value = F.transform_values(value, lambda _k, v: _by_name(v, src.valueType, dst.valueType,
                                                                      f"{where}.value"))
    return value


def _reordered(src: T.DataType, dst: T.DataType) -> bool:
    """Whether some struct inside differs from the table's in its field names or their order."""
    if isinstance(src, T.StructType) and isinstance(dst, T.StructType):
        if [f.name.lower() for f in src.fields] != [f.name.lower() for f in dst.fields]:
            return True
        return any(_reordered(a.dataType, b.dataType) for a, b in zip(src.fields, dst.fields, strict=True))
    if isinstance(src, T.ArrayType) and isinstance(dst, T.ArrayType):
        return _reordered(src.elementType, dst.elementType)
    if isinstance(src, T.MapType) and isinstance(dst, T.MapType):
        return _reordered(src.keyType, dst.keyType) or _reordered(src.valueType, dst.valueType)
    return False


def _has_list_or_map(column: Column) -> bool:
    return any(parse_type(c.type) in ("list", "map") for c in column.walk())


def _check_session(spark: SparkSession) -> None:
    for key, value in _REQUIRED.items():
        found = spark.conf.get(key, None)
        if str(found).lower() != value.lower():
            raise ValueError(f"the Spark session needs {key}={value} to write DuckLake files (found {found!r}); "
                             "build it with dbt.adapters.ducklake.spark.env.session.build_session or apply_required_conf")


# ------------------------------------------------------------------------------------------------ partition keys

@dataclasses.dataclass(frozen=True)
class _Key:
    """One partition field as a STRING column of the written DataFrame (steps = successive projections)."""

    name: str  # the key column's name (never a table column's)
    column: Column
    transform: str
    steps: tuple[dict[str, SparkColumn], ...]
    temps: tuple[str, ...]

    def add(self, df: DataFrame) -> DataFrame:
        for step in self.steps:
            df = df.withColumns(step)
        return df.drop(*self.temps) if self.temps else df

    def value(self, text: str | None, path: str = "") -> str | None:
        """The partition value DuckDB stores, from the key's text (as Spark wrote it into the directory name).

        A long string or blob has only its digest in the key (a directory name is limited): its value is read from
        the file (path), where the column holds that one value in every row.
        """
        if text is None:
            return None
        if self.transform != "identity":
            return str(int(text))
        t = parse_type(self.column.type)
        if text.startswith("h") and t in ("varchar", "json", "blob"):
            return format_value(t, _single_value(path, self.column.name), form="value")
        if t in ("varchar", "json"):
            return text[1:]
        if t == "blob":
            return format_value(t, bytes.fromhex(text[1:]), form="value")
        if t == "boolean":
            return format_value(t, text == "true", form="value")
        if t in ("float32", "float64"):
            return format_value(t, float(text), form="value")  # Java's text round-trips, incl. NaN and -0.0
        if t.startswith("decimal"):
            return format_value(t, Decimal(text), form="value")
        if t in ("timestamp_s", "timestamp_ms"):  # the key holds micros; format_value takes the type's own unit
            return format_value(t, int(text) // (10**6 if t == "timestamp_s" else 10**3), form="value")
        return format_value(t, int(Decimal(text)), form="value")  # integers, dates (days), timestamps (micros)


def _partition_keys(table: TableInfo, df: DataFrame) -> list[_Key]:
    if table.partition is None:
        return []
    taken = {c.name.lower() for c in table.columns}
    keys = []
    for f in table.partition.fields:
        col = table.column_by_id(f.column_id)
        transform = validate_transform(col, f.transform)
        name = f"__ducklake_partition_{f.key_index}"
        while name.lower() in taken:
            name = "_" + name
        taken.add(name.lower())
        keys.append(_key(name, col, transform, df.schema[col.name].dataType, taken))
    return keys


def _key(name: str, col: Column, transform: str, dtype: T.DataType, taken: set[str]) -> _Key:
    c = F.col(ident(col.name))
    t = parse_type(col.type)
    if transform == "identity":
        return _Key(name, col, transform, ({name: _identity_text(c, t, dtype)},), ())
    if transform in ("year", "month", "day", "hour"):
        return _Key(name, col, transform, ({name: _calendar(c, dtype, transform).cast("string")},), ())
    if transform in EPOCH_TRANSFORMS:
        return _Key(name, col, transform, ({name: _epoch(c, dtype, transform).cast("string")},), ())
    m = _BUCKET.match(transform)
    assert m is not None  # validate_transform accepted it
    n = int(m.group(1))
    if t in _LONG_BUCKET or isinstance(dtype, (T.DateType, T.TimestampType, T.TimestampNTZType)) or (
        isinstance(dtype, T.DecimalType) and dtype.precision <= 18
    ):
        h = _unsigned(F.hash(F.lit(_SEED0), _as_long(c, dtype)))
        expr = F.when(c.isNotNull(), h.bitwiseAND(F.lit(0x7FFFFFFF)) % F.lit(n)).cast("string")
        return _Key(name, col, transform, ({name: expr},), ())
    if t in _BYTES_BUCKET:
        return _bytes_bucket(name, col, c, n, taken)
    raise UnsupportedTypeError(
        f"column {col.name!r}: bucket partitioning of {col.type} columns is not supported by the Spark writer "
        "(supported: integers, booleans, dates, timestamps, decimals up to 18 digits, strings, blobs)"
    )


def _identity_text(c: SparkColumn, t: str, dtype: T.DataType) -> SparkColumn:
    """A lossless text of the value, short enough for a directory name.

    Strings and blobs get a prefix because Spark writes '' partition values as NULL: 'v' + the value (hex for
    blobs), or 'h' + its SHA-256 when long (the value is then read back from the file, see _Key.value).
    """
    if t in ("varchar", "json", "blob"):
        short = F.concat(F.lit("v"), c if t != "blob" else F.hex(c))
        digest = F.concat(F.lit("h"), F.sha2(c.cast("binary"), 256))
        return F.when(F.octet_length(c) <= F.lit(_SHORT_KEY), short).otherwise(digest)
    if isinstance(dtype, T.DateType):
        return F.unix_date(c).cast("string")
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return _micros(c, dtype).cast("string")
    if isinstance(dtype, (T.ArrayType, T.MapType, T.StructType)):
        raise UnsupportedTypeError(f"cannot partition by nested column of type {t}")
    return c.cast("string")


def _micros(c: SparkColumn, dtype: T.DataType) -> SparkColumn:
    """Microseconds since the epoch, independent of the session time zone."""
    if isinstance(dtype, T.TimestampNTZType):
        return F.timestamp_diff("MICROSECOND", F.lit("1970-01-01 00:00:00").cast("timestamp_ntz"), c)
    return F.unix_micros(c)


def _calendar(c: SparkColumn, dtype: T.DataType, transform: str) -> SparkColumn:
    """DuckDB's year()/month()/day()/hour(): calendar fields, in UTC for timestamptz."""
    if isinstance(dtype, T.TimestampType):  # a UTC instant: compute in UTC whatever the session time zone
        us = F.unix_micros(c)
        if transform == "hour":
            return F.floor(F.pmod(us, F.lit(_MICROS_PER_DAY)) / F.lit(_MICROS_PER_HOUR)).cast("int")
        c = F.date_from_unix_date(_floor_div(us, _MICROS_PER_DAY).cast("int"))
    fn: Callable[[SparkColumn], SparkColumn] = {
        "year": F.year, "month": F.month, "day": F.dayofmonth, "hour": F.hour}[transform]
    return fn(c)


def _floor_div(us: SparkColumn, unit: int) -> SparkColumn:
    """floor(us / unit), also for negative values: the multiple of the unit below us, divided exactly (decimal)."""
    return (us - F.pmod(us, F.lit(unit))).cast("decimal(20,0)") / F.lit(unit).cast("decimal(20,0)")


def _epoch(c: SparkColumn, dtype: T.DataType, transform: str) -> SparkColumn:
    """DuckLake 1.1's epoch_*: whole years/months/days/hours since 1970-01-01 (UTC for timestamptz), floored."""
    if isinstance(dtype, T.DateType):
        if transform == "epoch_day":
            return F.unix_date(c)
        year, month = F.year(c), F.month(c)
    else:
        us = _micros(c, dtype)
        if transform in ("epoch_day", "epoch_hour"):
            return _floor_div(us, _MICROS_PER_DAY if transform == "epoch_day" else _MICROS_PER_HOUR).cast("bigint")
        day = F.date_from_unix_date(_floor_div(us, _MICROS_PER_DAY).cast("int"))
        year, month = F.year(day), F.month(day)
    if transform == "epoch_year":
        return year - F.lit(1970)
    return (year - F.lit(1970)) * F.lit(12) + month - F.lit(1)


def _as_long(c: SparkColumn, dtype: T.DataType) -> SparkColumn:
    """The value Spark must hash as a long (hashLong = murmur3 of 8 little-endian bytes)."""
    if isinstance(dtype, T.DateType):
        return F.unix_date(c).cast("bigint")
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType, T.DecimalType)):
        return c  # Spark hashes timestamps as their micros and decimal(p<=18) as the unscaled long
    return c.cast("bigint")


def _unsigned(c: SparkColumn) -> SparkColumn:
    return c.cast("bigint").bitwiseAND(F.lit(_M32))


def _mul(x: SparkColumn, k: int) -> SparkColumn:
    """x * k mod 2**32 for 0 <= x < 2**32, in bigint without overflow (ANSI mode would fail on overflow)."""
    lo, hi = k & 0xFFFF, k >> 16
    return (x * F.lit(lo) + F.shiftleft((x * F.lit(hi)).bitwiseAND(F.lit(0xFFFF)), 16)).bitwiseAND(F.lit(_M32))


def _xorshift(x: SparkColumn, *shifts: int) -> SparkColumn:
    out = x
    for s in shifts:
        out = out.bitwiseXOR(F.shiftright(x, s))
    return out


def _bytes_bucket(name: str, col: Column, c: SparkColumn, n: int, taken: set[str]) -> _Key:
    """bucket(N) of strings/blobs: murmur3_32 of the bytes, seed 0, with Spark's hash for the 4-byte blocks.

    Spark's hash of bytes processes whole 4-byte blocks like murmur3 but mixes the tail bytes differently. So hash
    only the body (length a multiple of 4), undo its finalisation (fmix is invertible), then mix the tail and
    finalise as murmur3 does. Every step that uses a value twice is its own projection, so expressions never nest.
    """
    tmp = [f"{name}_{s}" for s in ("b", "n", "h", "k", "t")]
    for t in tmp:
        if t.lower() in taken:
            raise InvalidDataFileError(f"the table has a column named {t!r}, which the writer needs for itself")
    b, n_, h, k, tail = (F.col(t) for t in tmp)
    nb = n_ - F.pmod(n_, F.lit(4))
    inv = lambda x: pow(x, -1, 1 << 32)  # noqa: E731
    steps: list[dict[str, SparkColumn]] = [
        {tmp[0]: c.cast("binary")},
        {tmp[1]: F.octet_length(b).cast("bigint")},
        {tmp[2]: _unsigned(F.hash(F.lit(_SEED0), b.substr(F.lit(1), nb.cast("int")))),
         tmp[4]: F.hex(b.substr((nb + 1).cast("int"), F.lit(3)))},
        # undo fmix: h ^= h>>16; h *= 0x85ebca6b; h ^= h>>13; h *= 0xc2b2ae35; h ^= h>>16
        {tmp[2]: _xorshift(h, 16),
         tmp[3]: sum((F.coalesce(F.conv(F.substring(tail, 2 * i + 1, 2), 16, 10).cast("bigint"), F.lit(0))
                      * F.lit(1 << (8 * i)) for i in range(3)), F.lit(0))},
        {tmp[2]: _mul(h, inv(_F2)), tmp[3]: _mul(k, _C1)},
        {tmp[2]: _xorshift(h, 13, 26),
         tmp[3]: F.shiftleft(k, 15).bitwiseAND(F.lit(_M32)).bitwiseOR(F.shiftright(k, 17))},
        {tmp[2]: _mul(h, inv(_F1)), tmp[3]: _mul(k, _C2)},
        {tmp[2]: _xorshift(h, 16).bitwiseXOR(nb)},  # the seed state after the body
        {tmp[2]: h.bitwiseXOR(k).bitwiseXOR(n_)},  # the tail (k = 0 without one), then the length
        {tmp[2]: _xorshift(h, 16)},
        {tmp[2]: _mul(h, _F1)},
        {tmp[2]: _xorshift(h, 13)},
        {tmp[2]: _mul(h, _F2)},
        {tmp[2]: _xorshift(h, 16)},
        {name: F.when(c.isNotNull(), h.bitwiseAND(F.lit(0x7FFFFFFF)) % F.lit(n)).cast("string")},
    ]
    taken.update(t.lower() for t in tmp)
    return _Key(name, col, f"bucket({n})", tuple(steps), tuple(tmp))


# ---------------------------------------------------------------------------------------------- written files

_ESCAPED = re.compile(r"%([0-9A-Fa-f]{2})")


def _written_files(staging: str, key_names: list[str]) -> list[tuple[str, list[str | None]]]:
    """The data files Spark wrote under staging, each with its partition keys' texts (None = NULL).

    Listed through the storage seam (one recursive listing on S3); paths come back as the seam spells them."""
    found = []
    base = as_dir(staging if "://" in staging and not staging.startswith("file://") else to_local(staging))
    fio = file_io(staging)
    for info in fio.list(staging):
        path = info.path
        rel = path[len(base):] if path.startswith(base) else os.path.relpath(path, base)
        *parts, fname = rel.split("/")
        if fname.startswith(("_", ".")) or not fname.endswith(".parquet"):
            continue
        if len(parts) != len(key_names):
            raise InvalidDataFileError(f"unexpected file {path} in a Spark write")
        texts: list[str | None] = []
        for part, key in zip(parts, key_names, strict=True):
            k, _, v = part.partition("=")
            if k != key:
                raise InvalidDataFileError(f"unexpected directory {part!r} in a Spark write (key {key!r})")
            texts.append(None if v == NULL_PARTITION_DIR else _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), v))
        found.append((path, texts))
    return sorted(found)


def _single_value(path: str, column: str) -> object:
    """The value of a column that holds one non-NULL value in every row of the file (an identity partition key)."""
    import pyarrow.parquet as pq

    with file_io(path).open_input(path) as source:
        pf = pq.ParquetFile(source)
        for rg in range(pf.num_row_groups):
            values = pf.read_row_group(rg, columns=[column]).column(0)
            if len(values) and values[0].is_valid:
                return values[0].as_py()
    raise InvalidDataFileError(f"{path}: column {column!r} holds no value, yet its partition key is not NULL")


def _describe(path: str, table: TableInfo, keys: list[_Key], texts: list[str | None], by: str) -> DataFileSpec | None:
    """The file's spec (None if it has no rows: Spark writes an empty file for an empty DataFrame)."""
    values = [k.value(t, path) for k, t in zip(keys, texts, strict=True)]
    # one open and footer parse per file: stats, sizes, footer length and the writer's name all come from it
    footer = read_footer(path)
    spec = describe_parquet(path, table.columns, partition_values=values, by=by, footer=footer)
    if spec.record_count == 0:
        file_io(path).delete(path)
        return None
    return _known_nans(spec, footer.metadata.created_by, table)


def _known_nans(spec: DataFileSpec, created_by: str | None, table: TableInfo) -> DataFileSpec:
    """contains_nan=False for float leaves whose every chunk has non-NaN bounds (exact for parquet-mr, see module)."""
    floats = {c.column_id for c in table.all_columns() if parse_type(c.type) in ("float32", "float64")}
    if not floats or not any(s.column_id in floats and s.contains_nan for s in spec.stats):
        return spec
    if not (created_by or "").startswith("parquet-mr"):
        return spec
    stats = tuple(
        dataclasses.replace(s, contains_nan=False)
        if s.column_id in floats and s.contains_nan and s.min_value is not None and s.max_value is not None else s
        for s in spec.stats
    )
    return dataclasses.replace(spec, stats=stats)


def _move(spec: DataFileSpec, table: TableInfo, keys: list[_Key], table_dir: str) -> DataFileSpec:
    """Move a staged file to DuckDB's layout: <table>/<column or transform>=<value>/…/ducklake-<uuidv7>.parquet."""
    parts = []
    for key, value in zip(keys, spec.partition_values, strict=True):
        label = key.column.name if key.transform == "identity" else key.transform.split("(")[0]
        text = NULL_PARTITION_DIR if value is None else quote(value, safe="")
        if len(text) > 120:  # readers ignore names; keep path components short
            text = text[:100] + "~" + format(zlib.crc32(str(value).encode()), "08x")
        parts.append(f"{quote(label, safe='')}={text}")
    directory = join_path(as_dir(table_dir), "/".join(parts)) if parts else table_dir
    target = join_path(directory, data_file_name())
    file_io(target).move(spec.path, target)  # a rename locally; copy and delete on S3
    return dataclasses.replace(spec, path=target)


def _uri(path: str) -> str:
    """A path as a URI for Spark (a plain path would resolve against the cluster's default file system)."""
    if "://" in path:
        return s3a.to_spark(path)  # s3:// (the catalog's spelling) is s3a:// to Spark
    return "file://" + os.path.abspath(path)
