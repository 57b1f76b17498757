"""rewrite_data_files with the reference's semantics: data files whose deleted fraction reaches a threshold are
rewritten without their deleted rows, all tables in one snapshot ('rewrite_delete:<tid>' each).

As DuckDB's ducklake_rewrite_data_files does: per table (auto_compact not false), the live files with deletes (delete
file and inlined file deletes) of at least delete_threshold of their rows (the rewrite_delete_threshold option,
default 0.95) are grouped by schema version and partition, and each group becomes ONE new file holding the group's
remaining rows in file order with their row ids (`_ducklake_internal_row_id`; `row_id_start` NULL), beginning at
the rewrite's snapshot. The sources and their delete files are ended at that snapshot, not removed: time travel to
earlier snapshots reads them as before, and expire_snapshots schedules them for deletion once no snapshot sees them.
A table left without any delete gets exact statistics again (record_count is then its net row count).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from ..catalog.changes_text import parse_changes
from ..catalog.state import LakeState
from ..errors import CommitConflictError
from ..option_values import parse_threshold
from ..read import file_checks
from ..read.deletes import ROW_ID_COLUMN, ROW_ID_FIELD_ID
from ..read.inlined import read_inlined
from ..read.scan import FileScanTask, deleted_positions, read_file
from ..records import ColumnStats, DataFile, TableColumnStats, TableInfo
from ..types import parse_type, sort_key
from ..write import catalog_rows, file_rows
from ..write.builder import CatalogBuilder
from ..write.datafiles import DataFileSpec
from ..write.operations import Operation, bound_table
from ..write.writer import write_file
from .compaction import (
    check_untouched,
    compactable_tables,
    compaction_order,
    conform_loose,
    group_key,
    insert_data_file,
    reserved_field,
    schema_versions,
    state_at,
)

if TYPE_CHECKING:
    from ..write.transaction import Transaction
    from .maintained_lake import MaintainedLake

DEFAULT_DELETE_THRESHOLD = 0.95  # the reference's default of the rewrite_delete_threshold option
# the reference recomputes a table's stats with inlined rows only when every top-level column is one of these
# (DuckDB's IsFoldableScalarType: numeric, temporal, VARCHAR, BOOLEAN); otherwise the stats stay as they were
_FOLDABLE = {"int8", "int16", "int32", "int64", "int128", "uint8", "uint16", "uint32", "uint64", "uint128",
             "float32", "float64", "decimal", "varchar", "json", "boolean", "date", "time", "timetz", "timestamp",
             "timestamptz", "timestamp_s", "timestamp_ms", "timestamp_ns"}


@dataclass
class _Rewrite:
    sources: tuple[DataFile, ...]
    spec: DataFileSpec | None  # None: no row of the group is left (the sources are only ended)


@dataclass
class RewriteDataFiles(Operation):
    """Rewritten files of one table (the reference's REWRITE_DELETES compaction commit)."""

    schema: str
    table: str
    base: int
    rewrites: list[_Rewrite] = field(default_factory=list)
    inlined: tuple[int, list[ColumnStats]] | None = None  # (net inlined rows, their stats) at base; None: unfoldable

    def apply(self, b: CatalogBuilder) -> None:
        info = bound_table(b, self, self.table)
        check_untouched(b, info.table_id, self.base)
        _check_no_new_inlined_rows(b, info.table_id, self.base)
        sid = b.snapshot_id
        new: list[tuple[int, DataFileSpec]] = []
        for r in self.rewrites:
            if r.spec is not None:
                first = r.sources[0]
                new.append((insert_data_file(b, info, r.spec, sid, None, None, first.partition_id), r.spec))
            for f in r.sources:
                b.add(*file_rows.end_data_files(sid, data_file_id=f.data_file_id))
                if f.delete_file is not None:
                    b.add(*file_rows.end_delete_files(sid, data_file_id=f.data_file_id))
        self._recompute_stats(b, info, {f.data_file_id for r in self.rewrites for f in r.sources}, new)
        b.changes.rewritten.add(info.table_id)

    def _recompute_stats(self, b: CatalogBuilder, info: TableInfo, removed: set[int],
                         new: Sequence[tuple[int, DataFileSpec]]) -> None:
        """The reference's RecomputeGlobalStatsAfterRewrite: when no live file of the table has a delete left, the
        table's stats become exact: record_count and size of the live files (plus the inlined rows), column bounds
        merged from the files' stats (a column without any becomes unknown). next_row_id never changes."""
        current = b.catalog.table_stats(info.table_id)
        if current is None:
            return  # the reference only updates an existing stats row
        kept = sorted((f for f in b.live_files(info.table_id) if f.data_file_id not in removed),
                      key=lambda f: f.data_file_id)
        if any(f.delete_file is not None or f.inlined_deletes for f in kept):
            return  # deletes remain: the merged file stats would not be exact
        if self.inlined is None:
            return  # inlined rows of a type the reference cannot fold: it keeps the stats as they were
        inlined_rows, inlined_stats = self.inlined
        types = {c.column_id: c.type for c in info.columns for c in c.walk()}
        merged: dict[int, _Merged] = {}

        def fold(stats: Sequence[ColumnStats]) -> None:
            for st in stats:
                if st.column_id in types:
                    got = merged.get(st.column_id)
                    if got is None:
                        merged[st.column_id] = _Merged.of(st)
                    else:
                        got.merge(st, types[st.column_id])

        record_count = size = 0
        for f in kept:  # in file id order, as the reference reads them, then the new files
            record_count, size = record_count + f.record_count, size + f.file_size_bytes
            fold(f.stats)
        for _, spec in new:
            record_count, size = record_count + spec.record_count, size + spec.file_size_bytes
            fold(spec.stats)
        if inlined_rows:
            fold(inlined_stats)
            record_count += inlined_rows
        b.add(*catalog_rows.update_table_stats(catalog_rows.TableStatsRow(info.table_id, record_count, current[1],
                                                                            size)))
        existing = b.catalog.table_column_stats(info.table_id)
        unknown = _Merged(None, None, None, None, None, False)  # a column no file has stats of
        rows = [merged.get(cid, unknown).row(info.table_id, cid) for cid in sorted(existing) if cid in types]
        if rows:
            b.add_rows(catalog_rows.update_table_column_stats(b.db.dialect, rows))


@dataclass
class _Merged:
    """One column's table-level stats as DuckDB's DuckLakeColumnStats::MergeStats folds file stats, quirks included:
    counts are merged before bounds, so a file of only NULLs folded first leaves the bounds unknown."""

    values: int | None  # num_values: values and NULLs
    nulls: int | None
    min: str | None
    max: str | None
    nan: bool | None
    any_valid: bool = True

    @staticmethod
    def of(st: ColumnStats) -> _Merged:
        known = st.value_count is not None and st.null_count is not None
        return _Merged((st.value_count or 0) + (st.null_count or 0) if known else None,
                       st.null_count if known else None, st.min_value, st.max_value, st.contains_nan)

    def valid(self) -> bool:
        return self.values > self.nulls if self.values is not None and self.nulls is not None else self.any_valid

    def merge(self, st: ColumnStats, type_: str) -> None:
        new = _Merged.of(st)
        self.nulls = None if new.nulls is None or self.nulls is None else self.nulls + new.nulls
        self.values = None if new.values is None or self.values is None else self.values + new.values
        self.nan = None if new.nan is None or self.nan is None else self.nan or new.nan
        if not new.valid():
            return
        if not self.valid():
            self.min, self.max, self.any_valid = new.min, new.max, True
            return
        self.min = None if new.min is None or self.min is None else min(self.min, new.min,
                                                                         key=lambda v: sort_key(type_, v))
        self.max = None if new.max is None or self.max is None else max(self.max, new.max,
                                                                         key=lambda v: sort_key(type_, v))

    def row(self, table_id: int, column_id: int) -> TableColumnStats:
        return TableColumnStats(table_id, column_id, None if self.nulls is None else self.nulls > 0, self.nan,
                                self.min, self.max)


def _check_no_new_inlined_rows(b: CatalogBuilder, table_id: int, base: int) -> None:
    """Inlined rows committed since the rewrite read them would be missing from the recomputed statistics."""
    rows = b.db.query(b.conn, "SELECT changes_made FROM {p}ducklake_snapshot_changes WHERE snapshot_id > :s",
                      {"s": base})
    if any(parse_changes(text).has("inlined_insert", table_id) for (text,) in rows):
        raise CommitConflictError(f"rows were inlined into table id {table_id} while its files were rewritten; "
                                  "nothing was committed, run the maintenance again")


def rewrite_data_files(
    lake: MaintainedLake, schema: str | None = None, table: str | None = None, delete_threshold: float | None = None,
) -> list[tuple[str, str, int, int]]:
    """Rewrite the data files whose deleted fraction is at least delete_threshold, as ducklake_rewrite_data_files
    does; one snapshot for all tables. Returns (schema, table, files rewritten, files created) per table changed.

    delete_threshold defaults to the table's rewrite_delete_threshold option (table, schema, then lake scope), else
    0.95; 0 rewrites every file with a delete. Tables whose auto_compact option is not 'true' are left alone.

    Raises:
        ValueError: delete_threshold is not a number between 0 and 1.
        NoSuchTableError / NoSuchSchemaError: the table or schema does not exist.
        CommitConflictError: another writer changed the table meanwhile (nothing committed).
    """
    threshold = parse_threshold(delete_threshold)
    out = []
    # one snapshot for all tables, as the reference does; the transaction owns the files written for it
    with lake.transaction(commit_message="rewrite_data_files") as tx:
        state = tx.base
        for info in compactable_tables(lake, state, schema, table):
            limit = threshold if threshold is not None else parse_threshold(
                lake.option("rewrite_delete_threshold", info.table_id, info.schema_id) or DEFAULT_DELETE_THRESHOLD,
                "the rewrite_delete_threshold option")
            assert limit is not None
            groups = _rewrite_groups(lake, state, info, limit)
            if not groups:
                continue
            op = RewriteDataFiles(info.schema_name, info.name, state.snapshot_id, inlined=_inlined_stats(state, info))
            for sources in groups:
                op.rewrites.append(_write_rewritten(lake, state, info, sources, tx))
            tx.stage(op)
            out.append((info.schema_name, info.name, sum(len(g) for g in groups),
                        sum(r.spec is not None for r in op.rewrites)))
    return out


def _deleted(f: DataFile) -> int:
    """Rows of a live file deleted at the latest snapshot: its delete file's count and its inlined deletes."""
    return (f.delete_file.delete_count if f.delete_file is not None else 0) + len(f.inlined_deletes)


def _rewrite_groups(lake: MaintainedLake, state: LakeState, info: TableInfo, threshold: float) -> list[list[DataFile]]:
    """The reference's candidates: live files with deletes of at least threshold of their rows, grouped by schema
    version and partition, each group in the reference's file order."""
    versions = schema_versions(lake, info.table_id)
    groups: dict[tuple[object, ...], list[DataFile]] = {}
    for f in sorted(state.files(info), key=compaction_order):
        n = _deleted(f)
        if n == 0 or (n / f.record_count if f.record_count else 0.0) < threshold:
            continue
        groups.setdefault(group_key(versions, f), []).append(f)
    return list(groups.values())


def _write_rewritten(lake: MaintainedLake, state: LakeState, info: TableInfo, sources: Sequence[DataFile],
                     tx: Transaction) -> _Rewrite:
    """One file of the group's remaining rows, in the table's columns as of the first source's snapshot, each row
    with its row id (deleted rows leave gaps, so row ids are always written)."""
    first = sources[0]
    table_v = state_at(lake, state, first.begin_snapshot).table_by_id(info.table_id)
    mappings = state.name_mappings(info) if any(f.mapping_id is not None for f in sources) else {}
    # a missing or damaged source refuses the rewrite, named, before anything is written
    context = file_checks.table_context(info.schema_name, info.name, state.snapshot_id)
    file_checks.verify(context, [file_checks.data_file(f) for f in sources])
    parts = []
    for f in sources:
        task = FileScanTask(f, deleted_positions(f, state.snapshot_id), None,
                            mappings.get(f.mapping_id) if f.mapping_id is not None else None)
        with file_checks.reading(context, file_checks.data_file(f)):
            parts.append(read_file(task, table_v.columns, with_rowid=True))
    rows = pa.concat_tables(parts)
    if rows.num_rows == 0:
        return _Rewrite(tuple(sources), None)
    data = conform_loose(rows, table_v.columns)
    data = data.append_column(reserved_field(ROW_ID_COLUMN, ROW_ID_FIELD_ID), rows.column("rowid").cast(pa.int64()))
    directory = first.path.rsplit("/", 1)[0] if first.partition_id is not None else state.table_path(info)
    spec = write_file(table_v, directory, data, first.partition_values)
    tx.own_files([spec.path])
    return _Rewrite(tuple(sources), spec)


def _inlined_stats(state: LakeState, info: TableInfo) -> tuple[int, list[ColumnStats]] | None:
    """The table's inlined rows at the state's snapshot: their count and column stats as DuckDB's aggregates give
    them (MIN/MAX cast to text, booleans as 'false'/'true'), or None when a top-level column's type cannot be
    folded (the reference then keeps the table's stats)."""
    got = [t for t in read_inlined(state, info, with_rowid=False) if t.num_rows]
    if not got:
        return 0, []
    if any(parse_type(c.type).split("(")[0] not in _FOLDABLE for c in info.columns):
        return None
    rows = conform_loose(pa.concat_tables(got), info.columns)
    with tempfile.TemporaryDirectory() as tmp:  # the writer's footer stats are DuckDB's text forms of the bounds
        stats = write_file(info, tmp, rows, ()).stats
    booleans = {c.column_id for c in info.columns if c.type == "boolean"}
    named = {"0": "false", "1": "true"}
    return rows.num_rows, [
        ColumnStats(s.column_id, s.column_size_bytes, s.value_count, s.null_count,
                    named.get(s.min_value or "", s.min_value) if s.column_id in booleans else s.min_value,
                    named.get(s.max_value or "", s.max_value) if s.column_id in booleans else s.max_value,
                    s.contains_nan)
        for s in stats]
