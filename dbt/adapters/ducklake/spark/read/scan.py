"""DuckLake tables in Spark SQL: one persistent view per table (in a session-catalog database per schema).

The view's SQL reads the table's data files with Spark's native Parquet reader, one branch per group of files with
the same physical layout, each column mapped as the reference maps it (field id, name mapping or position), renamed,
reordered, promoted or filled with its initial default; positional deletes (delete files and inlined deletes) removed
by a broadcast anti join on each row's file and `_metadata.row_index` (see KEY: the deleted positions are read from
the delete files by Spark, or are literals when few); rows of partial files beyond the snapshot dropped; inlined rows
added as literals.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from ...lake import paths
from ...lake.catalog.state import LakeState
from ...lake.errors import DuckLakeError
from ...lake.maintenance.cleanup import SPARK_MANIFESTS
from ...lake.paths import join_path
from ...lake.read.deletes import ROW_ID_COLUMN, SNAPSHOT_COLUMN
from ...lake.read.file_checks import reading_any, scan_files, verify_scan
from ...lake.read.inlined import read_inlined
from ...lake.read.pruning import Predicate
from ...lake.read.scan import FileScanTask, ScanPlan, deleted_positions, plan_context, plan_scan
from ...lake.records import Column, DataFile, TableInfo
from ..env import s3a
from ..env.session import ensure_database, runs_on_this_machine
from ..sql_literals import ident, literal, string_literal
from ..types import spark_schema
from . import first_read, listing, manifest, read_errors, remote_readable
from .distinct_parts import distinct_parts
from .manifest import FILE, RID
from .projection import physical_schema, projection
from .type_readings import (
    UNOPENABLE,
    Encoding,
    file_encoding,
    file_reading_schema,
    unopenable,
    varying,
)

_FID = b"PARQUET:field_id"
POS = manifest.POS
# Read through manifests (local files, see spark/read/manifest.py) and listings (files on object storage, see
# spark/read/listing.py); off, every file is read by the footer-based path below (tests compare both on every reference
# scenario). That path remains for what neither can hold: files matched by a name mapping, remote files Spark cannot
# open as they are (GEOMETRY / VARIANT), and HUGEINT columns (DuckDB stores them as DOUBLE, Spark as DECIMAL).
USE_MANIFESTS = True


def file_uri(path: str) -> str:
    """A path as Spark's Parquet source wants it (s3://, the catalog's spelling, is s3a:// to Spark)."""
    if "://" in path:
        return s3a.to_spark(path)
    return "file://" + path


def table_sql(spark: SparkSession, state: LakeState, table: TableInfo, predicate: Predicate | None = None) -> str:
    """The SELECT that yields the table's rows at the state's snapshot, for Spark SQL.

    With a predicate, files whose statistics exclude it are left out: the SELECT then yields a superset of the rows
    matching the predicate (the caller still filters).

    Raises:
        UnsupportedTypeError: a column has a type Spark cannot hold (checked before anything is read).
        MissingDataFileError: a file to read is missing or damaged (lake/read/file_checks.py).
    """
    spark_schema(table.columns)
    return plan_sql(spark, state, table, plan_scan(state, table, predicate, positions=False))


def plan_sql(spark: SparkSession, state: LakeState, table: TableInfo, plan: ScanPlan) -> str:
    """The SELECT of a scan plan's files (pruned or not) and the table's inlined rows (see `table_sql`).

    Raises:
        MissingDataFileError: a file to read is missing or damaged.
    """
    spark_schema(table.columns)
    branches = _file_branches(spark, state, table, plan, locators=False)
    inlined = _inlined_sql(state, table)
    if inlined:
        branches.append(inlined)
    if not branches:
        nulls = ", ".join(f"{literal(None, c)} AS {ident(c.name)}" for c in table.columns)
        return f"SELECT {nulls} WHERE false"
    return "\nUNION ALL\n".join(branches)


def _split(table: TableInfo, plan: ScanPlan, here: Callable[[], bool]
           ) -> tuple[list[FileScanTask], list[FileScanTask], list[FileScanTask]]:
    """The plan's files read through a manifest (local files), through a listing (files on object storage:
    spark/read/listing.py), and by the footer-based path (with their positions). A manifest lives in the data path, which
    every Spark host reaches; a listing lives on this machine's disk: only a Spark that runs here (`here()`, asked
    only for a file a listing could hold: asking starts a Spark not started yet) reads it."""
    s = plan.snapshot_id
    linked, listed, rest = [], [], []
    defaults = manifest.default_columns(table.columns)
    for t in plan.files:
        if USE_MANIFESTS and manifest.linkable(t, defaults):
            linked.append(t)
        elif USE_MANIFESTS and listing.applies(t, table, defaults) and here():
            listed.append(t)
        else:
            rest.append(t)
    rest = [t if t.deleted_positions else dataclasses.replace(t, deleted_positions=deleted_positions(t.data_file, s))
            for t in rest]
    return linked, listed, rest


