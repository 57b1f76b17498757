"""Lake maintenance with the reference's semantics: expire snapshots, clean up old files, delete orphaned files.

Like DuckDB's ducklake_expire_snapshots / ducklake_cleanup_old_files / ducklake_delete_orphaned_files these change
catalog rows directly and commit no snapshot. Compaction (merge_adjacent_files, flush_inlined_data in compaction.py,
rewrite_data_files in rewrite.py), which does commit a snapshot, is re-exported here.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from ..catalog.database import CatalogDB
from ..catalog.state import id_list, list_snapshots
from ..errors import DuckLakeError, InvalidOptionError
from ..option_values import interval_before
from ..paths import by_file_io, file_io, join_path, to_local
from ..records import Snapshot
from ..write import file_rows
from .compaction import flush_inlined_data, merge_adjacent_files
from .rewrite import rewrite_data_files

if TYPE_CHECKING:
    from .maintained_lake import MaintainedLake

__all__ = ["cleanup_old_files", "delete_orphaned_files", "expire_snapshots", "flush_inlined_data",
           "merge_adjacent_files", "rewrite_data_files"]

DEFAULT_DELETE_OLDER_THAN = "2 days"  # the reference's default of the delete_older_than option
# a row that no remaining snapshot can see: [begin, end) holds none of them
_UNSEEN = ("end_snapshot IS NOT NULL AND NOT EXISTS (SELECT snapshot_id FROM {p}ducklake_snapshot "
           "WHERE snapshot_id >= begin_snapshot AND snapshot_id < end_snapshot)")
# catalog tables purged by table id once a dropped table is invisible to every remaining snapshot
_TABLE_ROWS = ("ducklake_table", "ducklake_table_stats", "ducklake_table_column_stats", "ducklake_partition_info",
               "ducklake_partition_column", "ducklake_column", "ducklake_column_tag", "ducklake_sort_info",
               "ducklake_sort_expression", "ducklake_schema_versions", "ducklake_inlined_data_tables",
               "ducklake_column_mapping")


def _aware(ts: dt.datetime) -> dt.datetime:
    return ts.replace(tzinfo=dt.timezone.utc) if ts.tzinfo is None else ts


def expire_snapshots(
    lake: MaintainedLake,
    versions: Sequence[int] | None = None,
    older_than: dt.datetime | None = None,
    dry_run: bool = False,
) -> list[Snapshot]:
    """Expire snapshots (by id, or those committed before older_than) as ducklake_expire_snapshots does.

    Like the reference, ids that do not exist and the latest snapshot (never expired) are skipped silently: the
    returned list holds what was (or, with dry_run, would be) expired. File rows no remaining snapshot sees move to
    ducklake_files_scheduled_for_deletion (cleanup_old_files deletes the files); dropped tables are purged.
    Without versions or older_than the lake's expire_older_than option applies, and without it nothing happens.

    Raises:
        ValueError: both criteria given, an empty or negative versions list (the reference errors on those too).
    """
    if versions is not None and older_than is not None:
        raise InvalidOptionError("expire_snapshots: give versions or older_than, not both")
    if versions is not None:
        wanted = {int(v) for v in versions}
        if not wanted:
            raise InvalidOptionError("expire_snapshots: versions is an empty list; give at least one snapshot id")
        if min(wanted) < 0:
            raise InvalidOptionError(f"expire_snapshots: snapshot ids are not negative, got {sorted(v for v in wanted if v < 0)}")
    if versions is None and older_than is None:
        default = lake.option("expire_older_than")
        if not default:
            return []
        older_than = interval_before(dt.datetime.now(dt.timezone.utc), default)
    db = lake.db
    with db.write() as conn:
        snaps = list_snapshots(db, conn)
        latest = snaps[-1].snapshot_id
        if versions is not None:
            chosen = [s for s in snaps if s.snapshot_id in wanted and s.snapshot_id != latest]
        else:
            assert older_than is not None
            cutoff = _aware(older_than)
            chosen = [s for s in snaps if s.snapshot_id != latest and s.snapshot_time < cutoff]
        if chosen and not dry_run:
            _delete_snapshots(db, conn, lake.data_path, [s.snapshot_id for s in chosen])
    return chosen


def _delete_snapshots(db: CatalogDB, conn: Connection, data_path: str, ids: list[int]) -> None:
    """The reference's DeleteSnapshots, statement for statement (ids are integers we formatted ourselves)."""
    q = lambda sql, p=None: db.query(conn, sql, p)  # noqa: E731
    run = lambda sql, p=None: db.execute(conn, sql, p)  # noqa: E731
    for t in ("ducklake_snapshot", "ducklake_snapshot_changes"):
        run(f"DELETE FROM {{p}}{t} WHERE snapshot_id IN ({id_list(ids)})")
    dropped = [r[0] for r in q(
        f"SELECT DISTINCT table_id FROM {{p}}ducklake_table t WHERE {_UNSEEN} AND NOT EXISTS (SELECT 1 FROM "
        "{p}ducklake_table t2 WHERE t2.table_id = t.table_id AND (t2.end_snapshot IS NULL OR EXISTS (SELECT "
        "snapshot_id FROM {p}ducklake_snapshot WHERE snapshot_id >= t2.begin_snapshot "
        "AND snapshot_id < t2.end_snapshot)))"
    )]
    table_filter = f"table_id IN ({id_list(dropped)}) OR " if dropped else ""
    now = dt.datetime.now(dt.timezone.utc)
    files = q(f"SELECT data_file_id, table_id, path, path_is_relative FROM {{p}}ducklake_data_file "
              f"WHERE {table_filter}({_UNSEEN})")
    if files:
        fids = id_list(f[0] for f in files)
        for t in ("ducklake_data_file", "ducklake_file_column_stats", "ducklake_file_variant_stats",
                  "ducklake_file_partition_value"):
            run(f"DELETE FROM {{p}}{t} WHERE data_file_id IN ({fids})")
        _schedule(db, conn, data_path, files, now)
    file_filter = f"data_file_id IN ({id_list(f[0] for f in files)}) OR " if files else ""
    deletes = q(f"SELECT delete_file_id, table_id, path, path_is_relative FROM {{p}}ducklake_delete_file "
                f"WHERE {table_filter}{file_filter}({_UNSEEN})")
    if deletes:
        run(f"DELETE FROM {{p}}ducklake_delete_file WHERE delete_file_id IN ({id_list(d[0] for d in deletes)})")
        _schedule(db, conn, data_path, deletes, now)
    if dropped:
        tids = id_list(dropped)
        inlined = [r[0] for r in q(f"SELECT table_name FROM {{p}}ducklake_inlined_data_tables WHERE table_id IN ({tids})")]
        inlined += [f"ducklake_inlined_delete_{t}" for t in dropped]
        for t in _TABLE_ROWS:
            run(f"DELETE FROM {{p}}{t} WHERE table_id IN ({tids})")
        for name in inlined:
            if db.has_table(conn, name):
                run(f"DROP TABLE {{p}}{name}")
    versioned = ["ducklake_schema", "ducklake_view", "ducklake_tag", "ducklake_macro"]
    if db.spec.view_column_tags:  # DuckLake 1.1: tag versions no retained snapshot sees go, as the spec says
        versioned.append("ducklake_view_column_tag")
    for t in versioned:
        run(f"DELETE FROM {{p}}{t} WHERE {_UNSEEN}")
    for t in ("ducklake_macro_impl", "ducklake_macro_parameters"):
        run(f"DELETE FROM {{p}}{t} WHERE NOT EXISTS (SELECT 1 FROM {{p}}ducklake_macro m "
            f"WHERE m.macro_id = {{p}}{t}.macro_id)")
    run("DELETE FROM {p}ducklake_name_mapping WHERE NOT EXISTS (SELECT 1 FROM {p}ducklake_column_mapping m "
        "WHERE m.mapping_id = {p}ducklake_name_mapping.mapping_id)")


