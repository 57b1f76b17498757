"""What Spark reads for a DuckLake table whose files are on object storage (S3): a file list Spark reads as the
listing of a directory, without a request per file, and one SQL branch per file layout whatever the file count.

Why not spark/read/manifest.py's symlinks: object storage has none. Why not a glob of the files (`dir/{a,b,...}`, the
footer-based path of spark/read/scan.py): the view's SQL then grows with the file count (Spark parses and analyzes it on
every query), and planning reads every file's footer. Why not `spark.read.parquet(*paths)`: a persistent view
cannot hold a DataFrame, and Spark checks and lists each path (a request per file).

The list is Spark's own: a directory holding `_spark_metadata/0`, the metadata log Spark's file sink writes (one
JSON line per file: URI, size), is read by Spark's Parquet source as exactly those files (`MetadataLogFileIndex`:
no listing, no request per file; the files may be anywhere Spark's file systems reach). The directory is on the
driver's disk (the cache directory), one per table, snapshot and file set, built once and reused by every process,
read as a Spark catalog table with an explicit schema of field ids (as a manifest: renamed columns by id, promoted
types, missing columns as NULL, no footer read while planning).

Deletes are data: the first reader of a set of live Parquet delete files has Spark read them (another log, read by
field id: position and, in partial delete files, snapshot), joined to the data file each deletes by a small Parquet
map (delete file URI -> data file URI), while a background job gathers their positions into one local Parquet file
(`gathered_deletes`) that later statements read instead: a query then opens one delete file instead of one per data
file, which is half the requests of a scan of a lake where every file has deletes. A gathering takes the rows of the
delete files it shares with the table's newest earlier gathering from that file (delete files never change), so a
snapshot that adds a few delete files reads only those. Inlined deletes and deletion vectors (which Spark cannot
read) are gathered on the driver into a small Parquet file of the listing. Deleted rows are removed by a broadcast
anti join on (`_metadata.file_path`, `_metadata.row_index`); DML targets get each row's file id and row id from a
map of the data files (URI -> data file id, row id start).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from ...lake import paths
from ...lake.read.deletes import POS_FIELD_ID, ROW_ID_COLUMN, SNAPSHOT_COLUMN, SNAPSHOT_FIELD_ID, read_delete_arrays
from ...lake.read.scan import FileScanTask
from ...lake.records import Column, DeleteFile, TableInfo
from ..env import s3a
from ..env.cache_dir import cache_root
from ..sql_literals import ident
from ..sql_literals import string_literal as sql_string
from ..types import FIELD_ID_KEY
from . import first_read, manifest
from .manifest import FILE, POS, RID
from .type_readings import UNOPENABLE, Encoding

LOG = "_spark_metadata"  # Spark's file sink metadata log directory (FileStreamSink.metadataDir)
# a block size Spark splits nothing by: a lake's data files are read whole by one task each, as Spark's listing of
# small files gives them
_BLOCK = 128 * 2**20
_PATH = "__ducklake_path"  # the row's data file URI (_metadata.file_path)
_DEL = "__ducklake_deleted"

_lock = threading.Lock()


def applies(task: FileScanTask, table: TableInfo, defaults: Sequence[Column]) -> bool:
    """A file a listing can hold: on object storage Spark reaches (s3://), matched by field id (no name mapping),
    of a table Spark reads the files of as they are (no GEOMETRY / VARIANT: those need readable copies), and, where
    the table has default-bearing columns, with catalog statistics that say which of them it holds."""
    f = task.data_file
    if not s3a.is_object_store(f.path) or task.mapping is not None or (defaults and not f.stats):
        return False
    d = f.delete_file
    if d is not None and not (s3a.is_object_store(d.path) or paths.is_local(d.path)):
        return False
    return not any(c.type in UNOPENABLE for top in table.columns for c in top.walk())


def uri(path: str) -> str:
    """A lake path as Spark's `_metadata.file_path` spells the file: the s3a URI, its path percent-encoded as Java's
    URI encodes a Hadoop Path (so a map keyed by it joins on equal strings)."""
    p = s3a.to_spark(path)
    scheme, sep, rest = p.partition("://")
    if not sep:
        return "file://" + urllib.parse.quote(p, safe=_URI_SAFE)
    authority, slash, key = rest.partition("/")
    return f"{scheme}://{authority}{slash}{urllib.parse.quote(key, safe=_URI_SAFE)}"


_URI_SAFE = "/:@!$&'()*+,;=-._~"  # what java.net.URI leaves as it is in a path


@dataclass(frozen=True)
class Listing:
    """Spark tables over one table's live files at a snapshot (see the module)."""

    # (qualified Spark table of a group's data files, ids of default columns its files have, their encoding)
    data: tuple[tuple[str, frozenset[int], Encoding], ...]
    deletes: str | None  # the SELECT of deleted (path, pos) rows at the snapshot, or None
    files: str | None  # qualified Spark table (path, file id, row id start) of the data files: DML locators only


DELETE_SCHEMA = T.StructType([
    T.StructField("pos", T.LongType(), True, {FIELD_ID_KEY: POS_FIELD_ID}),
    T.StructField(SNAPSHOT_COLUMN, T.LongType(), True, {FIELD_ID_KEY: SNAPSHOT_FIELD_ID}),
])
_FILES_SCHEMA = pa.schema([("path", pa.string()), ("file", pa.int64()), ("start", pa.int64())])
_DELETE_MAP_SCHEMA = pa.schema([("delete_path", pa.string()), ("path", pa.string())])
_GATHERED_SCHEMA = pa.schema([("path", pa.string()), ("pos", pa.int64()), ("snapshot", pa.int64())])


def _spark_schema(schema: pa.Schema) -> T.StructType:
    kinds = {pa.string(): T.StringType(), pa.int64(): T.LongType()}
    return T.StructType([T.StructField(f.name, kinds[f.type], True) for f in schema])


def root(data_path: str, table_id: int) -> str:
    """This machine's directory of a lake table's listings (by the lake's data path and the table id)."""
    lake = hashlib.sha1(data_path.encode()).hexdigest()[:16]
    return os.path.join(cache_root(), "listings", lake, f"t{table_id}")


def prepare(spark: SparkSession, data_path: str, table: TableInfo, tasks: Sequence[FileScanTask], snapshot_id: int,
            encoding_of: Callable[[FileScanTask], Encoding] = lambda t: (), locators: bool = False) -> Listing:
    """Build (or reuse) the listing of these files at snapshot_id and the Spark tables over it; files are grouped as
    a manifest groups them (default-bearing columns held, encoding of VARYING columns)."""
    defaults = manifest.default_columns(table.columns)
    groups: dict[tuple[frozenset[int], Encoding], list[FileScanTask]] = {}
    for t in tasks:
        groups.setdefault((manifest.present_defaults(t, defaults), encoding_of(t)), []).append(t)
    order = sorted(groups, key=lambda p: (sorted(p[0]), p[1]))
    logs = {f"g{i}": [(uri(t.data_file.path), t.data_file.file_size_bytes) for t in groups[p]]
            for i, p in enumerate(order)}
    spark_read: list[tuple[str, DeleteFile]] = []
    driver_read: list[tuple[str, DeleteFile]] = []
    inlined = []
    for t in tasks:
        f = t.data_file
        d = f.delete_file
        if d is not None and d.begin_snapshot <= snapshot_id:
            (driver_read if d.format != "parquet" else spark_read).append((f.path, d))
        inlined += [(uri(f.path), p, begin) for p, begin in f.inlined_deletes if begin <= snapshot_id]
    if spark_read:
        logs["del"] = [(uri(d.path), d.file_size_bytes) for _p, d in spark_read]
    # (the file's name, a key of its content, its builder): the content key names the directory
    small: list[tuple[str, str, Callable[[], pa.Table]]] = []
    delmap_pairs = [(uri(d.path), uri(p)) for p, d in spark_read]
    if spark_read:
        pairs = delmap_pairs
        small.append(("delmap.parquet", repr(pairs), lambda: pa.table(list(zip(*pairs, strict=True)) or [(), ()],
                                                                      schema=_DELETE_MAP_SCHEMA)))
    if driver_read or inlined:
        key = repr((sorted((d.delete_file_id, d.path) for _p, d in driver_read), sorted(inlined)))
        small.append(("gathered.parquet", key, lambda: _gather(driver_read, inlined)))
    if locators:
        rows = sorted((uri(t.data_file.path), t.data_file.data_file_id, t.data_file.row_id_start or 0)
                      for t in tasks)
        small.append(("files.parquet", repr(rows), lambda: pa.table(list(zip(*rows, strict=True)),
                                                                    schema=_FILES_SCHEMA)))
    directory = _materialize(root(data_path, table.table_id), logs, small)
    data = tuple((manifest.spark_table(spark, os.path.join(directory, f"g{i}"), manifest.data_schema(table.columns, e)),
                  p, e) for i, (p, e) in enumerate(order))
    parts = []
    gathered_path = _gathered_path(data_path, table.table_id, [uri(d.path) for _p, d in spark_read])
    if spark_read and os.path.exists(gathered_path):
        manifest.note_in_use(gathered_path)
        with contextlib.suppress(OSError):
            os.utime(gathered_path)  # in use: kept by cleanup
        gathered = manifest.spark_table(spark, gathered_path, _spark_schema(_GATHERED_SCHEMA), recursive=False)
        parts.append(f"SELECT path, pos FROM {gathered} WHERE snapshot IS NULL OR snapshot <= {snapshot_id}")
    elif spark_read:
        dels = manifest.spark_table(spark, os.path.join(directory, "del"), DELETE_SCHEMA)
        dmap = manifest.spark_table(spark, os.path.join(directory, "delmap.parquet"),
                                    _spark_schema(_DELETE_MAP_SCHEMA), recursive=False)
        snap = ident(SNAPSHOT_COLUMN)
        # a partial delete file's rows deleted after the snapshot are not deleted at it; rows of a file without the
        # snapshot column (NULL) were all deleted at its begin snapshot, which the plan has checked
        positions = (f"SELECT m.path, d.pos, d.{snap} AS snapshot, d.dp AS delete_path FROM (SELECT pos, {snap}, "
                     f"_metadata.file_path AS dp FROM {dels}) d JOIN {dmap} m ON m.delete_path = d.dp")
        parts.append(f"SELECT path, pos FROM ({positions}) WHERE snapshot IS NULL OR snapshot <= {snapshot_id}")
        first_read.build_in_background(
            f"deletes:{gathered_path}", lambda: _gather_with_spark(spark, positions, gathered_path, delmap_pairs))
    if driver_read or inlined:
        gathered = manifest.spark_table(spark, os.path.join(directory, "gathered.parquet"),
                                        _spark_schema(_GATHERED_SCHEMA), recursive=False)
        parts.append(f"SELECT path, pos FROM {gathered} WHERE snapshot <= {snapshot_id}")
    files = (manifest.spark_table(spark, os.path.join(directory, "files.parquet"), _spark_schema(_FILES_SCHEMA),
                                  recursive=False) if locators else None)
    return Listing(data, " UNION ALL ".join(parts) or None, files)


_DELETES = "deletes"  # the table's gathered delete positions, one file per set of delete files
_GATHERED_FILE_SCHEMA = pa.schema([*_GATHERED_SCHEMA, ("delete_path", pa.string())])


def _gathered_path(data_path: str, table_id: int, delete_uris: Sequence[str]) -> str:
    key = hashlib.sha1(repr(sorted(delete_uris)).encode()).hexdigest()[:24]
    return os.path.join(root(data_path, table_id), _DELETES, f"{key}.parquet")


def _gather_with_spark(spark: SparkSession, positions: str, target: str, pairs: Sequence[tuple[str, str]]) -> None:
    """Write the positions of these delete files (delete URI -> data URI pairs) to target: the rows of the table's
    newest earlier gathering for the delete files it holds, the rest read by Spark (the SELECT positions, filtered
    to them)."""
    if os.path.exists(target):
        return
    folder = os.path.dirname(target)
    wanted = {d for d, _p in pairs}
    earlier = _newest_gathering(folder)
    parts = []
    if earlier is not None:
        t = earlier.filter(pc.is_in(earlier.column("delete_path"), pa.array(sorted(wanted), pa.string())))
        parts.append(t)
        wanted -= set(t.column("delete_path").unique().to_pylist())
    if wanted:
        # the earlier gathering lacks these delete files: Spark reads them (all, when there is none)
        ids = pa.array(sorted(wanted), pa.string())
        if earlier is None:
            read = spark.sql(positions).toArrow()
        else:
            names = ", ".join(sql_string(d) for d in ids.to_pylist())
            read = spark.sql(f"SELECT * FROM ({positions}) WHERE delete_path IN ({names})").toArrow()
        parts.append(read.select([f.name for f in _GATHERED_FILE_SCHEMA]).cast(_GATHERED_FILE_SCHEMA))
    table = pa.concat_tables([p.cast(_GATHERED_FILE_SCHEMA) for p in parts]) if parts else \
        _GATHERED_FILE_SCHEMA.empty_table()
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".tmp-{uuid.uuid4().hex}")
    try:
        pq.write_table(table.sort_by([("delete_path", "ascending"), ("pos", "ascending")]), tmp)
        os.replace(tmp, target)  # whole or not at all: readers see the file only once written
    finally:
        with contextlib.suppress(OSError):
            os.remove(tmp)
    manifest.cleanup(folder, target)


