"""Table clones: a new table whose files are hard links of another table's files at a snapshot (metadata-only).

Why hard links and not shared paths: DuckDB's ducklake_cleanup_old_files deletes every path that expiring the source's
snapshots scheduled, so a clone whose catalog rows named the source's paths would lose its files. A hard link in the
clone's own directory is another name for the same bytes: deleting the source's name leaves it readable, and no data
is written. Where a link is impossible (another file system, a file system or policy that refuses links) the bytes
are copied instead; either way the clone keeps the source's column ids, row ids, statistics and partitioning.

What a clone holds, as of the source snapshot S:
- each live data file, linked, with its row_id_start, record count and stats (files may carry explicit row ids);
- the positions deleted at S (delete file, inlined deletes, and rows of a partial file added after S) in one delete
  file per data file: the source's delete file linked when it is exactly that, else a new one. DuckDB reads delete
  files by position (their file_path column is not matched), so a linked delete file needs no rewrite;
- the source's inlined rows visible at S, written as Parquet files that keep their row ids;
- the comment, tags and column tags, and the ids of dropped columns above the live ones (as never-visible column
  rows), so a column added to the clone later never takes an id that a linked file still holds data under.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..catalog.state import LakeState
from ..errors import DuckLakeError, InvalidOptionError, TransactionOrderError
from ..paths import data_file_name, delete_file_name, join_path, relative_to, to_local
from ..read.deletes import SNAPSHOT_COLUMN, DeletePositions, read_delete_file, write_delete_file
from ..read.file_checks import reading_any, scan_files, table_context, verify_scan
from ..read.inlined import read_inlined
from ..read.scan import deleted_positions
from ..records import ColumnStats, DataFile, TableInfo
from ..storage import file_io, is_object_store, parquet_source
from . import catalog_rows, file_rows
from .builder import CatalogBuilder
from .operations import Operation, bound_table
from .writer import write_data_files

if TYPE_CHECKING:
    from .lake_handle import LakeHandle

logger = logging.getLogger(__name__)

HARD_LINK = "hard_link"
FILE_COPY = "file_copy"
# errors of os.link that mean "this file system or policy gives no hard links here": copy the bytes instead
_NO_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EACCES}


class CloneUnsupportedError(DuckLakeError):
    """The table cannot be cloned file by file here (e.g. its files are on remote storage): copy its rows instead."""


@dataclass(frozen=True)
class ClonedDelete:
    """The deletes a cloned data file carries: the source's delete file linked as is, or positions to write."""

    link_from: str | None  # the source delete file, when it holds exactly the positions deleted at S (no snapshots)
    positions: tuple[int, ...]
    file_size_bytes: int = 0
    footer_size: int | None = None


@dataclass(frozen=True)
class ClonedFile:
    source: DataFile
    subdir: str  # under the clone's directory: the source file's partition directories ('' if none)
    mapping: tuple[tuple[str, int, int | None, bool], ...] | None  # the source's name mapping, if the file has one
    deletes: ClonedDelete | None


