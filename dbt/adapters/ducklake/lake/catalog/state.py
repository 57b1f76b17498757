"""The lake as of one snapshot: schemas, tables, views, columns, partitioning, tags, files and stats.

Every query here uses one visibility rule: a row is visible at snapshot S when
begin_snapshot <= S AND (end_snapshot IS NULL OR S < end_snapshot).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.engine import Connection

from ..errors import NoSuchSnapshotError, UnsupportedFeatureError
from ..gc_pause import gc_paused
from ..paths import join_path, table_directory
from ..records import (
    Column,
    ColumnStats,
    DataFile,
    DeleteFile,
    InlinedTable,
    NameMapping,
    PartitionField,
    PartitionSpec,
    SchemaInfo,
    Snapshot,
    SortField,
    SortSpec,
    TableColumnStats,
    TableInfo,
    TableStats,
    ViewInfo,
)
from .database import CatalogDB
from .lookups import CatalogObjects

# a load of one table's files loads those of every table not loaded yet while they are at most this many
LOAD_ALL_FILES_UP_TO = 2_000
# a load of one table's inlined-data tables loads those of at most this many tables not loaded yet
LOAD_ALL_TABLES_UP_TO = 2_000


def id_list(values: Iterable[int]) -> str:
    """Integer ids for an IN (...) list written into the SQL (integers we format ourselves, never text)."""
    return ", ".join(str(int(v)) for v in values)


def visible(alias: str = "", param: str = "s") -> str:
    """The visibility predicate for rows of a catalog table (optionally aliased) at snapshot :s."""
    a = f"{alias}." if alias else ""
    return f"({a}begin_snapshot <= :{param} AND ({a}end_snapshot IS NULL OR :{param} < {a}end_snapshot))"


SNAPSHOT_SELECT = """
    SELECT s.snapshot_id, s.snapshot_time, s.schema_version, s.next_catalog_id, s.next_file_id,
           c.changes_made, c.author, c.commit_message, c.commit_extra_info
    FROM {p}ducklake_snapshot s LEFT JOIN {p}ducklake_snapshot_changes c USING (snapshot_id)
