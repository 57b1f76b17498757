"""What Spark reads for a DuckLake table at a snapshot: a directory of symlinks to exactly the live files, read as a
Spark catalog table with an explicit schema of field ids.

Why: Spark parses and analyzes a persistent view's SQL on every query, so the SQL must not grow with the file count;
and planning must not open every file on the driver. A directory of symlinks named `f<data_file_id>_r<row_id_start>`
is read like the files themselves, and `_metadata.file_name` then gives each row's file id and row id without a
literal per file. The explicit schema (the table's columns with their field ids) makes Spark's Parquet reader match
columns by id (renamed columns), widen promoted types and read missing columns as NULL, with no footer read here.
Deletes are data: the live delete files' positions (and inlined deletes) are gathered into ONE small Parquet file of
(data file id, position, snapshot) in the manifest, anti-joined on (file, position). Gathering them costs a read of
each delete file once (in parallel, and once per file and process; a new manifest takes the rows of delete files it
shares with the newest earlier manifest of the table from that manifest's file); a query then reads one file
instead of one per data file with deletes, which halves a scan of a lake where every file has deletes.

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
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from ...lake import paths
from ...lake.maintenance.cleanup import SPARK_MANIFESTS
from ...lake.paths import to_local
from ...lake.read.deletes import (
    POS_FIELD_ID,
    ROW_ID_COLUMN,
    ROW_ID_FIELD_ID,
    SNAPSHOT_COLUMN,
    SNAPSHOT_FIELD_ID,
    read_delete_arrays,
)
from ...lake.read.scan import FileScanTask
from ...lake.records import Column, DeleteFile, TableInfo
from ..env.session import catalog_key, ensure_database
from ..sql_literals import ident
from ..types import FIELD_ID_KEY, spark_field
from . import read_errors
from .projection import default_sql
from .readable import READABLE, ensure_copies
from .type_readings import Encoding, project, reading_type, unopenable

DATABASE = "_ducklake_manifests"
KEEP_UNUSED_SECONDS = 3600.0
FILE = "__ducklake_file"  # the row's data file id
POS = "__ducklake_pos"  # the row's position in its file
RID = "__ducklake_rid"  # the row's row id
_DATA_FILE_FIELD_ID = 2147483100  # the data file id column of the gathered deletes (our own)
_DATA_FILE_COLUMN = "__ducklake_data_file"
_DELETE_FILE_COLUMN = "__ducklake_delete_file"  # which delete file a gathered position came from (-1: inlined)
# the name of a gathered position's data file link: reads anti-join a row's `_metadata.file_name` with it, which
# costs a string hash per row where the file id (file_id_sql: a regexp per row) cost twice the scan's CPU
LINK = "__ducklake_link"
_LINK_FIELD_ID = 2147483101
DELETES_FILE = "del/deletes.parquet"

_log = logging.getLogger(__name__)
_lock = threading.Lock()
# Spark tables made, by (catalog_key, name): a catalog lives as long as its application (or Connect session), and a
# session stopped and made again in the process has none of them
_created: set[tuple[str, str]] = set()
_in_use: set[str] = set()  # manifest directories this process reads: never removed by its own cleanup
_last_cleanup: dict[str, float] = {}


def linkable(task: FileScanTask, defaults: Sequence[Column]) -> bool:
    """A file a manifest can hold: local (symlinks), matched by field id (no name mapping), and, where the table has
    default-bearing columns, with catalog statistics that say which of them it holds."""
    f = task.data_file
    if defaults and not f.stats:
        return False
    d = f.delete_file
    return paths.is_local(f.path) and task.mapping is None and (d is None or paths.is_local(d.path))


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
    T.StructField(_DATA_FILE_COLUMN, T.LongType(), True, {FIELD_ID_KEY: _DATA_FILE_FIELD_ID}),
])
GATHERED_DELETE_SCHEMA = T.StructType([*DELETE_SCHEMA.fields,
                                       T.StructField(LINK, T.StringType(), True, {FIELD_ID_KEY: _LINK_FIELD_ID})])


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
    enc = dict(encoding)
    out = []
    for c in table.columns:
        if c.initial_default is not None and not c.is_nested and c.column_id not in present:
            out.append(f"{default_sql(c)} AS {ident(c.name)}")  # the file predates the column
        else:
            out.append(f"{project(c, f'{ref}.{ident(c.name)}', enc)} AS {ident(c.name)}")
    return out


def link_targets(root: str, table: TableInfo, files: Sequence[tuple[str, int, Encoding]]) -> dict[str, str]:
    """What a manifest links for each (path, size, encoding) data file: the file itself, or, where Spark cannot open
    it (type_readings.UNOPENABLE: DuckDB's GEOMETRY / VARIANT columns), its readable copy (spark/read/readable.py)."""
    out = {p: to_local(p) for p, _s, _e in files}
    # a file listed twice (inserted and deleted in one change-feed range) is copied once
    copies = list(dict.fromkeys((to_local(p), s) for p, s, e in files if unopenable(e, table.columns) is not None))
    if copies:
        made = ensure_copies(root, copies, table.columns)
        with _lock:
            _in_use.update(made.values())  # read by this process: never removed by its own cleanup
        for p, target in made.items():
            read_errors.note_copy(target, p)  # Spark's errors name the copy: explained as the lake file
        out.update({p: made[to_local(p)] for p, _s, e in files if unopenable(e, table.columns) is not None})
    return out


@dataclass(frozen=True)
class Layout:
    """What a manifest of these files at a snapshot holds, before anything is made: its subdirectories of links,
    its small files (the gathered deletes), and the (default columns held, encoding) of each subdirectory."""

    root: str
    links: dict[str, list[tuple[str, str]]]
    tables: dict[str, tuple[str, Callable[[], pa.Table]]]
    order: list[tuple[frozenset[int], Encoding]]


def link_name(data_file_id: int, row_id_start: int | None) -> str:
    """The name of a data file's link in a manifest (file_id_sql and row_id_start_sql read it back)."""
    return f"f{data_file_id}_r{row_id_start or 0}.parquet"


def layout(data_path: str, table: TableInfo, tasks: Sequence[FileScanTask], snapshot_id: int,
           encoding_of: Callable[[FileScanTask], Encoding] = lambda t: ()) -> Layout:
    defaults = default_columns(table.columns)
    groups: dict[tuple[frozenset[int], Encoding], list[tuple[str, str]]] = {}
    deletes: list[DeleteFile] = []
    inlined: list[tuple[int, int, int]] = []
    root = table_root(data_path, table.table_id)
    encodings = {id(t): encoding_of(t) for t in tasks}
    targets = link_targets(root, table, [(t.data_file.path, t.data_file.file_size_bytes, encodings[id(t)])
                                         for t in tasks])
    for t in tasks:
        f = t.data_file
        groups.setdefault((present_defaults(t, defaults), encodings[id(t)]), []).append(
            (link_name(f.data_file_id, f.row_id_start), targets[f.path]))
        d = f.delete_file
        if d is not None and d.begin_snapshot <= snapshot_id:
            deletes.append(d)
        inlined += [(f.data_file_id, p, begin) for p, begin in f.inlined_deletes if begin <= snapshot_id]
    order = sorted(groups, key=lambda p: (sorted(p[0]), p[1]))
    links = {f"g{i}": groups[p] for i, p in enumerate(order)}
    tables: dict[str, tuple[str, Callable[[], pa.Table]]] = {}
    if deletes or inlined:
        # "link": the gathered rows name each data file's link (older manifests' deletes file does not)
        key = repr(("link", sorted((d.delete_file_id, d.path) for d in deletes), sorted(inlined)))
        names = {t.data_file.data_file_id: link_name(t.data_file.data_file_id, t.data_file.row_id_start)
                 for t in tasks}
        tables[DELETES_FILE] = (key, lambda: gather_deletes(root, deletes, inlined, names))
    return Layout(root, links, tables, order)


def built(data_path: str, table_id: int, lay: Layout) -> bool:
    """Whether the manifest of this layout exists (made by this process or another): reading it lists its links
    only (no link or deletes file is made)."""
    return os.path.isdir(_plan(data_path, table_id, lay.links, lay.tables)[0])


def prepare(spark: SparkSession, data_path: str, table: TableInfo, tasks: Sequence[FileScanTask],
            snapshot_id: int, encoding_of: Callable[[FileScanTask], Encoding] = lambda t: (),
            lay: Layout | None = None) -> Manifest:
    """Build (or reuse) the manifest of these files at snapshot_id and the Spark tables over it; files are grouped
    by the default-bearing columns they hold and by encoding_of (their footers' encoding of VARYING columns)."""
    lay = lay or layout(data_path, table, tasks, snapshot_id, encoding_of)
    directory = materialize(data_path, table.table_id, lay.links, lay.tables)
    data = tuple((spark_table(spark, os.path.join(directory, f"g{i}"), data_schema(table.columns, e)), p, e)
                 for i, (p, e) in enumerate(lay.order))
    dels = spark_table(spark, os.path.join(directory, "del"), GATHERED_DELETE_SCHEMA) if lay.tables else None
    return Manifest(data, dels)


# Positions of delete files read by this process (files never change once written): path -> (pos, snapshot).
_DELETE_CACHE_ROWS = 20_000_000
_delete_cache: OrderedDict[str, tuple[pa.Array, pa.Array]] = OrderedDict()
_delete_cache_rows = 0


def gather_deletes(root: str, deletes: Sequence[DeleteFile], inlined: Sequence[tuple[int, int, int]],
                   names: Mapping[int, str]) -> pa.Table:
    """One table of every deleted (data file id, position, snapshot) of these delete files and inlined deletes, with
    the name of the data file's link (`names`: by data file id).

    Positions come from this process's cache, then from the newest gathered file of an earlier manifest of the table
    (delete files are immutable, so its rows for a delete file are that file's), and the rest from the delete files
    themselves, read in parallel.
    """
    found: dict[int, tuple[pa.Array, pa.Array]] = {}
    with _lock:
        for d in deletes:
            hit = _delete_cache.get(d.path)
            if hit is not None:
                _delete_cache.move_to_end(d.path)
                found[d.delete_file_id] = hit
    missing = [d for d in deletes if d.delete_file_id not in found]
    if missing:
        found.update(_from_earlier_manifest(root, {d.delete_file_id for d in missing}))
        missing = [d for d in missing if d.delete_file_id not in found]
    if missing:
        with ThreadPoolExecutor(max_workers=min(8, len(missing))) as pool:
            for d, arrays in zip(missing, pool.map(lambda d: read_delete_arrays(d.path, d.begin_snapshot), missing), strict=True):
                found[d.delete_file_id] = arrays
    with _lock:
        global _delete_cache_rows
        for d in deletes:
            if d.path not in _delete_cache:
                _delete_cache[d.path] = found[d.delete_file_id]
                _delete_cache_rows += len(found[d.delete_file_id][0])
        while _delete_cache_rows > _DELETE_CACHE_ROWS and _delete_cache:
            _, (pos, _snap) = _delete_cache.popitem(last=False)
            _delete_cache_rows -= len(pos)
    files, positions, snapshots, sources = [], [], [], []
    for d in deletes:
        pos, snap = found[d.delete_file_id]
        files.append(pa.array([d.data_file_id] * len(pos), pa.int64()))
        positions.append(pos)
        snapshots.append(snap)
        sources.append(pa.array([d.delete_file_id] * len(pos), pa.int64()))
    if inlined:
        files.append(pa.array([r[0] for r in inlined], pa.int64()))
        positions.append(pa.array([r[1] for r in inlined], pa.int64()))
        snapshots.append(pa.array([r[2] for r in inlined], pa.int64()))
        sources.append(pa.array([-1] * len(inlined), pa.int64()))
    columns = [pa.concat_arrays(c) if c else pa.array([], pa.int64()) for c in (files, positions, snapshots, sources)]
    # the link names as a dictionary over the files' names: one string per file, not per row
    ids = sorted({d.data_file_id for d in deletes} | {r[0] for r in inlined})
    at = pc.index_in(columns[0], value_set=pa.array(ids, pa.int64()))
    links = pa.DictionaryArray.from_arrays(at.cast(pa.int32()), pa.array([names[i] for i in ids], pa.string()))
    return pa.Table.from_arrays([*columns, links.cast(pa.string())], schema=_GATHERED_SCHEMA)


def _id_field(name: str, fid: int) -> pa.Field:
    return pa.field(name, pa.int64(), metadata={b"PARQUET:field_id": str(fid).encode()})


_GATHERED_SCHEMA = pa.schema([_id_field(_DATA_FILE_COLUMN, _DATA_FILE_FIELD_ID), _id_field("pos", POS_FIELD_ID),
                              _id_field(SNAPSHOT_COLUMN, SNAPSHOT_FIELD_ID), pa.field(_DELETE_FILE_COLUMN, pa.int64()),
                              pa.field(LINK, pa.string(), metadata={b"PARQUET:field_id": str(_LINK_FIELD_ID).encode()})])


def _from_earlier_manifest(root: str, wanted: set[int]) -> dict[int, tuple[pa.Array, pa.Array]]:
    """The rows of the wanted delete files found in the newest gathered deletes of the table's earlier manifests."""
    try:
        candidates = [os.path.join(root, n, DELETES_FILE) for n in os.listdir(root) if not n.startswith(".")]
    except OSError:
        return {}
    newest = None
    for path in candidates:
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            continue
        if newest is None or mtime > newest[0]:
            newest = (mtime, path)
    if newest is None:
        return {}
    try:
        t = pq.read_table(newest[1], columns=[_DELETE_FILE_COLUMN, "pos", SNAPSHOT_COLUMN])
    except Exception:  # noqa: BLE001 - a manifest being removed by another process's cleanup: read the files instead
        return {}
    t = t.filter(pc.is_in(t.column(_DELETE_FILE_COLUMN), pa.array(sorted(wanted), pa.int64())))
    if not t.num_rows:
        return {}
    t = t.sort_by(_DELETE_FILE_COLUMN)
    ids = t.column(_DELETE_FILE_COLUMN).to_numpy()
    pos, snap = t.column("pos").combine_chunks(), t.column(SNAPSHOT_COLUMN).combine_chunks()
    out: dict[int, tuple[pa.Array, pa.Array]] = {}
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[start]:
            out[int(ids[start])] = (pos.slice(start, i - start), snap.slice(start, i - start))
            start = i
    return out


def table_root(data_path: str, table_id: int) -> str:
    """The directory of a table's manifests (and of its readable copies)."""
    return os.path.join(to_local(data_path), SPARK_MANIFESTS, f"t{table_id}")


def materialize(data_path: str, table_id: int, links: dict[str, list[tuple[str, str]]],
                tables: dict[str, tuple[str, Callable[[], pa.Table]]] | None = None) -> str:
    """The manifest directory holding these subdirectories of symlinks (name, target) and these small Parquet files
    (relative path -> (a key naming its content, its builder)): built once (named by a hash of everything in it,
    the files' builders called only then), reused after.

    A subdirectory's symlinks live in CHUNKS shared by every manifest of the table (chunk directories named by their
    entries, one per range of CHUNK_FILES data file ids), and the subdirectory holds a symlink per chunk: a manifest
    of a table that gained or lost a few files makes a few hundred links, not one per file (Spark lists them
    recursively, following the chunk links)."""
    tables = tables or {}
    root = table_root(data_path, table_id)
    directory, chunked, chunks = _plan(data_path, table_id, links, tables)
    for chunk, entries in chunks.items():
        _materialize(chunk, {"": entries}, {})
    _materialize(directory, chunked, tables)
    cleanup(root, directory)
    cleanup(os.path.join(root, CHUNKS), "")
    cleanup(os.path.join(root, READABLE), "")
    return directory


def _plan(data_path: str, table_id: int, links: dict[str, list[tuple[str, str]]],
          tables: dict[str, tuple[str, Callable[[], pa.Table]]]
          ) -> tuple[str, dict[str, list[tuple[str, str]]], dict[str, list[tuple[str, str]]]]:
    """(the manifest's directory, its subdirectories' chunk links, the chunks' entries): names only, nothing made."""
    root = table_root(data_path, table_id)
    chunked: dict[str, list[tuple[str, str]]] = {}
    chunks: dict[str, list[tuple[str, str]]] = {}
    for sub in sorted(links):
        by_range: dict[int, list[tuple[str, str]]] = {}
        for name, target in links[sub]:
            by_range.setdefault(_chunk_of(name), []).append((name, target))
        for k in sorted(by_range):
            entries = sorted(by_range[k])
            chunk = os.path.join(root, CHUNKS, hashlib.sha1(repr(entries).encode()).hexdigest()[:24])
            chunks[chunk] = entries
            chunked.setdefault(sub, []).append((f"c{k}", chunk))
    h = hashlib.sha1()
    for sub in sorted(chunked):
        h.update(repr((sub, chunked[sub])).encode())
    for rel in sorted(tables):
        h.update(repr((rel, tables[rel][0])).encode())
    return os.path.join(root, h.hexdigest()[:24]), chunked, chunks


CHUNKS = "chunks"
CHUNK_FILES = 256  # data file ids per chunk: a new manifest links about (files / 256 + 256 / 2) entries


def _chunk_of(name: str) -> int:
    """The chunk of an entry named f<data file id>_...: its id range."""
    if name.startswith("f") and "_" in name:
        with contextlib.suppress(ValueError):
            return int(name[1:name.index("_")]) // CHUNK_FILES
    return 0


def note_in_use(directory: str) -> None:
    """A manifest directory this process reads: never removed by its own cleanup, and (touched) not by another's."""
    with _lock:
        _in_use.add(directory)
    if os.path.isdir(directory):
        with contextlib.suppress(OSError):
            os.utime(directory)


def _materialize(directory: str, links: dict[str, list[tuple[str, str]]],
                 tables: dict[str, tuple[str, Callable[[], pa.Table]]]) -> None:
    """Build directory (its subdirectories of symlinks, "" for itself, and its files) unless it exists."""
    def fill(tmp: str) -> None:
        for sub, entries in links.items():
            os.makedirs(os.path.join(tmp, sub), exist_ok=True)
            for name, target in entries:
                os.symlink(target, os.path.join(tmp, sub, name))
        for rel, (_key, build) in tables.items():
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
            pq.write_table(build(), os.path.join(tmp, rel))

    built_once(directory, fill)


def built_once(directory: str, fill: Callable[[str], None]) -> None:
    """Build a directory named by its contents unless it exists: fill(tmp) fills a temporary sibling, renamed into
    place, so processes that share it never see half of one (a concurrent builder's identical one may win)."""
    note_in_use(directory)
    if os.path.isdir(directory):
        return
    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".tmp-{uuid.uuid4().hex}")
    try:
        os.makedirs(tmp)
        fill(tmp)
        try:
            os.rename(tmp, directory)
        except OSError:
            if not os.path.isdir(directory):  # not a concurrent builder's identical directory: a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def positions_table(rows: Sequence[tuple[int, int, int]]) -> pa.Table:
    """(data file id, position, snapshot id) rows as a Parquet-ready table read by DELETE_SCHEMA's field ids."""
    arrays = [pa.array([r[i] for r in rows], pa.int64()) for i in range(3)]
    return pa.table(arrays, schema=pa.schema(list(_GATHERED_SCHEMA)[:3]))