def _newest_gathering(folder: str) -> pa.Table | None:
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".parquet") and not n.startswith(".")]
    except OSError:
        return None
    for name in sorted(names, key=lambda n: -_mtime(os.path.join(folder, n))):
        try:
            return pq.read_table(os.path.join(folder, name), schema=_GATHERED_FILE_SCHEMA)
        except Exception:  # noqa: BLE001 - removed meanwhile by another process's cleanup: try the next
            continue
    return None


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _gather(driver_read: Sequence[tuple[str, object]], inlined: Sequence[tuple[str, int, int]]) -> pa.Table:
    """(data file URI, position, snapshot) of deletion vectors (read here: Spark cannot) and inlined deletes."""
    cols: list[list[pa.Array]] = [[], [], []]
    if driver_read:
        with ThreadPoolExecutor(max_workers=min(8, len(driver_read))) as pool:
            arrays = list(pool.map(lambda pd: read_delete_arrays(pd[1].path, pd[1].begin_snapshot),  # type: ignore[attr-defined]
                                   driver_read))
        for (p, _d), (pos, snap) in zip(driver_read, arrays, strict=True):
            cols[0].append(pa.array([uri(p)] * len(pos), pa.string()))
            cols[1].append(pos)
            cols[2].append(snap)
    if inlined:
        for i, kind in enumerate((pa.string(), pa.int64(), pa.int64())):
            cols[i].append(pa.array([r[i] for r in inlined], kind))
    return pa.Table.from_arrays([pa.concat_arrays(c) if c else pa.array([], f.type)
                                 for c, f in zip(cols, _GATHERED_SCHEMA, strict=True)], schema=_GATHERED_SCHEMA)


