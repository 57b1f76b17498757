"""A table's write options and sort keys (lake.write.layout) as Spark's Parquet writer takes them.

parquet-java 1.15 (Spark 4.0) has no row count limit for a row group: it closes one when its buffered bytes reach
`parquet.block.size`, and only looks at them every `parquet.page.size.row.check.min/max` rows. Both set to DuckDB's
rows per group and the block size to -1 make every check close a row group, so Spark's row groups hold exactly the
rows DuckDB's do (`exact_row_groups`). The same settings pace the page size checks, so a page holds up to 20,000 rows
(parquet-java's page row count limit) whatever its bytes, and the writer's memory is bounded by the rows of a group
only: a row group whose estimated bytes (`row_width`) pass `EXACT_ROW_GROUP_BYTES`, or a table with
`parquet_row_group_size_bytes` (DuckDB closes at whichever limit comes first), falls back to a byte target, and
its row groups hold about the rows asked for. Files close only at the end of a task or after `maxRecordsPerFile`
rows: whole row groups until `target_file_size` is passed by the estimate. Codec, level and Parquet version are
exact. The driver's own writer (small results, compaction) lays files out exactly as DuckDB does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import sqlglot
from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F

from ...lake.records import SortField, TableInfo
from ...lake.write.layout import DEFAULT_ROW_GROUP_SIZE, DEFAULT_TARGET_FILE_SIZE, WriteOptions

# DuckDB's codec names -> Spark's: DuckDB writes LZ4_RAW for 'lz4' (Spark's 'lz4' is Hadoop's framed LZ4)
_CODECS = {"uncompressed": "uncompressed", "snappy": "snappy", "gzip": "gzip", "zstd": "zstd", "lz4": "lz4_raw",
           "lz4_raw": "lz4_raw"}
# bytes a value takes in parquet-mr's buffers before compression, by DuckLake type (others: 16)
_WIDTHS = {"boolean": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4,
           "uint64": 8, "float32": 4, "float64": 8, "date": 4, "time": 8, "timestamp": 8, "timestamptz": 8,
           "timestamp_ms": 8, "timestamp_s": 8, "timestamp_ns": 8, "uuid": 16, "varchar": 16, "blob": 16}
# the row group bytes used when parquet_row_group_size is DuckDB's default: Spark skips row groups whose min/max
# exclude a pushed filter, so a MERGE whose keys cluster (key_range_sql in dml) reads the row groups it can hit
DEFAULT_ROW_GROUP_BYTES = 16 * 1024 * 1024
# the largest estimated row group written with exact row counts (parquet-java's own default block size): a group of
# exact rows is buffered whole, whatever its bytes
EXACT_ROW_GROUP_BYTES = 128 * 1024 * 1024


def row_width(table: TableInfo) -> int:
    """An estimate of one row's bytes in parquet-mr's buffers (leaf columns' widths)."""
    return max(1, sum(_WIDTHS.get(c.type, 16) for c in table.all_columns() if not c.children))


def parquet_options(options: WriteOptions, table: TableInfo) -> dict[str, str]:
    """The DataFrameWriter options (they reach the write's Hadoop conf) for the table's write options.

    Raises:
        ValueError: a codec Spark cannot write (brotli: Spark ships no brotli codec).
    """
    codec = _CODECS.get(options.compression)
    if codec is None:
        raise ValueError(f"table {table.schema_name}.{table.name}: parquet_compression {options.compression!r} cannot "
                         f"be written by Spark (it ships no {options.compression} codec); set the table's "
                         f"parquet_compression to one of {', '.join(_CODECS)}")
    out = {"compression": codec,
           "parquet.writer.version": "PARQUET_2_0" if options.parquet_version == 2 else "PARQUET_1_0"}
    if options.level is not None and codec == "zstd":
        out["parquet.compression.codec.zstd.level"] = str(options.level)
    width = row_width(table)
    rows = exact_row_groups(options, table)
    if rows is not None:
        # every check of the buffered bytes (each `rows` rows) finds them above -1 and closes the group; no padding
        # to a file system block, which would move the cut (DuckDB pads nothing)
        out.update({"parquet.block.size": "-1", "parquet.page.size.row.check.min": str(rows),
                    "parquet.page.size.row.check.max": str(rows), "parquet.writer.max-padding": "0"})
        block, group_rows = rows * width, rows
    else:
        block = (DEFAULT_ROW_GROUP_BYTES if options.row_group_size == DEFAULT_ROW_GROUP_SIZE
                 else options.rows_per_group(width) * width)
        if options.row_group_size_bytes is not None:
            block = min(block, options.row_group_size_bytes)
        out["parquet.block.size"] = str(block)
        group_rows = block // width
    if options.target_file_size != DEFAULT_TARGET_FILE_SIZE:
        # whole row groups until the target is passed, as DuckDB rotates files
        groups = math.ceil(options.target_file_size / block) if block else 1
        out["maxRecordsPerFile"] = str(max(1, groups * group_rows))
    return out


def exact_row_groups(options: WriteOptions, table: TableInfo) -> int | None:
    """The rows of each full row group when Spark writes them exactly as DuckDB cuts them (None: a byte target)."""
    if options.row_group_size_bytes is not None:
        return None
    rows = options.rows_per_group(0)
    return rows if rows * row_width(table) <= EXACT_ROW_GROUP_BYTES else None


def sort_columns(fields: Sequence[SortField]) -> list[SparkColumn]:
    """Spark sort columns for the table's sort keys (DuckDB expressions transpiled to Spark SQL; keys of other
    dialects are skipped, as DuckDB skips them); NULLs placed as DuckDB places them."""
    out = []
    for f in fields:
        if f.dialect != "duckdb":
            continue
        col = F.expr(sqlglot.transpile(f.expression, read="duckdb", write="spark")[0])
        if f.descending:
            out.append(col.desc_nulls_first() if f.nulls_first else col.desc_nulls_last())
        else:
            out.append(col.asc_nulls_first() if f.nulls_first else col.asc_nulls_last())
    return out
