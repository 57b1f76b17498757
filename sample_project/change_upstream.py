"""Change the raw_customers table with DuckDB itself (another writer of the lake): two updates of one customer, one delete, one
insert, each its own DuckLake snapshot. The next `dbt run` merges exactly these changes into customer_directory."""

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
con.execute(f"ATTACH 'ducklake:{root}/metadata.ducklake' AS lake")
for sql in ["UPDATE lake.main.raw_customers SET country = 'be' WHERE id = 1",
            "UPDATE lake.main.raw_customers SET country = 'de' WHERE id = 1",
            "DELETE FROM lake.main.raw_customers WHERE id = 2",
            "INSERT INTO lake.main.raw_customers VALUES (99, 'Zoe Quinn', 'fr')"]:
    print(sql)
    con.execute(sql)
