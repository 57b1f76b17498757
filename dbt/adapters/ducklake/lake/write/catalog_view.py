"""The working catalog of a transaction: what it creates, drops and changes, checked as it goes; no SQL.

A CatalogView starts from a state of the lake and the counters of its snapshot. Operations validate themselves
against it and change it; a transaction keeps one as its staged view. At commit, the same operations replay on a
CatalogBuilder (lake/builder), the view that also records the rows of what changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from sqlalchemy.engine import Connection

from ..catalog.database import CatalogDB
from ..catalog.lookups import CatalogObjects, ci_lookup
from ..catalog.state import LakeState, load_files, nested_nullable, option_rows, resolve_option
from ..errors import (
    SchemaEvolutionError,
    SchemaExistsError,
    TableExistsError,
    UnsupportedFeatureError,
)
from ..paths import table_directory, uuid7
from ..records import Column, ColumnStats, DataFile, SchemaInfo, Snapshot, TableColumnStats, TableInfo, ViewInfo
from .nested_fields import NestedChange


def quote(name: str) -> str:
    """A name in a change string: double-quoted, '"' doubled (DuckDB's KeywordHelper::WriteQuoted)."""
    return '"' + name.replace('"', '""') + '"'


@dataclass
class ChangeSet:
    """What a commit changed, in the categories DuckDB's change strings and conflict rules use."""

    created_schemas: list[str] = field(default_factory=list)
    dropped_schemas: set[int] = field(default_factory=set)
    created_tables: list[tuple[str, str, bool]] = field(default_factory=list)  # (schema, name, is_view)
    dropped_tables: set[int] = field(default_factory=set)
    dropped_views: set[int] = field(default_factory=set)
    inserted_tables: set[int] = field(default_factory=set)
    deleted_tables: set[int] = field(default_factory=set)
    altered_tables: set[int] = field(default_factory=set)
    altered_views: set[int] = field(default_factory=set)
    inlined_inserted: set[int] = field(default_factory=set)
    inlined_deleted: set[int] = field(default_factory=set)
    inline_flushed: set[int] = field(default_factory=set)  # maintenance: flush_inlined_data
    merged_adjacent: set[int] = field(default_factory=set)  # maintenance: merge_adjacent_files
    rewritten: set[int] = field(default_factory=set)  # maintenance: rewrite_data_files
    deleted_files: set[int] = field(default_factory=set)  # data files we delete rows from (for conflict checks)
    # for conflict checks only: names of schemas we drop, ids of existing schemas we create entries in
    dropped_schema_names: set[str] = field(default_factory=set)
    created_in_schemas: set[int] = field(default_factory=set)

    def render(self) -> str:
        """The ducklake_snapshot_changes.changes_made string, in the reference's order."""
        parts = [f"dropped_schema:{i}" for i in sorted(self.dropped_schemas)]
        parts += [f"dropped_table:{i}" for i in sorted(self.dropped_tables)]
        parts += [f"dropped_view:{i}" for i in sorted(self.dropped_views)]
        parts += [f"created_schema:{quote(s)}" for s in self.created_schemas]
        parts += [
            f"created_{'view' if is_view else 'table'}:{quote(s)}.{quote(n)}" for s, n, is_view in self.created_tables
        ]
        parts += [f"inserted_into_table:{i}" for i in sorted(self.inserted_tables)]
        parts += [f"deleted_from_table:{i}" for i in sorted(self.deleted_tables)]
        parts += [f"altered_table:{i}" for i in sorted(self.altered_tables)]
        parts += [f"altered_view:{i}" for i in sorted(self.altered_views)]
        parts += [f"inlined_insert:{i}" for i in sorted(self.inlined_inserted)]
        parts += [f"inlined_delete:{i}" for i in sorted(self.inlined_deleted)]
        parts += [f"inline_flush:{i}" for i in sorted(self.inline_flushed)]
        parts += [f"merge_adjacent:{i}" for i in sorted(self.merged_adjacent)]
        parts += [f"rewrite_delete:{i}" for i in sorted(self.rewritten)]
        return ",".join(parts)

    @property
    def empty(self) -> bool:
        return not self.render()

    def without_created(self, table_ids: set[int], view_ids: set[int]) -> ChangeSet:
        """A copy without the ids of tables and views this transaction creates, for conflict checks: they are
        provisional (a retry gives them fresh ids), and another writer's object may hold the same id meanwhile."""
        out = replace(self)
        for name in ("inserted_tables", "deleted_tables", "altered_tables", "inlined_inserted", "inlined_deleted",
                     "dropped_tables"):
            setattr(out, name, getattr(self, name) - table_ids)
        for name in ("altered_views", "dropped_views"):
            setattr(out, name, getattr(self, name) - view_ids)
        return out


@dataclass
class StatsDelta:
    """Changes to one table's ducklake_table_stats / ducklake_table_column_stats rows."""

    record_count: int = 0
    file_size_bytes: int = 0
    rows_added: int = 0  # next_row_id advance
    file_stats: dict[int, list[ColumnStats]] = field(default_factory=dict)  # per column, in file order
    unknown_bounds: set[int] = field(default_factory=set)  # columns with values whose min/max are not known


class CatalogReader:
    """The catalog's rows a commit reads beyond its state (inside the commit's transaction, on its connection)."""

    def __init__(self, db: CatalogDB, conn: Connection) -> None:
        self.db = db
        self.conn = conn
        # each option name's rows, read once per commit attempt: a delete of many files asks for the table's
        # write_deletion_vectors once per file (1,024 files: 1,024 catalog queries, 2.5 s on a DuckDB file). The
        # attempt's own rows (set_table_options) are statements run after every operation has been applied, so
        # the catalog its reads see does not change during the attempt
        self._options: dict[str, dict[tuple[str | None, int | None], str]] = {}

    def option(self, name: str, table_id: int | None = None, schema_id: int | None = None) -> str | None:
        """A set_option value as DuckDB resolves it (table scope, then schema, then the lake's)."""
        found = self._options.get(name)
        if found is None:
            found = self._options[name] = option_rows(self.db, self.conn, name)
        return resolve_option(found, table_id, schema_id)

    def max_column_id(self, table_id: int) -> int:
        """The highest column id the table ever had (dropped columns included); 0 if none."""
        rows = self.db.query(self.conn, "SELECT max(column_id) FROM {p}ducklake_column WHERE table_id = :t",
                             {"t": table_id})
        return rows[0][0] or 0

    def live_files(self, state: LakeState, table: TableInfo) -> list[DataFile]:
        return load_files(self.db, self.conn, state, table)

    def table_stats(self, table_id: int) -> tuple[int, int, int] | None:
        """(record_count, next_row_id, file_size_bytes) of the table's stats row, if it has one."""
        rows = self.db.query(
            self.conn,
            "SELECT record_count, next_row_id, file_size_bytes FROM {p}ducklake_table_stats WHERE table_id = :t",
            {"t": table_id},
        )
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    def table_column_stats(self, table_id: int) -> dict[int, TableColumnStats]:
        rd = self.db.dialect.read_bool
        return {
            r[0]: TableColumnStats(table_id, r[0], rd(r[1]), rd(r[2]), r[3], r[4])
            for r in self.db.query(
                self.conn,
                "SELECT column_id, contains_null, contains_nan, min_value, max_value "
                "FROM {p}ducklake_table_column_stats WHERE table_id = :t",
                {"t": table_id},
            )
        }


class ColumnIdReader:
    """A transaction's staged view asks the catalog one thing its state does not hold: the highest id a table's
    columns ever had, dropped ones included. A column added in the transaction gets its id from it, and files written
    in the same transaction carry that id as a field id, so it must be the id the commit gives (a lower one would
    leave the column's values unreadable). One short read per table; nothing else of the view reads the catalog.
    """

    def __init__(self, db: CatalogDB) -> None:
        self.db = db
        self._known: dict[int, int] = {}  # one answer per table for the whole transaction (its replays too)

    def max_column_id(self, table_id: int) -> int:
        if table_id not in self._known:
            with self.db.read() as conn:
                self._known[table_id] = CatalogReader(self.db, conn).max_column_id(table_id)
        return self._known[table_id]


class CatalogView(CatalogObjects):
    """The working catalog of one transaction or commit attempt: schemas, tables and views as changed so far, the
    id counters, the ChangeSet, and what needs a schema_versions row or a stats change.

    reader: the catalog, for what the state does not hold (the ids of columns dropped before it): a commit's
    CatalogReader, or a transaction's ColumnIdReader. Without one a new column's id only knows the state's columns.
    """

    MISSING_ID_HINT = " (was it dropped by another writer?)"

    def __init__(self, latest: LakeState, reader: CatalogReader | ColumnIdReader | None = None) -> None:
        self.latest = latest
        self.reader = reader
        snap = latest.snapshot
        self.snapshot_id = snap.snapshot_id + 1
        self.base_schema_version = snap.schema_version
        self.next_catalog_id = snap.next_catalog_id
        self.next_file_id = snap.next_file_id
        self.schemas: dict[str, SchemaInfo] = dict(latest.schemas)
        self.tables: dict[tuple[str, str], TableInfo] = dict(latest.tables)
        self.views: dict[tuple[str, str], ViewInfo] = dict(latest.views)
        self.changes = ChangeSet()
        self.schema_changed = False
        self.schema_version_tables: set[int] = set()  # tables that get a ducklake_schema_versions row
        self.stats: dict[int, StatsDelta] = {}
        self.created_table_ids: set[int] = set()
        self.created_view_ids: set[int] = set()
        self._assigned_column_ids: dict[int, list[int]] = {}  # column ids given out by this commit, per table

    # ids -------------------------------------------------------------------------------------------------------
    def catalog_id(self) -> int:
        cid = self.next_catalog_id
        self.next_catalog_id += 1
        return cid

    def file_id(self) -> int:
        fid = self.next_file_id
        self.next_file_id += 1
        return fid

    def ddl_change(self, table_id: int | None = None, schema_row: bool = True) -> None:
        """Record a schema change: a new schema_version, and a schema_versions row for the table if asked."""
        self.schema_changed = True
        if table_id is not None and schema_row:
            self.schema_version_tables.add(table_id)

    @property
    def schema_version(self) -> int:
        return self.base_schema_version + (1 if self.schema_changed else 0)

    def state_after(self, snapshot: Snapshot, changed: frozenset[int] | None) -> LakeState:
        """The lake at the snapshot this view's commit wrote (snapshot: its row, as CatalogBuilder.record gives it):
        the view's schemas, tables and views, with the files and inlined rows the latest state had loaded for the
        tables the commit did not change (`changed`: the ids its changes_made names; None: unknown, nothing carried;
        the others load on demand, as after load_state)."""
        # a renamed table's row is new in the catalog, from this snapshot on (the view keeps its first begin)
        rows = {(s, n) for s, n, is_view in self.changes.created_tables if not is_view}
        tables = {k: replace(t, begin_snapshot=self.snapshot_id) if k in rows else t for k, t in self.tables.items()}
        # as a load reads them (the kept state must equal the next load's)
        tables = {k: t if (cols := nested_nullable(t.columns)) is t.columns else replace(t, columns=cols)
                  for k, t in tables.items()}
        state = LakeState(self.latest.db, snapshot, self.latest.data_path, dict(self.schemas), tables,
                          dict(self.views), self.latest.nested_schemas)
        if changed is not None:
            state.carry_files(self.latest, changed | self.created_table_ids)
        return state

    # lookups: catalog/lookups.CatalogObjects -----------------------------------------------------------------
    def table_path(self, info: TableInfo) -> str:
        """The directory of a table as this view has it (its schema may be created in this transaction)."""
        schema = next(s for s in self.schemas.values() if s.schema_id == info.schema_id)
        return table_directory(self.latest.data_path, schema, info)

    def check_free(self, schema: str, name: str) -> None:
        if ci_lookup(self.tables, (schema, name)) is not None:
            raise TableExistsError(f"table {schema}.{name} already exists")
        if ci_lookup(self.views, (schema, name)) is not None:
            raise TableExistsError(f"a view {schema}.{name} already exists")

    def note_created_in(self, schema: SchemaInfo) -> None:
        if schema.begin_snapshot < self.snapshot_id:  # an existing schema another writer could drop
            self.changes.created_in_schemas.add(schema.schema_id)

    # schemas -----------------------------------------------------------------------------------------------
    def create_schema(self, name: str) -> SchemaInfo:
        if ci_lookup(self.schemas, name) is not None:
            raise SchemaExistsError(f"schema {name!r} already exists")
        info = SchemaInfo(self.catalog_id(), str(uuid7()), name, name + "/", True, self.snapshot_id)
        self.schemas[name] = info
        self.changes.created_schemas.append(name)
        self.ddl_change()
        return info

    def drop_schema(self, name: str, cascade: bool) -> None:
        info = self.schema(name)
        members = [t for t in self.tables.values() if t.schema_id == info.schema_id]
        views = [v for v in self.views.values() if v.schema_id == info.schema_id]
        if (members or views) and not cascade:
            names = ", ".join(sorted([t.name for t in members] + [v.name for v in views]))
            raise SchemaExistsError(f"schema {info.name!r} is not empty ({names}); drop it with cascade")
        for t in members:
            self.drop_table(t)
        for v in views:
            self.drop_view(v)
        del self.schemas[info.name]
        if info.name in self.changes.created_schemas:  # created and dropped in this transaction: nothing to say
            self.changes.created_schemas.remove(info.name)
        else:
            self.changes.dropped_schemas.add(info.schema_id)
            self.changes.dropped_schema_names.add(info.name)
        self.ddl_change()

    # tables --------------------------------------------------------------------------------------------------
    def create_table(
        self, schema: str, name: str, columns: Sequence[Column], partition: Sequence[tuple[str, str]] | None,
        keep_column_ids: bool = False,
    ) -> TableInfo:
        info = self.new_table(schema, name, columns, keep_column_ids)
        if partition:
            info = self.set_partitioning(info, partition)
        return info

    def new_table(self, schema: str, name: str, columns: Sequence[Column], keep_column_ids: bool) -> TableInfo:
        """A new table, unpartitioned (create_table's first step)."""
        s = self.schema(schema)
        self.check_free(s.name, name)
        tid = self.catalog_id()
        # a clone keeps its source's column ids: its files carry them as field ids
        cols = tuple(columns) if keep_column_ids else assign_column_ids(columns, 1)
        info = TableInfo(tid, str(uuid7()), s.schema_id, s.name, name, name + "/", True, self.snapshot_id, cols)
        self.tables[(s.name, name)] = info
        self.created_table_ids.add(tid)
        self.changes.created_tables.append((s.name, name, False))
        self.note_created_in(s)
        self.ddl_change(tid)
        return info

    def replace_table(self, old: TableInfo, new: TableInfo) -> TableInfo:
        del self.tables[(old.schema_name, old.name)]
        self.tables[(new.schema_name, new.name)] = new
        return new

    def drop_table(self, info: TableInfo) -> None:
        del self.tables[(info.schema_name, info.name)]
        if info.table_id in self.created_table_ids:  # created and dropped in this transaction
            self.changes.created_tables = [c for c in self.changes.created_tables
                                           if (c[0], c[1], c[2]) != (info.schema_name, info.name, False)]
        else:
            self.changes.dropped_tables.add(info.table_id)
        self.ddl_change()

    def rename_table(self, info: TableInfo, new_name: str) -> TableInfo:
        self.check_free(info.schema_name, new_name)
        self.changes.created_tables.append((info.schema_name, new_name, False))
        self.ddl_change(info.table_id)
        return self.replace_table(info, replace(info, name=new_name))

    def set_partitioning(self, info: TableInfo, fields: Sequence[tuple[str, str]] | None) -> TableInfo:
        spec = None
        if fields:
            from ..records import PartitionField, PartitionSpec
            from .partitioning import validate_transform

            pf = tuple(
                PartitionField(i, info.column(c).column_id,
                               validate_transform(info.column(c), t, epoch=self.latest.db.spec.epoch_transforms))
                for i, (c, t) in enumerate(fields)
            )
            spec = PartitionSpec(self.catalog_id(), pf)
        self.altered(info.table_id)
        return self.replace_table(info, replace(info, partition=spec))

    def set_sorted_by(self, info: TableInfo, keys: Sequence[str] | None) -> TableInfo:
        """SET SORTED BY (keys as DuckDB takes them) or, with None, RESET SORTED BY. As the reference: a new sort id
        from next_catalog_id, altered_table, a new schema version but no schema_versions row."""
        from ..records import SortSpec
        from .layout import parse_sorted_by

        spec = SortSpec(self.catalog_id(), parse_sorted_by(keys, info)) if keys else None
        self.altered(info.table_id, schema_row=False)
        return self.replace_table(info, replace(info, sort=spec))

    def altered(self, table_id: int, schema_row: bool = True) -> None:
        # also for a table created in this commit, as the reference writes it (created_table:…,altered_table:<id>)
        self.changes.altered_tables.add(table_id)
        self.ddl_change(table_id, schema_row)

    # columns -------------------------------------------------------------------------------------------------
    def next_column_id(self, info: TableInfo) -> int:
        """The id a new column gets: above every id the table ever had, dropped columns' included, as the
        reference's GetNextColumnId (a reused id would map old files' data of a dropped column to the new one).
        Those dropped before this view's state only the catalog knows (see ColumnIdReader)."""
        top = info.max_column_id()
        if self.reader is not None and info.table_id not in self.created_table_ids:
            top = max(top, self.reader.max_column_id(info.table_id))
        top = max([top, *self._assigned_column_ids.get(info.table_id, [])])
        return top + 1

    def add_column(self, info: TableInfo, column: Column) -> TableInfo:
        if any(c.name.lower() == column.name.lower() for c in info.columns):
            raise TableExistsError(f"table {info.schema_name}.{info.name} already has a column {column.name!r}")
        (col,) = assign_column_ids([column], self.next_column_id(info))
        self._assigned_column_ids.setdefault(info.table_id, []).extend(c.column_id for c in col.walk())
        self.altered(info.table_id)
        return self.replace_table(info, replace(info, columns=info.columns + (col,)))

    def column_id_source(self, info: TableInfo) -> Callable[[], int]:
        """next_column_id as a counter: each call gives the table the next id (the new fields of a nested change)."""

        def take() -> int:
            cid = self.next_column_id(info)
            self._assigned_column_ids.setdefault(info.table_id, []).append(cid)
            return cid

        return take

    def change_nested_column(self, info: TableInfo, change: NestedChange) -> TableInfo:
        """A top-level column's new tree after a change of its fields (lake/write/nested_fields)."""
        self.altered(info.table_id)
        return self.replace_table(info, replace(info, columns=_swap(info.columns, change.column.column_id,
                                                                    change.column)))

    def drop_column(self, info: TableInfo, name: str) -> TableInfo:
        col = info.column(name)
        if len(info.columns) == 1:
            raise SchemaEvolutionError(f"cannot drop {name!r}: it is the only column of {info.schema_name}.{info.name}")
        if info.partition and any(f.column_id == col.column_id for f in info.partition.fields):
            raise SchemaEvolutionError(f"cannot drop {name!r}: table {info.name} is partitioned by it")
        self.altered(info.table_id)
        return self.replace_table(info, replace(info, columns=tuple(c for c in info.columns if c is not col)))

    def replace_column(self, info: TableInfo, old: Column, new: Column) -> TableInfo:
        """A column's new version (same id): rename, type, default, nullability."""
        self.altered(info.table_id)
        return self.replace_table(info, replace(info, columns=_swap(info.columns, old.column_id, new)))

    # views ---------------------------------------------------------------------------------------------------
    def create_view(self, schema: str, name: str, sql: str, dialect: str, aliases: Sequence[str]) -> ViewInfo:
        s = self.schema(schema)
        self.check_free(s.name, name)
        vid = self.catalog_id()
        alias_text = ",".join(quote(a) for a in aliases)
        info = ViewInfo(vid, str(uuid7()), s.schema_id, s.name, name, dialect, sql, alias_text, self.snapshot_id)
        self.views[(s.name, name)] = info
        self.created_view_ids.add(vid)
        self.changes.created_tables.append((s.name, name, True))
        self.note_created_in(s)
        self.ddl_change()
        return info

    def drop_view(self, info: ViewInfo) -> None:
        del self.views[(info.schema_name, info.name)]
        self.changes.dropped_views.add(info.view_id)
        self.ddl_change()

    def rename_view(self, info: ViewInfo, new_name: str) -> ViewInfo:
        self.check_free(info.schema_name, new_name)
        new = replace(info, name=new_name, begin_snapshot=self.snapshot_id)
        del self.views[(info.schema_name, info.name)]
        self.views[(info.schema_name, new_name)] = new
        self.changes.created_tables.append((info.schema_name, new_name, True))
        self.ddl_change()
        return new

    # comments and tags ---------------------------------------------------------------------------------------
    def set_tag(self, object_id: int, key: str, value: str | None, is_view: bool) -> None:
        objects: dict = self.views if is_view else self.tables
        for name, obj in objects.items():  # the record keeps its tags as the catalog will (a new dict: base shared)
            if (obj.view_id if is_view else obj.table_id) == object_id:
                objects[name] = replace(obj, tags=_with_tag(obj.tags, key, value))
                break
        if is_view:
            self.changes.altered_views.add(object_id)
            self.ddl_change()
        else:
            self.altered(object_id, schema_row=False)

    def set_column_tag(self, info: TableInfo, column_id: int, key: str, value: str | None) -> None:
        current = self.tables.get((info.schema_name, info.name))
        if current is not None and current.table_id == info.table_id:
            column_tags = {**current.column_tags,
                           column_id: _with_tag(current.column_tags.get(column_id, {}), key, value)}
            self.tables[(info.schema_name, info.name)] = replace(
                current, column_tags={k: v for k, v in column_tags.items() if v})
        self.altered(info.table_id, schema_row=False)

    def set_view_column_tag(self, info: ViewInfo, column: str, key: str, value: str | None) -> None:
        """A tag of a view's column (DuckLake 1.1), by the name the view's query gives it."""
        if not self.latest.db.spec.view_column_tags:
            raise UnsupportedFeatureError(
                f"a {key} on column {column!r} of view {info.schema_name}.{info.name}: view column tags are a DuckLake "
                "1.1 feature and this lake's catalog is spec 1.0")
        current = self.views.get((info.schema_name, info.name), info)
        tags = {**current.column_tags, column: _with_tag(current.column_tags.get(column, {}), key, value)}
        self.views[(info.schema_name, info.name)] = replace(current, column_tags={k: v for k, v in tags.items() if v})
        self.changes.altered_views.add(info.view_id)
        self.ddl_change()

    # stats ---------------------------------------------------------------------------------------------------
    def stats_delta(self, table_id: int) -> StatsDelta:
        return self.stats.setdefault(table_id, StatsDelta())


def _with_tag(tags: dict[str, str], key: str, value: str | None) -> dict[str, str]:
    """tags with key set to value (None: removed)."""
    out = {k: v for k, v in tags.items() if k != key}
    if value is not None:
        out[key] = value
    return out


def assign_column_ids(columns: Sequence[Column], first: int) -> tuple[Column, ...]:
    """Give columns ids depth first, parent before children, starting at first (as DuckDB numbers them)."""
    counter = [first]

    def assign(col: Column) -> Column:
        cid = counter[0]
        counter[0] += 1
        kids = tuple(assign(c) for c in col.children)
        return replace(col, column_id=cid, children=kids)

    return tuple(assign(c) for c in columns)


def parent_of(columns: Sequence[Column], column_id: int) -> int | None:
    """The id of the column whose child has this id; None for a top-level column."""
    for top in columns:
        for node in top.walk():
            if any(ch.column_id == column_id for ch in node.children):
                return node.column_id
    return None


def _swap(columns: Sequence[Column], column_id: int, new: Column) -> tuple[Column, ...]:
    def sw(c: Column) -> Column:
        if c.column_id == column_id:
            return new
        return replace(c, children=tuple(sw(ch) for ch in c.children)) if c.children else c

    return tuple(sw(c) for c in columns)
