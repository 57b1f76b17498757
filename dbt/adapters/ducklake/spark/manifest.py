"""What Spark reads for a DuckLake table at a snapshot: a directory of symlinks to exactly the live files, read as a
Spark catalog table with an explicit schema of field ids.

Why: Spark parses and analyzes a persistent view's SQL on every query, so the SQL must not grow with the file count;
and planning must not open every file on the driver. A directory of symlinks named `f<data_file_id>_r<row_id_start>`
is read like the files themselves, and `_metadata.file_name` then gives each row's file id and row id without a
literal per file. The explicit schema (the table's columns with their field ids) makes Spark's Parquet reader match
columns by id (renamed columns), widen promoted types and read missing columns as NULL, with no footer read here.
Deletes are data: the live delete files are symlinked as `d<data_file_id>` and anti-joined on (file, position),
inlined deletes are a small Parquet file beside them.

A manifest's directory is named by a hash of its entries, built in a temporary directory and renamed, so processes
share it and never see half of one. Directories of a table unused for KEEP_UNUSED_SECONDS are removed when a newer
one is built (`_ducklake_spark/` is skipped by both engines' orphan cleanup).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from ..lake.deletes import POS_FIELD_ID, ROW_ID_COLUMN, ROW_ID_FIELD_ID, SNAPSHOT_COLUMN, SNAPSHOT_FIELD_ID
from ..lake.maintenance import SPARK_MANIFESTS
from ..lake.paths import to_local
from ..lake.records import Column, TableInfo
from ..lake.scan import FileScanTask
from .sql_literals import ident
from .type_readings import Encoding, project, reading_type, unopenable, unopenable_message
from .types import FIELD_ID_KEY, spark_field

DATABASE = "_ducklake_manifests"
KEEP_UNUSED_SECONDS = 3600.0
FILE = "__ducklake_file"  # the row's data file id
POS = "__ducklake_pos"  # the row's position in its file
RID = "__ducklake_rid"  # the row's row id
_INLINED_FILE_FIELD_ID = 2147483100  # the data file id column of the inlined-deletes file (our own)
_INLINED_FILE_COLUMN = "__ducklake_data_file"

_log = logging.getLogger(__name__)
_lock = threading.Lock()
_created: set[str] = set()  # Spark tables this process made (a session catalog lives as long as the process)
_in_use: set[str] = set()  # manifest directories this process reads: never removed by its own cleanup
_last_cleanup: dict[str, float] = {}


def linkable(task: FileScanTask, defaults: Sequence[Column]) -> bool:
    """A file a manifest can hold: local (symlinks), matched by field id (no name mapping), and, where the table has
    default-bearing columns, with catalog statistics that say which of them it holds."""
    f = task.data_file
    if defaults and not f.stats:
        return False
    local = "://" not in f.path or f.path.startswith("file://")
    d = f.delete_file
    return local and task.mapping is None and (d is None or "://" not in d.path or d.path.startswith("file://"))


@dataclass(frozen=True)
class Manifest:
    """Spark tables over one table's live files at a snapshot: one per set of present default-bearing columns."""

    # (qualified Spark table, ids of default columns its files have, how they store the type_readings.VARYING leaves)
    data: tuple[tuple[str, frozenset[int], Encoding], ...]
    deletes: str | None  # qualified Spark table of (file, pos, snapshot) of deleted rows, or None


def _nullable(dt: T.DataType) -> T.DataType:
    """Every field nullable: a file may lack a column (it reads NULL), so no NOT NULL may reach the optimizer."""
    if isinstance(dt, T.StructType):
        return T.StructType([T.StructField(f.name, _nullable(f.dataType), True, f.metadata) for f in dt.fields])
    if isinstance(dt, T.ArrayType):
        return T.ArrayType(_nullable(dt.elementType), True)
    if isinstance(dt, T.MapType):
        return T.MapType(_nullable(dt.keyType), _nullable(dt.valueType), True)
    return dt


def data_schema(columns: Sequence[Column], encoding: Encoding = ()) -> T.StructType:
    """The Spark schema a manifest of data files is read with: the columns by field id as their Parquet values are
    read (type_readings.reading_type), then the internal row id and snapshot columns (present in files DuckDB
    rewrote)."""
    enc = dict(encoding)
    fields = []
    for c in columns:
        f = spark_field(c)
        fields.append(T.StructField(f.name, reading_type(c, enc, f.dataType), True, f.metadata))
    fields += [T.StructField(ROW_ID_COLUMN, T.LongType(), True, {FIELD_ID_KEY: ROW_ID_FIELD_ID}),
               T.StructField(SNAPSHOT_COLUMN, T.LongType(), True, {FIELD_ID_KEY: SNAPSHOT_FIELD_ID})]
    return _nullable(T.StructType(fields))  # type: ignore[return-value]


