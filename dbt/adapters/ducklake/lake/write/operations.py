"""Staged operations (named apart from the router's typed statements: `AddTable` here, `router.CreateTable`
there). DDL applies itself to the transaction's staged view as it is staged; at commit every operation replays on a
CatalogBuilder (the view that also writes the rows) on the latest state."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from ..catalog.lookups import ci_lookup
from ..errors import (
    CommitConflictError,
    DeletePositionError,
    InvalidDataFileError,
    NoSuchTableError,
    SchemaEvolutionError,
)
from ..read.deletes import delete_row_groups, merge_positions
from ..records import Column, ColumnStats, DataFile, TableInfo
from . import file_rows, nested_fields
from .builder import CatalogBuilder
from .catalog_view import CatalogView
from .datafiles import DataFileSpec
from .delete_files import DeleteFileSpec
from .inlining import take_small_insert
from .promotions import promotion_allowed


class Operation:
    """A staged change, applied at commit to a CatalogBuilder on the latest state (a data operation: its rows need
    the catalog, e.g. the table's live files).

    An operation on a table that existed when it was staged is bound to that table's id (bound_table_id), so a
    retried commit applies it to the same table even if another writer renamed it meanwhile, as the reference does.
    """

    bound_table_id: int | None = None

    def apply(self, b: CatalogBuilder) -> None:
        raise NotImplementedError


class DdlOperation(Operation):
    """A change of the catalog's objects: it applies to any CatalogView, so it also runs when staged (on the
    transaction's staged view), and later operations see its effect; at commit the builder also writes its rows."""

    def apply(self, b: CatalogView) -> None:
        raise NotImplementedError


@dataclass
class AddSchema(DdlOperation):
    name: str
    if_not_exists: bool = False

    def apply(self, b: CatalogView) -> None:
        if self.if_not_exists and self.name.lower() in (s.lower() for s in b.schemas):
            return
        b.create_schema(self.name)


@dataclass
class RemoveSchema(DdlOperation):
    name: str
    cascade: bool = False
    if_exists: bool = False

    def apply(self, b: CatalogView) -> None:
        if self.if_exists and self.name.lower() not in (s.lower() for s in b.schemas):
            return
        b.drop_schema(self.name, self.cascade)


@dataclass
class AddTable(DdlOperation):
    schema: str
    name: str
    columns: tuple[Column, ...]
    partition: tuple[tuple[str, str], ...] | None = None
    comment: str | None = None
    replace: bool = False
    keep_column_ids: bool = False  # the columns carry their ids already (a clone)

    def apply(self, b: CatalogView) -> None:
        if self.replace:
            old = b.tables.get((self.schema, self.name))
            if old is not None:
                b.drop_table(old)
            view = b.views.get((self.schema, self.name))
            if view is not None:
                b.drop_view(view)
        info = b.create_table(self.schema, self.name, self.columns, self.partition, self.keep_column_ids)
        if self.comment is not None:
            b.set_tag(info.table_id, "comment", self.comment, is_view=False)


@dataclass
class RemoveTable(DdlOperation):
    schema: str
    name: str
    if_exists: bool = False

    def apply(self, b: CatalogView) -> None:
        if self.if_exists and _bound_or_none(b, self, self.name) is None:
            return
        b.drop_table(bound_table(b, self, self.name))


@dataclass
class RenameTable(DdlOperation):
    schema: str
    name: str
    new_name: str

    def apply(self, b: CatalogView) -> None:
        b.rename_table(bound_table(b, self, self.name), self.new_name)


@dataclass
class SetPartitioning(DdlOperation):
    schema: str
    name: str
    fields: tuple[tuple[str, str], ...] | None

    def apply(self, b: CatalogView) -> None:
        b.set_partitioning(bound_table(b, self, self.name), self.fields)


@dataclass
class SetSortedBy(DdlOperation):
    schema: str
    name: str
    keys: tuple[str, ...] | None

    def apply(self, b: CatalogView) -> None:
        b.set_sorted_by(bound_table(b, self, self.name), self.keys)


@dataclass
class SetTableOptions(Operation):
    """Table-scope write options (stored texts), written with the commit for the table's final id."""

    schema: str
    table: str
    options: dict[str, str]

    def apply(self, b: CatalogBuilder) -> None:
        b.set_table_options(bound_table(b, self, self.table), self.options)


@dataclass
class AddColumn(DdlOperation):
    schema: str
    table: str
    column: Column
    staged_ids: tuple[int, ...] | None = None  # the ids staging gave the column (its tree): files may carry them

    def apply(self, b: CatalogView) -> None:
        info = b.add_column(bound_table(b, self, self.table), self.column)
        ids = tuple(c.column_id for c in info.columns[-1].walk())
        if self.staged_ids is None:
            self.staged_ids = ids
        elif ids != self.staged_ids:
            # another writer's columns took the ids this transaction's files were written with
            raise CommitConflictError(f"the column {self.column.name!r} added to {self.schema}.{self.table} would get "
                                      f"column ids {list(ids)} at commit, but was staged (and its data written) with "
                                      f"{list(self.staged_ids)}: another writer changed the table's columns")


@dataclass
class RemoveColumn(DdlOperation):
    schema: str
    table: str
    column: str

    def apply(self, b: CatalogView) -> None:
        b.drop_column(bound_table(b, self, self.table), self.column)


@dataclass
class AlterColumn(DdlOperation):
    """Rename, change type (promotion only), set/drop default, set/drop NOT NULL of a top-level column."""

    schema: str
    table: str
    column: str
    new_name: str | None = None
    new_type: str | None = None
    default: str | None = None
    set_default: bool = False
    nullable: bool | None = None

    def apply(self, b: CatalogView) -> None:
        info = bound_table(b, self, self.table)
        old = info.column(self.column)
        new = old
        if self.new_name is not None and self.new_name != old.name:
            if any(c.name.lower() == self.new_name.lower() for c in info.columns if c is not old):
                raise SchemaEvolutionError(f"table {info.name} already has a column {self.new_name!r}")
            new = replace(new, name=self.new_name)
        if self.new_type is not None:
            from ..types import parse_type

            target = parse_type(self.new_type)
            if target != old.type:
                if old.is_nested or not promotion_allowed(old.type, target):
                    raise SchemaEvolutionError(
                        f"cannot change column {info.name}.{old.name} from {old.type} to {target}: only widening "
                        "type promotions are allowed (e.g. int32 -> int64, float32 -> float64, date -> timestamp)"
                    )
                new = replace(new, type=target)
        if self.set_default:
            new = replace(new, default_value=self.default)
        if self.nullable is not None:
            new = replace(new, nullable=self.nullable)
        if new != old:
            b.replace_column(info, old, new)


@dataclass
class ChangeField(DdlOperation):
    """A change inside a nested column, as the reference writes it (nested_fields): `add` the field at path (field:
    its type tree), `drop` or `rename` (to new_name) the field at path, or `type`: the column path[0] evolves to the
    nested type tree field (new fields added, missing ones dropped, leaves widened)."""

    schema: str
    table: str
    path: tuple[str, ...]
    action: str
    field: Column | None = None
    new_name: str | None = None
    staged_ids: tuple[int, ...] | None = None  # the ids staging gave new fields: files may carry them

    def apply(self, b: CatalogView) -> None:
        info = bound_table(b, self, self.table)
        top = info.column(self.path[0])
        if self.action == "add" and self.field is not None:
            change = nested_fields.add_field(top, self.path, self.field, b.column_id_source(info))
        elif self.action == "drop":
            change = nested_fields.drop_field(top, self.path)
        elif self.action == "rename" and self.new_name is not None:
            change = nested_fields.rename_field(top, self.path, self.new_name)
        elif self.action == "type" and self.field is not None:
            change = nested_fields.evolve(top, self.field, b.column_id_source(info))
        else:
            raise ValueError(f"ChangeField: unknown action {self.action!r} or missing argument")
        if not change.ended and not change.rows:
            return  # the same type: no change, as an unchanged ALTER of another column
        b.change_nested_column(info, change)
        if self.staged_ids is None:
            self.staged_ids = change.added_ids
        elif change.added_ids != self.staged_ids:
            raise CommitConflictError(f"the fields added to {self.schema}.{self.table} column {top.name!r} would get "
                                      f"column ids {list(change.added_ids)} at commit, but were staged (and their "
                                      f"data written) with {list(self.staged_ids)}: another writer changed the "
                                      "table's columns")


@dataclass
class SetComment(DdlOperation):
    schema: str
    name: str
    comment: str | None
    column: str | None = None

    def apply(self, b: CatalogView) -> None:
        if (self.schema, self.name) in b.views:
            view = b.view(self.schema, self.name)
            if self.column is None:
                b.set_tag(view.view_id, "comment", self.comment, is_view=True)
            else:
                b.set_view_column_tag(view, self.column, "comment", self.comment)
            return
        info = bound_table(b, self, self.name)
        if self.column is None:
            b.set_tag(info.table_id, "comment", self.comment, is_view=False)
        else:
            b.set_column_tag(info, info.column(self.column).column_id, "comment", self.comment)


@dataclass
class SetTag(DdlOperation):
    """A tag (key/value) on a table or view; None removes it."""

    schema: str
    name: str
    key: str
    value: str | None

    def apply(self, b: CatalogView) -> None:
        if (self.schema, self.name) in b.views or ci_lookup(b.views, (self.schema, self.name)) is not None:
            b.set_tag(b.view(self.schema, self.name).view_id, self.key, self.value, is_view=True)
            return
        info = bound_table(b, self, self.name)
        b.set_tag(info.table_id, self.key, self.value, is_view=False)


@dataclass
class AddView(DdlOperation):
    schema: str
    name: str
    sql: str
    dialect: str = "duckdb"
    column_aliases: tuple[str, ...] = ()
    replace: bool = False
    comment: str | None = None

    def apply(self, b: CatalogView) -> None:
        if self.replace:
            old = b.views.get((self.schema, self.name))
            if old is not None:
                b.drop_view(old)
        info = b.create_view(self.schema, self.name, self.sql, self.dialect, self.column_aliases)
        if self.comment is not None:
            b.set_tag(info.view_id, "comment", self.comment, is_view=True)


@dataclass
class RemoveView(DdlOperation):
    schema: str
    name: str
    if_exists: bool = False

    def apply(self, b: CatalogView) -> None:
        if self.if_exists and (self.schema, self.name) not in b.views:
            return
        b.drop_view(b.view(self.schema, self.name))


@dataclass
class RenameView(DdlOperation):
    schema: str
    name: str
    new_name: str

    def apply(self, b: CatalogView) -> None:
        b.rename_view(b.view(self.schema, self.name), self.new_name)


# data ----------------------------------------------------------------------------------------------------------


@dataclass
class AddDataFiles(Operation):
    schema: str
    table: str
    files: tuple[DataFileSpec, ...]
    # the rows of small files read back to be inlined (lake/write/inlining), kept for a retried commit
    inlined_reads: dict[str, pa.Table] = field(default_factory=dict, repr=False, compare=False)

    def apply(self, b: CatalogBuilder) -> None:
        info = bound_table(b, self, self.table)
        files = take_small_insert(b, info, self.files, b.inlining_overrides, self.inlined_reads)
        nkeys = len(info.partition.fields) if info.partition else 0
        table_dir = b.table_path(info)
        delta = b.stats_delta(info.table_id)
        next_row_id = _next_row_id(b, info.table_id) + delta.rows_added
        pid = info.partition.partition_id if info.partition else None
        rows: list[file_rows.DataFileRow] = []
        stats: list[tuple[int, int, ColumnStats]] = []
        values: list[tuple[int, int, Sequence[str | None]]] = []
        mappings: list[tuple[int, int, Sequence[file_rows.NameMappingEntry]]] = []
        leaf_ids = {c.column_id for top in info.columns for c in top.leaves()}
        for spec in files:
            if len(spec.partition_values) != nkeys:
                raise InvalidDataFileError(
                    f"{spec.path}: table {info.schema_name}.{info.name} has {nkeys} partition keys but the file "
                    f"gives {len(spec.partition_values)} partition values"
                )
            fid = b.file_id()
            mapping_id = None
            if spec.name_mapping is not None:
                mapping_id = b.file_id()
                mappings.append((mapping_id, info.table_id, spec.name_mapping))
            rows.append(file_rows.DataFileRow(fid, info.table_id, b.snapshot_id, spec.path, table_dir,
                                              spec.record_count, spec.file_size_bytes, spec.footer_size, next_row_id,
                                              pid, mapping_id=mapping_id, row_group_count=spec.row_group_count))
            next_row_id += spec.record_count
            delta.rows_added += spec.record_count
            delta.record_count += spec.record_count
            delta.file_size_bytes += spec.file_size_bytes
            for st in spec.stats:
                if st.column_id not in leaf_ids:
                    continue
                stats.append((fid, info.table_id, st))
                if (st.min_value is None or st.max_value is None) and (st.value_count is None or st.value_count > 0):
                    delta.unknown_bounds.add(st.column_id)
                delta.file_stats.setdefault(st.column_id, []).append(st)
            values.append((fid, info.table_id, spec.partition_values))
        # one many-row statement per catalog table, not two per file (fast on a DuckDB catalog: see catalog.execute)
        for statement in file_rows.name_mappings(b.db.dialect, mappings):
            b.add_rows(statement)
        b.add_rows(file_rows.data_files(b.db.dialect, rows, b.db.spec.row_group_counts))
        b.add_rows(file_rows.column_stats(b.db.dialect, stats))
        b.add_rows(file_rows.partition_values(values))
        if files:
            b.changes.inserted_tables.add(info.table_id)


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted (by a sort: NumPy 2's hash-based unique is several times slower on positions,
    which arrive sorted)."""
    out = np.sort(values)
    return out[np.r_[True, out[1:] != out[:-1]]] if out.size else out


@dataclass
class DeleteRows(Operation):
    """Delete rows of one data file by position (0-based row number in the file)."""

    schema: str
    table: str
    data_file_id: int
    positions: tuple[int, ...]

    def apply(self, b: CatalogBuilder) -> None:
        info = bound_table(b, self, self.table)
        f = _live_file(b, info.table_id, self.data_file_id)
        # vectorized: a MERGE can delete millions of positions of one file
        asked = np.asarray(self.positions, dtype=np.int64)
        outside = (asked < 0) | (asked >= f.record_count)
        if outside.any():
            raise DeletePositionError(f"delete positions {asked[outside][:5].tolist()} are outside data file "
                                      f"{f.data_file_id} ({f.record_count} rows)")
        existing = b.read_deletes(f.delete_file.path, f.delete_file.begin_snapshot) if f.delete_file else None
        already = _sorted_unique(np.concatenate([np.asarray(existing.positions if existing else (), dtype=np.int64),
                                                 np.asarray([p for p, _ in f.inlined_deletes], dtype=np.int64)]))
        new = _sorted_unique(asked)
        if already.size:
            at = np.minimum(np.searchsorted(already, new), already.size - 1)
            new = new[already[at] != new]
        if not new.size:
            return
        b.changes.deleted_tables.add(info.table_id)
        b.changes.deleted_files.add(f.data_file_id)
        if (len(existing.positions) if existing else 0) + len(new) >= f.record_count:
            # every row gone by delete files: the reference ends the data file and writes no delete file. Rows
            # deleted by inlined deletes do not count: with those, it writes a delete file of the rest, as here
            b.add(*file_rows.end_data_files(b.snapshot_id, data_file_id=f.data_file_id))
            b.add(*file_rows.end_delete_files(b.snapshot_id, data_file_id=f.data_file_id))
            return
        merged = merge_positions(existing, new, b.snapshot_id)
        directory = f.path.rsplit("/", 1)[0]
        vectors = (b.catalog.option("write_deletion_vectors", info.table_id, info.schema_id) or "").lower() == "true"
        # each position's snapshot is written when the file already had deletes (1.0 style: the new file holds them
        # all), and for a data file whose rows carry their own snapshots (a merged or flushed file): a delete file
        # without the column makes the reference's change feed report such a row's delete at the row's insert
        # snapshot, where a feed that already read past it never sees it
        with_snapshots = existing is not None or f.partial_max is not None
        if vectors and existing is not None and b.db.spec.is_1_1:
            # DuckLake 1.1 keeps every snapshot's deletes in one Puffin file of cumulative vectors (time travel and
            # the change feed keep each delete's snapshot): begins at the earliest, partial_max the latest
            spec = DeleteFileSpec("puffin", f.path, directory, merged.positions, merged.snapshots)
        elif vectors:
            # as DuckDB writes them: every deleted position in one vector, counted from this snapshot (a vector keeps
            # no per-position snapshot), no footer
            spec = DeleteFileSpec("vector", f.path, directory, merged.positions, None)
        else:
            spec = DeleteFileSpec("parquet", f.path, directory, merged.positions,
                                  merged.snapshots if with_snapshots else None)
        written = b.delete_file(spec)
        if written is None:
            return  # not written yet: the commit writes it before its catalog transaction and tries again
        path, size, footer = written
        if spec.kind == "puffin":
            row = file_rows.DeleteFileRow(b.file_id(), info.table_id, min(merged.snapshots), f.data_file_id, path,
                                          b.table_path(info), len(merged.positions), size, footer,
                                          max(merged.snapshots), "puffin")
        elif spec.kind == "vector":
            row = file_rows.DeleteFileRow(b.file_id(), info.table_id, b.snapshot_id, f.data_file_id, path,
                                          b.table_path(info), len(merged.positions), size, footer, None, "puffin")
        else:
            row = file_rows.DeleteFileRow(
                b.file_id(), info.table_id, min(merged.snapshots) if existing else b.snapshot_id, f.data_file_id, path,
                b.table_path(info), len(merged.positions), size, footer, b.snapshot_id if with_snapshots else None,
                row_group_count=delete_row_groups(len(merged.positions)))
        b.add_rows(file_rows.delete_files(b.db.dialect, [row], b.db.spec.row_group_counts))
        if existing is not None and f.delete_file is not None:
            # 1.0 style: the new file holds every delete with its snapshot; the old row goes, its file is scheduled
            old = f.delete_file
            b.add(*file_rows.remove_delete_file(old.delete_file_id))
            b.schedule_for_deletion([(old.delete_file_id, old.path)])


@dataclass
class DeleteInlinedRows(Operation):
    """Delete rows that live in the table's inlined-data tables, by row id."""

    schema: str
    table: str
    row_ids: tuple[int, ...]

    def apply(self, b: CatalogBuilder) -> None:
        info = bound_table(b, self, self.table)
        names = [r[0] for r in b.db.query(
            b.conn, "SELECT table_name FROM {p}ducklake_inlined_data_tables WHERE table_id = :t", {"t": info.table_id}
        )]
        ids = sorted(set(self.row_ids))
        if not ids or not names:
            return
        for name in names:
            if not b.db.has_table(b.conn, name):
                continue
            sys = b.db.spec.inlined
            b.add(
                f"UPDATE {{p}}{name} SET {sys.end_snapshot} = :sid WHERE {sys.end_snapshot} IS NULL "
                f"AND {sys.row_id} = :r",
                [{"sid": b.snapshot_id, "r": r} for r in ids],
            )
        b.changes.inlined_deleted.add(info.table_id)


def bound_table(b: CatalogView, op: Operation, name: str) -> TableInfo:
    """The table an operation works on: by its bound id, else by name (a table created in this transaction)."""
    if op.bound_table_id is not None:
        return b.table_by_id(op.bound_table_id)
    return b.table(op.schema, name)  # type: ignore[attr-defined]


def _bound_or_none(b: CatalogView, op: Operation, name: str) -> TableInfo | None:
    try:
        return bound_table(b, op, name)
    except NoSuchTableError:
        return None


def _next_row_id(b: CatalogBuilder, table_id: int) -> int:
    rows = b.db.query(b.conn, "SELECT next_row_id FROM {p}ducklake_table_stats WHERE table_id = :t", {"t": table_id})
    return rows[0][0] if rows else 0


def _live_file(b: CatalogBuilder, table_id: int, data_file_id: int) -> DataFile:
    for f in b.live_files(table_id):
        if f.data_file_id == data_file_id:
            return f
    raise CommitConflictError(
        f"data file {data_file_id} of table id {table_id} is no longer live (another writer compacted or dropped it)"
    )
