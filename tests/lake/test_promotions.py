"""Type promotion: the same widening rules as the reference, and old files read under the new type by both sides."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from dbt.adapters.ducklake.lake import Column, DuckLake, read_arrow, write_data_files
from dbt.adapters.ducklake.lake.errors import SchemaEvolutionError
from dbt.adapters.ducklake.lake.write.promotions import promotion_allowed
from tests.lake.compare import arrow_rows
from tests.support import reference

TYPES = {"TINYINT": "int8", "SMALLINT": "int16", "INTEGER": "int32", "BIGINT": "int64", "HUGEINT": "int128",
         "UTINYINT": "uint8", "USMALLINT": "uint16", "UINTEGER": "uint32", "UBIGINT": "uint64", "FLOAT": "float32",
         "DOUBLE": "float64", "DECIMAL(10,2)": "decimal(10,2)", "DECIMAL(20,4)": "decimal(20,4)", "VARCHAR": "varchar",
         "DATE": "date", "TIMESTAMP": "timestamp", "TIMESTAMPTZ": "timestamptz"}


def test_promotion_rules_match_duckdb(tmp_path: object) -> None:
    with reference.attached(f"{tmp_path}/m.ducklake", data_path=f"{tmp_path}/d/") as con:
        # every table in one commit (a commit per table was three quarters of the time); each ALTER is its own
        con.execute("BEGIN")
        for i, (src_sql, _) in enumerate(TYPES.items()):
            for j in range(len(TYPES)):
                if i != j:
                    con.execute(f"CREATE TABLE lake.t_{i}_{j} (x {src_sql})")
        con.execute("COMMIT")
        for i, (_, src) in enumerate(TYPES.items()):
            for j, (dst_sql, dst) in enumerate(TYPES.items()):
                if i == j:
                    continue
                try:
                    con.execute(f"ALTER TABLE lake.t_{i}_{j} ALTER x TYPE {dst_sql}")
                    duckdb_allows = True
                except Exception:
                    duckdb_allows = False
                assert promotion_allowed(src, dst) == duckdb_allows, (src, dst)


def test_old_files_read_under_promoted_types(catalog_url: str, data_path: str) -> None:
    lake = DuckLake.create(catalog_url, data_path)
    cols = [Column(0, "i", "int32"), Column(0, "f", "float32"), Column(0, "d", "date"), Column(0, "m", "decimal(5,2)"),
            Column(0, "u", "uint16")]
    with lake.transaction() as tx:
        table = tx.create_table("main", "t", cols)
    data = pa.table({"i": [1, -2], "f": [1.5, None], "d": [dt.date(2024, 2, 29), None],
                     "m": [Decimal("123.45"), Decimal("-1.00")], "u": [65535, 0]})
    with lake.transaction() as tx:
        tx.add_data_files("main", "t", write_data_files(table, lake.snapshot().table_path(table), data))
    with lake.transaction() as tx:
        tx.alter_column_type("main", "t", "i", "int64")
        tx.alter_column_type("main", "t", "f", "float64")
        tx.alter_column_type("main", "t", "d", "timestamp")
        tx.alter_column_type("main", "t", "m", "decimal(12,4)")
        tx.alter_column_type("main", "t", "u", "int32")
    with pytest.raises(SchemaEvolutionError, match="from int64 to int32: only widening"), lake.transaction() as tx:
        tx.alter_column_type("main", "t", "i", "int32")
    st = lake.snapshot()
    ours = arrow_rows(read_arrow(st, st.table("main", "t")))
    assert [c.type for c in st.table("main", "t").columns] == ["int64", "float64", "timestamp", "decimal(12,4)", "int32"]
    lake.close()
    with reference.attached(catalog_url) as con:
        theirs = con.execute("SELECT rowid, * FROM lake.t").to_arrow_table()
        assert arrow_rows(theirs) == ours
        assert con.execute("SELECT typeof(i), typeof(d), typeof(m) FROM lake.t LIMIT 1").fetchone() == (
            "BIGINT", "TIMESTAMP", "DECIMAL(12,4)")