@dataclass
class CloneData(Operation):
    """Files, deletes, inlined rows, tags and retired column ids of a table created in the same transaction."""

    schema: str
    table: str
    source: TableInfo  # at the source snapshot
    source_snapshot: int
    files: tuple[ClonedFile, ...]
    inlined: pa.Table | None  # the source's inlined rows at S, with their rowid
    next_row_id: int
    retired_columns: tuple[tuple[Any, ...], ...]  # ducklake_column rows of dropped ids above the live ones
    mode: str = HARD_LINK
    linked: int = field(default=0, init=False)  # what the last commit attempt did, for the caller's log
    copied: int = field(default=0, init=False)

    def apply(self, b: CatalogBuilder) -> None:
        info = bound_table(b, self, self.table)
        if info.table_id not in b.created_table_ids:
            raise TransactionOrderError(f"{self.schema}.{self.table}: a clone is written into a table created in the same "
                                        "transaction")
        table_dir = b.table_path(info)
        self.linked = self.copied = 0
        delta = b.stats_delta(info.table_id)
        leaves = {c.column_id for top in info.columns for c in top.leaves()}
        pid = info.partition.partition_id if info.partition else None
        for f in self.files:
            directory = join_path(table_dir, f.subdir) if f.subdir else table_dir
            path = join_path(directory, data_file_name())
            self._place(f.source.path, path, b)
            fid = _insert_file(b, info, table_dir, path, f.source, pid, f.mapping)
            _count(delta, f.source.record_count, f.source.file_size_bytes, f.source.stats, leaves)
            if f.deletes is not None:
                dpath = join_path(directory, delete_file_name())
                if f.deletes.link_from is not None:
                    self._place(f.deletes.link_from, dpath, b)
                    size, footer = f.deletes.file_size_bytes, f.deletes.footer_size
                else:
                    size, footer = write_delete_file(dpath, path, DeletePositions(f.deletes.positions, ()),
                                                     with_snapshots=False)
                    b.written_files.append(dpath)
                _insert_delete(b, info, table_dir, fid, dpath, len(f.deletes.positions), size, footer)
        if self.inlined is not None and self.inlined.num_rows:
            rowids = self.inlined.column("rowid")
            for spec in write_data_files(self.source, table_dir, self.inlined.drop_columns(["rowid"]), row_ids=rowids):
                b.written_files.append(spec.path)
                with parquet_source(spec.path) as pfile:
                    ids = pq.read_table(pfile, columns=["_ducklake_internal_row_id"]).column(0)
                first = pc.min(ids).as_py()
                row = DataFile(0, info.table_id, spec.path, "", True, spec.record_count, spec.file_size_bytes,
                               spec.footer_size, first, b.snapshot_id, partition_values=spec.partition_values,
                               stats=spec.stats)
                _insert_file(b, info, table_dir, spec.path, row, pid, None)
                _count(delta, spec.record_count, spec.file_size_bytes, spec.stats, leaves)
        delta.rows_added = max(delta.rows_added, self.next_row_id)
        if self.retired_columns:
            b.add(*catalog_rows.columns(b.db.dialect, [
                catalog_rows.ColumnRow(info.table_id, r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), r[7], r[8])
                for r in self.retired_columns], b.snapshot_id, ended=True))
        for key, value in sorted(self.source.tags.items()):
            b.set_tag(info.table_id, key, value, is_view=False)
        for cid, tags in sorted(self.source.column_tags.items()):
            for key, value in sorted(tags.items()):
                b.set_column_tag(info, cid, key, value)
        if self.files or self.inlined is not None:
            b.changes.inserted_tables.add(info.table_id)
        if self.copied:
            logger.info("clone %s.%s: %d files copied (no hard links on this file system), %d linked",
                        info.schema_name, info.name, self.copied, self.linked)

    def _place(self, source: str, target: str, b: CatalogBuilder) -> None:
        """The source file under the clone's name: a hard link, else (or in file_copy mode, or on an object store) a
        copy of its bytes."""
        if is_object_store(source) or is_object_store(target):
            try:
                file_io(target).copy(source, target)
            except FileNotFoundError as e:
                raise DuckLakeError(f"{source} of the clone's source is gone (another writer cleaned it up after "
                                    "the snapshot was read): clone again") from e
            b.written_files.append(target)
            self.copied += 1
            return
        local = to_local(target)
        os.makedirs(os.path.dirname(local), exist_ok=True)
        if self.mode == HARD_LINK:
            try:
                os.link(to_local(source), local)
                b.written_files.append(target)  # only the clone's name: removing it leaves the source's file
                self.linked += 1
                return
            except FileNotFoundError as e:
                raise DuckLakeError(f"{source} of the clone's source is gone (another writer cleaned it up after "
                                    "the snapshot was read): clone again") from e
            except OSError as e:
                if e.errno not in _NO_LINK:
                    raise
        try:
            shutil.copyfile(to_local(source), local)
        except FileNotFoundError as e:
            raise DuckLakeError(f"{source} of the clone's source is gone (another writer cleaned it up after the "
                                "snapshot was read): clone again") from e
        b.written_files.append(target)
        self.copied += 1


