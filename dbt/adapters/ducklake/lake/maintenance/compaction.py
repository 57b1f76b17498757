"""Compaction with the reference's semantics: merge_adjacent_files and flush_inlined_data, one snapshot each.

Files are planned and written against the latest snapshot for a Transaction (which owns them), whose operation
re-checks at commit time that no other writer changed what was read (else CommitConflictError, files removed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..catalog.changes_text import parse_changes
from ..catalog.state import LakeState, load_state
from ..errors import CommitConflictError, InvalidOptionError
from ..option_values import parse_size
from ..paths import delete_file_name, join_path
from ..read import file_checks
from ..read.deletes import (
    ROW_ID_COLUMN,
    ROW_ID_FIELD_ID,
    SNAPSHOT_COLUMN,
    SNAPSHOT_FIELD_ID,
    DeletePositions,
    delete_row_groups,
    read_delete_file,
    write_delete_file,
)
from ..read.inlined import read_inlined
from ..read.scan import FileScanTask, read_file
from ..records import Column, DataFile, DeleteFile, TableInfo
from ..storage import parquet_source
from ..write import file_rows
from ..write.builder import CatalogBuilder
from ..write.datafiles import DataFileSpec
from ..write.layout import sort_permutation
from ..write.operations import Operation, bound_table
from ..write.partitioning import partition_values
from ..write.writer import NULL_PARTITION_DIR, conform, write_file

if TYPE_CHECKING:
    from ..write.transaction import Transaction
    from .maintained_lake import MaintainedLake

DEFAULT_TARGET_FILE_SIZE = 1 << 29  # the reference's target_file_size default (512 MiB)
# changes by other writers that invalidate what a compaction read (new inserts do not)
_INVALIDATING = ("deleted_from_table", "dropped_table", "altered_table", "inlined_delete", "inline_flush",
                 "flushed_inlined", "merge_adjacent", "rewrite_delete", "compacted_table")


def reserved_field(name: str, fid: int) -> pa.Field:
    return pa.field(name, pa.int64(), metadata={b"PARQUET:field_id": str(fid).encode()})


def conform_loose(data: pa.Table, columns: Sequence[Column]) -> pa.Table:
    """conform() with every field optional: a NULL struct stored inline has NULL children even under NOT NULL."""

    def loose(c: Column) -> Column:
        return replace(c, nullable=True, children=tuple(loose(ch) for ch in c.children))

    return conform(data, [loose(c) for c in columns])


def tables_of(state: LakeState, schema: str | None, table: str | None) -> list[TableInfo]:
    if table is not None:
        return [state.table(schema or "main", table)]
    if schema is not None:
        s = state.schema(schema)
        return [t for t in state.tables.values() if t.schema_id == s.schema_id]
    return list(state.tables.values())


def compactable_tables(lake: MaintainedLake, state: LakeState, schema: str | None, table: str | None) -> list[TableInfo]:
    """The tables a compaction works on: those named (all by default) whose auto_compact option is not false."""
    # the reference compares the stored text with 'true' exactly
    return [t for t in tables_of(state, schema, table)
            if (lake.option("auto_compact", t.table_id, t.schema_id) or "true") == "true"]


def state_at(lake: MaintainedLake, base: LakeState, snapshot_id: int) -> LakeState:
    """The catalog as seen at a snapshot id even if that snapshot was expired (rows carry their own range)."""
    with lake.db.read() as conn:
        return load_state(lake.db, conn, replace(base.snapshot, snapshot_id=snapshot_id), lake.data_path)


def check_untouched(b: CatalogBuilder, table_id: int, base: int) -> None:
    rows = b.db.query(b.conn, "SELECT changes_made FROM {p}ducklake_snapshot_changes WHERE snapshot_id > :s",
                      {"s": base})
    for (text,) in rows:
        other = parse_changes(text)
        for kind in _INVALIDATING:
            if other.has(kind, table_id):
                raise CommitConflictError(
                    f"table id {table_id} changed while it was being compacted ({kind} after snapshot {base}); "
                    "nothing was committed, run the maintenance again")


def insert_data_file(b: CatalogBuilder, info: TableInfo, spec: DataFileSpec, begin: int, partial_max: int | None,
                      row_id_start: int | None, partition_id: int | None) -> int:
    fid = b.file_id()
    b.add_rows(file_rows.data_files(b.db.dialect, [file_rows.DataFileRow(
        fid, info.table_id, begin, spec.path, b.table_path(info), spec.record_count, spec.file_size_bytes,
        spec.footer_size, row_id_start, partition_id, partial_max=partial_max,
        row_group_count=spec.row_group_count)], b.db.spec.row_group_counts))
    b.file_details(fid, info.table_id, spec.stats, spec.partition_values)
    return fid


@dataclass
class _DeleteSpec:
    path: str
    count: int
    size: int
    footer: int
    begin: int
    partial_max: int | None


def _insert_delete_file(b: CatalogBuilder, info: TableInfo, data_file_id: int, d: _DeleteSpec,
                        deleted_from: bool = True) -> None:
    b.add_rows(file_rows.delete_files(b.db.dialect, [file_rows.DeleteFileRow(
        b.file_id(), info.table_id, d.begin, data_file_id, d.path, b.table_path(info), d.count, d.size, d.footer,
        d.partial_max, row_group_count=delete_row_groups(d.count))], b.db.spec.row_group_counts))
    if deleted_from:
        b.changes.deleted_tables.add(info.table_id)


# merge_adjacent_files ----------------------------------------------------------------------------------------
@dataclass
class _Merge:
    sources: tuple[DataFile, ...]
    spec: DataFileSpec
    row_id_start: int | None


@dataclass
class MergeAdjacent(Operation):
    """Replace groups of small adjacent files by one file each (the reference's MERGE_ADJACENT_TABLES commit)."""

    schema: str
    table: str
    base: int
    merges: list[_Merge] = field(default_factory=list)

    def apply(self, b: CatalogBuilder) -> None:
        info = bound_table(b, self, self.table)
        check_untouched(b, info.table_id, self.base)
        for m in self.merges:
            first = m.sources[0]
            pmax = max(f.partial_max if f.partial_max is not None else f.begin_snapshot for f in m.sources)
            insert_data_file(b, info, m.spec, first.begin_snapshot, pmax, m.row_id_start, first.partition_id)
            ids = ", ".join(str(f.data_file_id) for f in m.sources)
            for t in ("ducklake_data_file", "ducklake_file_column_stats", "ducklake_delete_file",
                      "ducklake_file_partition_value", "ducklake_file_variant_stats"):
                b.add(f"DELETE FROM {{p}}{t} WHERE data_file_id IN ({ids})")
            b.schedule_for_deletion([(f.data_file_id, f.path) for f in m.sources])
        b.changes.merged_adjacent.add(info.table_id)


def merge_adjacent_files(
    lake: MaintainedLake, schema: str | None = None, table: str | None = None, target_file_size: int | None = None,
    *, min_file_size: int | None = None, max_file_size: int | None = None, max_compacted_files: int | None = None,
) -> list[tuple[str, str, int, int]]:
    """Merge small files without deletes per table, schema version and partition, as ducklake_merge_adjacent_files
    does; one snapshot for all tables ('merge_adjacent:<tid>' each). Returns (schema, table, files merged, created).

    target_file_size (how large a merged file may grow) defaults to the lake's target_file_size option, else
    512 MiB. As in the reference, only files of at least min_file_size and below max_file_size (default: the
    target) take part, at most max_compacted_files merges are made per table, and tables whose auto_compact
    option is not 'true' are left alone.

    Raises:
        ValueError: a size or count is not positive, or min_file_size >= max_file_size.
        NoSuchTableError / NoSuchSchemaError: the table or schema does not exist.
        CommitConflictError: another writer changed the table meanwhile (nothing committed).
    """
    if target_file_size is not None and target_file_size <= 0:
        raise InvalidOptionError(f"target_file_size must be a positive number of bytes, got {target_file_size}")
    if max_file_size is not None and max_file_size <= 0:
        raise InvalidOptionError(f"max_file_size must be a positive number of bytes, got {max_file_size}")
    if min_file_size is not None and min_file_size < 0:
        raise InvalidOptionError(f"min_file_size must not be negative, got {min_file_size}")
    if min_file_size is not None and max_file_size is not None and min_file_size >= max_file_size:
        raise InvalidOptionError(f"min_file_size ({min_file_size}) must be less than max_file_size ({max_file_size})")
    if max_compacted_files is not None and max_compacted_files <= 0:
        raise InvalidOptionError(f"max_compacted_files must be greater than zero, got {max_compacted_files}")
    out = []
    # one snapshot for all tables, as the reference does; the transaction owns the files written for it
    with lake.transaction(commit_message="merge_adjacent_files") as tx:
        state = tx.base
        for info in compactable_tables(lake, state, schema, table):
            target = target_file_size or parse_size(
                lake.option("target_file_size", info.table_id, info.schema_id) or DEFAULT_TARGET_FILE_SIZE)
            groups = _merge_groups(lake, state, info, target, min_file_size, max_file_size)
            if max_compacted_files is not None:
                groups = groups[:max_compacted_files]
            if not groups:
                continue
            op = MergeAdjacent(info.schema_name, info.name, state.snapshot_id)
            for sources in groups:
                op.merges.append(_write_merged(lake, state, info, sources, tx))
            tx.stage(op)
            out.append((info.schema_name, info.name, sum(len(g) for g in groups), len(groups)))
    return out


def schema_versions(lake: MaintainedLake, table_id: int) -> list[tuple[int, int]]:
    with lake.db.read() as conn:
        return [(r[0], r[1]) for r in lake.db.query(
            conn, "SELECT begin_snapshot, schema_version FROM {p}ducklake_schema_versions WHERE table_id = :t "
                  "ORDER BY begin_snapshot", {"t": table_id})]


def group_key(versions: Sequence[tuple[int, int]], f: DataFile) -> tuple[Any, ...]:
    """The compaction group of a file, as the reference forms them: the schema version the file was written in
    (from schema_versions' (begin_snapshot, version) pairs), its partition id and partition values."""
    found = None
    for begin, sv in versions:
        if begin <= f.begin_snapshot:
            found = sv
    return found, f.partition_id, f.partition_values


def compaction_order(f: DataFile) -> tuple[int, bool, int, int]:
    """The order the reference lists files for compaction: begin snapshot, row_id_start (NULL last), file id."""
    return f.begin_snapshot, f.row_id_start is None, f.row_id_start or 0, f.data_file_id


def _merge_groups(lake: MaintainedLake, state: LakeState, info: TableInfo, target: int, min_size: int | None = None,
                  max_size: int | None = None) -> list[list[DataFile]]:
    """The reference's GenerateCompactions: candidates (size in [min_size, max_size or target)) in (begin,
    row_id_start, id) order, greedy up to target, groups in order of their first file."""
    below = target if max_size is None else min(max_size, target)
    versions = schema_versions(lake, info.table_id)
    files = sorted(state.files(info), key=compaction_order)
    groups: dict[tuple[Any, ...], list[DataFile]] = {}
    for f in files:
        if f.file_size_bytes >= below or f.delete_file is not None or f.inlined_deletes:
            continue
        if min_size is not None and f.file_size_bytes < min_size:
            continue
        groups.setdefault(group_key(versions, f), []).append(f)
    out = []
    for candidates in groups.values():
        i = 0
        while i < len(candidates):
            size, j = 0, i
            while j < len(candidates) and size < target:
                size += candidates[j].file_size_bytes
                j += 1
            if j - i > 1:
                out.append(candidates[i:j])
            i = max(j, i + 1)
    return out


def _write_merged(lake: MaintainedLake, state: LakeState, info: TableInfo, sources: Sequence[DataFile],
                  tx: Transaction) -> _Merge:
    first = sources[0]
    table_v = state_at(lake, state, first.begin_snapshot).table_by_id(info.table_id)
    mappings = state.name_mappings(info) if any(f.mapping_id is not None for f in sources) else {}
    parts, snaps = [], []
    adjacent, expect = True, None
    # a missing or damaged source refuses the merge, named, before anything is written
    context = file_checks.table_context(info.schema_name, info.name, state.snapshot_id)
    file_checks.verify(context, [file_checks.data_file(f) for f in sources])
    for f in sources:
        task = FileScanTask(f, (), None, mappings.get(f.mapping_id) if f.mapping_id is not None else None)
        with file_checks.reading(context, file_checks.data_file(f)):
            part = read_file(task, table_v.columns, with_rowid=True)
            with parquet_source(f.path) as source:
                names = pq.read_schema(source).names
        parts.append(part)
        if SNAPSHOT_COLUMN in names:
            with parquet_source(f.path) as source:
                snaps.append(pq.read_table(source, columns=[SNAPSHOT_COLUMN]).column(0).cast(pa.int64()))
        else:
            snaps.append(pa.chunked_array([pa.array([f.begin_snapshot] * part.num_rows, pa.int64())]))
        # explicit row ids (UPDATE post-images, earlier merges) are never recomputable from row_id_start
        if f.row_id_start is None or ROW_ID_COLUMN in names or (expect is not None and expect != f.row_id_start):
            adjacent = False
        else:
            expect = f.row_id_start + f.record_count
    rows = pa.concat_tables(parts)
    sort = info.sort.fields if info.sort is not None else ()
    order = sort_permutation(conform_loose(rows, table_v.columns), sort)
    if order is not None:  # the reference's compaction sorts by the table's SET SORTED BY: positions change
        begins = pa.chunked_array([c for s in snaps for c in s.chunks], pa.int64()).take(order)
        rows, snaps, adjacent = rows.take(order), [begins], False
    data = conform_loose(rows, table_v.columns)
    data = data.append_column(reserved_field(SNAPSHOT_COLUMN, SNAPSHOT_FIELD_ID), pa.chunked_array(
        [c for s in snaps for c in s.chunks], pa.int64()))
    if not adjacent:
        data = data.append_column(reserved_field(ROW_ID_COLUMN, ROW_ID_FIELD_ID), rows.column("rowid").cast(pa.int64()))
    directory = first.path.rsplit("/", 1)[0] if first.partition_id is not None else state.table_path(info)
    spec = write_file(table_v, directory, data, first.partition_values, lake.write_options(info))
    tx.own_files([spec.path])
    return _Merge(tuple(sources), spec, first.row_id_start if adjacent else None)


# flush_inlined_data ------------------------------------------------------------------------------------------
@dataclass
class _Flushed:
    spec: DataFileSpec
    begin: int
    partial_max: int
    row_id_start: int
    partition_id: int | None
    deletes: _DeleteSpec | None


@dataclass
class FlushInlined(Operation):
    """Flushed inlined rows as files, inlined file deletes as delete files (the reference's flush commit)."""

    schema: str
    table: str
    base: int
    files: list[_Flushed] = field(default_factory=list)
    inlined_tables: list[str] = field(default_factory=list)
    file_deletes: list[tuple[DataFile, _DeleteSpec]] = field(default_factory=list)

    def apply(self, b: CatalogBuilder) -> None:
        info = bound_table(b, self, self.table)
        check_untouched(b, info.table_id, self.base)
        for f in self.files:
            fid = insert_data_file(b, info, f.spec, f.begin, f.partial_max, f.row_id_start, f.partition_id)
            b.stats_delta(info.table_id).file_size_bytes += f.spec.file_size_bytes
            if f.deletes is not None:
                # rows deleted before the flush: the reference does not count this as a delete from the table
                _insert_delete_file(b, info, fid, f.deletes, deleted_from=False)
        for data_file, d in self.file_deletes:
            old = data_file.delete_file
            if old is not None:
                b.add(*file_rows.remove_delete_file(old.delete_file_id))
                b.schedule_for_deletion([(old.delete_file_id, old.path)])
            _insert_delete_file(b, info, data_file.data_file_id, d)
        if self.file_deletes:
            b.add(f"DELETE FROM {{p}}ducklake_inlined_delete_{info.table_id} WHERE begin_snapshot <= :s",
                  {"s": self.base})
        for name in self.inlined_tables:
            b.add(f"DELETE FROM {{p}}{name} WHERE {b.db.spec.inlined.begin_snapshot} <= :s", {"s": self.base})
        if self.files:
            b.changes.inline_flushed.add(info.table_id)


def flush_inlined_data(
    lake: MaintainedLake, schema: str | None = None, table: str | None = None
) -> list[tuple[str, str, int]]:
    """Write inlined rows to Parquet files and inlined file deletes to delete files, as ducklake_flush_inlined_data
    does; one snapshot for all tables. Returns (schema, table, rows flushed) for tables with rows flushed.

    Raises:
        NoSuchTableError / NoSuchSchemaError: the table or schema does not exist.
        CommitConflictError: another writer changed the table meanwhile (nothing committed).
    """
    out = []
    with lake.transaction(commit_message="flush_inlined_data") as tx:  # one snapshot; it owns the written files
        state = tx.base
        for info in tables_of(state, schema, table):
            op = FlushInlined(info.schema_name, info.name, state.snapshot_id)
            flushed = _plan_flush(lake, state, info, op, tx)
            if op.files or op.file_deletes:
                tx.stage(op)
            if flushed:
                out.append((info.schema_name, info.name, flushed))
    return out


def _plan_flush(lake: MaintainedLake, state: LakeState, info: TableInfo, op: FlushInlined, tx: Transaction) -> int:
    flushed = 0
    table_dir = state.table_path(info)
    for it in state.inlined_tables(info):
        begin = _version_begin(lake, info.table_id, it.schema_version)
        table_v = replace(state_at(lake, state, begin).table_by_id(info.table_id), columns=it.columns)
        got = read_inlined(state, table_v, with_rowid=True, history=True, only=it.table_name)
        if not got:
            continue
        rows = pa.concat_tables(got).sort_by([("rowid", "ascending"), ("begin_snapshot", "ascending")])
        op.inlined_tables.append(it.table_name)
        flushed += rows.num_rows
        keys = partition_values(table_v, rows) if table_v.partition else [()] * rows.num_rows
        groups: dict[tuple[str | None, ...], list[int]] = {}
        for i, key in enumerate(keys):
            groups.setdefault(key, []).append(i)
        for key, idx in groups.items():
            part = rows.take(pa.array(idx))
            data = conform_loose(part, table_v.columns)
            data = data.append_column(reserved_field(ROW_ID_COLUMN, ROW_ID_FIELD_ID), part.column("rowid").cast(pa.int64()))
            data = data.append_column(reserved_field(SNAPSHOT_COLUMN, SNAPSHOT_FIELD_ID),
                                      part.column("begin_snapshot").cast(pa.int64()))
            directory = table_dir if not key else join_path(table_dir, _partition_dir(table_v, key))
            spec = write_file(table_v, directory, data, key)
            tx.own_files([spec.path])
            begins = part.column("begin_snapshot").to_pylist()
            ends = part.column("end_snapshot").to_pylist()
            deleted = [(p, e) for p, e in enumerate(ends) if e is not None]
            deletes = None
            if deleted:
                path = join_path(directory, delete_file_name())
                positions = DeletePositions(tuple(p for p, _ in deleted), tuple(e for _, e in deleted))
                size, footer = write_delete_file(path, spec.path, positions, with_snapshots=True)
                tx.own_files([path])
                deletes = _DeleteSpec(path, len(deleted), size, footer, min(e for _, e in deleted), None)
            op.files.append(_Flushed(spec, min(begins), max(begins), min(part.column("rowid").to_pylist()),
                                     table_v.partition.partition_id if table_v.partition else None, deletes))
    for f in state.files(info):
        if f.inlined_deletes:
            op.file_deletes.append((f, _merged_file_deletes(f, tx)))
    return flushed


def _merged_file_deletes(f: DataFile, tx: Transaction) -> _DeleteSpec:
    """One delete file holding the data file's existing deletes and its inlined ones, each with its snapshot."""
    merged: dict[int, int] = {}
    old: DeleteFile | None = f.delete_file
    if old is not None:
        d = read_delete_file(old.path, old.begin_snapshot)
        merged.update(zip(d.positions, d.snapshots, strict=True))
    for pos, snap in f.inlined_deletes:
        merged.setdefault(pos, snap)
    order = sorted(merged)
    positions = DeletePositions(tuple(order), tuple(merged[p] for p in order))
    path = join_path(f.path.rsplit("/", 1)[0], delete_file_name())
    size, footer = write_delete_file(path, f.path, positions, with_snapshots=True)
    tx.own_files([path])
    return _DeleteSpec(path, len(order), size, footer, min(positions.snapshots), max(positions.snapshots))


def _version_begin(lake: MaintainedLake, table_id: int, schema_version: int) -> int:
    with lake.db.read() as conn:
        row = lake.db.query(conn, "SELECT min(begin_snapshot) FROM {p}ducklake_schema_versions WHERE table_id = :t "
                                  "AND schema_version = :v", {"t": table_id, "v": schema_version})
        if row[0][0] is None:
            row = lake.db.query(conn, "SELECT min(snapshot_id) FROM {p}ducklake_snapshot WHERE schema_version = :v",
                                {"v": schema_version})
    return int(row[0][0] or 0)


def _partition_dir(table: TableInfo, key: tuple[str | None, ...]) -> str:
    assert table.partition is not None
    parts = []
    for f, v in zip(table.partition.fields, key, strict=True):
        name = table.column_by_id(f.column_id).name if f.transform == "identity" else f.transform.split("(")[0]
        parts.append(f"{name}={NULL_PARTITION_DIR if v is None else v}")
    return "/".join(parts)
