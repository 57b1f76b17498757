"""Write options as Spark's Parquet writer takes them (no session needed: they are DataFrameWriter options)."""

from __future__ import annotations

import pytest

from dbt.adapters.ducklake.lake.records import Column, TableInfo
from dbt.adapters.ducklake.lake.write.layout import WriteOptions, option_text, resolve
from dbt.adapters.ducklake.spark.write.write_layout import DEFAULT_ROW_GROUP_BYTES, parquet_options

EXACT_122880 = {"parquet.block.size": "-1", "parquet.page.size.row.check.min": "122880",
                "parquet.page.size.row.check.max": "122880", "parquet.writer.max-padding": "0"}

TABLE = TableInfo(1, "u", 0, "main", "t", "t/", True, 1, (Column(1, "a", "int64"), Column(2, "b", "varchar")))


def test_defaults_are_duckdbs() -> None:
    assert parquet_options(WriteOptions(), TABLE) == {
        "compression": "snappy", "parquet.writer.version": "PARQUET_1_0", **EXACT_122880}


def test_options_map_to_sparks_writer() -> None:
    got = parquet_options(WriteOptions(compression="lz4", parquet_version=2, row_group_size=4096,
                                       target_file_size=1_000_000), TABLE)
    # DuckDB's lz4 is LZ4_RAW; row groups of exactly 4096 rows; whole row groups until the file passes 1 MB by the
    # estimate of 8 + 16 bytes a row
    assert got == {"compression": "lz4_raw", "parquet.writer.version": "PARQUET_2_0", "parquet.block.size": "-1",
                   "parquet.page.size.row.check.min": "4096", "parquet.page.size.row.check.max": "4096",
                   "parquet.writer.max-padding": "0", "maxRecordsPerFile": str(11 * 4096)}
    zstd = parquet_options(WriteOptions(compression="zstd"), TABLE)
    assert zstd["parquet.compression.codec.zstd.level"] == "3"  # DuckDB's level when none is set
    # rows as DuckDB counts them: whole chunks of 2048 until the size is reached
    assert parquet_options(WriteOptions(row_group_size=3000), TABLE)["parquet.page.size.row.check.min"] == "4096"


def test_byte_targets_where_exact_rows_cannot_be_kept() -> None:
    # DuckDB closes at the row or the byte limit, whichever comes first: by bytes only, no exact row count
    assert parquet_options(WriteOptions(row_group_size_bytes=1000), TABLE) == {
        "compression": "snappy", "parquet.writer.version": "PARQUET_1_0", "parquet.block.size": "1000"}
    # 122,880 rows of 100 strings (an estimated 196 MB) would be buffered whole: a byte target instead
    wide = TableInfo(1, "u", 0, "main", "w", "w/", True, 1,
                     tuple(Column(i + 1, f"c{i}", "varchar") for i in range(100)))
    assert parquet_options(WriteOptions(), wide)["parquet.block.size"] == str(DEFAULT_ROW_GROUP_BYTES)
    assert parquet_options(WriteOptions(row_group_size=2048), wide)["parquet.block.size"] == "-1"


def test_brotli_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"table main.t: parquet_compression 'brotli' cannot be written by Spark"):
        parquet_options(WriteOptions(compression="brotli"), TABLE)


@pytest.mark.parametrize(("name", "value", "stored"), [
    ("parquet_compression", "ZSTD", "zstd"), ("parquet_version", 2, "V2"), ("parquet_version", "v1", "V1"),
    ("target_file_size", "512MB", "512000000"), ("parquet_row_group_size_bytes", "1KiB", "1024"),
    ("parquet_row_group_size", "100", "100"), ("sort_on_insert", "0", "false")])
def test_stored_texts_are_set_options(name: str, value: object, stored: str) -> None:
    assert option_text(name, value) == stored


@pytest.mark.parametrize(("name", "value", "message"), [
    ("parquet_compression", "lzo", "not a codec DuckDB writes"), ("parquet_version", 3, "must be 1 or 2"),
    ("parquet_row_group_size", 0, "must be a positive number"), ("data_inlining", 1, "is not a write option")])
def test_bad_values_are_refused(name: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        option_text(name, value)


def test_table_beats_schema_beats_lake() -> None:
    rows = [(None, None, "parquet_compression", "gzip"), ("schema", 0, "parquet_compression", "zstd"),
            ("table", 2, "parquet_compression", "brotli"), ("table", 1, "parquet_row_group_size", "10")]
    assert resolve(rows, TABLE) == WriteOptions(compression="zstd", row_group_size=10)
