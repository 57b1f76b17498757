"""A small lake built with the format layer alone, then read by DuckDB's ducklake extension.

Usage: python examples/format_layer_demo.py [DIRECTORY]   (default: sample_lake; it is created anew)
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys

import pyarrow as pa

from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.lake.records import Column
from dbt.adapters.ducklake.lake.write.writer import write_data_files


def main(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    catalog = os.path.join(directory, "metadata.ducklake")
    lake = DuckLake.create(catalog, os.path.join(directory, "data"))
    with lake.transaction(author="demo", commit_message="create sales") as tx:
        tx.create_schema("shop")
        tx.create_table(
            "shop", "sales",
            [Column(0, "id", "int64"), Column(0, "product", "varchar"), Column(0, "amount", "decimal(10,2)"),
             Column(0, "sold_at", "timestamp")],
            partition_by=[("sold_at", "month")], comment="one row per sale",
        )
    table = lake.snapshot().table("shop", "sales")
    rows = pa.table({
        "id": list(range(1, 7)),
        "product": ["tea", "coffee", "tea", "cake", "coffee", "tea"],
        "amount": pa.array([3.5, 4.0, 3.5, 6.25, 4.0, 3.5]).cast(pa.decimal128(10, 2)),
        "sold_at": [dt.datetime(2026, m, d) for m, d in ((1, 5), (1, 9), (2, 1), (2, 14), (3, 3), (3, 8))],
    })
    with lake.transaction(author="demo", commit_message="load sales") as tx:
        tx.add_data_files("shop", "sales", write_data_files(table, lake.snapshot().table_path(table), rows))
    state = lake.snapshot()
    cake = next(f for f in state.files(state.table("shop", "sales")) if f.partition_values == ("2",))
    with lake.transaction(author="demo", commit_message="refund the cake") as tx:
        tx.delete_rows("shop", "sales", cake.data_file_id, [1])
    lake.close()
    show_with_duckdb(catalog)


def show_with_duckdb(catalog: str) -> None:
    import duckdb
    import duckdb_extension_ducklake as ext

    path = os.path.join(os.path.dirname(ext.__file__), "extensions", f"v{duckdb.__version__}", "ducklake.duckdb_extension")
    con = duckdb.connect(config={"autoinstall_known_extensions": False})
    con.execute(f"LOAD '{path}'")
    attach = f"ATTACH 'ducklake:{os.path.abspath(catalog)}' AS lake"
    print(f"\nIn DuckDB: {attach};")
    con.execute(attach)
    for sql in (
        "SELECT snapshot_id, author, commit_message, changes FROM lake.snapshots() ORDER BY 1",
        "SELECT product, count(*) AS sales, sum(amount) AS revenue FROM lake.shop.sales GROUP BY ALL ORDER BY 1",
        "SELECT count(*) AS rows_before_refund FROM lake.shop.sales AT (VERSION => 2)",
    ):
        print(f"\n{sql}")
        con.sql(sql).show()
    con.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sample_lake")