def _schedule(db: CatalogDB, conn: Connection, data_path: str, rows: list[Any], now: dt.datetime) -> None:
    """Schedule files (id, table id, stored path, relative) for deletion, paths relative to data_path if inside."""
    dirs = _table_dirs(db, conn, data_path)
    files = [(fid, join_path(dirs.get(tid, data_path), path) if db.dialect.read_bool(rel) is not False else path)
             for fid, tid, path, rel in rows]
    if files:
        db.execute(conn, *file_rows.scheduled_for_deletion(db.dialect, files, data_path, now))


def _table_dirs(db: CatalogDB, conn: Connection, data_path: str) -> dict[int, str]:
    """Every table id's directory, from any version of its rows (a file's table may have been dropped)."""
    rd = db.dialect.read_bool
    out: dict[int, str] = {}
    for tid, tpath, trel, spath, srel in db.query(
        conn, "SELECT t.table_id, t.path, t.path_is_relative, s.path, s.path_is_relative FROM {p}ducklake_table t "
              "JOIN {p}ducklake_schema s ON s.schema_id = t.schema_id"
    ):
        base = join_path(data_path, spath or "") if rd(srel) is not False else spath
        out[tid] = join_path(base, tpath or "") if rd(trel) is not False else tpath
    return out


def _cutoff(lake: MaintainedLake, older_than: dt.datetime | None, cleanup_all: bool, what: str) -> dt.datetime | None:
    if cleanup_all and older_than is not None:
        raise InvalidOptionError(f"{what}: give all=True or older_than, not both")
    if cleanup_all:
        return None
    if older_than is not None:
        return _aware(older_than)
    default = lake.option("delete_older_than") or DEFAULT_DELETE_OLDER_THAN
    return interval_before(dt.datetime.now(dt.timezone.utc), default)