DELETE_SCHEMA = T.StructType([
    T.StructField("pos", T.LongType(), True, {FIELD_ID_KEY: POS_FIELD_ID}),
    T.StructField(SNAPSHOT_COLUMN, T.LongType(), True, {FIELD_ID_KEY: SNAPSHOT_FIELD_ID}),
    T.StructField(_INLINED_FILE_COLUMN, T.LongType(), True, {FIELD_ID_KEY: _INLINED_FILE_FIELD_ID}),
])


def default_columns(columns: Sequence[Column]) -> list[Column]:
    """Top-level columns whose initial default is not NULL: files written before they were added read the default."""
    return [c for c in columns if c.initial_default is not None and not c.is_nested]


def present_defaults(task: FileScanTask, defaults: Sequence[Column]) -> frozenset[int]:
    """Ids of the default-bearing columns a file holds, from its catalog statistics (a row per column it has)."""
    if not defaults:
        return frozenset()
    have = {s.column_id for s in task.data_file.stats}
    return frozenset(c.column_id for c in defaults if c.column_id in have)


def columns_sql(table: TableInfo, present: frozenset[int], encoding: Encoding, ref: str = "x") -> list[str]:
    """The table's columns from a manifest table aliased ref: each column's Spark value (type_readings.project), or
    its initial default where the files predate it."""
    from .scan import default_sql  # scan imports this module

    enc = dict(encoding)
    out = []
    for c in table.columns:
        if c.initial_default is not None and not c.is_nested and c.column_id not in present:
            out.append(f"{default_sql(c)} AS {ident(c.name)}")  # the file predates the column
        else:
            out.append(f"{project(c, f'{ref}.{ident(c.name)}', enc)} AS {ident(c.name)}")
    return out


def unreadable_sql(table: TableInfo, encoding: Encoding, extra: Sequence[str] = ()) -> str | None:
    """A SELECT (extra columns, then the table's) that fails naming the column, when files of this encoding hold one
    Spark cannot open them with (type_readings.UNOPENABLE); None otherwise."""
    from .sql_literals import literal, string_literal

    col = unopenable(encoding, table.columns)
    if col is None:
        return None
    msg = string_literal(unopenable_message(f"{table.schema_name}.{table.name}", col))
    nulls = [*extra, *(f"{literal(None, c)} AS {ident(c.name)}" for c in table.columns)]
    return f"SELECT {', '.join(nulls)} FROM range(1) WHERE raise_error({msg}) IS NULL"


def prepare(spark: SparkSession, data_path: str, table: TableInfo, tasks: Sequence[FileScanTask],
            snapshot_id: int, encoding_of: Callable[[FileScanTask], Encoding] = lambda t: ()) -> Manifest:
    """Build (or reuse) the manifest of these files at snapshot_id and the Spark tables over it; files are grouped
    by the default-bearing columns they hold and by encoding_of (their footers' encoding of VARYING columns)."""
    defaults = default_columns(table.columns)
    groups: dict[tuple[frozenset[int], Encoding], list[tuple[str, str]]] = {}
    deletes: list[tuple[str, str]] = []
    inlined: list[tuple[int, int]] = []
    for t in tasks:
        f = t.data_file
        groups.setdefault((present_defaults(t, defaults), encoding_of(t)), []).append(
            (f"f{f.data_file_id}_r{f.row_id_start or 0}.parquet", to_local(f.path)))
        d = f.delete_file
        if d is not None and d.begin_snapshot <= snapshot_id:
            deletes.append((f"d{f.data_file_id}.parquet", to_local(d.path)))
        inlined += [(f.data_file_id, p) for p, begin in f.inlined_deletes if begin <= snapshot_id]
    order = sorted(groups, key=lambda p: (sorted(p[0]), p[1]))
    links = {f"g{i}": groups[p] for i, p in enumerate(order)}
    tables = {}
    if deletes or inlined:
        links["del"] = deletes
        if inlined:
            tables["del/inlined.parquet"] = positions_table(inlined)
    directory = materialize(data_path, table.table_id, links, tables)
    data = tuple((spark_table(spark, os.path.join(directory, f"g{i}"), data_schema(table.columns, e)), p, e)
                 for i, (p, e) in enumerate(order))
    dels = spark_table(spark, os.path.join(directory, "del"), DELETE_SCHEMA) if deletes or inlined else None
    return Manifest(data, dels)