def cleanup(root: str, keep: str) -> None:
    """Remove the manifests (or chunks, or listings: spark/read/listing.py) under root nobody used for KEEP_UNUSED_SECONDS
    (at most once a minute)."""
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
        if path == keep or path in in_use or name in (CHUNKS, READABLE):
            continue
        try:
            if now - os.stat(path, follow_symlinks=False).st_mtime > KEEP_UNUSED_SECONDS:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.remove(path)  # a readable copy
        except OSError:
            continue


def spark_table(spark: SparkSession, path: str, schema: T.StructType, recursive: bool = True) -> str:
    """A Spark catalog table (Parquet, this schema) over a manifest directory (or, not recursive, a file or a glob of
    files), named by both."""
    name = f"{DATABASE}.m{hashlib.sha1((path + schema.json()).encode()).hexdigest()[:24]}"
    made = (catalog_key(spark), name)
    with _lock:
        if made in _created:
            return name
    try:
        if not spark.catalog.tableExists(name):
            ensure_database(spark, DATABASE)
            # recursive: the manifest's subdirectories are links to chunk directories (see materialize)
            options = {"recursiveFileLookup": "true"} if recursive else {}
            # Spark lists the files here (later resolutions hit its file status cache); a manifest's symlinks are
            # listed as local files (_LISTING), a file or glob (footer_relation, maybe remote) as configured
            with _listing_conf(spark) if recursive else contextlib.nullcontext():
                spark.catalog.createTable(name, path=path, source="parquet", schema=schema, **options)
    except Exception:  # noqa: BLE001 - another thread of this session created it first
        if not spark.catalog.tableExists(name):
            raise
    with _lock:
        _created.add(made)
    return name


