"""How a table's data files are laid out: the write options DuckDB's set_option holds, and the table's sort.

DuckDB's ducklake extension reads each write option for a table from ducklake_metadata, table scope first, then the
table's schema, then the lake (`DuckLakeCatalog::TryGetConfigOption`), and hands them to its Parquet writer
(`DuckLakeInsert::GetCopyOptions`); unset options keep the writer's defaults. Every writer of this package resolves
them here, so files written by Spark, by the driver and by compaction are laid out as DuckDB would lay them out.

A table's SET SORTED BY (`ducklake_sort_info` / `ducklake_sort_expression`) sorts the rows of each file DuckDB
writes (inserts, compaction); `sort_permutation` gives the same order with DuckDB's own ORDER BY.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from ..errors import InvalidOptionError, InvalidSortKeyError, NoSuchColumnError
from ..option_values import parse_size
from ..records import SortField, TableInfo

# the options DuckDB 1.5.5's inserts read (ducklake_insert.cpp); per_thread_output and hive_file_pattern change
# only how DuckDB's own threads split and name files, which readers ignore
WRITE_OPTIONS = ("parquet_compression", "parquet_compression_level", "parquet_row_group_size",
                 "parquet_row_group_size_bytes", "parquet_version", "target_file_size", "sort_on_insert")
CODECS = ("uncompressed", "snappy", "gzip", "zstd", "brotli", "lz4", "lz4_raw")
VECTOR_SIZE = 2048  # DuckDB's writer buffers whole chunks of this many rows before it closes a row group
DEFAULT_ROW_GROUP_SIZE = 122_880  # DuckDB's Parquet writer's default row group size (rows)
DEFAULT_TARGET_FILE_SIZE = 1 << 29  # DuckLakeCatalog::DEFAULT_TARGET_FILE_SIZE (512 MiB)
ZSTD_DEFAULT_LEVEL = 3  # DuckDB's (and parquet-mr's) zstd level when none is set; pyarrow's own default is 1


@dataclass(frozen=True)
class WriteOptions:
    """The Parquet layout of a table's data files, with DuckDB's defaults for what is not set."""

    compression: str = "snappy"
    compression_level: int | None = None
    row_group_size: int = DEFAULT_ROW_GROUP_SIZE
    row_group_size_bytes: int | None = None
    parquet_version: int = 1  # data pages v1 or v2
    target_file_size: int = DEFAULT_TARGET_FILE_SIZE
    sort_on_insert: bool = True

    @property
    def level(self) -> int | None:
        """The compression level to write with: the option, or DuckDB's for zstd."""
        if self.compression_level is not None:
            return self.compression_level
        return ZSTD_DEFAULT_LEVEL if self.compression == "zstd" else None

    def rows_per_group(self, bytes_per_row: float) -> int:
        """Rows in a full row group, as DuckDB closes them: after the chunk that reaches row_group_size rows (or
        row_group_size_bytes of data, when set)."""
        rows = self.row_group_size
        if self.row_group_size_bytes is not None and bytes_per_row > 0:
            rows = min(rows, max(1, int(self.row_group_size_bytes // bytes_per_row)))
        return math.ceil(rows / VECTOR_SIZE) * VECTOR_SIZE


def option_text(name: str, value: object) -> str:
    """The text DuckDB's set_option stores for a write option (ducklake_set_option.cpp).

    Raises:
        ValueError: a value DuckDB refuses, named.
    """
    text = str(value).strip()
    if name == "parquet_compression":
        if text.lower() not in CODECS:
            raise InvalidOptionError(f"parquet_compression {text!r} is not a codec DuckDB writes: {', '.join(CODECS)}")
        return text.lower()
    if name == "parquet_version":
        if text.upper().lstrip("V") not in ("1", "2"):
            raise InvalidOptionError(f"parquet_version must be 1 or 2, got {text!r}")
        return "V" + text.upper().lstrip("V")
    if name in ("parquet_compression_level", "parquet_row_group_size"):
        if not text.isdigit() or (name == "parquet_row_group_size" and int(text) == 0):
            raise InvalidOptionError(f"{name} must be a {'positive' if name == 'parquet_row_group_size' else 'whole'} "
                                     f"number, got {text!r}")
        return str(int(text))
    if name in ("parquet_row_group_size_bytes", "target_file_size"):
        size = parse_size(text)
        if size == 0 and name == "parquet_row_group_size_bytes":
            raise InvalidOptionError("parquet_row_group_size_bytes cannot be 0")
        return str(size)
    if name == "sort_on_insert":
        return boolean_text(name, value)
    raise InvalidOptionError(f"{name!r} is not a write option; these are: {', '.join(WRITE_OPTIONS)}")


def boolean_text(name: str, value: object) -> str:
    """'true' or 'false', as DuckDB stores a boolean option. Raises ValueError naming the option."""
    truth = {"true": "true", "1": "true", "t": "true", "false": "false", "0": "false", "f": "false"}
    text = str(value).strip().lower()
    if text not in truth:
        raise InvalidOptionError(f"{name} must be true or false, got {value!r}")
    return truth[text]


def resolve(rows: Iterable[tuple[str | None, int | None, str, str]], table: TableInfo,
            staged: Mapping[str, str] | None = None) -> WriteOptions:
    """The options for the table from ducklake_metadata rows (scope, scope_id, key, value): table scope, then the
    table's schema, then the lake, as DuckDB resolves them; staged table options (this commit's) win."""
    found: dict[tuple[str | None, int | None, str], str] = {(s, i, k): v for s, i, k, v in rows}
    values: dict[str, str] = {}
    for name in WRITE_OPTIONS:
        for key in (("table", table.table_id), ("schema", table.schema_id), (None, None)):
            if (*key, name) in found:
                values[name] = found[(*key, name)]
                break
    values.update(staged or {})
    out = WriteOptions()
    if "parquet_compression" in values:
        out = replace(out, compression=values["parquet_compression"].lower())
    if "parquet_compression_level" in values:
        out = replace(out, compression_level=int(values["parquet_compression_level"]))
    if "parquet_row_group_size" in values:
        out = replace(out, row_group_size=int(values["parquet_row_group_size"]))
    if "parquet_row_group_size_bytes" in values:
        out = replace(out, row_group_size_bytes=parse_size(values["parquet_row_group_size_bytes"]))
    if "parquet_version" in values:
        out = replace(out, parquet_version=int(values["parquet_version"].upper().lstrip("V")))
    if "target_file_size" in values:
        out = replace(out, target_file_size=parse_size(values["target_file_size"]))
    if "sort_on_insert" in values:
        out = replace(out, sort_on_insert=values["sort_on_insert"] == "true")
    return out


# sorting ---------------------------------------------------------------------------------------------------------

def parse_sorted_by(keys: str | Sequence[str], table: TableInfo) -> tuple[SortField, ...]:
    """Sort keys as DuckDB's SET SORTED BY records them: each 'expr [ASC|DESC] [NULLS FIRST|LAST]', the expression
    in DuckDB's normalized text ('"B"' -> 'B', 'a+1' -> '(a + 1)'), parsed by DuckDB's own parser.

    Raises:
        ValueError: a key does not parse, or names no column of the table (as DuckDB refuses it).
    """
    import duckdb

    text = keys if isinstance(keys, str) else ", ".join(keys)
    if not text.strip():
        raise InvalidSortKeyError("sorted_by names no sort key")
    con = duckdb.connect()
    try:
        doc = json.loads(_scalar(con, "SELECT json_serialize_sql(?)", f"SELECT 1 ORDER BY {text}"))
        orders = _orders(doc)
        if orders is None:
            raise InvalidSortKeyError(f"sorted_by {text!r} is not a list of DuckDB sort expressions: "
                                      f"{doc.get('error_message', 'no sort keys')}")
        fields, unknown = [], []
        for i, order in enumerate(orders):
            node = doc["statements"][0]["node"]
            node["modifiers"], node["select_list"] = [], [order["expression"]]
            expr = _scalar(con, "SELECT json_deserialize_sql(?)", json.dumps(doc))
            unknown += [c for c in _column_refs(order["expression"]) if not _has_column(table, c)]
            fields.append(SortField(i, expr[len("SELECT "):], order["type"] == "DESCENDING",
                                    order["null_order"] == "NULLS FIRST"))
    finally:
        con.close()
    if unknown:
        # DuckDB: "Columns in the SET SORTED BY statement were not found in the DuckLake table"
        raise InvalidSortKeyError(
            f"sorted_by names columns table {table.schema_name}.{table.name} does not have: "
            f"{', '.join(dict.fromkeys(unknown))} (its columns: {', '.join(c.name for c in table.columns)})")
    return tuple(fields)


def sort_permutation(data: pa.Table, fields: Sequence[SortField]) -> pa.Array | None:
    """The row order DuckDB's ORDER BY on the sort keys gives (ties keep their order), computed by DuckDB on the
    rows' Arrow buffers; None when nothing is to sort (DuckDB skips keys of other dialects)."""
    import duckdb

    keys = [f for f in fields if f.dialect == "duckdb"]
    if not keys or data.num_rows < 2:
        return None
    probe = data.append_column(_POSITION, pa.array(range(data.num_rows), pa.int64()))
    order = ", ".join(f"{f.expression} {'DESC' if f.descending else 'ASC'} NULLS {'FIRST' if f.nulls_first else 'LAST'}"
                      for f in keys)
    con = duckdb.connect()
    try:
        con.register("__ducklake_rows", probe)
        got = con.execute(f"SELECT {_POSITION} FROM __ducklake_rows ORDER BY {order}, {_POSITION}").to_arrow_table()
    finally:
        con.close()
    return got.column(0).combine_chunks()


def sort_rows(data: pa.Table, fields: Sequence[SortField] | None) -> pa.Table:
    """The rows in the order of the sort keys (unchanged without keys)."""
    order = sort_permutation(data, fields or ())
    return data if order is None else data.take(order)


_POSITION = "__ducklake_position"


def _scalar(con: Any, sql: str, arg: str) -> Any:
    """The one value of a one-row DuckDB query."""
    row = con.execute(sql, [arg]).fetchone()
    assert row is not None  # a scalar function's SELECT has one row
    return row[0]


def _orders(doc: dict) -> list[dict] | None:
    if doc.get("error"):
        return None
    for modifier in doc["statements"][0]["node"].get("modifiers", []):
        if modifier.get("type") == "ORDER_MODIFIER":
            return modifier["orders"]
    return None


def _column_refs(node: object) -> list[str]:
    """The column names an expression tree refers to (the last part of each reference)."""
    out: list[str] = []
    if isinstance(node, dict):
        if node.get("class") == "COLUMN_REF":
            out.append(node["column_names"][-1])
        for v in node.values():
            out += _column_refs(v)
    elif isinstance(node, list):
        for v in node:
            out += _column_refs(v)
    return out


def _has_column(table: TableInfo, name: str) -> bool:
    try:
        table.column(name)
        return True
    except NoSuchColumnError:
        return False
