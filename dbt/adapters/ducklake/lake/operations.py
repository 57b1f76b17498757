"""Staged operations. Each applies itself to a CatalogBuilder; the commit replays them on the latest state."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .builder import CatalogBuilder
from .datafiles import DataFileSpec
from .deletes import merge_positions, read_delete_file, write_delete_file
from .errors import CommitConflictError, InvalidDataFileError, NoSuchTableError, SchemaEvolutionError
from .paths import delete_file_name, join_path, relative_to
from .records import Column, DataFile, TableInfo
from .state import ci_lookup, load_files

# The widening type changes the reference allows (DuckDB's max-logical-type rule, checked against DuckDB 1.5).
_SIGNED = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "int128": 128}
_UNSIGNED = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
_INT_DIGITS = {"int8": 3, "int16": 5, "int32": 10, "int64": 19, "uint8": 3, "uint16": 5, "uint32": 10, "uint64": 20}


def promotion_allowed(source: str, target: str) -> bool:
    """Whether ALTER COLUMN TYPE source -> target is a widening the reference accepts (files are not rewritten)."""
    from .types import decimal_params

    if source == target:
        return False
    if source in _SIGNED or source in _UNSIGNED:
        if target in ("float32", "float64"):
            return True
        if target in _SIGNED:
            bits = _SIGNED.get(source) or _UNSIGNED[source]
            return _SIGNED[target] > bits
        if target in _UNSIGNED:
            return source in _UNSIGNED and _UNSIGNED[target] > _UNSIGNED[source]
        if target.startswith("decimal") and source in _INT_DIGITS:
            p, s = decimal_params(target)
            return p - s >= _INT_DIGITS[source]
        return False
    if source == "float32":
        return target == "float64"
    if source.startswith("decimal"):
        if target in ("float32", "float64"):
            return True
        if target.startswith("decimal"):
            (p1, s1), (p2, s2) = decimal_params(source), decimal_params(target)
            return s2 >= s1 and p2 - s2 >= p1 - s1
        return False
    if source == "date":
        return target in ("timestamp", "timestamptz")
    return source == "timestamp" and target == "timestamptz"


class Operation:
    """A staged change. ddl operations also run at staging time, so later operations see their effect.

    An operation on a table that existed when it was staged is bound to that table's id (bound_table_id), so a
    retried commit applies it to the same table even if another writer renamed it meanwhile, as the reference does.
    """

    ddl = True
    bound_table_id: int | None = None

    def apply(self, b: CatalogBuilder) -> None:
        raise NotImplementedError


@dataclass
class CreateSchema(Operation):
    name: str
    if_not_exists: bool = False

    def apply(self, b: CatalogBuilder) -> None:
        if self.if_not_exists and self.name.lower() in (s.lower() for s in b.schemas):
            return
        b.create_schema(self.name)


@dataclass
class DropSchema(Operation):
    name: str
    cascade: bool = False
    if_exists: bool = False

    def apply(self, b: CatalogBuilder) -> None:
        if self.if_exists and self.name.lower() not in (s.lower() for s in b.schemas):
            return
        b.drop_schema(self.name, self.cascade)


@dataclass
class CreateTable(Operation):
    schema: str
    name: str
    columns: tuple[Column, ...]
    partition: tuple[tuple[str, str], ...] | None = None
    comment: str | None = None
    replace: bool = False
    keep_column_ids: bool = False  # the columns carry their ids already (a clone)

    def apply(self, b: CatalogBuilder) -> None:
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
class DropTable(Operation):
    schema: str
    name: str
    if_exists: bool = False

    def apply(self, b: CatalogBuilder) -> None:
        if self.if_exists and _bound_or_none(b, self, self.name) is None:
            return
        b.drop_table(bound_table(b, self, self.name))


@dataclass
class RenameTable(Operation):
    schema: str
    name: str
    new_name: str

    def apply(self, b: CatalogBuilder) -> None:
        b.rename_table(bound_table(b, self, self.name), self.new_name)


@dataclass
class SetPartitioning(Operation):
    schema: str
    name: str
    fields: tuple[tuple[str, str], ...] | None

    def apply(self, b: CatalogBuilder) -> None:
        b.set_partitioning(bound_table(b, self, self.name), self.fields)


@dataclass
class AddColumn(Operation):
    schema: str
    table: str
    column: Column

    def apply(self, b: CatalogBuilder) -> None:
        b.add_column(bound_table(b, self, self.table), self.column)


@dataclass
class DropColumn(Operation):
    schema: str
    table: str
    column: str

    def apply(self, b: CatalogBuilder) -> None:
        b.drop_column(bound_table(b, self, self.table), self.column)


@dataclass
class AlterColumn(Operation):
    """Rename, change type (promotion only), set/drop default, set/drop NOT NULL of a top-level column."""

    schema: str
    table: str
    column: str
    new_name: str | None = None
    new_type: str | None = None
    default: str | None = None
    set_default: bool = False
    nullable: bool | None = None

    def apply(self, b: CatalogBuilder) -> None:
        info = bound_table(b, self, self.table)
        old = info.column(self.column)
        new = old
        if self.new_name is not None and self.new_name != old.name:
            if any(c.name.lower() == self.new_name.lower() for c in info.columns if c is not old):
                raise SchemaEvolutionError(f"table {info.name} already has a column {self.new_name!r}")
            new = replace(new, name=self.new_name)
        if self.new_type is not None:
            from .types import parse_type

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
class SetComment(Operation):
    schema: str
    name: str
    comment: str | None
    column: str | None = None

    def apply(self, b: CatalogBuilder) -> None:
        if self.column is None and (self.schema, self.name) in b.views:
            b.set_tag(b.view(self.schema, self.name).view_id, "comment", self.comment, is_view=True)
            return
        info = bound_table(b, self, self.name)
        if self.column is None:
            b.set_tag(info.table_id, "comment", self.comment, is_view=False)
        else:
            b.set_column_tag(info, info.column(self.column).column_id, "comment", self.comment)


@dataclass
class SetTag(Operation):
    """A tag (key/value) on a table or view; None removes it."""

    schema: str
    name: str
    key: str
    value: str | None

    def apply(self, b: CatalogBuilder) -> None:
        if (self.schema, self.name) in b.views or ci_lookup(b.views, (self.schema, self.name)) is not None:
            b.set_tag(b.view(self.schema, self.name).view_id, self.key, self.value, is_view=True)
            return
        info = bound_table(b, self, self.name)
        b.set_tag(info.table_id, self.key, self.value, is_view=False)


@dataclass
class CreateView(Operation):
    schema: str
    name: str
    sql: str
    dialect: str = "duckdb"
    column_aliases: tuple[str, ...] = ()
    replace: bool = False
    comment: str | None = None

    def apply(self, b: CatalogBuilder) -> None:
        if self.replace:
            old = b.views.get((self.schema, self.name))
            if old is not None:
                b.drop_view(old)
        info = b.create_view(self.schema, self.name, self.sql, self.dialect, self.column_aliases)
        if self.comment is not None:
            b.set_tag(info.view_id, "comment", self.comment, is_view=True)


@dataclass
class DropView(Operation):
    schema: str
    name: str
    if_exists: bool = False

    def apply(self, b: CatalogBuilder) -> None:
        if self.if_exists and (self.schema, self.name) not in b.views:
            return
        b.drop_view(b.view(self.schema, self.name))


@dataclass
class RenameView(Operation):
    schema: str
    name: str
    new_name: str

    def apply(self, b: CatalogBuilder) -> None:
        b.rename_view(b.view(self.schema, self.name), self.new_name)


# data ----------------------------------------------------------------------------------------------------------


@dataclass
class AddDataFiles(Operation):
    schema: str
    table: str
    files: tuple[DataFileSpec, ...]
    ddl = False

    def apply(self, b: CatalogBuilder) -> None:
        info = bound_table(b, self, self.table)
        nkeys = len(info.partition.fields) if info.partition else 0
        table_dir = b.latest.table_path(info) if info.table_id in _live_ids(b) else _new_table_dir(b, info)
        delta = b.stats_delta(info.table_id)
        next_row_id = _next_row_id(b, info.table_id) + delta.rows_added
        rows, stats_rows, pv_rows, mapping_rows, name_rows = [], [], [], [], []
        leaf_ids = {c.column_id for top in info.columns for c in top.leaves()}
        for spec in self.files:
            if len(spec.partition_values) != nkeys:
                raise InvalidDataFileError(
                    f"{spec.path}: table {info.schema_name}.{info.name} has {nkeys} partition keys but the file "
                    f"gives {len(spec.partition_values)} partition values"
                )
            fid = b.file_id()
            rel = relative_to(spec.path, table_dir)
            mapping_id = None
            if spec.name_mapping is not None:
                mapping_id = _name_mapping_rows(b, info.table_id, spec, mapping_rows, name_rows)
            rows.append({
                "fid": fid, "tid": info.table_id, "sid": b.snapshot_id,
                "path": rel if rel is not None else spec.path, "rel": b.db.dialect.bool_param(rel is not None),
                "rc": spec.record_count, "size": spec.file_size_bytes, "footer": spec.footer_size,
                "rid": next_row_id, "pid": info.partition.partition_id if info.partition else None,
                "mid": mapping_id,
            })
            next_row_id += spec.record_count
            delta.rows_added += spec.record_count
            delta.record_count += spec.record_count
            delta.file_size_bytes += spec.file_size_bytes
            for st in spec.stats:
                if st.column_id not in leaf_ids:
                    continue
                stats_rows.append({
                    "fid": fid, "tid": info.table_id, "cid": st.column_id, "size": st.column_size_bytes,
                    "vc": st.value_count, "nc": st.null_count, "mn": st.min_value, "mx": st.max_value,
                    "nan": b.db.dialect.bool_param(st.contains_nan),
                })
                if (st.min_value is None or st.max_value is None) and (st.value_count is None or st.value_count > 0):
                    delta.unknown_bounds.add(st.column_id)
                delta.file_stats.setdefault(st.column_id, []).append(st)
            for k, v in enumerate(spec.partition_values):
                pv_rows.append({"fid": fid, "tid": info.table_id, "k": k, "v": v})
        if mapping_rows:
            # one many-row statement per catalog table, not two per file (fast on a DuckDB catalog: see catalog.execute)
            b.add("INSERT INTO {p}ducklake_column_mapping VALUES (:m, :t, 'map_by_name')", mapping_rows)
            if name_rows:
                b.add("INSERT INTO {p}ducklake_name_mapping VALUES (:m, :c, :src, :target, :parent, :part)", name_rows)
        b.add(
            "INSERT INTO {p}ducklake_data_file VALUES (:fid, :tid, :sid, NULL, NULL, :path, :rel, 'parquet', :rc, "
            ":size, :footer, :rid, :pid, NULL, :mid, NULL)",
            rows,
        )
        if stats_rows:
            b.add(
                "INSERT INTO {p}ducklake_file_column_stats VALUES (:fid, :tid, :cid, :size, :vc, :nc, :mn, :mx, :nan, "
                "NULL)",
                stats_rows,
            )
        if pv_rows:
            b.add("INSERT INTO {p}ducklake_file_partition_value VALUES (:fid, :tid, :k, :v)", pv_rows)
        if self.files:
            b.changes.inserted_tables.add(info.table_id)


@dataclass
class DeleteRows(Operation):
    """Delete rows of one data file by position (0-based row number in the file)."""

    schema: str
    table: str
    data_file_id: int
    positions: tuple[int, ...]
    ddl = False

    def apply(self, b: CatalogBuilder) -> None:
        info = bound_table(b, self, self.table)
        f = _live_file(b, info.table_id, self.data_file_id)
        bad = [p for p in self.positions if p < 0 or p >= f.record_count]
        if bad:
            raise ValueError(
                f"delete positions {bad[:5]} are outside data file {f.data_file_id} ({f.record_count} rows)"
            )
        existing = read_delete_file(f.delete_file.path, f.delete_file.begin_snapshot) if f.delete_file else None
        already = set(existing.positions if existing else ()) | {p for p, _ in f.inlined_deletes}
        new = sorted(set(self.positions) - already)
        if not new:
            return
        b.changes.deleted_tables.add(info.table_id)
        b.changes.deleted_files.add(f.data_file_id)
        if len(already) + len(new) >= f.record_count:
            # every row gone: the reference ends the data file and writes no delete file
            b.end_rows("ducklake_data_file", "data_file_id = :f", {"f": f.data_file_id})
            b.end_rows("ducklake_delete_file", "data_file_id = :f", {"f": f.data_file_id})
            return
        merged = merge_positions(existing, new, b.snapshot_id)
        directory = f.path.rsplit("/", 1)[0]
        path = join_path(directory, delete_file_name())
        size, footer = write_delete_file(path, f.path, merged, with_snapshots=existing is not None)
        b.written_files.append(path)
        table_dir = b.latest.table_path(info)
        rel = relative_to(path, table_dir)
        did = b.file_id()
        b.add(
            "INSERT INTO {p}ducklake_delete_file VALUES (:did, :tid, :begin, NULL, :fid, :path, :rel, 'parquet', :n, "
            ":size, :footer, NULL, :pmax)",
            {"did": did, "tid": info.table_id, "begin": min(merged.snapshots) if existing else b.snapshot_id,
             "fid": f.data_file_id, "path": rel if rel is not None else path,
             "rel": b.db.dialect.bool_param(rel is not None), "n": len(merged.positions), "size": size,
             "footer": footer, "pmax": b.snapshot_id if existing else None},
        )
        if existing is not None and f.delete_file is not None:
            # 1.0 style: the new file holds every delete with its snapshot; the old row goes, its file is scheduled
            old = f.delete_file
            b.add("DELETE FROM {p}ducklake_delete_file WHERE delete_file_id = :d", {"d": old.delete_file_id})
            spath, srel = b.data_path_relative(old.path)
            b.add(
                "INSERT INTO {p}ducklake_files_scheduled_for_deletion VALUES (:d, :path, :rel, "
                + b.db.dialect.timestamp_literal_sql() + ")",
                {"d": old.delete_file_id, "path": spath, "rel": b.db.dialect.bool_param(srel),
                 "ts": b.db.dialect.timestamp_param(b.now)},
            )


@dataclass
class DeleteInlinedRows(Operation):
    """Delete rows that live in the table's inlined-data tables, by row id."""

    schema: str
    table: str
    row_ids: tuple[int, ...]
    ddl = False

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
            b.add(
                f"UPDATE {{p}}{name} SET end_snapshot = :sid WHERE end_snapshot IS NULL AND row_id = :r",
                [{"sid": b.snapshot_id, "r": r} for r in ids],
            )
        b.changes.inlined_deleted.add(info.table_id)