def cleanup_old_files(
    lake: MaintainedLake, older_than: dt.datetime | None = None, all: bool = False, dry_run: bool = False
) -> list[str]:
    """Delete the files scheduled for deletion before older_than (default: the delete_older_than option, else
    2 days ago), or all of them, and their rows, as ducklake_cleanup_old_files does. Returns their paths.

    Raises:
        ValueError: both all and older_than given.
    """
    cutoff = _cutoff(lake, older_than, all, "cleanup_old_files")
    db = lake.db
    with db.write() as conn:
        rows = db.query(conn, "SELECT data_file_id, path, path_is_relative, schedule_start "
                              "FROM {p}ducklake_files_scheduled_for_deletion")
        chosen = [(fid, join_path(lake.data_path, path) if db.dialect.read_bool(rel) is not False else path)
                  for fid, path, rel, start in rows
                  if cutoff is None or db.dialect.read_timestamp(start) < cutoff]
        if chosen and not dry_run:
            for fio, group in by_file_io(p for _, p in chosen):
                fio.delete_many(group)  # one request per 1,000 files on S3
            db.execute(conn, f"DELETE FROM {{p}}ducklake_files_scheduled_for_deletion "
                             f"WHERE data_file_id IN ({id_list(f for f, _ in chosen)})")
    if chosen and not dry_run:
        lake.files_deleted([p for _, p in chosen])
    return [p for _, p in chosen]


class ForeignFilesError(DuckLakeError):
    """Orphan deletion found files that look like another lake's: it deletes nothing unless forced."""


# what the Spark writer leaves when its process dies mid-write: its staging directory (part files, .crc, _SUCCESS,
# _temporary) inside a table directory; and the Spark layer's manifests of symlinks (not data)
STAGING_PREFIX = "ducklake-write-"
SPARK_MANIFESTS = "_ducklake_spark"