def _file_branches(spark: SparkSession, state: LakeState, table: TableInfo, plan: ScanPlan,
                   locators: bool) -> list[str]:
    """SELECTs of the plan's files: manifest reads (a bounded number) and footer-based groups; with locators, each
    row's FILE, POS and RID come first.

    Every file is checked first (present, with its catalog size: a manifest's link to a missing file, or a glob's
    missing member, would be skipped by Spark without an error), and noted for spark/read/read_errors.py."""
    context = plan_context(plan)
    files = [t.data_file for t in plan.files]
    verify_scan(context, files, plan.snapshot_id)
    read_errors.note_files(table.table_id, context, plan.snapshot_id, files)
    # footers and delete files read while planning
    with reading_any(context, lambda: scan_files(files, plan.snapshot_id)):
        return _planned_branches(spark, state, table, plan, locators)


def _planned_branches(spark: SparkSession, state: LakeState, table: TableInfo, plan: ScanPlan,
                      locators: bool) -> list[str]:
    linked, listed, rest = _split(table, plan, functools.cache(lambda: runs_on_this_machine(spark)))
    out = []
    lay = None
    if linked and not locators and not plan.pruned and first_read.applies(spark, table, linked):
        # the first reader of a many-file snapshot reads through the catalog's file list while the manifest is
        # built for the statements after it (spark/read/first_read.py)
        lay = manifest.layout(state.data_path, table, linked, plan.snapshot_id)
        if not manifest.built(state.data_path, table.table_id, lay):
            out.append(first_read.table_sql(spark, table, linked, plan.snapshot_id))
            data_path, tasks, snapshot_id, layout = state.data_path, list(linked), plan.snapshot_id, lay
            first_read.build_in_background(
                f"{table.table_id}:{snapshot_id}:{len(tasks)}",
                lambda: manifest.prepare(spark, data_path, table, tasks, snapshot_id, lay=layout))
            linked = []
    if linked:
        m = manifest.prepare(spark, state.data_path, table, linked, plan.snapshot_id, encoding_of(table), lay)
        partial = any(t.max_snapshot is not None for t in linked)
        out += [_manifest_sql(name, present, enc, m.deletes, table, plan.snapshot_id, partial, locators)
                for name, present, enc in m.data]
    if listed:
        lst = listing.prepare(spark, state.data_path, table, listed, plan.snapshot_id, encoding_of(table), locators)
        partial = any(t.max_snapshot is not None for t in listed)
        out += [listing.listing_sql(lst, name, present, enc, table, plan.snapshot_id, partial, locators)
                for name, present, enc in lst.data]
    if rest:
        rest = _readable_tasks(spark, state.data_path, table, rest)
        legacy = ScanPlan(plan.table, plan.snapshot_id, tuple(rest))
        out += [group_sql(g, plan.snapshot_id, locators=locators, spark=spark)
                for g in file_groups(table.columns, legacy, keyed=locators)]
    return out


def _readable_tasks(spark: SparkSession, data_path: str, table: TableInfo, tasks: list[FileScanTask]
                    ) -> list[FileScanTask]:
    """Tasks of the footer-based path with each file Spark cannot open (GEOMETRY/VARIANT written by DuckDB) replaced
    by its readable copy (same rows, positions and field ids): spark/read/readable.py for local files,
    spark/read/remote_readable.py (made by Spark) for remote ones."""
    files = readable_files(spark, data_path, table, [t.data_file for t in tasks])
    return [t if files[i] is t.data_file else dataclasses.replace(t, data_file=files[i]) for i, t in enumerate(tasks)]


