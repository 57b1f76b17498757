"""Scan planning (which files, which deletes, which inlined rows) and an Arrow reader of a table at a snapshot.

The plan is what any engine needs; the Arrow reader applies it on the driver (small tables, tests, tools), mapping
file columns exactly as the reference does: by field id, by name mapping, or by position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..catalog.state import LakeState
from ..records import Column, DataFile, NameMapping, TableInfo
from ..storage import parquet_source
from ..types import parse_value
from .arrow_types import cast_to, plain_type
from .deletes import ROW_ID_COLUMN, SNAPSHOT_COLUMN, read_delete_arrays
from .file_checks import DELETE_FILE, ListedFile, data_file, reading, table_context, verify_scan
from .inlined import read_inlined
from .pruning import Predicate, prune

ROWID = "rowid"
_FIELD_ID = b"PARQUET:field_id"


@dataclass(frozen=True)
class FileScanTask:
    """One data file to read at a snapshot."""

    data_file: DataFile
    deleted_positions: tuple[int, ...]  # positions deleted as of the snapshot (delete file + inlined deletes)
    max_snapshot: int | None  # keep only rows whose _ducklake_internal_snapshot_id <= this (partial files)
    mapping: NameMapping | None


@dataclass(frozen=True)
class ScanPlan:
    table: TableInfo
    snapshot_id: int
    files: tuple[FileScanTask, ...]
    pruned: int = 0  # live files skipped because their statistics exclude the predicate


def row_count(state: LakeState, table: TableInfo) -> int:
    """The table's rows at the state's snapshot from the catalog alone, as DuckDB answers count(*): the live files'
    record counts, minus their deletes (delete files and inlined deletes), plus the inlined rows. Exact whenever no
    partial file reaches beyond the snapshot, which is always the case at the latest snapshot."""
    n = state.live_rows_in_files(table)
    return n + sum(t.num_rows for t in read_inlined(state, table, with_rowid=False))


DeleteSources = tuple[str | None, int, tuple[int, ...]]


def deleted_positions(f: DataFile, snapshot_id: int) -> tuple[int, ...]:
    """The positions of a data file deleted as of snapshot_id (its delete file, read here, and inlined deletes)."""
    return tuple(np.unique(positions_of(delete_sources(f, snapshot_id), snapshot_id)).tolist())


def delete_sources(f: DataFile, snapshot_id: int) -> DeleteSources:
    """What says which rows of a data file are deleted as of snapshot_id, from the catalog alone: (its delete file's
    path or None, the delete file's first snapshot, the inlined deleted positions), for `positions_of`."""
    d = f.delete_file
    inlined = tuple(sorted(p for p, begin in f.inlined_deletes if begin <= snapshot_id))
    if d is None or d.begin_snapshot > snapshot_id:
        return None, 0, inlined
    return d.path, d.begin_snapshot, inlined


def positions_of(sources: DeleteSources, snapshot_id: int) -> np.ndarray:
    """The deleted positions those sources give as of snapshot_id (the delete file read here; unsorted, a position
    may appear twice)."""
    path, begin, inlined = sources
    deleted = np.asarray(inlined, dtype=np.int64)
    if path is None:
        return deleted
    pos, snap = read_delete_arrays(path, begin)
    live = pos.to_numpy()[snap.to_numpy() <= snapshot_id]
    return np.concatenate([deleted, live]) if len(deleted) else live


def plan_scan(state: LakeState, table: TableInfo, predicate: Predicate | None = None, *,
              positions: bool = True) -> ScanPlan:
    """The files of a table at the state's snapshot, with the deletes that apply to each.

    With a predicate, files whose column statistics prove that no row matches are left out (`pruned` counts them).
    positions=False reads the catalog only: tasks carry no deleted positions (an engine that reads the delete files
    itself takes them from each file's delete_file and inlined_deletes, or calls `deleted_positions`, and checks
    the files first: `check_plan`).

    Raises:
        MissingDataFileError: with positions, a file to read is missing or damaged (lake/read/file_checks.py).
    """
    s = state.snapshot_id
    live = state.files(table)
    files = prune(live, table, predicate)
    mappings = state.name_mappings(table) if any(f.mapping_id is not None for f in files) else {}
    context = table_context(table.schema_name, table.name, s)
    if positions:
        verify_scan(context, files, s)
    tasks = []
    for f in files:
        tasks.append(
            FileScanTask(
                data_file=f,
                deleted_positions=checked_positions(context, f, s) if positions else (),
                max_snapshot=s if f.partial_max is not None and f.partial_max > s else None,
                mapping=mappings.get(f.mapping_id) if f.mapping_id is not None else None,
            )
        )
    return ScanPlan(table, s, tuple(tasks), len(live) - len(files))


def check_plan(plan: ScanPlan) -> None:
    """Check that the files the plan reads (data files, and the delete files its snapshot sees) are on storage as
    the catalog lists them (once per file and process: lake/read/file_checks.py).

    Raises:
        MissingDataFileError: a file is missing or of another size than listed, naming the table and snapshot.
    """
    verify_scan(plan_context(plan), [t.data_file for t in plan.files], plan.snapshot_id)


def plan_context(plan: ScanPlan) -> str:
    """How errors about the plan's files name what was read (`lake table s.t at snapshot n`)."""
    return table_context(plan.table.schema_name, plan.table.name, plan.snapshot_id)


def checked_positions(context: str, f: DataFile, snapshot_id: int) -> tuple[int, ...]:
    """`deleted_positions`, with a delete file that cannot be read reported as the damaged file it is."""
    d = f.delete_file
    if d is None or d.begin_snapshot > snapshot_id:
        return deleted_positions(f, snapshot_id)
    with reading(context, ListedFile(d.path, d.file_size_bytes, DELETE_FILE)):
        return deleted_positions(f, snapshot_id)


def read_arrow(state: LakeState, table: TableInfo, *, with_rowid: bool = True) -> pa.Table:
    """The table's rows at the state's snapshot as Arrow, current column names and types, plus rowid."""
    with state.db.reading():  # the catalog reads first, in one connection; the files after it is closed
        plan = plan_scan(state, table)
        inlined = read_inlined(state, table, with_rowid)
    return read_rows(plan, inlined, table.columns, with_rowid=with_rowid)


def read_rows(plan: ScanPlan, inlined: Sequence[pa.Table], columns: Sequence[Column], *,
              with_rowid: bool) -> pa.Table:
    """The plan's files (deletes applied) and these inlined rows as one table of the columns, plus rowid.

    Raises:
        MissingDataFileError: a file of the plan is missing or damaged.
    """
    schema = _output_schema(columns, with_rowid)
    check_plan(plan)
    context = plan_context(plan)
    parts = []
    for task in plan.files:
        with reading(context, data_file(task.data_file)):
            parts.append(read_file(task, columns, with_rowid))
    parts += [t.select(schema.names) for t in inlined]
    if not parts:
        return schema.empty_table()
    return pa.concat_tables([p.cast(schema) for p in parts])


def _output_schema(columns: Sequence[Column], with_rowid: bool) -> pa.Schema:
    fields = [pa.field(ROWID, pa.int64())] if with_rowid else []
    return pa.schema(fields + [pa.field(c.name, plain_type(c)) for c in columns])


def read_file(task: FileScanTask, columns: Sequence[Column], with_rowid: bool) -> pa.Table:
    """One data file mapped to the table's columns, with deletes and partial-snapshot filtering applied."""
    f = task.data_file
    return read_data_file(f.path, columns, deleted_positions=task.deleted_positions, max_snapshot=task.max_snapshot,
                          mapping=task.mapping, row_id_start=(f.row_id_start or 0) if with_rowid else None)


def read_data_file(path: str, columns: Sequence[Column], *, deleted_positions: Sequence[int] | np.ndarray = (),
                   max_snapshot: int | None = None, mapping: NameMapping | None = None,
                   row_id_start: int | None = None) -> pa.Table:
    """A data file's rows mapped to the table's columns (by field id, name mapping or position; defaults for missing
    columns; promoted types), without the deleted positions and the rows beyond max_snapshot; with a rowid column
    first when row_id_start is given."""
    # one ParquetFile read: pq.read_table's dataset set-up costs several times a small file's read
    with parquet_source(path) as source:
        raw = pq.ParquetFile(source, pre_buffer=False).read()
    n = raw.num_rows
    keep = np.ones(n, dtype=bool)
    if len(deleted_positions):
        pos = np.asarray(deleted_positions, dtype=np.int64)
        keep[pos[pos < n]] = False
    mask = pa.array(keep)
    if max_snapshot is not None and SNAPSHOT_COLUMN in raw.schema.names:
        mask = pc.and_(mask, pc.less_equal(raw.column(SNAPSHOT_COLUMN), max_snapshot))
    out: dict[str, pa.ChunkedArray | pa.Array] = {}
    if row_id_start is not None:
        if ROW_ID_COLUMN in raw.schema.names:
            out[ROWID] = raw.column(ROW_ID_COLUMN)
        else:
            out[ROWID] = pa.array(range(row_id_start, row_id_start + n), pa.int64())
    resolver = _Resolver(raw.schema, mapping, columns)
    for col in columns:
        found = resolver.top_level(col)
        if found is None:
            out[col.name] = _default_array(col, n)
        else:
            idx, key = found
            out[col.name] = _convert(raw.column(idx), raw.schema.field(idx), col, resolver, key)
    table = pa.table(out)
    return table.filter(mask)


def _default_array(col: Column, n: int) -> pa.Array:
    t = plain_type(col)
    if col.initial_default is None or col.is_nested:
        return pa.nulls(n, t)
    return pa.array([parse_value(col.type, col.initial_default)] * n, t)


class _Resolver:
    """Finds the file field that holds a table column: by field id, by name mapping, or by position."""

    def __init__(self, schema: pa.Schema, mapping: NameMapping | None, columns: Sequence[Column]) -> None:
        self.schema = schema
        self.mapping = mapping
        data_fields = [f for f in schema if f.name not in (ROW_ID_COLUMN, SNAPSHOT_COLUMN)]
        self.by_id = mapping is None and all(f.metadata and _FIELD_ID in f.metadata for f in data_fields)
        self.positions = [i for i, f in enumerate(schema) if f.name not in (ROW_ID_COLUMN, SNAPSHOT_COLUMN)]
        # name mapping: (parent index or None, source name) -> target field id
        self.names: dict[tuple[int | None, str], int] = {}
        self.index_of: dict[tuple[int | None, str], int] = {}
        if mapping is not None:
            for idx, src, target, parent, _part in mapping.entries:
                self.names[(parent, src)] = target
                self.index_of[(parent, src)] = idx
        # without ids or a mapping, top-level columns match by position (names ignored), as the reference does
        self.position_of = {c.column_id: self.positions[i] for i, c in enumerate(columns) if i < len(self.positions)}

    def _match(self, fields: Sequence[pa.Field], col: Column, parent_key: int | None) -> tuple[int, int | None] | None:
        if self.mapping is not None:
            for i, fld in enumerate(fields):
                if self.names.get((parent_key, fld.name)) == col.column_id:
                    return i, self.index_of[(parent_key, fld.name)]
            return None
        if self.by_id:
            for i, fld in enumerate(fields):
                if fld.metadata and fld.metadata.get(_FIELD_ID) == str(col.column_id).encode():
                    return i, None
            return None
        return None

    def top_level(self, col: Column) -> tuple[int, int | None] | None:
        if self.mapping is None and not self.by_id:
            return (self.position_of[col.column_id], None) if col.column_id in self.position_of else None
        return self._match(list(self.schema), col, None)

    def child(self, fields: Sequence[pa.Field], col: Column, parent_key: int | None, pos: int) -> tuple[int, int | None] | None:
        if self.mapping is None and not self.by_id:
            for i, fld in enumerate(fields):  # without ids nested children match by name, then position
                if fld.name == col.name:
                    return i, None
            return (pos, None) if pos < len(fields) else None
        return self._match(fields, col, parent_key)


def _convert(arr: pa.ChunkedArray | pa.Array, fld: pa.Field, col: Column, r: _Resolver, key: int | None = None) -> pa.Array:
    """Map one file column (and its children) onto the table column: rename, reorder, fill, promote."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    target = plain_type(col)
    if col.type == "struct":
        sfields = list(fld.type)
        children, names = [], []
        for pos, child in enumerate(col.children):
            m = r.child(sfields, child, key, pos)
            if m is None:
                children.append(_default_array(child, len(arr)))
            else:
                children.append(_convert(arr.field(m[0]), sfields[m[0]], child, r, m[1]))
            names.append(child.name)
        return pa.StructArray.from_arrays(children, names=names, mask=arr.is_null())
    if col.type == "list":
        elem = col.children[0]
        vfield = fld.type.value_field
        m = r.child([vfield], elem, key, 0)
        values = _convert(arr.values, vfield, elem, r, m[1] if m else None)
        return pa.ListArray.from_arrays(arr.offsets, values, type=target, mask=arr.is_null())
    if col.type == "map":
        kcol, vcol = col.children
        kfield, vfield = fld.type.key_field, fld.type.item_field
        km = r.child([kfield, vfield], kcol, key, 0)
        vm = r.child([kfield, vfield], vcol, key, 1)
        keys = _convert(arr.keys, kfield, kcol, r, km[1] if km else None)
        items = _convert(arr.items, vfield, vcol, r, vm[1] if vm else None)
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=target, mask=arr.is_null())
    return cast_to(arr, target)