def _log_text(entries: Sequence[tuple[str, int]]) -> str:
    """The file sink's log batch of these files (CompactibleFileStreamLog: a version line, then one SinkFileStatus
    as JSON per line)."""
    lines = ["v1"]
    for path, size in entries:
        lines.append(json.dumps({"path": path, "size": size, "isDir": False, "modificationTime": 0,
                                 "blockReplication": 1, "blockSize": _BLOCK, "action": "add"}))
    return "\n".join(lines)


def _materialize(table_root: str, logs: dict[str, list[tuple[str, int]]],
                 small: Sequence[tuple[str, str, Callable[[], pa.Table]]]) -> str:
    """The directory of these logs and small files: named by a hash of everything in it, built in a temporary
    directory and renamed (processes share it and never see half of one), reused after."""
    h = hashlib.sha1()
    for sub in sorted(logs):
        h.update(repr((sub, logs[sub])).encode())
    for name, key, _build in sorted(small, key=lambda s: s[0]):
        h.update(repr((name, key)).encode())
    directory = os.path.join(table_root, h.hexdigest()[:24])

    def fill(tmp: str) -> None:
        for sub, entries in logs.items():
            os.makedirs(os.path.join(tmp, sub, LOG))
            with open(os.path.join(tmp, sub, LOG, "0"), "w", encoding="utf-8") as f:
                f.write(_log_text(entries))
        for name, _key, build in small:
            pq.write_table(build(), os.path.join(tmp, name))

    manifest.built_once(directory, fill)
    manifest.cleanup(table_root, directory)
    return directory