def readable_files(spark: SparkSession, data_path: str, table: TableInfo, files: Sequence[DataFile]) -> list[DataFile]:
    """The data files as the footer-based path reads them: each itself, or where Spark cannot open it (GEOMETRY /
    VARIANT written by DuckDB) its readable copy, local (made here) or remote (made by Spark, one job for all)."""
    if not any(c.type in UNOPENABLE for top in table.columns for c in top.walk()):
        return list(files)
    out = list(files)
    local: dict[int, Encoding] = {}
    remote: list[int] = []
    for i, f in enumerate(files):
        enc = file_encoding(physical_schema(f.path, f.file_size_bytes), table.columns)
        if unopenable(enc, table.columns) is None:
            continue
        if paths.is_local(f.path):
            local[i] = enc
        else:
            remote.append(i)
    if local:  # one call: the missing copies are made in parallel (and noted for spark/read/read_errors.py)
        targets = manifest.link_targets(manifest.table_root(data_path, table.table_id), table,
                                        [(files[i].path, files[i].file_size_bytes, e) for i, e in local.items()])
        for i in local:
            target = targets[files[i].path]
            out[i] = dataclasses.replace(files[i], path=target, file_size_bytes=os.path.getsize(target))
    if remote:
        wanted = list(dict.fromkeys((files[i].path, files[i].file_size_bytes) for i in remote))
        made = remote_readable.ensure_copies(
            spark, remote_root(data_path, table.table_id),
            [(p, s, physical_schema(p, s)) for p, s in wanted], table.columns)
        for i in remote:
            path, size = made[files[i].path]
            read_errors.note_copy(remote_readable.copy_key(files[i].path, files[i].file_size_bytes), files[i].path)
            out[i] = dataclasses.replace(files[i], path=path, file_size_bytes=size)
    return out


def remote_root(data_path: str, table_id: int) -> str:
    """The URI of a table's folder of remote readable copies (next to its local manifests' folder)."""
    return join_path(file_uri(data_path), f"{SPARK_MANIFESTS}/t{table_id}")


def footer_relation(spark: SparkSession | None, source: str, schema: pa.Schema) -> str:
    """What Spark SQL reads a Parquet source (a file or a dir/{a,b} glob of one layout) of the footer-based path as: a
    catalog table with an explicit schema of the file's fields as they are read (type_readings.file_reading_schema),
    so Spark never infers one (it rejects UUID, TIME, TIMESTAMP(NANOS) and INTERVAL fields even when not selected).
    Without a session (SQL built for another process), `parquet.<source>` with Spark's inferred schema."""
    if spark is None:
        return f"parquet.{ident(source)}"
    return manifest.spark_table(spark, source, file_reading_schema(schema), recursive=False)


def encoding_of(table: TableInfo) -> Callable[[FileScanTask], Encoding]:
    """How a file of the table stores its VARYING columns (from its footer; () when the table has none)."""
    if not varying(table.columns):
        return lambda t: ()
    return lambda t: file_encoding(physical_schema(t.data_file.path, t.data_file.file_size_bytes), table.columns)


def _manifest_sql(name: str, present: frozenset[int], encoding: Encoding, deletes: str | None, table: TableInfo,
                  snapshot_id: int, partial: bool, locators: bool) -> str:
    cols = manifest.columns_sql(table, present, encoding)
    inner = "SELECT *"
    if deletes is not None or locators:
        # only then: Spark does not prune an unused _metadata struct, and reading row indexes slows the scan (a
        # plain 10M-row scan took 1.20 s with them, 1.08 s without)
        inner += f", _metadata.row_index AS {POS}"
    if locators:
        inner += f", {manifest.file_id_sql()} AS {FILE}"
    if deletes is not None:  # deleted rows are found by their file's link name (manifest.LINK)
        inner += f", _metadata.file_name AS {manifest.LINK}"
    if locators:
        inner += f", {manifest.row_id_start_sql()} AS __ducklake_start"
        cols = [f"x.{FILE}", f"x.{POS}",
                f"CAST(coalesce(x.{ident(ROW_ID_COLUMN)}, x.__ducklake_start + x.{POS}) AS BIGINT) AS {RID}", *cols]
    snap = ident(SNAPSHOT_COLUMN)
    sql = f"FROM ({inner} FROM {name}) x"
    if deletes is not None:
        dels = f"SELECT {manifest.LINK} AS f, pos AS p FROM {deletes} WHERE {snap} <= {snapshot_id}"
        sql = f"/*+ BROADCAST({_DEL}) */ {', '.join(cols)} {sql} LEFT ANTI JOIN ({dels}) {_DEL} " \
              f"ON {_DEL}.f = x.{manifest.LINK} AND {_DEL}.p = x.{POS}"
    else:
        sql = f"{', '.join(cols)} {sql}"
    if partial:  # rows a partial file holds beyond the snapshot
        sql += f" WHERE x.{snap} IS NULL OR x.{snap} <= {snapshot_id}"
    return f"SELECT {sql}"


