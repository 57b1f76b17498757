"""Data files to register: what the catalog needs to know of a Parquet file, read from its footer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InvalidDataFileError, NotParquetError
from ..read.deletes import ROW_ID_COLUMN, SNAPSHOT_COLUMN
from ..records import Column, ColumnStats
from ..storage import file_io


@dataclass(frozen=True)
class DataFileSpec:
    """A written Parquet file ready to be added to a table."""

    path: str  # absolute path or URI
    record_count: int
    file_size_bytes: int
    footer_size: int
    stats: tuple[ColumnStats, ...]
    partition_values: tuple[str | None, ...] = ()  # one per partition key, in key order (None = NULL)
    has_row_ids: bool = False  # the file carries _ducklake_internal_row_id (an UPDATE's post-images)
    # (source_name, target_field_id, parent index, is_partition) entries of a name mapping, DFS order; None = ids
    name_mapping: tuple[tuple[str, int, int | None, bool], ...] | None = None
    row_group_count: int | None = None  # DuckLake 1.1 records it


@dataclass(frozen=True)
class ParquetFooter:
    """What registering a file needs from it, read with one open and one footer parse."""

    metadata: pq.FileMetaData
    schema: pa.Schema  # the file's Arrow schema, as pq.ParquetFile gives it
    file_size: int
    footer_size: int  # the footer length stored before the trailing 'PAR1'


def read_footer(path: str) -> ParquetFooter:
    """Parse a Parquet file's footer once; its size and footer length come from the same open file.

    Raises:
        InvalidDataFileError: the file cannot be read as Parquet.
    """
    try:
        with file_io(path).open_input(path) as f:  # two ranged reads on S3: the tail, then the footer
            size = f.size()
            tail = f.read_at(8, size - 8) if size >= 8 else b""
            if tail[4:] != b"PAR1":
                raise NotParquetError("no PAR1 magic at the end")
            pf = pq.ParquetFile(f)
            return ParquetFooter(pf.metadata, pf.schema_arrow, size, int.from_bytes(tail[:4], "little"))
    except Exception as e:  # pyarrow raises several error types for a bad file
        raise InvalidDataFileError(f"{path} is not a readable Parquet file: {e}") from e


def describe_parquet(
    path: str,
    columns: Sequence[Column],
    *,
    partition_values: Sequence[str | None] = (),
    by: str = "field_id",
    contains_nan: dict[int, bool] | None = None,
    footer: ParquetFooter | None = None,
) -> DataFileSpec:
    """Read a Parquet footer and describe the file for registration: counts, sizes, per-leaf stats.

    contains_nan: what the writer knows of NaNs per float column id (a footer cannot tell; unknown means "maybe").
    footer: the file's footer if the caller has read it already (read_footer), so it is not parsed twice.

    Raises:
        InvalidDataFileError: the file is not Parquet, or its columns cannot be mapped to the table's.
    """
    from .stats import file_column_stats

    if footer is None:
        footer = read_footer(path)
    meta = footer.metadata
    names = set(footer.schema.names)
    if by == "field_id":
        missing_ids = [
            f.name for f in footer.schema
            if f.name not in (ROW_ID_COLUMN, SNAPSHOT_COLUMN) and (not f.metadata or b"PARQUET:field_id" not in f.metadata)
        ]
        if missing_ids:
            raise InvalidDataFileError(
                f"{path}: columns {missing_ids} carry no Parquet field id; write field ids or register with a name mapping"
            )
    stats = tuple(file_column_stats(meta, columns, by=by, contains_nan=contains_nan))
    mapping = name_mapping_for(footer.schema, columns) if by == "name" else None

    return DataFileSpec(
        path=path,
        record_count=meta.num_rows,
        file_size_bytes=footer.file_size,
        footer_size=footer.footer_size,
        stats=stats,
        partition_values=tuple(partition_values),
        has_row_ids=ROW_ID_COLUMN in names,
        name_mapping=mapping,
        row_group_count=meta.num_row_groups,
    )


def name_mapping_for(
    schema: pa.Schema, columns: Sequence[Column]
) -> tuple[tuple[str, int, int | None, bool], ...]:
    """A DuckLake name mapping for a file without field ids: each file node (DFS) -> the table column it holds.

    Raises:
        InvalidDataFileError: a file column matches no table column.
    """
    entries: list[tuple[str, int, int | None, bool]] = []

    def add(field: pa.Field, col: Column, parent: int | None, path: str) -> None:
        index = len(entries)
        entries.append((field.name, col.column_id, parent, False))
        t = field.type
        if pa.types.is_struct(t):
            for child in t:
                match = next((c for c in col.children if c.name == child.name), None)
                if match is None:
                    raise InvalidDataFileError(f"file field {path}.{child.name} matches no column of the table")
                add(child, match, index, f"{path}.{child.name}")
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            add(t.value_field, col.children[0], index, f"{path}.{t.value_field.name}")
        elif pa.types.is_map(t):
            add(t.key_field, col.children[0], index, f"{path}.key")
            add(t.item_field, col.children[1], index, f"{path}.value")

    for field in schema:
        if field.name in (ROW_ID_COLUMN, SNAPSHOT_COLUMN):
            continue
        match = next((c for c in columns if c.name == field.name), None)
        if match is None:
            raise InvalidDataFileError(f"file column {field.name!r} matches no column of the table")
        add(field, match, None, field.name)
    return tuple(entries)
