"""Data files to register: what the catalog needs to know of a Parquet file, read from its footer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow.parquet as pq

from .deletes import ROW_ID_COLUMN, SNAPSHOT_COLUMN, footer_size
from .errors import InvalidDataFileError
from .paths import to_local
from .records import Column, ColumnStats


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


def describe_parquet(
    path: str,
    columns: Sequence[Column],
    *,
    partition_values: Sequence[str | None] = (),
    by: str = "field_id",
) -> DataFileSpec:
    """Read a Parquet footer and describe the file for registration: counts, sizes, per-leaf stats.

    Raises:
        InvalidDataFileError: the file is not Parquet, or its columns cannot be mapped to the table's.
    """
    from .stats import file_column_stats

    local = to_local(path)
    try:
        pf = pq.ParquetFile(local)
    except Exception as e:  # pyarrow raises several error types for a bad file
        raise InvalidDataFileError(f"{path} is not a readable Parquet file: {e}") from e
    meta = pf.metadata
    names = set(pf.schema_arrow.names)
    if by == "field_id":
        missing_ids = [
            f.name for f in pf.schema_arrow
            if f.name not in (ROW_ID_COLUMN, SNAPSHOT_COLUMN) and (not f.metadata or b"PARQUET:field_id" not in f.metadata)
        ]
        if missing_ids:
            raise InvalidDataFileError(
                f"{path}: columns {missing_ids} carry no Parquet field id; write field ids or register with a name mapping"
            )
    stats = tuple(file_column_stats(meta, columns, by=by))
    import os

    return DataFileSpec(
        path=path,
        record_count=meta.num_rows,
        file_size_bytes=os.path.getsize(local),
        footer_size=footer_size(local),
        stats=stats,
        partition_values=tuple(partition_values),
        has_row_ids=ROW_ID_COLUMN in names,
    )