def target_rows_sql(spark: SparkSession, state: LakeState, table: TableInfo, plan: ScanPlan) -> list[str]:
    """SELECTs of the plan's file rows with their LOCATORS first (FILE, POS, RID), for DML."""
    spark_schema(table.columns)
    return _file_branches(spark, state, table, plan, locators=True)


# Deleted rows are removed by a broadcast anti join on one BIGINT key per row: the row's position, and in a source of
# several files the file's size (`_metadata.file_size`, which is the catalog's file_size_bytes, as DuckDB relies on
# too; sources are split so that sizes are unique in each) shifted above the position bits. Up to
# MAX_LITERAL_DELETES keys per source are literals in the view's SQL; beyond that they are read by Spark from the
# delete files themselves, so the SQL (parsed and analyzed on every query of the view) stays small.
MAX_LITERAL_DELETES = 1000
KEY = "__ducklake_key"  # the row's key in its source (see above)
_DEL = "__ducklake_deleted"  # the relation alias of the deleted keys


@dataclass(frozen=True)
class FileGroup:
    """Data files read by one Parquet source (`dir/{a,b}`): same column mapping, physical types, snapshot bound and
    directory. A group that needs row keys (deletes, or file ids for DML) also has files of distinct sizes."""

    proj: tuple[str, ...]
    physical: pa.Schema
    max_snapshot: int | None
    tasks: tuple[FileScanTask, ...]

    @property
    def source(self) -> str:
        return _source([t.data_file.path for t in self.tasks])

    @property
    def shift(self) -> int:
        """Bits of the position in a row key; 0: one file, the key is the position."""
        if len(self.tasks) == 1:
            return 0
        return max(1, max(t.data_file.record_count for t in self.tasks).bit_length())

    def key(self, task: FileScanTask, pos: int) -> int:
        return (task.data_file.file_size_bytes << self.shift) + pos if self.shift else pos

    @property
    def key_sql(self) -> str:
        if not self.shift:
            return "_metadata.row_index"
        return f"_metadata.file_size * {1 << self.shift} + _metadata.row_index"


def file_groups(columns: Sequence[Column], plan: ScanPlan, keyed: bool = False) -> list[FileGroup]:
    """The plan's files in groups Spark reads with one Parquet source each (one schema check per group and query).

    keyed: every group must tell its files apart by size (see KEY); otherwise only groups with deletes must.
    """
    groups: dict[tuple[tuple[str, ...], str, int | None, str], list[FileScanTask]] = {}
    physical: dict[tuple[tuple[str, ...], str, int | None, str], pa.Schema] = {}
    for task in plan.files:
        f = task.data_file
        schema = physical_schema(f.path, f.file_size_bytes)
        key = (projection(columns, task), str(schema.remove_metadata()), task.max_snapshot, f.path.rpartition("/")[0])
        groups.setdefault(key, []).append(task)
        physical.setdefault(key, schema)
    out = []
    for key, tasks in groups.items():
        needs_keys = keyed or any(t.deleted_positions for t in tasks)
        for part in (_distinct_sizes(tasks) if needs_keys else [tasks]):
            out.append(FileGroup(key[0], physical[key], key[2], tuple(part)))
    return out


def _source(paths: Sequence[str]) -> str:
    """The path of a Parquet source reading these files of one directory."""
    uris = [file_uri(p) for p in paths]
    if len(uris) == 1:
        return uris[0]
    directory = uris[0].rpartition("/")[0]  # Hadoop globs alternate within one directory: dir/{a,b}
    return directory + "/{" + ",".join(u.rpartition("/")[2] for u in uris) + "}"


def _distinct_sizes(tasks: list[FileScanTask]) -> list[list[FileScanTask]]:
    """Tasks split so that no two files of a part have the same size, and a part's keys fit in a BIGINT."""
    out = []
    for part in distinct_parts(tasks, lambda t: t.data_file.file_size_bytes):
        bits = max(t.data_file.file_size_bytes for t in part).bit_length() + \
            max(1, max(t.data_file.record_count for t in part).bit_length())
        out += [part] if bits <= 62 else [[t] for t in part]  # a key that would overflow: one file per source
    return out


# Where a row of a DML target is: its data file id (-1: inlined), position, and row id.
LOCATORS = (FILE, POS, RID)