def delete_orphaned_files(
    lake: MaintainedLake, older_than: dt.datetime | None = None, all: bool = False, dry_run: bool = False,
    force: bool = False,
) -> list[str]:
    """Delete Parquet files under the data path that no catalog row references (data, delete or scheduled files),
    last modified before older_than (default as cleanup_old_files), as ducklake_delete_orphaned_files does; and the
    staging directories a killed Spark writer left in table directories (with their .crc, _SUCCESS and _temporary).

    Files outside every directory this lake ever gave a table look like another lake's (say, a second catalog
    pointed at the same data path): then nothing is deleted unless force=True.

    Raises:
        ValueError: both all and older_than given.
        ForeignFilesError: files that look like another lake's were found (nothing was deleted).
    """
    cutoff = _cutoff(lake, older_than, all, "delete_orphaned_files")
    db = lake.db
    fio = file_io(lake.data_path)
    # one spelling for listed and catalogued paths: normalised local paths, or s3:// URIs
    local = "://" not in lake.data_path or lake.data_path.startswith("file://")

    def norm(path: str) -> str:
        if local:
            return os.path.normpath(to_local(path))
        return "s3://" + path[len("s3a://"):] if path.startswith("s3a://") else path.rstrip("/")

    root = norm(lake.data_path)
    with db.read() as conn:
        known = {norm(p) for p in _known_files(db, conn, lake.data_path)}
        table_dirs = {norm(d) for d in _table_dirs(db, conn, lake.data_path).values()}

    def in_table_dir(path: str) -> bool:
        return any(path == d or path.startswith(d + "/") for d in table_dirs)

    found: list[str] = []
    foreign: list[str] = []
    staging: dict[str, dt.datetime] = {}  # a killed writer's staging directory -> its newest file's time
    for info in fio.list(lake.data_path):  # one recursive listing (S3: no directories to walk)
        path = norm(info.path)
        parts = path[len(root) + 1:].split("/")
        if parts[0] == SPARK_MANIFESTS:
            continue
        at = next((i for i, part in enumerate(parts[:-1]) if part.startswith(STAGING_PREFIX)), None)
        if at is not None:
            directory = "/".join([root, *parts[:at + 1]])
            if in_table_dir(directory):
                staging[directory] = max(staging.get(directory, info.modified), info.modified)
                continue
        if not path.endswith(".parquet") or path in known or not (cutoff is None or info.modified < cutoff):
            continue
        (found if in_table_dir(path) else foreign).append(path)
    old_staging = [d for d, modified in staging.items() if cutoff is None or modified < cutoff]
    if foreign and not force:
        shown = ", ".join(sorted(foreign)[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise ForeignFilesError(
            f"{len(foreign)} unreferenced Parquet files lie outside every table directory of this lake ({shown}): "
            "they look like another lake's files (is another catalog using this data path?). Nothing was deleted; "
            "check the catalog and data_path, or force the deletion")
    found += foreign
    if not dry_run:
        fio.delete_many(found)
        for path in old_staging:
            fio.delete_dir(path)
        lake.files_deleted(found)  # unreferenced, so no state lists them; said all the same (one rule for deletions)
    return sorted(found) + sorted(old_staging)


def _known_files(db: CatalogDB, conn: Connection, data_path: str) -> list[str]:
    dirs = _table_dirs(db, conn, data_path)
    rd = db.dialect.read_bool
    out = []
    for t in ("ducklake_data_file", "ducklake_delete_file"):
        for tid, path, rel in db.query(conn, f"SELECT table_id, path, path_is_relative FROM {{p}}{t}"):
            out.append(join_path(dirs.get(tid, data_path), path) if rd(rel) is not False else path)
    for path, rel in db.query(conn, "SELECT path, path_is_relative FROM {p}ducklake_files_scheduled_for_deletion"):
        out.append(join_path(data_path, path) if rd(rel) is not False else path)
    return out