def _count(delta: Any, records: int, size: int, stats: tuple[ColumnStats, ...], leaves: set[int]) -> None:
    """A cloned file in the table's stats. A leaf without stats in a file that has rows (a column added after the
    file was written reads its default there) leaves the column's table-wide bounds unknown, as in AddDataFiles."""
    delta.record_count += records
    delta.file_size_bytes += size
    have = {st.column_id for st in stats}
    for st in stats:
        if st.column_id not in leaves:
            continue
        if (st.min_value is None or st.max_value is None) and (st.value_count is None or st.value_count > 0):
            delta.unknown_bounds.add(st.column_id)
        delta.file_stats.setdefault(st.column_id, []).append(st)
    if records:
        delta.unknown_bounds.update(leaves - have)


def _insert_file(b: CatalogBuilder, info: TableInfo, table_dir: str, path: str, src: DataFile, pid: int | None,
                 mapping: tuple[tuple[str, int, int | None, bool], ...] | None) -> int:
    """The clone's data file row (row ids as the source's), its column stats and partition values; its id."""
    mapping_id = None
    if mapping is not None:
        mapping_id = b.file_id()
        for statement in file_rows.name_mappings(b.db.dialect, [(mapping_id, info.table_id, mapping)]):
            b.add_rows(statement)
    fid = b.file_id()
    # partial_max stays NULL: every row of the file is visible from the clone's first snapshot on (rows added after
    # the source snapshot are among the clone's deletes)
    b.add_rows(file_rows.data_files(b.db.dialect, [file_rows.DataFileRow(
        fid, info.table_id, b.snapshot_id, path, table_dir, src.record_count, src.file_size_bytes, src.footer_size,
        src.row_id_start, pid, file_order=src.file_order, mapping_id=mapping_id)]))
    leaves = {c.column_id for top in info.columns for c in top.leaves()}
    b.file_details(fid, info.table_id, [st for st in src.stats if st.column_id in leaves], src.partition_values)
    return fid


def _insert_delete(b: CatalogBuilder, info: TableInfo, table_dir: str, data_file_id: int, path: str, count: int,
                   size: int, footer: int | None) -> None:
    b.add_rows(file_rows.delete_files(b.db.dialect, [file_rows.DeleteFileRow(
        b.file_id(), info.table_id, b.snapshot_id, data_file_id, path, table_dir, count, size, footer)]))


# planning (reads the source; writes nothing) ----------------------------------------------------------------------
def plan_clone(lake: LakeHandle, state: LakeState, source: TableInfo, schema: str, name: str, *,
               mode: str = HARD_LINK) -> CloneData:
    """What cloning `source` as of `state` into schema.name takes: the files and their deletes at the snapshot.

    Raises:
        CloneUnsupportedError: a file of the source is neither local nor on S3 (copy the rows instead).
        MissingDataFileError: a file of the source is missing or damaged (nothing is linked or copied).
        ValueError: an unknown mode.
    """
    if mode not in (HARD_LINK, FILE_COPY):
        raise InvalidOptionError(f"clone mode must be {HARD_LINK!r} or {FILE_COPY!r}, got {mode!r}")
    s = state.snapshot_id
    source_dir = state.table_path(source)
    files = state.files(source)
    for path in [state.data_path, *(f.path for f in files)]:
        # S3 files are copied server-side through the storage seam (the bytes never pass through the driver)
        if "://" in path and not path.startswith("file://") and not is_object_store(path):
            raise CloneUnsupportedError(f"{source.schema_name}.{source.name}: {path} is neither local nor on S3, "
                                        "so its files cannot be linked or copied by the lake layer")
    # every file is linked or copied as it is: a missing or damaged one would make a clone that cannot be read
    context = table_context(source.schema_name, source.name, s)
    verify_scan(context, files, s)
    with reading_any(context, lambda: scan_files(files, s)):
        out = _cloned_files(state, source, files, source_dir)
    inlined = read_inlined(state, source, with_rowid=True)
    stats = state.table_stats(source)
    return CloneData(schema, name, source, s, tuple(out), pa.concat_tables(inlined) if inlined else None,
                     stats.next_row_id if stats else 0, _retired_columns(lake, source), mode)