def group_sql(g: FileGroup, snapshot_id: int, locators: bool = False, spark: SparkSession | None = None) -> str:
    """One group's live rows: the table's columns, and with locators also the LOCATORS in front."""
    where = [f"{ident(SNAPSHOT_COLUMN)} <= {g.max_snapshot}"] if g.max_snapshot is not None else []
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    deleted = _deleted_keys_sql(g, snapshot_id)
    source = footer_relation(spark, g.source, g.physical)
    if deleted is None and not locators:
        return f"SELECT {', '.join(g.proj)} FROM {source}{clause}"
    cols = list(g.proj)
    joins = ""
    if deleted is not None:
        joins = f" LEFT ANTI JOIN ({deleted}) {_DEL} ON {_DEL}.__ducklake_k = x.{KEY}"
    if locators:
        # the file (within its group, files have distinct sizes); files DuckDB rewrote keep their rows' ids in a
        # column, other files' row ids are row_id_start + position
        fid = " ".join(f"WHEN {t.data_file.file_size_bytes} THEN {t.data_file.data_file_id}" for t in g.tasks)
        start = " ".join(f"WHEN {t.data_file.file_size_bytes} THEN {t.data_file.row_id_start or 0}" for t in g.tasks)
        own = f"x.{ident(ROW_ID_COLUMN)}" if ROW_ID_COLUMN in g.physical.names else "NULL"
        cols = [f"CAST(CASE x.__ducklake_size {fid} END AS BIGINT) AS {FILE}", f"CAST(x.{POS} AS BIGINT) AS {POS}",
                f"CAST(coalesce({own}, CASE x.__ducklake_size {start} END + x.{POS}) AS BIGINT) AS {RID}", *cols]
    hint = f"/*+ BROADCAST({_DEL}) */ " if deleted is not None else ""
    return (f"SELECT {hint}{', '.join(cols)} FROM (SELECT *, _metadata.row_index AS {POS}, _metadata.file_size AS "
            f"__ducklake_size, {g.key_sql} AS {KEY} FROM {source}) x{joins}{clause}")


def _deleted_keys_sql(g: FileGroup, snapshot_id: int) -> str | None:
    """The keys (column k) of the group's deleted rows, or None when no row is deleted."""
    total = sum(len(t.deleted_positions) for t in g.tasks)
    if not total:
        return None
    literals: list[int] = []
    from_files: dict[tuple[str, str], list[FileScanTask]] = {}
    for t in g.tasks:
        d = t.data_file.delete_file
        if not t.deleted_positions:
            continue
        if total <= MAX_LITERAL_DELETES or d is None or d.format != "parquet":  # Spark reads no deletion vector
            literals += [g.key(t, p) for p in t.deleted_positions]
            continue
        # the delete file's positions (those deleted by snapshot_id) are read by Spark; inlined deletes are literals
        literals += [g.key(t, p) for p, begin in t.data_file.inlined_deletes if begin <= snapshot_id]
        if d.begin_snapshot <= snapshot_id:
            schema = physical_schema(d.path, d.file_size_bytes)
            from_files.setdefault((d.path.rpartition("/")[0], str(schema.remove_metadata())), []).append(t)
    parts = []
    for tasks in from_files.values():
        parts.append(_delete_files_sql(g, tasks, snapshot_id))
    if literals:
        values = ", ".join(f"({k})" for k in literals)
        parts.append(f"SELECT CAST(__ducklake_k AS BIGINT) AS __ducklake_k FROM VALUES {values} AS v(__ducklake_k)")
    return " UNION ALL ".join(parts)


def _delete_files_sql(g: FileGroup, tasks: list[FileScanTask], snapshot_id: int) -> str:
    """Keys of the positions in delete files of one layout and directory (read by position, as the reference does:
    file_path, pos[, snapshot]); positions deleted after snapshot_id (partial delete files) are left out."""
    files = [t.data_file.delete_file for t in tasks]
    schema = physical_schema(files[0].path, files[0].file_size_bytes)  # type: ignore[union-attr]
    pos = ident(schema.names[1])
    where = f" WHERE d.{ident(schema.names[2])} <= {snapshot_id}" if len(schema.names) >= 3 else ""
    glob = _source([d.path for d in files])  # type: ignore[union-attr]
    if len(tasks) == 1:
        return (f"SELECT CAST({g.key(tasks[0], 0)} + d.{pos} AS BIGINT) AS __ducklake_k FROM parquet.{ident(glob)} "
                f"d{where}")
    bases = ", ".join(f"({string_literal(d.path.rpartition('/')[2])}, {g.key(t, 0)})"  # type: ignore[union-attr]
                      for d, t in zip(files, tasks, strict=True))
    return (f"SELECT CAST(m.base + d.{pos} AS BIGINT) AS __ducklake_k FROM (SELECT *, _metadata.file_name AS "
            f"__ducklake_name FROM parquet.{ident(glob)}) d JOIN (SELECT * FROM VALUES {bases} AS v(name, base)) m "
            f"ON m.name = d.__ducklake_name{where}")


