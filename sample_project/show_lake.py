"""Open the sample's lake with DuckDB's own ducklake extension and show what dbt built."""

from __future__ import annotations

import os
import sys

import duckdb
import duckdb_extension_ducklake

root = sys.argv[1] if len(sys.argv) > 1 else "lake"
ext = os.path.join(os.path.dirname(duckdb_extension_ducklake.__file__), "extensions", f"v{duckdb.__version__}",
                   "ducklake.duckdb_extension")
con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
con.execute(f"LOAD '{ext}'")
con.execute(f"ATTACH 'ducklake:{root}/metadata.ducklake' AS lake (READ_ONLY)")
print(f"-- ATTACH 'ducklake:{root}/metadata.ducklake' AS lake; then, in DuckDB:")
tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake' AND "
                                    "schema_name = 'main' ORDER BY 1").fetchall()]
# count(*), not duckdb_tables().estimated_size: that counts deleted rows too
counts = " UNION ALL ".join(f"SELECT '{t}' AS table_name, count(*) AS rows FROM lake.main.{t}" for t in tables)
for sql in [
    f"SELECT c.table_name, c.rows, t.comment FROM ({counts}) c JOIN duckdb_tables() t ON t.database_name = 'lake' "
    "AND t.schema_name = 'main' AND t.table_name = c.table_name ORDER BY 1",
    "SELECT * FROM lake.main.customers ORDER BY revenue DESC",
    "SELECT count(*) AS orders, sum(amount) AS amount FROM lake.main.order_log",
    "SELECT * FROM lake.main.customer_cohorts ORDER BY cohort_month, months_since_first LIMIT 6",
    "SELECT * FROM lake.main.stg_customers ORDER BY customer_id LIMIT 3",
    "SELECT * FROM lake.main.customer_directory WHERE id IN (1, 2, 99) ORDER BY id",
    "SELECT id, name, country, dbt_valid_from, dbt_valid_to FROM lake.main.customers_history WHERE id IN (1, 2, 99) "
    "ORDER BY id, dbt_valid_from",
    "SELECT snapshot_id, author, commit_message FROM lake.snapshots() ORDER BY snapshot_id",
]:
    # the row-count query is long (a count(*) per table): show what it does instead
    print("\n-- rows per table (count(*)) and comments" if sql.startswith("SELECT c.table_name") else f"\n{sql}")
    print(con.sql(sql))
