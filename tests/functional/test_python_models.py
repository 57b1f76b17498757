"""Python models checked with DuckDB: each model's table equals the same logic run by DuckDB as SQL on the source,
after a first run and after DuckDB changed the source; every strategy, on_schema_change, time travel and
the change feed from Python; failures name the user's file and line, and leave the lake as it was."""

from __future__ import annotations

from typing import Any

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference

SEED = "id,customer,amount,day\n1,ann,10,2026-01-01\n2,bob,20,2026-01-01\n3,ann,30,2026-01-02\n4,cid,40,2026-01-03\n"

PY_TABLE = """
from pyspark.sql import functions as F


def model(dbt, session):
    dbt.config(materialized="table")
    orders = dbt.ref("orders")
    return orders.where(F.col("amount") > 15).select("id", (F.col("amount") * 2).alias("amount2"))
"""
PY_PANDAS = """
def model(dbt, session):
    dbt.config(materialized="table")
    pdf = dbt.ref("orders").toPandas()
    return pdf.groupby("customer", as_index=False)["amount"].sum()
"""
PY_ARROW = """
import pyarrow as pa


def model(dbt, session):
    dbt.config(materialized="table")
    rows = dbt.ref("orders").select("id", "customer").collect()
    return pa.table({"id": [r.id for r in rows], "who": [r.customer.upper() for r in rows]})
"""
PY_INCREMENTAL = """
def model(dbt, session):
    dbt.config(materialized="incremental", incremental_strategy="{strategy}", unique_key={key},
               partition_by={partition})
    orders = dbt.ref("orders")
    if dbt.is_incremental:
        seen = session.sql(f"select coalesce(max(id), 0) as m from {{dbt.this}}").collect()[0].m
        orders = orders.where((orders.id > seen) | (orders.id == 2))
    return orders.select("id", "customer", "amount", "day")
"""
PY_EVOLVE = """
def model(dbt, session):
    dbt.config(materialized="incremental", incremental_strategy="append", on_schema_change="append_new_columns")
    orders = dbt.ref("orders")
    if dbt.is_incremental:
        return orders.where("id > 4").selectExpr("id", "amount", "upper(customer) as shout")
    return orders.select("id", "amount")
"""
PY_TIME_TRAVEL = """
def model(dbt, session):
    dbt.config(materialized="table")
    return dbt.ducklake_at(dbt.ref("orders"), changes_back=1)  # the version before the last change
"""
PY_CHANGES = """
def model(dbt, session):
    dbt.config(materialized="incremental", unique_key="id")
    changes = dbt.ducklake_changes(dbt.ref("orders"))
    return changes.select("id", "customer", "amount", "_ducklake_change_type")
"""
PY_FAILS = """
def model(dbt, session):
    dbt.config(materialized="table")
    orders = dbt.ref("orders")
    raise ValueError(f"boom after reading {orders.count()} rows")
    return orders
"""
PY_WRONG_TYPE = """
def model(dbt, session):
    answer = 42
    return answer
"""
PY_MISSING_PACKAGE = """
def model(dbt, session):
    dbt.config(materialized="table", packages=["definitely-not-a-real-package-xyz==1.0"])
    return dbt.ref("orders")
"""

GOOD = ["py_table", "py_pandas", "py_arrow", "py_merge", "py_append", "py_delete_insert", "py_overwrite",
        "py_evolve", "py_changes"]


def _rows(con: Any, sql: str) -> list[tuple]:
    return sorted(con.execute(sql).fetchall(), key=repr)


