"""Plain records for catalog rows: what a snapshot of the lake holds, engine-free and immutable."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Column:
    """One node of a table's column tree (ducklake_column); nested types have children."""

    column_id: int
    name: str
    type: str  # DuckLake type string, lower case: 'int32', 'decimal(10,2)', 'list', 'struct', 'map', ...
    nullable: bool = True
    initial_default: str | None = None  # value that files written before the column existed read
    default_value: str | None = None  # current DEFAULT (None = no default)
    children: tuple[Column, ...] = ()

    @property
    def is_nested(self) -> bool:
        return self.type in ("list", "struct", "map")

    def walk(self) -> Iterator[Column]:
        """This column and its descendants, depth first (column_id order for reference-built trees)."""
        yield self
        for child in self.children:
            yield from child.walk()

    def leaves(self) -> Iterator[Column]:
        """The leaf columns (the ones that carry statistics)."""
        for col in self.walk():
            if not col.children:
                yield col

    def child(self, name: str) -> Column:
        for c in self.children:
            if c.name == name:
                return c
        raise KeyError(name)


@dataclass(frozen=True)
class Snapshot:
    """A row of ducklake_snapshot joined with its ducklake_snapshot_changes row."""

    snapshot_id: int
    snapshot_time: dt.datetime
    schema_version: int
    next_catalog_id: int
    next_file_id: int
    changes_made: str | None = None
    author: str | None = None
    commit_message: str | None = None
    commit_extra_info: str | None = None

    def same_as(self, other: Snapshot) -> bool:
        """The same snapshot: by id and time (a catalog restored from a copy can hold another snapshot under the same
        id)."""
        return (self.snapshot_id, self.snapshot_time) == (other.snapshot_id, other.snapshot_time)


@dataclass(frozen=True)
class SchemaInfo:
    schema_id: int
    schema_uuid: str
    name: str
    path: str
    path_is_relative: bool
    begin_snapshot: int
    tags: dict[str, str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class PartitionField:
    key_index: int
    column_id: int
    transform: str  # identity | year | month | day | hour | bucket(N)


@dataclass(frozen=True)
class PartitionSpec:
    partition_id: int
    fields: tuple[PartitionField, ...]


@dataclass(frozen=True)
class SortField:
    """One key of a table's SET SORTED BY, as ducklake_sort_expression holds it."""

    key_index: int
    expression: str  # in its dialect's text, DuckDB's normalized form for 'duckdb' ('a', 'lower(b)', '(a + 1)')
    descending: bool = False
    nulls_first: bool = False  # DuckDB's default is NULLS LAST for both directions
    dialect: str = "duckdb"


@dataclass(frozen=True)
class SortSpec:
    sort_id: int
    fields: tuple[SortField, ...]


@dataclass(frozen=True)
class TableInfo:
    table_id: int
    table_uuid: str
    schema_id: int
    schema_name: str
    name: str
    path: str
    path_is_relative: bool
    begin_snapshot: int
    columns: tuple[Column, ...]
    partition: PartitionSpec | None = None
    tags: dict[str, str] = field(default_factory=dict, compare=False)
    sort: SortSpec | None = None
    column_tags: dict[int, dict[str, str]] = field(default_factory=dict, compare=False)

    @property
    def comment(self) -> str | None:
        return self.tags.get("comment")

    def all_columns(self) -> Iterator[Column]:
        for c in self.columns:
            yield from c.walk()

    def column(self, name: str) -> Column:
        """The top-level column with this name (case-insensitive, as DuckDB resolves names)."""
        for c in self.columns:
            if c.name == name:
                return c
        low = name.lower()
        for c in self.columns:
            if c.name.lower() == low:
                return c
        from .errors import NoSuchColumnError

        raise NoSuchColumnError(f"table {self.schema_name}.{self.name} has no column {name!r}")

    def column_by_id(self, column_id: int) -> Column:
        for c in self.all_columns():
            if c.column_id == column_id:
                return c
        from .errors import NoSuchColumnError

        raise NoSuchColumnError(f"table {self.schema_name}.{self.name} has no column id {column_id}")

    def max_column_id(self) -> int:
        return max((c.column_id for c in self.all_columns()), default=0)


@dataclass(frozen=True)
class ViewInfo:
    view_id: int
    view_uuid: str
    schema_id: int
    schema_name: str
    name: str
    dialect: str
    sql: str
    column_aliases: str
    begin_snapshot: int
    tags: dict[str, str] = field(default_factory=dict, compare=False)
    # DuckLake 1.1: tags of the view's columns, by the name the view's query gives the column
    column_tags: dict[str, dict[str, str]] = field(default_factory=dict, compare=False)

    @property
    def comment(self) -> str | None:
        return self.tags.get("comment")


@dataclass(frozen=True)
class ColumnStats:
    """Per-file statistics of one leaf column (ducklake_file_column_stats)."""

    column_id: int
    column_size_bytes: int | None
    value_count: int | None
    null_count: int | None
    min_value: str | None
    max_value: str | None
    contains_nan: bool | None = None


@dataclass(frozen=True)
class DeleteFile:
    delete_file_id: int
    data_file_id: int
    path: str  # resolved, absolute
    stored_path: str
    path_is_relative: bool
    delete_count: int
    file_size_bytes: int
    footer_size: int | None
    begin_snapshot: int
    partial_max: int | None = None
    encryption_key: str | None = None
    format: str = "parquet"  # or "puffin": a deletion vector (lake/read/deletes.py)


@dataclass(frozen=True)
class DataFile:
    data_file_id: int
    table_id: int
    path: str  # resolved, absolute
    stored_path: str
    path_is_relative: bool
    record_count: int
    file_size_bytes: int
    footer_size: int | None
    row_id_start: int | None
    begin_snapshot: int
    partition_id: int | None = None
    mapping_id: int | None = None
    partial_max: int | None = None
    file_order: int | None = None
    encryption_key: str | None = None
    partition_values: tuple[str | None, ...] = ()
    stats: tuple[ColumnStats, ...] = ()
    delete_file: DeleteFile | None = None
    # positions deleted through ducklake_inlined_delete_<tid>: (position, begin_snapshot)
    inlined_deletes: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class TableStats:
    table_id: int
    record_count: int
    next_row_id: int
    file_size_bytes: int


@dataclass(frozen=True)
class TableColumnStats:
    table_id: int
    column_id: int
    contains_null: bool | None
    contains_nan: bool | None
    min_value: str | None
    max_value: str | None


@dataclass(frozen=True)
class InlinedTable:
    """One ducklake_inlined_data_<tid>_<schema_version> table and the columns it was made with."""

    table_id: int
    table_name: str
    schema_version: int
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class NameMapping:
    """A ducklake_column_mapping with its name-mapping tree (for files without field ids)."""

    mapping_id: int
    table_id: int
    type: str
    # (column_id (0-based DFS), source_name, target_field_id, parent_column, is_partition)
    entries: tuple[tuple[int, str, int, int | None, bool], ...]
