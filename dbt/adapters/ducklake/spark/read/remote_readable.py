"""Readable copies of remote data files Spark 4.0 cannot open (DuckDB's GEOMETRY / VARIANT Parquet annotations, see
readable.py), made by Spark itself: files on object storage (s3://, gs://, abfss://, hdfs://, whatever Spark's Hadoop
file system reads) are never opened by the driver for the decode.

`spark.read.format("binaryFile")` loads each file's bytes on an executor; a `mapInArrow` function decodes them with
pyarrow one row group at a time (geometry WKB as DuckDB's WKT text, `lake.wkb`; the variant group kept as it is,
unannotated, which Spark reads as its VARIANT type, shredded values included) and emits the rows in file order with
their position; Spark writes them, partitioned by the source file, sorted by (file, position), so each source file
becomes exactly one Parquet file whose `_metadata.row_index` is the source's row position: positional deletes and
row ids apply to the copy as to the original.

Why a copy and not the decode in the query: a lake table is a persistent view, and a persistent view cannot refer to
a DataFrame (or a temporary view or Python function). The copies live under the table's `_ducklake_spark/t<id>/
readable/` on the lake's own storage (skipped by both engines' orphan cleanup), one job directory per copying run:
`s<uuid>/__ducklake_copy=<key of the source>/part-*.parquet`. Any such file is complete (Spark commits files whole),
so processes share copies; two processes racing on one file each make one and either is read.

Values read as the local path's copies (spark/read/readable.py) read; other columns are carried in the types Spark holds
as `type_readings.file_reading_schema` reads them (UUID/INTERVAL as bytes, TIME as ticks, TIMESTAMP(NANOS) as
nanoseconds, unsigned integers widened), so the footer-based projections apply unchanged.
Memory: a task holds the bytes of the files Spark packs into its partition (`spark.sql.files.maxPartitionBytes`, or
one larger file: binaryFile's limit is 2 GiB) and decodes one row group at a time; the sort spills to disk.
Remote copies are not removed by this adapter (local ones are, after an hour unused): `ducklake_delete_orphaned_files`
never touches `_ducklake_spark/`; remove the folder when no query runs.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_type

from ...lake import wkb
from ...lake.errors import DuckLakeError
from ...lake.paths import join_path
from ...lake.records import Column
from ..env import s3a
from . import readable
from .distinct_parts import distinct_parts
from .readable import readable_column as _readable_column

COPY = "__ducklake_copy"  # the partition column: the source file's key
POS_COLUMN = "__ducklake_source_pos"  # the row's position in its source file (kept in the copy: the sort's total order)
POS_FIELD_ID = 2147483102  # its Parquet field id (never a column id)
_FID = b"PARQUET:field_id"
_SPARK_FID = "parquet.field.id"

_lock = threading.Lock()
_known: dict[str, tuple[str, int]] = {}  # source key -> (copy URI, size): copies never change


def copy_key(path: str, size: int) -> str:
    """The name part of a source file's copy (a data file never changes: path and size name it)."""
    return hashlib.sha1(f"{path}\0{size}".encode()).hexdigest()[:32]


# ---------------------------------------------------------------------------------------------- the copy's types

def _is_variant_group(t: pa.DataType) -> bool:
    return pa.types.is_struct(t) and {t.field(i).name for i in range(t.num_fields)} in (
        {"metadata", "value"}, {"metadata", "value", "typed_value"})


def _sparkable(t: pa.DataType) -> pa.DataType | None:
    """The Arrow type Spark carries a field of the readable copy as (type_readings._reading_of_arrow's reading), or
    None where it reads nothing (the field is left out)."""
    if isinstance(t, pa.BaseExtensionType):  # arrow.uuid: its 16 bytes
        return _sparkable(t.storage_type)
    if _is_variant_group(t):
        return _plain(t)  # kept (shredded values too): Spark reads the group as VARIANT
    if pa.types.is_struct(t):
        kids = [t.field(i).with_type(k) for i in range(t.num_fields) if (k := _sparkable(t.field(i).type)) is not None]
        return pa.struct(kids) if kids else None
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        e = _sparkable(t.value_type)
        return None if e is None else pa.list_(t.value_field.with_type(e))
    if pa.types.is_map(t):
        k, v = _sparkable(t.key_type), _sparkable(t.item_type)
        return None if k is None or v is None else pa.map_(t.key_field.with_type(k), t.item_field.with_type(v))
    if pa.types.is_decimal(t):
        return t if t.precision <= 38 else None
    if pa.types.is_timestamp(t):
        return pa.int64() if t.unit == "ns" else pa.timestamp("us", t.tz)  # ns: as nanoseconds (timestamp_ns)
    if pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_time64(t):
        return pa.int64()
    widened = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.decimal128(20, 0),
               pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}
    if t in widened:
        return widened[t]
    if pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if (pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_string(t)
            or pa.types.is_binary(t) or pa.types.is_date32(t)):
        return t
    return None