class TestPythonModels:
    @pytest.fixture(scope="class")
    def seeds(self) -> dict[str, str]:
        return {"orders.csv": SEED}

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        inc = PY_INCREMENTAL
        return {
            "py_table.py": PY_TABLE, "py_pandas.py": PY_PANDAS, "py_arrow.py": PY_ARROW,
            "py_merge.py": inc.format(strategy="merge", key="'id'", partition=None),
            "py_append.py": inc.format(strategy="append", key=None, partition=None),
            "py_delete_insert.py": inc.format(strategy="delete+insert", key="'id'", partition=None),
            "py_overwrite.py": inc.format(strategy="insert_overwrite", key=None, partition="['day']"),
            "py_evolve.py": PY_EVOLVE,
            "py_time_travel.py": PY_TIME_TRAVEL, "py_changes.py": PY_CHANGES,
            "py_fails.py": PY_FAILS, "py_wrong_type.py": PY_WRONG_TYPE, "py_missing_package.py": PY_MISSING_PACKAGE,
        }

    def _check(self, con: Any, s: str, appended: list[tuple]) -> None:
        o = f"lake.{s}.orders"
        assert _rows(con, f"SELECT * FROM lake.{s}.py_table") == _rows(
            con, f"SELECT id, amount * 2 FROM {o} WHERE amount > 15")
        assert _rows(con, f"SELECT * FROM lake.{s}.py_pandas") == _rows(
            con, f"SELECT customer, sum(amount) FROM {o} GROUP BY customer")
        assert _rows(con, f"SELECT * FROM lake.{s}.py_arrow") == _rows(con, f"SELECT id, upper(customer) FROM {o}")
        current = _rows(con, f"SELECT id, customer, amount, day FROM {o}")
        for name in ("py_merge", "py_delete_insert"):  # keyed: the source's current rows
            assert _rows(con, f"SELECT * FROM lake.{s}.{name}") == current, name
        assert _rows(con, f"SELECT * FROM lake.{s}.py_append") == sorted(appended, key=repr)
        assert _rows(con, f"SELECT id, customer, amount FROM lake.{s}.py_changes") == _rows(
            con, f"SELECT id, customer, amount FROM {o}")

    def test_python_models_equal_their_sql(self, project: Any) -> None:
        catalog, s = project.adapter.config.credentials.catalog, project.test_schema
        run_dbt(["seed"])
        results = run_dbt(["run", "--exclude", "py_time_travel"], expect_pass=False)
        status = {r.node.name: r.status for r in results}
        assert {n: status[n] for n in GOOD} == {n: "success" for n in GOOD}
        msg = {r.node.name: str(r.message) for r in results}
        # the user's traceback: their file and line, their exception
        assert "models/py_fails.py\", line 5, in model" in msg["py_fails"], msg["py_fails"]
        assert "ValueError: boom after reading 4 rows" in msg["py_fails"]
        assert "returned builtins.int" in msg["py_wrong_type"] and "PySpark DataFrame" in msg["py_wrong_type"]
        assert "definitely-not-a-real-package-xyz==1.0" in msg["py_missing_package"]
        assert "pip install" in msg["py_missing_package"]
        with reference.attached(catalog) as con:
            tables = {r[0] for r in con.execute(
                f"SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake' AND schema_name = '{s}'"
            ).fetchall()}
            assert not tables & {"py_fails", "py_wrong_type", "py_missing_package"}  # nothing of failed models
            first = _rows(con, f"SELECT id, customer, amount, day FROM lake.{s}.orders")
            self._check(con, s, first)
            assert _rows(con, f"SELECT * FROM lake.{s}.py_evolve") == _rows(
                con, f"SELECT id, amount FROM lake.{s}.orders")
            messages = [r[0] for r in con.execute(
                "SELECT commit_message FROM lake.snapshots() WHERE commit_message LIKE 'model.test.py_merge%'").fetchall()]
            assert len(messages) == 1  # one snapshot, with provenance
            # DuckDB changes the source: an update, a delete, an insert
            before = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
            con.execute(f"UPDATE lake.{s}.orders SET amount = 21 WHERE id = 2")
            con.execute(f"DELETE FROM lake.{s}.orders WHERE id = 1")
            con.execute(f"INSERT INTO lake.{s}.orders VALUES (5, 'dan', 50, DATE '2026-01-03')")
            previous = _rows(con, f"SELECT * FROM lake.{s}.orders AT (VERSION => {before + 2})")
        results = run_dbt(["run", "--select", *GOOD, "py_time_travel"])
        assert len(results) == len(GOOD) + 1
        with reference.attached(catalog) as con:
            # append took rows with a new id, and id 2 again (its filter keeps id 2): old rows stay
            appended = first + _rows(con, f"SELECT id, customer, amount, day FROM lake.{s}.orders WHERE id IN (2, 5)")
            current = _rows(con, f"SELECT id, customer, amount, day FROM lake.{s}.orders")
            # merge and delete+insert by key: deleted id 1 stays (the model only sees new rows and id 2)
            for name in ("py_merge", "py_delete_insert"):
                assert _rows(con, f"SELECT * FROM lake.{s}.{name}") == sorted(
                    current + [r for r in first if r[0] == 1], key=repr), name
            assert _rows(con, f"SELECT * FROM lake.{s}.py_append") == sorted(appended, key=repr)
            # insert_overwrite replaced the partitions of the new rows (days of ids 2 and 5), kept the others
            kept = [r for r in first if str(r[3]) not in ("2026-01-01", "2026-01-03")]
            assert _rows(con, f"SELECT * FROM lake.{s}.py_overwrite") == sorted(
                kept + _rows(con, f"SELECT id, customer, amount, day FROM lake.{s}.orders WHERE id IN (2, 5)"),
                key=repr)
            # the change feed from Python: update, delete and insert applied by the merge
            assert _rows(con, f"SELECT id, customer, amount FROM lake.{s}.py_changes") == _rows(
                con, f"SELECT id, customer, amount FROM lake.{s}.orders")
            assert _rows(con, f"SELECT * FROM lake.{s}.py_evolve") == _rows(
                con, f"SELECT id, amount, NULL FROM lake.{s}.orders AT (VERSION => {before}) UNION ALL "
                     f"SELECT id, amount, upper(customer) FROM lake.{s}.orders WHERE id > 4")
            # time travel from Python: the version before the last change of orders (DuckDB's insert)
            assert _rows(con, f"SELECT * FROM lake.{s}.py_time_travel") == previous