def materialize(data_path: str, table_id: int, links: dict[str, list[tuple[str, str]]],
                tables: dict[str, pa.Table] | None = None) -> str:
    """The manifest directory holding these subdirectories of symlinks (name, target) and these small Parquet files
    (relative path -> Arrow table): built once (named by a hash of everything in it), reused after."""
    tables = tables or {}
    h = hashlib.sha1()
    for sub in sorted(links):
        h.update(repr((sub, sorted(links[sub]))).encode())
    for rel in sorted(tables):
        h.update(rel.encode())
        for col in tables[rel].columns:
            h.update(repr(col.to_pylist()).encode())
    root = os.path.join(to_local(data_path), SPARK_MANIFESTS, f"t{table_id}")
    directory = os.path.join(root, h.hexdigest()[:24])
    _materialize(directory, links, tables)
    _cleanup(root, directory)
    return directory


def _materialize(directory: str, links: dict[str, list[tuple[str, str]]], tables: dict[str, pa.Table]) -> None:
    with _lock:
        _in_use.add(directory)
    if os.path.isdir(directory):
        with contextlib.suppress(OSError):
            os.utime(directory)  # in use: keeps other processes' cleanup off it
        return
    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".tmp-{uuid.uuid4().hex}")
    try:
        for sub, entries in links.items():
            os.makedirs(os.path.join(tmp, sub))
            for name, target in entries:
                os.symlink(target, os.path.join(tmp, sub, name))
        for rel, table in tables.items():
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
            pq.write_table(table, os.path.join(tmp, rel))
        try:
            os.rename(tmp, directory)
        except OSError:
            if not os.path.isdir(directory):  # not a concurrent builder's identical manifest: a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def positions_table(rows: Sequence[tuple[int, ...]]) -> pa.Table:
    """(data file id, position[, snapshot id]) rows as a Parquet-ready table read by DELETE_SCHEMA's field ids."""
    def field(name: str, fid: int) -> pa.Field:
        return pa.field(name, pa.int64(), metadata={b"PARQUET:field_id": str(fid).encode()})

    fields = [field(_INLINED_FILE_COLUMN, _INLINED_FILE_FIELD_ID), field("pos", POS_FIELD_ID),
              field(SNAPSHOT_COLUMN, SNAPSHOT_FIELD_ID)]
    width = len(rows[0]) if rows else 2
    arrays = [pa.array([r[i] for r in rows], pa.int64()) for i in range(width)]
    return pa.table(arrays, schema=pa.schema(fields[:width]))


def _cleanup(root: str, keep: str) -> None:
    """Remove this table's manifests nobody used for KEEP_UNUSED_SECONDS (at most once a minute per table)."""
    now = time.time()
    with _lock:
        if now - _last_cleanup.get(root, 0.0) < 60:
            return
        _last_cleanup[root] = now
        in_use = set(_in_use)
    try:
        entries = os.listdir(root)
    except OSError:
        return
    for name in entries:
        path = os.path.join(root, name)
        if path == keep or path in in_use:
            continue
        try:
            if now - os.stat(path, follow_symlinks=False).st_mtime > KEEP_UNUSED_SECONDS:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def spark_table(spark: SparkSession, path: str, schema: T.StructType) -> str:
    """A Spark catalog table (Parquet, this schema) over a manifest directory, named by both."""
    name = f"{DATABASE}.m{hashlib.sha1((path + schema.json()).encode()).hexdigest()[:24]}"
    with _lock:
        if name in _created:
            return name
    try:
        if not spark.catalog.tableExists(name):
            spark.sql(f"CREATE DATABASE IF NOT EXISTS {ident(DATABASE)}")
            spark.catalog.createTable(name, path=path, source="parquet", schema=schema)
    except Exception:  # noqa: BLE001 - another thread of this session created it first
        if not spark.catalog.tableExists(name):
            raise
    with _lock:
        _created.add(name)
    return name


def file_id_sql(ref: str = "_metadata.file_name") -> str:
    return f"CAST(regexp_extract({ref}, '^f([0-9]+)_', 1) AS BIGINT)"


def row_id_start_sql(ref: str = "_metadata.file_name") -> str:
    return f"CAST(regexp_extract({ref}, '_r([0-9]+)[.]parquet$', 1) AS BIGINT)"