def _plain(t: pa.DataType) -> pa.DataType:
    """A type without extension types (inside a variant group: uuid typed values as their bytes)."""
    if isinstance(t, pa.BaseExtensionType):
        return _plain(t.storage_type)
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_plain(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(t.value_field.with_type(_plain(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(_plain(t.key_type)), t.item_field.with_type(_plain(t.item_type)))
    return t


def copy_schema(schema: pa.Schema, geometry: set[int]) -> pa.Schema:
    """The Arrow schema of a remote copy of a file of this (footer) schema: the readable copy's fields (readable.py)
    in types Spark carries, then the position column."""
    fields = []
    for f in readable.readable_schema(schema, geometry):
        t = _sparkable(f.type)
        if t is not None:
            fields.append(f.with_type(t))
    fields.append(pa.field(POS_COLUMN, pa.int64(), metadata={_FID: str(POS_FIELD_ID).encode()}))
    return pa.schema(fields)


def _spark_type(t: pa.DataType, field_meta: dict | None = None) -> T.DataType:
    """Spark's type for a copy field, with the Parquet field ids of struct children (Spark writes them)."""
    if pa.types.is_struct(t):
        return T.StructType([_spark_field(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return T.ArrayType(_spark_type(t.value_type), True)
    if pa.types.is_map(t):
        return T.MapType(_spark_type(t.key_type), _spark_type(t.item_type), True)
    return from_arrow_type(t, prefer_timestamp_ntz=True)


def _spark_field(f: pa.Field) -> T.StructField:
    raw = (f.metadata or {}).get(_FID)
    meta = {_SPARK_FID: int(raw)} if raw is not None else {}
    return T.StructField(f.name, _spark_type(f.type), True, meta)


def spark_schema(schema: pa.Schema) -> T.StructType:
    """The Spark schema the decode emits for a copy schema, with the partition column last."""
    return T.StructType([*(_spark_field(f) for f in schema), T.StructField(COPY, T.StringType(), True)])


# ---------------------------------------------------------------------------------------------- the decode

def _to(arr: pa.Array, t: pa.DataType) -> pa.Array:
    """The array (a readable copy's column) in the copy type t (`_sparkable`), nested fields matched by name."""
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage
    src = arr.type
    if src == t:
        return arr
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(t):
        children = [_to(arr.field(src.get_field_index(t.field(i).name)), t.field(i).type) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)
    if pa.types.is_list(t):
        flat = arr.flatten()
        offsets = arr.offsets
        if offsets[0].as_py():
            offsets = pc.subtract(offsets, offsets[0])
        offsets = offsets.cast(pa.int32())
        return pa.ListArray.from_arrays(offsets, _to(flat, t.value_type), type=t, mask=mask)
    if pa.types.is_map(t):
        if arr.offset:
            arr = pa.concat_arrays([arr])  # offsets and keys/items from 0
        return pa.MapArray.from_arrays(arr.offsets, _to(arr.keys, t.key_type), _to(arr.items, t.item_type), type=t,
                                       mask=mask)
    return arr.cast(t)


def decode_batches(batches: Iterator[pa.RecordBatch], schema: pa.Schema, geometry: set[int]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: binaryFile's (content, key) rows to the files' rows in the copy schema, in file order,
    with their positions and the source's key (one row group decoded at a time)."""
    for batch in batches:
        contents, keys = batch.column("content"), batch.column(COPY)
        for i in range(batch.num_rows):
            src = pq.ParquetFile(pa.BufferReader(contents[i].as_buffer()))
            arrow = src.schema_arrow
            pos = 0
            for g in range(src.num_row_groups):
                t = src.read_row_group(g)
                arrays = []
                for f in schema:
                    if f.name == POS_COLUMN:
                        arrays.append(pa.array(range(pos, pos + t.num_rows), pa.int64()))
                        continue
                    j = arrow.get_field_index(f.name)
                    col = _readable_column(t.column(j).combine_chunks(), arrow.field(j), geometry)
                    arrays.append(_to(col, f.type))
                arrays.append(pa.array([keys[i].as_py()] * t.num_rows, pa.string()))
                pos += t.num_rows
                yield pa.RecordBatch.from_arrays(arrays, schema=pa.schema([*schema, pa.field(COPY, pa.string())]))


def decoder(schema: pa.Schema, geometry: set[int]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function of one copy job (pickled by value with this module, see `_by_value`)."""
    return lambda batches: decode_batches(batches, schema, geometry)


# ---------------------------------------------------------------------------------------------- copies

def _by_value() -> None:
    """Ship this module and lake.wkb to the executors by value: their Python needs pyarrow and pyspark, not this
    adapter (cloudpickle pickles module functions by reference otherwise)."""
    import sys

    from pyspark import cloudpickle

    for mod in (wkb, readable, sys.modules[__name__]):
        cloudpickle.register_pickle_by_value(mod)


def ensure_copies(spark: SparkSession, root: str, files: Sequence[tuple[str, int, pa.Schema]],
                  columns: Sequence[Column]) -> dict[str, tuple[str, int]]:
    """Copies of these (URI, size, footer schema) remote files under root (a table's `_ducklake_spark/t<id>` URI),
    made by Spark where missing: {URI: (copy URI, copy size)}."""
    geometry = {c.column_id for top in columns for c in top.walk() if c.type == "geometry"}
    base = join_path(root, readable.READABLE)
    keys = {p: copy_key(p, s) for p, s, _ in files}
    with _lock:
        missing = [f for f in files if keys[f[0]] not in _known]
    if missing:
        _list(spark, base)
        with _lock:
            missing = [f for f in missing if keys[f[0]] not in _known]
    if missing:
        by_layout: dict[str, list[tuple[str, int, pa.Schema]]] = {}
        for f in missing:
            by_layout.setdefault(str(copy_schema(f[2], geometry)), []).append(f)
        # a part's rows are matched to their source by file name
        parts = [part for group in by_layout.values()
                 for part in distinct_parts(group, lambda f: f[0].rpartition("/")[2])]
        _by_value()
        # a Spark job per footer layout (DuckDB shreds each file's variants its own way): run side by side
        with ThreadPoolExecutor(max_workers=min(4, len(parts))) as pool:
            list(pool.map(lambda part: _copy(spark, base, part, keys, geometry), parts))
        _list(spark, base)
    out = {}
    with _lock:
        for p, _, _ in files:
            hit = _known.get(keys[p])
            if hit is None:
                raise DuckLakeError(f"no readable copy of {p} was found under {base} after making it")
            out[p] = hit
    return out


def _copy(spark: SparkSession, base: str, files: list[tuple[str, int, pa.Schema]], keys: dict[str, str],
          geometry: set[int]) -> None:
    """One Spark job copying files of one layout (distinct file names) into a new job directory under base."""
    schema = copy_schema(files[0][2], geometry)
    paths = [p for p, _, _ in files]
    # binaryFile's path is Hadoop's qualified form of the URI (file:/x for file:///x): matched by file name
    names = F.create_map(*[x for p in paths for x in (F.lit(p.rpartition("/")[2]), F.lit(keys[p]))])
    # the catalog's s3:// is s3a:// to Spark (Hadoop's s3:// scheme is not the S3 connector)
    raw = spark.read.format("binaryFile").load([s3a.to_spark(p) for p in paths]).select(
        "content", F.element_at(names, F.element_at(F.split("path", "/"), -1)).alias(COPY))
    rows = raw.mapInArrow(decoder(schema, geometry), spark_schema(schema))  # type: ignore[arg-type]
    # sorted by (file, position), a total order: each file's rows reach its one output file in order
    job = join_path(base, f"s{uuid.uuid4().hex}")
    rows.sortWithinPartitions(COPY, POS_COLUMN).write.partitionBy(COPY).parquet(job)


def _list(spark: SparkSession, base: str) -> None:
    """Record the copies found under base (one Spark listing; no file content is read)."""
    try:
        found = (spark.read.format("binaryFile").option("recursiveFileLookup", "true").option("pathGlobFilter", "*.parquet")
                 .load(base).select("path", "length").collect())
    except Exception as e:  # noqa: BLE001 - no copy made yet: the directory does not exist
        if "PATH_NOT_FOUND" in str(e) or "does not exist" in str(e):
            return
        raise
    marker = f"/{COPY}="
    with _lock:
        for r in found:
            path: str = r.path
            at = path.find(marker)
            if at < 0:
                continue
            rel = path[path.rfind("/", 0, at) + 1:]  # s<job>/__ducklake_copy=<key>/part-....parquet
            key = rel.split("/")[1].partition("=")[2]
            _known.setdefault(key, (join_path(base, rel), int(r.length)))