def listing_sql(lst: Listing, name: str, present: frozenset[int], encoding: Encoding, table: TableInfo,
                snapshot_id: int, partial: bool, locators: bool) -> str:
    """One group's live rows: the table's columns (with locators, FILE, POS and RID first)."""
    cols = manifest.columns_sql(table, present, encoding)
    inner = "SELECT *"
    if lst.deletes is not None or locators:
        # only then: reading the row index and path costs the scan (see spark/read/scan.py's manifest SELECT)
        inner += f", _metadata.file_path AS {_PATH}, _metadata.row_index AS {POS}"
    sql = f"FROM ({inner} FROM {name}) x"
    hints = []
    if locators:
        assert lst.files is not None
        sql += f" JOIN {lst.files} __ducklake_files ON __ducklake_files.path = x.{_PATH}"
        hints.append("__ducklake_files")
        cols = [f"__ducklake_files.file AS {FILE}", f"x.{POS}",
                f"CAST(coalesce(x.{ident(ROW_ID_COLUMN)}, __ducklake_files.start + x.{POS}) AS BIGINT) AS {RID}",
                *cols]
    if lst.deletes is not None:
        sql += f" LEFT ANTI JOIN ({lst.deletes}) {_DEL} ON {_DEL}.path = x.{_PATH} AND {_DEL}.pos = x.{POS}"
        hints.append(_DEL)
    if partial:  # rows a partial file holds beyond the snapshot
        snap = ident(SNAPSHOT_COLUMN)
        sql += f" WHERE x.{snap} IS NULL OR x.{snap} <= {snapshot_id}"
    hint = f"/*+ BROADCAST({', '.join(hints)}) */ " if hints else ""
    return f"SELECT {hint}{', '.join(cols)} {sql}"