def bound_table(b: CatalogBuilder, op: Operation, name: str) -> TableInfo:
    """The table an operation works on: by its bound id, else by name (a table created in this transaction)."""
    if op.bound_table_id is not None:
        return b.table_by_id(op.bound_table_id)
    return b.table(op.schema, name)  # type: ignore[attr-defined]


def _bound_or_none(b: CatalogBuilder, op: Operation, name: str) -> TableInfo | None:
    try:
        return bound_table(b, op, name)
    except NoSuchTableError:
        return None


def _live_ids(b: CatalogBuilder) -> set[int]:
    return {t.table_id for t in b.latest.tables.values()}


def _new_table_dir(b: CatalogBuilder, info: object) -> str:
    from .records import TableInfo

    assert isinstance(info, TableInfo)
    schema = b.schemas[info.schema_name]
    base = join_path(b.latest.data_path, schema.path) if schema.path_is_relative else schema.path
    return join_path(base, info.path)


def _next_row_id(b: CatalogBuilder, table_id: int) -> int:
    rows = b.db.query(b.conn, "SELECT next_row_id FROM {p}ducklake_table_stats WHERE table_id = :t", {"t": table_id})
    return rows[0][0] if rows else 0


def _live_file(b: CatalogBuilder, table_id: int, data_file_id: int) -> DataFile:
    cache: dict[int, list[DataFile]] = b.__dict__.setdefault("_files", {})
    if table_id not in cache:
        cache[table_id] = load_files(b.db, b.conn, b.latest, b.table_by_id(table_id))
    for f in cache[table_id]:
        if f.data_file_id == data_file_id:
            return f
    raise CommitConflictError(
        f"data file {data_file_id} of table id {table_id} is no longer live (another writer compacted or dropped it)"
    )


def _name_mapping_rows(b: CatalogBuilder, table_id: int, spec: DataFileSpec, mapping_rows: list[dict[str, Any]],
                       name_rows: list[dict[str, Any]]) -> int:
    """Append a file's ducklake_column_mapping row and its ducklake_name_mapping rows; returns the mapping id."""
    mid = b.file_id()
    mapping_rows.append({"m": mid, "t": table_id})
    name_rows.extend(
        {"m": mid, "c": i, "src": src, "target": target, "parent": parent, "part": b.db.dialect.bool_param(part)}
        for i, (src, target, parent, part) in enumerate(spec.name_mapping or ())
    )
    return mid