def _inlined_sql(state: LakeState, table: TableInfo) -> str | None:
    parts = read_inlined(state, table, with_rowid=False)
    rows = [r for t in parts for r in t.to_pylist()]
    if not rows:
        return None
    names = ", ".join(ident(c.name) for c in table.columns)
    values = ", ".join("(" + ", ".join(literal(r[c.name], c) for c in table.columns) + ")" for r in rows)
    return f"SELECT * FROM VALUES {values} AS inlined({names})"


def register_table(spark: SparkSession, state: LakeState, table: TableInfo, *, database: str | None = None,
                   view: str | None = None) -> str:
    """Create or replace the view database.view (default schema.table) over the table at the state's snapshot."""
    database = database or table.schema_name
    view = view or table.name
    ensure_database(spark, database)
    name = f"{ident(database)}.{ident(view)}"
    create_view(spark, name, table_sql(spark, state, table), f"{table.schema_name}.{table.name}", state.snapshot_id)
    return name


_log = logging.getLogger(__name__)
_ERROR_CHARS = 300  # of Spark's message shown; its parse errors quote the whole (possibly huge) view SQL


def create_view(spark: SparkSession, name: str, sql: str, table: str, snapshot_id: int, *,
                temporary: bool = False, typed: Callable[[DataFrame], DataFrame] | None = None) -> None:
    """CREATE OR REPLACE VIEW name AS sql (temporary: a temporary view holding the analysed plan of sql, through
    `typed` if given); a failure names the lake table and snapshot, not the generated SQL.

    The full SQL and Spark's full message go to the debug log only.
    """
    try:
        if temporary:
            df = spark.sql(sql)
            (typed(df) if typed is not None else df).createOrReplaceTempView(name)
        else:
            spark.sql(f"CREATE OR REPLACE VIEW {name} AS {sql}")
    except Exception as e:  # noqa: BLE001 - Spark parse errors (and JVM StackOverflowError) come in many classes
        text = str(e).strip()
        _log.debug("Spark could not register %s at snapshot %s:\n%s\n%s", table, snapshot_id, sql, text)
        first = text.splitlines()[0] if text else type(e).__name__
        if len(first) > _ERROR_CHARS:
            first = first[:_ERROR_CHARS] + " ..."
        raise DuckLakeError(f"Spark could not register lake table {table} at snapshot {snapshot_id} "
                            f"({len(sql)} characters of view SQL, shown at debug level): {first}") from None


def read_table(spark: SparkSession, state: LakeState, table: TableInfo, where: str | None = None) -> DataFrame:
    """The table's rows at the state's snapshot WHERE a Spark SQL condition, as a DataFrame.

    Files whose column statistics exclude the condition are not read (Spark's Parquet reader then skips row groups
    by their own statistics). Columns are referenced unqualified or as t.<column>.
    """
    from .predicates import to_predicate

    sql = table_sql(spark, state, table, to_predicate(where, table.columns, (None, "t")))
    return spark.sql(f"SELECT * FROM ({sql}) t" + (f" WHERE ({where})" if where else ""))


def register_lake(spark: SparkSession, state: LakeState) -> list[str]:
    """Views for every table of the lake at the state's snapshot; views of dropped tables are removed."""
    names = [register_table(spark, state, t) for t in state.tables.values()]
    return names


def time_travel_name(table: TableInfo, snapshot_id: int) -> str:
    """The view name a table gets for one snapshot: <table>__at_<snapshot>."""
    return f"{table.name}__at_{snapshot_id}"


def is_time_travel_name(name: str) -> bool:
    """A name `time_travel_name` makes (a lake table's view at one snapshot, never stale: a snapshot is immutable)."""
    return re.search(r"__at_\d+$", name) is not None


def register_at(spark: SparkSession, state: LakeState, table: TableInfo) -> str:
    """A view of the table at the state's snapshot, under schema.<table>__at_<snapshot>."""
    return register_table(spark, state, table, view=time_travel_name(table, state.snapshot_id))