# How Spark lists a manifest (local symlinks, on the driver's file system): on the driver, without a Spark job per
# listing (the chunk directories are more than the default threshold of 32 paths), and without asking the file
# system for block locations (local files have none worth scheduling by). At 10k files this takes the listing from
# ~2.7 s to ~1.6 s on a loaded 2-core machine. Set only while a manifest's table is created, then restored.
_LISTING = {"spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000000",
            "spark.sql.sources.ignoreDataLocality": "true"}


_listing_lock = threading.Lock()  # one change of the session's settings at a time (each restores what it found)


@contextlib.contextmanager
def _listing_conf(spark: SparkSession) -> Iterator[None]:
    with _listing_lock:
        yield from _listing_conf_locked(spark)


def _listing_conf_locked(spark: SparkSession) -> Iterator[None]:
    before: dict[str, str | None] = {}
    try:
        for k, v in _LISTING.items():
            before[k] = spark.conf.get(k, None)
            spark.conf.set(k, v)
    except Exception:  # noqa: BLE001 - a session that refuses the setting lists as it is configured
        pass
    try:
        yield
    finally:
        for k, old in before.items():
            with contextlib.suppress(Exception):
                if old is None:
                    spark.conf.unset(k)
                else:
                    spark.conf.set(k, old)


# both are evaluated on every row a DML statement reads: string cuts cost a fraction of a regexp per row
def file_id_sql(ref: str = "_metadata.file_name") -> str:
    """The data file id of a link name f<id>_r<row id start>[...].parquet (link_name)."""
    return f"CAST(substring_index(substring({ref}, 2), '_', 1) AS BIGINT)"


def row_id_start_sql(ref: str = "_metadata.file_name") -> str:
    """The row id start of a link name f<id>_r<row id start>.parquet (link_name)."""
    return f"CAST(substring_index(substring_index({ref}, '_r', -1), '.', 1) AS BIGINT)"