"""


def snapshot_from_row(db: CatalogDB, row: Sequence[Any]) -> Snapshot:
    return Snapshot(
        snapshot_id=row[0],
        snapshot_time=db.dialect.read_timestamp(row[1]),
        schema_version=row[2],
        next_catalog_id=row[3],
        next_file_id=row[4],
        changes_made=row[5],
        author=row[6],
        commit_message=row[7],
        commit_extra_info=row[8],
    )


def latest_snapshot(db: CatalogDB, conn: Connection) -> Snapshot:
    """The newest snapshot of the lake."""
    rows = db.query(conn, SNAPSHOT_SELECT + " WHERE s.snapshot_id = (SELECT max(snapshot_id) FROM {p}ducklake_snapshot)")
    if not rows:
        raise NoSuchSnapshotError("the lake has no snapshots at all (damaged catalog?)")
    return snapshot_from_row(db, rows[0])


def find_snapshot(
    db: CatalogDB, conn: Connection, version: int | None = None, timestamp: dt.datetime | None = None
) -> Snapshot:
    """A snapshot by id, or the last one committed at or before a timestamp, or the latest.

    Raises:
        NoSuchSnapshotError: the version does not exist (never did, or was expired) or the time is before the lake.
    """
    if version is not None and timestamp is not None:
        raise ValueError("give a snapshot version or a timestamp, not both")
    if version is not None:
        rows = db.query(conn, SNAPSHOT_SELECT + " WHERE s.snapshot_id = :v", {"v": int(version)})
        if not rows:
            latest = latest_snapshot(db, conn)
            hint = "it was expired" if version < latest.snapshot_id else "it is newer than the latest"
            raise NoSuchSnapshotError(
                f"snapshot version {version} does not exist in the lake ({hint}; latest is {latest.snapshot_id})"
            )
        return snapshot_from_row(db, rows[0])
    if timestamp is not None:
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=dt.timezone.utc)
        rows = db.query(
            conn,
            SNAPSHOT_SELECT
            + " WHERE s.snapshot_id = (SELECT max(snapshot_id) FROM {p}ducklake_snapshot WHERE snapshot_time <= "
            + db.dialect.timestamp_literal_sql()
            + ")",
            {"ts": db.dialect.timestamp_param(timestamp)},
        )
        if not rows:
            raise NoSuchSnapshotError(f"the lake has no snapshot at or before {timestamp.isoformat()}")
        return snapshot_from_row(db, rows[0])
    return latest_snapshot(db, conn)


def option_value(db: CatalogDB, conn: Connection, name: str, table_id: int | None = None,
                 schema_id: int | None = None) -> str | None:
    """A set_option value (table scope, then schema scope, then the lake's), as DuckDB resolves it."""
    return resolve_option(option_rows(db, conn, name), table_id, schema_id)


def option_rows(db: CatalogDB, conn: Connection, name: str) -> dict[tuple[str | None, int | None], str]:
    """Every scope's value of one set_option name: (scope, scope id) -> value; (None, None) is the lake's."""
    return {(r[0], r[1]): r[2] for r in db.query(conn, db.spec.option_rows_sql, {"k": name})}


def resolve_option(found: dict[tuple[str | None, int | None], str], table_id: int | None = None,
                   schema_id: int | None = None) -> str | None:
    """The value that applies to the table: its own, else its schema's, else the lake's (None: none is set)."""
    for key in (("table", table_id), ("schema", schema_id), (None, None)):
        if key in found:
            return found[key]
    return None


def list_snapshots(db: CatalogDB, conn: Connection) -> list[Snapshot]:
    """All snapshots that still exist, oldest first, with their changes."""
    return [snapshot_from_row(db, r) for r in db.query(conn, SNAPSHOT_SELECT + " ORDER BY s.snapshot_id")]


def nested_nullable(columns: tuple[Column, ...]) -> tuple[Column, ...]:
    """The columns as a load of the catalog gives them (build_column_tree): every field below the top level nullable
    (the same tuple when they are already). A commit's kept state goes through it, so that it equals the next load."""
    def fields(children: tuple[Column, ...]) -> tuple[Column, ...]:
        out = tuple(replace(k, nullable=True, children=fields(k.children)) for k in children)
        return children if out == children else out

    out = tuple(replace(c, children=kids) if (kids := fields(c.children)) is not c.children else c for c in columns)
    return columns if all(a is b for a, b in zip(out, columns, strict=True)) else out


def build_column_tree(rows: Iterable[Sequence[Any]]) -> tuple[Column, ...]:
    """Columns from (column_id, column_order, name, type, initial_default, default_value, nulls_allowed, parent)."""
    by_parent: dict[int | None, list[Sequence[Any]]] = defaultdict(list)
    for r in rows:
        by_parent[r[7]].append(r)

    def build(parent: int | None) -> tuple[Column, ...]:
        out = []
        for r in sorted(by_parent.get(parent, []), key=lambda r: (r[1], r[0])):
            default = r[5]
            out.append(
                Column(
                    column_id=r[0],
                    name=r[2],
                    type=r[3].lower(),
                    # DuckDB enforces no NOT NULL inside a nested column, though it stores nulls_allowed=false
                    # for the fields an ALTER adds, renames or widens: only a top-level column can be NOT NULL
                    nullable=bool(r[6]) if r[6] is not None and parent is None else True,
                    initial_default=r[4],
                    default_value=None if default in (None, "NULL") else default,
                    children=build(r[0]),
                )
            )
        return tuple(out)

    return build(None)


@dataclass
class LakeState(CatalogObjects):
    """The catalog as of one snapshot. Schemas, tables and views load at once; files load per table on demand."""

    db: CatalogDB
    snapshot: Snapshot
    data_path: str
    schemas: dict[str, SchemaInfo]
    tables: dict[tuple[str, str], TableInfo]
    views: dict[tuple[str, str], ViewInfo]
    nested_schemas: frozenset[str] = field(default=frozenset(), repr=False)  # 1.1's, as dotted paths, lower case
    _files: dict[int, list[DataFile]] = field(default_factory=dict, repr=False)
    # a table's inlined-data tables and the rows visible at this snapshot (read_inlined), loaded on demand and kept:
    # at one snapshot they cannot change, and a pruned read of a table would otherwise read them per statement
    _inlined: dict[int, list[InlinedTable]] = field(default_factory=dict, repr=False)
    _inlined_rows: dict[tuple[Any, ...], list[Any]] = field(default_factory=dict, repr=False)
    # inlined-data tables known to hold no row at all (DuckDB catalogs: from the table's row count, read with the
    # list of inlined-data tables): their reads need no catalog connection
    _empty_inlined: set[str] = field(default_factory=set, repr=False)
    # whether a load of one table's files may load every table's (false once the lake proved too big for that)
    _load_all: bool = field(default=True, repr=False)

    @property
    def snapshot_id(self) -> int:
        return self.snapshot.snapshot_id

    # lookups (catalog/lookups.CatalogObjects) -----------------------------------------------------------------
    def where(self) -> str:
        return f" at snapshot {self.snapshot_id}"

    def check_schema_name(self, schema: str) -> None:
        self.refuse_nested(schema)

    def refuse_nested(self, schema: str) -> None:
        """Raise UnsupportedFeatureError if the name is that of a nested schema (DuckLake 1.1), which this reads not."""
        if schema.lower() in self.nested_schemas:
            raise UnsupportedFeatureError(
                f"schema {schema!r} is a nested schema (a DuckLake 1.1 schema inside another schema): this version "
                "reads and writes tables and views of top-level schemas only; the rest of the lake is unaffected")

    def table_path(self, table: TableInfo) -> str:
        """The table's directory: data_path + schema path + table path (each relative part joined)."""
        return table_directory(self.data_path, self.schema_by_id(table.schema_id), table)

    # files -----------------------------------------------------------------------------------------------------
    def files(self, table: TableInfo | int) -> list[DataFile]:
        """The table's data files visible at this snapshot, with delete files, inlined deletes and stats."""
        t = table if isinstance(table, TableInfo) else self.table_by_id(table)
        if t.table_id not in self._files:
            with self.db.read() as conn:
                loaded = load_files_of(self.db, conn, self, self._with_others(conn, t))
                self.require_snapshot(conn)
            self._files.update(loaded)
        return self._files[t.table_id]

    def require_snapshot(self, conn: Connection) -> None:
        """Call after a load of rows visible at this snapshot: raise NoSuchSnapshotError if the snapshot is gone.

        A state can be held (a pinned unit, a time-travel read) while another process expires its snapshot, which
        deletes the file and inlined rows that only expired snapshots saw: a load then is silently partial. Expiry is
        final, so a snapshot still there after the load was there during it.
        """
        found = self.db.query(conn, "SELECT count(*) FROM {p}ducklake_snapshot WHERE snapshot_id = :s",
                              {"s": self.snapshot_id})
        if not int(found[0][0] or 0):
            raise NoSuchSnapshotError(
                f"snapshot {self.snapshot_id} was expired while it was being read (expire_snapshots): what was "
                "visible only at it is no longer in the catalog; read again at a retained snapshot")

    def _with_others(self, conn: Connection, table: TableInfo) -> list[TableInfo]:
        """The table, and every other table whose files are not loaded yet, while they have at most
        LOAD_ALL_FILES_UP_TO files: a dbt process reads many tables, and a load of one table's files costs a catalog
        connection of its own (a database open, on a DuckDB-file catalog), where one load of all costs one."""
        others = [t for t in self.tables.values() if t.table_id not in self._files and t.table_id != table.table_id]
        if not self._load_all or not others:
            return [table]
        ids = id_list(t.table_id for t in others)
        count = self.db.query(
            conn, f"SELECT count(*) FROM {{p}}ducklake_data_file WHERE table_id IN ({ids}) AND {visible()}",
            {"s": self.snapshot_id})[0][0]
        if int(count or 0) > LOAD_ALL_FILES_UP_TO:
            self._load_all = False  # a big lake: tables load their own files
            return [table]
        return [table, *others]

    def carry_files(self, older: LakeState, changed: Iterable[int]) -> None:
        """Take the files and inlined rows `older` (an earlier snapshot's state) loaded for tables that no snapshot
        since changed (`state_advance.tables_changed`, which counts inlined inserts, deletes and flushes): at this
        snapshot they are the same."""
        skip = set(changed)
        live = {t.table_id for t in self.tables.values()}
        for tid, files in older._files.items():
            if tid not in skip and tid in live and tid not in self._files:
                self._files[tid] = files
        for tid, tables in older._inlined.items():
            if tid not in skip and tid in live and tid not in self._inlined:
                self._inlined[tid] = tables
                self._empty_inlined.update(t.table_name for t in tables if older.inlined_empty(t))
        for key, rows in older._inlined_rows.items():
            if key[0] not in skip and key[0] in live and key not in self._inlined_rows:
                self._inlined_rows[key] = rows

    def inlined_rows(self, table: TableInfo, with_rowid: bool, only: str | None, load: Callable[[], list[Any]]
                     ) -> list[Any]:
        """The table's inlined rows visible at this snapshot as `load` reads them (inlined.read_inlined), read once
        per table, column tree (the rows are mapped to the columns asked for) and options."""
        key = (table.table_id, table.columns, with_rowid, only)
        if key not in self._inlined_rows:
            self._inlined_rows[key] = load()
        return self._inlined_rows[key]

    def has_partial_beyond(self, table: TableInfo) -> bool:
        """Whether a live data file holds rows of snapshots after this one (a partial file: its record count is not
        this snapshot's)."""
        s = self.snapshot_id
        if table.table_id in self._files:
            return any(f.partial_max is not None and f.partial_max > s for f in self._files[table.table_id])
        with self.db.read() as conn:
            rows = self.db.query(
                conn, "SELECT count(*) FROM {p}ducklake_data_file WHERE table_id = :t AND partial_max > :s "
                f"AND {visible()}", {"s": s, "t": table.table_id})
            self.require_snapshot(conn)
        return bool(rows[0][0])

    def live_rows_in_files(self, table: TableInfo) -> int:
        """The live data files' record counts minus their deleted rows (delete files and inlined deletes) at this
        snapshot: one aggregate query, unless the files are loaded already (a table of 10,000 files is not loaded
        with its statistics just to be counted)."""
        s = self.snapshot_id
        if table.table_id in self._files:
            n = 0
            for f in self._files[table.table_id]:
                n += f.record_count
                if f.delete_file is not None and f.delete_file.begin_snapshot <= s:
                    n -= f.delete_file.delete_count
                n -= sum(1 for _, begin in f.inlined_deletes if begin <= s)
            return n
        p = {"s": s, "t": table.table_id}
        with self.db.read() as conn:
            files = self.db.query(
                conn, f"SELECT sum(record_count) FROM {{p}}ducklake_data_file WHERE table_id = :t AND {visible()}", p)
            deletes = self.db.query(
                conn, "SELECT sum(delete_count) FROM {p}ducklake_delete_file WHERE table_id = :t "
                f"AND {visible()}", p)
            inlined = [(0,)]
            if self.db.has_table(conn, f"ducklake_inlined_delete_{table.table_id}"):
                inlined = self.db.query(
                    conn, f"SELECT count(*) FROM {{p}}ducklake_inlined_delete_{table.table_id} d "
                    "JOIN {p}ducklake_data_file f ON f.data_file_id = d.file_id "
                    f"WHERE d.begin_snapshot <= :s AND f.table_id = :t AND {visible('f')}", p)
            self.require_snapshot(conn)
        return int(files[0][0] or 0) - int(deletes[0][0] or 0) - int(inlined[0][0] or 0)

    def table_stats(self, table: TableInfo | int) -> TableStats | None:
        """The table's ducklake_table_stats row (current, not versioned)."""
        tid = table.table_id if isinstance(table, TableInfo) else table
        with self.db.read() as conn:
            rows = self.db.query(
                conn,
                "SELECT table_id, record_count, next_row_id, file_size_bytes FROM {p}ducklake_table_stats "
                "WHERE table_id = :t",
                {"t": tid},
            )
        return TableStats(*rows[0]) if rows else None

    def table_column_stats(self, table: TableInfo | int) -> dict[int, TableColumnStats]:
        tid = table.table_id if isinstance(table, TableInfo) else table
        with self.db.read() as conn:
            rows = self.db.query(
                conn,
                "SELECT table_id, column_id, contains_null, contains_nan, min_value, max_value "
                "FROM {p}ducklake_table_column_stats WHERE table_id = :t",
                {"t": tid},
            )
        rd = self.db.dialect.read_bool
        return {r[1]: TableColumnStats(r[0], r[1], rd(r[2]), rd(r[3]), r[4], r[5]) for r in rows}

    def files_loaded(self, table: TableInfo) -> bool:
        return table.table_id in self._files

    def knows_inlined(self, table: TableInfo) -> bool:
        """Whether the table's inlined-data tables are loaded (or known to be none)."""
        return table.table_id in self._inlined

    def inlined_tables(self, table: TableInfo | int, conn: Connection | None = None) -> list[InlinedTable]:
        """The table's inlined-data tables, each with the columns of its schema version (read in conn when given;
        those of every other table not known yet are read with them, as files are)."""
        tid = table.table_id if isinstance(table, TableInfo) else table
        if tid not in self._inlined:
            ids = [tid] + [t.table_id for t in self.tables.values() if t.table_id not in self._inlined
                           and t.table_id != tid][:LOAD_ALL_TABLES_UP_TO]
            with contextlib.nullcontext(conn) if conn is not None else self.db.read() as c:
                found, empty = load_inlined_tables_of(self.db, c, ids)
            self._empty_inlined |= empty
            for i in ids:
                self._inlined[i] = found.get(i, [])
        return self._inlined[tid]

    def inlined_empty(self, inlined: InlinedTable) -> bool:
        """Whether the inlined-data table is known to hold no row (then its rows need no catalog connection)."""
        return inlined.table_name in self._empty_inlined

    def name_mappings(self, table: TableInfo | int) -> dict[int, NameMapping]:
        tid = table.table_id if isinstance(table, TableInfo) else table
        with self.db.read() as conn:
            return load_name_mappings(self.db, conn, tid)


def load_state(db: CatalogDB, conn: Connection, snapshot: Snapshot, data_path: str) -> LakeState:
    """Read schemas, tables (with columns, partitioning, tags) and views visible at the snapshot."""
    with gc_paused():  # a lake of many tables and columns: many objects at once (lake/gc_pause.py)
        return _load_state(db, conn, snapshot, data_path)


def _load_state(db: CatalogDB, conn: Connection, snapshot: Snapshot, data_path: str) -> LakeState:
    p = {"s": snapshot.snapshot_id}
    rd = db.dialect.read_bool
    tags: dict[int, dict[str, str]] = defaultdict(dict)
    for oid, k, v in db.query(conn, f"SELECT object_id, key, value FROM {{p}}ducklake_tag WHERE {visible()}", p):
        if v is not None:
            tags[oid][k] = v
    ctags: dict[int, dict[int, dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
    for tid, cid, k, v in db.query(
        conn, f"SELECT table_id, column_id, key, value FROM {{p}}ducklake_column_tag WHERE {visible()}", p
    ):
        if v is not None:
            ctags[tid][cid][k] = v

    vctags: dict[int, dict[str, dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
    if db.spec.view_column_tags:
        for vid, cname, k, v in db.query(
            conn, f"SELECT view_id, column_name, key, value FROM {{p}}ducklake_view_column_tag WHERE {visible()}", p
        ):
            if v is not None:
                vctags[vid][cname][k] = v

    schemas: dict[str, SchemaInfo] = {}
    by_id: dict[int, SchemaInfo] = {}
    parent_sql = ", parent_schema_id" if db.spec.nested_schemas else ", NULL"
    nested: dict[int, tuple[str, int]] = {}  # DuckLake 1.1's schemas inside schemas: (name, parent id)
    for sid, suuid, name, path, rel, begin, parent in db.query(
        conn,
        f"SELECT schema_id, schema_uuid, schema_name, path, path_is_relative, begin_snapshot{parent_sql} "
        f"FROM {{p}}ducklake_schema WHERE {visible()}",
        p,
    ):
        if parent is not None:
            nested[sid] = (name, parent)
            continue
        info = SchemaInfo(sid, db.dialect.read_uuid(suuid), name, path or "", rd(rel) is not False, begin, tags[sid])
        schemas[name] = by_id[sid] = info

    cols: dict[int, list[Sequence[Any]]] = defaultdict(list)
    for r in db.query(
        conn,
        "SELECT table_id, column_id, column_order, column_name, column_type, initial_default, default_value, "
        f"nulls_allowed, parent_column FROM {{p}}ducklake_column WHERE {visible()}",
        p,
    ):
        cols[r[0]].append((r[1], r[2], r[3], r[4], r[5], r[6], rd(r[7]), r[8]))

    parts: dict[int, PartitionSpec] = {}
    for pid, tid, key_index, cid, transform in db.query(
        conn,
        "SELECT i.partition_id, i.table_id, c.partition_key_index, c.column_id, c.transform "
        "FROM {p}ducklake_partition_info i JOIN {p}ducklake_partition_column c "
        "ON c.partition_id = i.partition_id AND c.table_id = i.table_id "
        f"WHERE {visible('i')} ORDER BY i.table_id, c.partition_key_index",
        p,
    ):
        spec = parts.get(tid) or PartitionSpec(pid, ())
        parts[tid] = PartitionSpec(pid, spec.fields + (PartitionField(key_index, cid, transform),))

    sorts: dict[int, SortSpec] = {}
    for sort_id, tid, key_index, expression, dialect, direction, nulls in db.query(
        conn,
        "SELECT i.sort_id, i.table_id, e.sort_key_index, e.expression, e.dialect, e.sort_direction, e.null_order "
        "FROM {p}ducklake_sort_info i JOIN {p}ducklake_sort_expression e "
        "ON e.sort_id = i.sort_id AND e.table_id = i.table_id "
        f"WHERE {visible('i')} ORDER BY i.table_id, i.sort_id, e.sort_key_index",
        p,
    ):
        held = sorts.get(tid) or SortSpec(sort_id, ())
        # as the reference reads them: 'DESC' (any case) is descending, 'NULLS_FIRST' puts NULLs first
        key = SortField(key_index, expression, (direction or "").upper() == "DESC",
                        (nulls or "").upper() == "NULLS_FIRST", dialect)
        sorts[tid] = SortSpec(held.sort_id, held.fields + (key,))

    tables: dict[tuple[str, str], TableInfo] = {}
    for tid, tuuid, sid, name, path, rel, begin in db.query(
        conn,
        "SELECT table_id, table_uuid, schema_id, table_name, path, path_is_relative, begin_snapshot "
        f"FROM {{p}}ducklake_table WHERE {visible()}",
        p,
    ):
        schema = by_id.get(sid)
        if schema is None:
            continue
        tables[(schema.name, name)] = TableInfo(
            table_id=tid,
            table_uuid=db.dialect.read_uuid(tuuid),
            schema_id=sid,
            schema_name=schema.name,
            name=name,
            path=path or "",
            path_is_relative=rd(rel) is not False,
            begin_snapshot=begin,
            columns=build_column_tree(cols.get(tid, [])),
            partition=parts.get(tid),
            tags=tags[tid],
            sort=sorts.get(tid),
            column_tags={k: dict(v) for k, v in ctags[tid].items()},
        )

    views: dict[tuple[str, str], ViewInfo] = {}
    for vid, vuuid, sid, name, dialect, sql, aliases, begin in db.query(
        conn,
        "SELECT view_id, view_uuid, schema_id, view_name, dialect, sql, column_aliases, begin_snapshot "
        f"FROM {{p}}ducklake_view WHERE {visible()}",
        p,
    ):
        schema = by_id.get(sid)
        if schema is None:
            continue
        views[(schema.name, name)] = ViewInfo(
            vid, db.dialect.read_uuid(vuuid), sid, schema.name, name, dialect, sql, aliases or "", begin, tags[vid],
            {c: dict(t) for c, t in vctags[vid].items()},
        )
    state = LakeState(db, snapshot, data_path, schemas, tables, views, _nested_paths(nested, by_id))
    # a table without an inlined-data table has no inlined row: known now, so its readers open no catalog connection
    inlined = {r[0] for r in db.query(conn, "SELECT DISTINCT table_id FROM {p}ducklake_inlined_data_tables", {})}
    state._inlined.update((t.table_id, []) for t in tables.values() if t.table_id not in inlined)
    return state


def _nested_paths(nested: dict[int, tuple[str, int]], top: dict[int, SchemaInfo]) -> frozenset[str]:
    """The dotted paths (lower case) of nested schemas: 'sales.europe' for europe inside sales."""
    out = set()
    for sid in nested:
        parts, at, seen = [], sid, set()
        while at in nested and at not in seen:
            seen.add(at)
            name, at = nested[at]
            parts.append(name)
        if at in top:
            parts.append(top[at].name)
        out.add(".".join(reversed(parts)).lower())
    return frozenset(out)


def load_files(db: CatalogDB, conn: Connection, state: LakeState, table: TableInfo) -> list[DataFile]:
    """The data files of one table visible at the state's snapshot, fully described."""
    return load_files_of(db, conn, state, [table])[table.table_id]


def load_files_of(db: CatalogDB, conn: Connection, state: LakeState, tables: Sequence[TableInfo]
                  ) -> dict[int, list[DataFile]]:
    """The data files of each table (by id) visible at the state's snapshot, fully described: one query per kind
    of catalog row for all the tables."""
    with gc_paused():  # tens of thousands of objects at 10k files (lake/gc_pause.py)
        return _load_files(db, conn, state, tables)


def _load_files(db: CatalogDB, conn: Connection, state: LakeState, tables: Sequence[TableInfo]
                ) -> dict[int, list[DataFile]]:
    p = {"s": state.snapshot_id}
    which = f"IN ({id_list(t.table_id for t in tables)})"
    rd = db.dialect.read_bool
    bases = {t.table_id: state.table_path(t) for t in tables}

    def resolve(tid: int, path: str, rel: Any) -> str:
        return join_path(bases[tid], path) if rd(rel) is not False else path

    stats: dict[int, list[ColumnStats]] = defaultdict(list)
    for fid, cid, size, vc, nc, mn, mx, nan in db.query(
        conn,
        "SELECT st.data_file_id, st.column_id, st.column_size_bytes, st.value_count, st.null_count, st.min_value, "
        "st.max_value, st.contains_nan FROM {p}ducklake_file_column_stats st JOIN {p}ducklake_data_file f "
        f"ON f.data_file_id = st.data_file_id WHERE f.table_id {which} AND {visible('f')}",
        p,
    ):
        stats[fid].append(ColumnStats(cid, size, vc, nc, mn, mx, rd(nan)))
    pvals: dict[int, dict[int, str | None]] = defaultdict(dict)
    for fid, key_index, value in db.query(
        conn,
        "SELECT pv.data_file_id, pv.partition_key_index, pv.partition_value FROM {p}ducklake_file_partition_value pv "
        "JOIN {p}ducklake_data_file f ON f.data_file_id = pv.data_file_id "
        f"WHERE f.table_id {which} AND {visible('f')}",
        p,
    ):
        pvals[fid][key_index] = value
    deletes: dict[int, DeleteFile] = {}
    for r in db.query(
        conn,
        "SELECT delete_file_id, data_file_id, path, path_is_relative, delete_count, file_size_bytes, footer_size, "
        "begin_snapshot, partial_max, encryption_key, table_id, format FROM {p}ducklake_delete_file "
        f"WHERE table_id {which} AND {visible()}",
        p,
    ):
        deletes[r[1]] = DeleteFile(r[0], r[1], resolve(r[10], r[2], r[3]), r[2], rd(r[3]) is not False, r[4], r[5],
                                   r[6], r[7], r[8], r[9], r[11] or "parquet")
    inlined_del: dict[int, list[tuple[int, int]]] = defaultdict(list)
    names = set(db.table_sizes(conn))
    for t in tables:
        name = f"ducklake_inlined_delete_{t.table_id}"
        if name in names:
            for fid, row_id, begin in db.query(
                conn, f"SELECT file_id, row_id, begin_snapshot FROM {{p}}{name} WHERE begin_snapshot <= :s "
                "ORDER BY file_id, row_id", p,
            ):
                inlined_del[fid].append((row_id, begin))
    files: dict[int, list[DataFile]] = {t.table_id: [] for t in tables}
    for r in db.query(
        conn,
        "SELECT data_file_id, path, path_is_relative, record_count, file_size_bytes, footer_size, row_id_start, "
        "begin_snapshot, partition_id, mapping_id, partial_max, file_order, encryption_key, table_id "
        f"FROM {{p}}ducklake_data_file WHERE table_id {which} AND {visible()} "
        "ORDER BY table_id, file_order, data_file_id",
        p,
    ):
        fid, tid = r[0], r[13]
        pv = pvals.get(fid, {})
        files[tid].append(
            DataFile(
                data_file_id=fid,
                table_id=tid,
                path=resolve(tid, r[1], r[2]),
                stored_path=r[1],
                path_is_relative=rd(r[2]) is not False,
                record_count=r[3],
                file_size_bytes=r[4],
                footer_size=r[5],
                row_id_start=r[6],
                begin_snapshot=r[7],
                partition_id=r[8],
                mapping_id=r[9],
                partial_max=r[10],
                file_order=r[11],
                encryption_key=r[12],
                partition_values=tuple(pv[k] for k in sorted(pv)),
                stats=tuple(sorted(stats.get(fid, []), key=lambda s: s.column_id)),
                delete_file=deletes.get(fid),
                inlined_deletes=tuple(inlined_del.get(fid, [])),
            )
        )
    return files


_INLINED_RE = re.compile(r"^ducklake_inlined_data_(\d+)_(\d+)$")


def load_inlined_tables(db: CatalogDB, conn: Connection, table_id: int) -> list[InlinedTable]:
    """The inlined-data tables of a table, each with the column tree at its schema version."""
    return load_inlined_tables_of(db, conn, [table_id])[0].get(table_id, [])


def load_inlined_tables_of(db: CatalogDB, conn: Connection, table_ids: Sequence[int]
                           ) -> tuple[dict[int, list[InlinedTable]], set[str]]:
    """The inlined-data tables of each table (by id), each with the column tree at its schema version, and (DuckDB
    catalogs) the names of those that hold no row. A few queries for all the tables."""
    ids = f"({id_list(table_ids)})"
    listed = db.query(
        conn,
        "SELECT table_id, table_name, schema_version FROM {p}ducklake_inlined_data_tables "
        f"WHERE table_id IN {ids} ORDER BY table_id, schema_version", {})
    out: dict[int, list[InlinedTable]] = {}
    if not listed:
        return out, set()
    sizes = db.table_sizes(conn)
    listed = [r for r in listed if r[1] in sizes]  # registered, but the table is gone
    versions: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for tid, version, begin in db.query(
            conn, f"SELECT table_id, schema_version, begin_snapshot FROM {{p}}ducklake_schema_versions "
            f"WHERE table_id IN {ids}", {}):
        versions[tid].append((version, begin))
    columns: dict[int, list[Sequence[Any]]] = defaultdict(list)
    for r in db.query(
        conn,
        "SELECT table_id, column_id, column_order, column_name, column_type, initial_default, default_value, "
        f"nulls_allowed, parent_column, begin_snapshot, end_snapshot FROM {{p}}ducklake_column WHERE table_id IN {ids}",
        {},
    ):
        columns[r[0]].append(r)
    for tid, name, version in listed:
        known = versions.get(tid, [])
        begins = [b for v, b in known if v == version]
        begin = min(begins) if begins else None
        if begin is None:
            # DuckDB's first inlined insert bumps schema_version without a schema_versions row; columns only change
            # with such a row, so the table's last one at or before this version tells them (the bumping snapshot
            # itself may have been expired)
            earlier = [b for v, b in known if v <= version]
            begin = max(earlier) if earlier else None
        if begin is None:  # no schema_versions rows at all: fall back to the first snapshot with that schema version
            begin = db.query(
                conn, "SELECT min(snapshot_id) FROM {p}ducklake_snapshot WHERE schema_version = :v", {"v": version}
            )[0][0]
        rows = [r for r in columns.get(tid, []) if begin is not None and r[9] <= begin
                and (r[10] is None or begin < r[10])]
        tree = build_column_tree((r[1], r[2], r[3], r[4], r[5], r[6], db.dialect.read_bool(r[7]), r[8]) for r in rows)
        out.setdefault(tid, []).append(InlinedTable(tid, name, version, tree))
    return out, {r[1] for r in listed if sizes[r[1]] == 0}


def load_name_mappings(db: CatalogDB, conn: Connection, table_id: int) -> dict[int, NameMapping]:
    """The name mappings of a table, by mapping id."""
    entries: dict[int, list[tuple[int, str, int, int | None, bool]]] = defaultdict(list)
    for mid, cid, src, target, parent, part in db.query(
        conn,
        "SELECT n.mapping_id, n.column_id, n.source_name, n.target_field_id, n.parent_column, n.is_partition "
        "FROM {p}ducklake_name_mapping n JOIN {p}ducklake_column_mapping m ON m.mapping_id = n.mapping_id "
        "WHERE m.table_id = :t ORDER BY n.mapping_id, n.column_id",
        {"t": table_id},
    ):
        entries[mid].append((cid, src, target, parent, bool(db.dialect.read_bool(part))))
    out = {}
    for mid, tid, typ in db.query(
        conn, "SELECT mapping_id, table_id, type FROM {p}ducklake_column_mapping WHERE table_id = :t", {"t": table_id}
    ):
        out[mid] = NameMapping(mid, tid, typ, tuple(entries.get(mid, [])))
    return out
