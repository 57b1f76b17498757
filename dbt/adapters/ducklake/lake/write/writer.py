"""A driver-side Parquet writer for small data (tools, seeds of tests): Arrow rows -> data files ready to register.

Large data is written by an engine (the Spark layer); this writer is the reference of the layout it must produce:
field ids on every node, one file set per partition under hive-style directories, stats from the footer.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import InvalidDataFileError
from ..paths import data_file_name, join_path
from ..read.arrow_types import interval_to_text
from ..read.deletes import ROW_ID_COLUMN, ROW_ID_FIELD_ID
from ..records import Column, TableInfo
from ..storage import file_io
from ..types import arrow_schema
from .datafiles import DataFileSpec, describe_parquet
from .layout import WriteOptions, sort_rows
from .partitioning import partition_values

NULL_PARTITION_DIR = "__HIVE_DEFAULT_PARTITION__"


def conform(data: pa.Table, columns: Sequence[Column]) -> pa.Table:
    """The data with the table's columns, order and types, carrying field ids.

    Raises:
        InvalidDataFileError: a column is missing or its values do not fit the column's type.
    """
    schema = arrow_schema(columns)
    arrays = []
    for field in schema:
        if field.name not in data.column_names:
            raise InvalidDataFileError(f"the data has no column {field.name!r} (columns: {data.column_names})")
        try:
            arrays.append(data.column(field.name).cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise InvalidDataFileError(
                f"column {field.name!r}: values of type {data.column(field.name).type} do not fit {field.type}: {e}"
            ) from e
    return pa.Table.from_arrays(arrays, schema=schema)


def write_data_files(
    table: TableInfo, table_dir: str, data: pa.Table, *, row_ids: Sequence[int] | pa.Array | None = None,
    options: WriteOptions | None = None,
) -> list[DataFileSpec]:
    """Write the rows as data files of the table (per partition, split at options.target_file_size), returning
    their specs for add_data_files. Rows are sorted by the table's SET SORTED BY, as DuckDB's inserts sort them.

    row_ids, for an UPDATE's post-images, are written as _ducklake_internal_row_id so the rows keep their ids.
    options: the table's write options (DuckLake.write_options / Transaction.write_options); DuckDB's defaults
    when None.
    """
    options = options or WriteOptions()
    data = conform(data, table.columns)
    if row_ids is not None:
        ids = pa.array(row_ids, pa.int64())
        if len(ids) != data.num_rows:
            raise InvalidDataFileError(f"{len(ids)} row ids for {data.num_rows} rows")
        field = pa.field(ROW_ID_COLUMN, pa.int64(), metadata={b"PARQUET:field_id": str(ROW_ID_FIELD_ID).encode()})
        data = data.append_column(field, ids)
    if data.num_rows == 0:
        return []
    if table.sort is not None and options.sort_on_insert:
        data = sort_rows(data, table.sort.fields)
    if table.partition is None:
        return _write_split(table, table_dir, data, (), options)
    keys = partition_values(table, data)  # one tuple of partition value strings per row
    groups: dict[tuple[str | None, ...], list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    specs = []
    for key, rows in groups.items():
        part = data.take(pa.array(rows))
        sub = "/".join(
            f"{_partition_dir_name(table, f.column_id, f.transform)}={NULL_PARTITION_DIR if v is None else v}"
            for f, v in zip(table.partition.fields, key, strict=True)
        )
        # DuckDB does not split partitioned writes by target_file_size (ducklake_insert.cpp: rotate only unpartitioned)
        specs.append(_write_one(table, join_path(table_dir, sub), part, key, options))
    return specs


def _partition_dir_name(table: TableInfo, column_id: int, transform: str) -> str:
    name = table.column_by_id(column_id).name
    return name if transform == "identity" else transform.split("(")[0]


def write_file(table: TableInfo, directory: str, data: pa.Table, key: tuple[str | None, ...],
               options: WriteOptions | None = None) -> DataFileSpec:
    """Write one data file of already conformed rows (reserved columns allowed) into directory; its spec."""
    return _write_one(table, directory, data, key, options or WriteOptions())


def _writable(data: pa.Table) -> pa.Table:
    """The rows as Parquet can hold them: pyarrow cannot write an INTERVAL column (month_day_nano), so a top-level
    one is written as the text Spark writes (DuckDB reads it VARCHAR -> INTERVAL), keeping its field id."""
    for i, field in enumerate(data.schema):
        if field.type == pa.month_day_nano_interval():
            data = data.set_column(i, pa.field(field.name, pa.string(), field.nullable, field.metadata),
                                   interval_to_text(data.column(i)))
    return data


def _write_split(table: TableInfo, directory: str, data: pa.Table, key: tuple[str | None, ...],
                 options: WriteOptions) -> list[DataFileSpec]:
    """Files of at most one row group past target_file_size each: DuckDB starts a new file once the bytes written
    reach the target (it checks after each row group)."""
    rows = options.rows_per_group(data.nbytes / max(data.num_rows, 1))
    specs, start = [], 0
    while start < data.num_rows:
        first = start
        path = join_path(directory, data_file_name())
        with file_io(path).open_output(path) as out, _parquet_writer(out, data, options) as writer:
            while start < data.num_rows:
                writer.write_table(_writable(data.slice(start, rows)), row_group_size=rows)
                start += rows
                if out.tell() >= options.target_file_size:
                    break
        specs.append(describe_parquet(path, table.columns, partition_values=key,
                                      contains_nan=_nan_presence(table, data.slice(first, start - first))))
    return specs


def _parquet_writer(out: object, data: pa.Table, options: WriteOptions) -> pq.ParquetWriter:
    return pq.ParquetWriter(out, _writable_schema(data.schema), compression=options.compression,
                            use_dictionary=_dictionary_columns(data),
                            compression_level=options.level, write_statistics=True,
                            data_page_version="2.0" if options.parquet_version == 2 else "1.0")


def _dictionary_columns(data: pa.Table) -> list[str]:
    """The columns DuckDB's writer would dictionary-encode: those whose dictionary plus indexes are smaller than
    the plain values (DuckDB drops the dictionary of a column whose values are mostly distinct); nested columns
    keep pyarrow's dictionary."""
    out = []
    n = max(data.num_rows, 1)
    for field in data.schema:
        column = data.column(field.name)
        if pa.types.is_nested(field.type):
            out.append(field.name)
            continue
        distinct = pc.count_distinct(column).as_py() or 1
        plain = column.nbytes / n
        if distinct * plain + n * max(1, distinct.bit_length()) / 8 < n * plain:
            out.append(field.name)
    return out


def _writable_schema(schema: pa.Schema) -> pa.Schema:
    return _writable(schema.empty_table()).schema


def _write_one(table: TableInfo, directory: str, data: pa.Table, key: tuple[str | None, ...],
               options: WriteOptions) -> DataFileSpec:
    path = join_path(directory, data_file_name())
    rows = options.rows_per_group(data.nbytes / max(data.num_rows, 1))
    with file_io(path).open_output(path) as out, _parquet_writer(out, data, options) as writer:
        writer.write_table(_writable(data), row_group_size=rows)
    return describe_parquet(path, table.columns, partition_values=key, contains_nan=_nan_presence(table, data))


def _nan_presence(table: TableInfo, data: pa.Table) -> dict[int, bool]:
    """Whether each top-level float column holds a NaN (the writer knows; a Parquet footer does not)."""
    out = {}
    for col in table.columns:
        if col.type in ("float32", "float64"):
            out[col.column_id] = bool(pc.any(pc.is_nan(data.column(col.name))).as_py() or False)
    return out