def _cloned_files(state: LakeState, source: TableInfo, files: list[DataFile], source_dir: str) -> list[ClonedFile]:
    """Each live file of the source as the clone holds it, with the positions deleted at the state's snapshot."""
    s = state.snapshot_id
    mappings = state.name_mappings(source) if any(f.mapping_id is not None for f in files) else {}
    out = []
    for f in files:
        positions = set(deleted_positions(f, s))
        if f.partial_max is not None and f.partial_max > s:
            # rows added to this (merged or flushed) file after S: deleted in the clone
            with parquet_source(f.path) as pfile:
                added = pq.read_table(pfile, columns=[SNAPSHOT_COLUMN]).column(0).to_pylist()
            positions.update(p for p, snap in enumerate(added) if snap is not None and snap > s)
        if len(positions) >= f.record_count:
            continue
        mapping = None
        if f.mapping_id is not None:
            entries = mappings[f.mapping_id].entries
            mapping = tuple((src, target, parent, part) for _i, src, target, parent, part in entries)
        out.append(ClonedFile(f, _subdir(f.path, source_dir), mapping, _deletes(f, tuple(sorted(positions)))))
    return out


def _deletes(f: DataFile, positions: tuple[int, ...]) -> ClonedDelete | None:
    if not positions:
        return None
    d = f.delete_file
    # a Parquet delete file of exactly these positions is linked; a deletion vector's positions are written anew
    if d is not None and d.delete_count == len(positions) and d.format == "parquet":
        with parquet_source(d.path) as pfile:
            existing = pq.read_schema(pfile)
        if len(existing.names) == 2 and read_delete_file(d.path, d.begin_snapshot).positions == positions:
            return ClonedDelete(d.path, positions, d.file_size_bytes, d.footer_size)
    return ClonedDelete(None, positions)


def _subdir(path: str, source_dir: str) -> str:
    """The partition directories of a file under its table's directory ('' for a file elsewhere or at the top)."""
    rel = relative_to(path, source_dir)
    if rel is None or "/" not in rel:
        return ""
    return rel.rsplit("/", 1)[0]


def _retired_columns(lake: LakeHandle, source: TableInfo) -> tuple[tuple[Any, ...], ...]:
    """The latest row of each column id the source ever had above its live ids (DuckDB numbers a new column
    MAX(column_id) + 1 over all rows of the table, dropped ones included)."""
    live = source.max_column_id()
    with lake.db.read() as conn:
        rows = lake.db.query(
            conn,
            "SELECT column_id, column_order, column_name, column_type, initial_default, default_value, nulls_allowed, "
            "parent_column, default_value_type, begin_snapshot FROM {p}ducklake_column WHERE table_id = :t "
            "AND column_id > :c ORDER BY column_id, begin_snapshot",
            {"t": source.table_id, "c": live})
    latest: dict[int, tuple[Any, ...]] = {}
    for r in rows:
        latest[r[0]] = (r[0], r[1], r[2], r[3], r[4], r[5], lake.db.dialect.read_bool(r[6]), r[7], r[8])
    return tuple(latest[k] for k in sorted(latest))


def probe_links(source: str, directory: str) -> bool:
    """Whether a hard link of `source` can be made next to `directory` (in its nearest existing ancestor)."""
    if is_object_store(source) or is_object_store(directory):
        return False  # no links on object stores: a clone copies (server-side)
    local = to_local(directory)
    while not os.path.isdir(local):
        parent = os.path.dirname(local.rstrip("/"))
        if parent == local:
            return False
        local = parent
    probe = os.path.join(local, f".ducklake-link-probe-{uuid.uuid4().hex}")
    try:
        os.link(to_local(source), probe)
    except OSError as e:
        if e.errno in _NO_LINK:
            return False
        raise
    os.remove(probe)
    return True
