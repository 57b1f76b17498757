"""A state loads the files and inlined-data tables of all its tables in one catalog connection (while the lake is
small enough), equal to loads of each table on its own; inlined-data tables without a row are read without a
connection; a big lake loads per table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.lake.catalog import state as state_module
from dbt.adapters.ducklake.lake.catalog.state import LakeState, load_files, load_inlined_tables
from dbt.adapters.ducklake.lake.read.inlined import read_inlined
from tests.support import reference
from tests.support.catalog_opens import count_opens


@pytest.fixture(params=["duckdb", "sqlite"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, DuckLake]]:
    ext = "ducklake" if request.param == "duckdb" else "sqlite"
    catalog = f"{request.param}:///{tmp_path}/l.{ext}"
    # files with a delete file, inlined deletes of file rows, inlined rows (one of them deleted), a column added with
    # a default, a table with only a file, an empty table, a partitioned table
    reference.execute_all(catalog, [
        "CALL lake.set_option('data_inlining_row_limit', 10)",
        "CREATE TABLE lake.a AS SELECT range AS id, range % 3 AS k FROM range(30)",
        "DELETE FROM lake.a WHERE id BETWEEN 10 AND 24",
        "DELETE FROM lake.a WHERE id IN (1, 2)",
        "INSERT INTO lake.a VALUES (100, 1), (101, 2)",
        "DELETE FROM lake.a WHERE id = 100",
        "DELETE FROM lake.a WHERE id = 5",
        "ALTER TABLE lake.a ADD COLUMN v VARCHAR DEFAULT 'x'",
        "INSERT INTO lake.a VALUES (102, 0, 'y')",
        "CREATE TABLE lake.b AS SELECT range AS id FROM range(20)",
        "CREATE TABLE lake.c (id INTEGER)",
        "CREATE TABLE lake.p (id INTEGER, part INTEGER)",
        "ALTER TABLE lake.p SET PARTITIONED BY (part)",
        "INSERT INTO lake.p SELECT range, range % 2 FROM range(40)",
    ], data_path=f"{tmp_path}/data/")
    lk = DuckLake.open(catalog)
    try:
        yield catalog, lk
    finally:
        lk.close()


def _alone(lk: DuckLake, st: LakeState) -> tuple[dict[str, list], dict[str, list]]:
    """Each table's files and inlined-data tables, loaded one table at a time."""
    with lk.db.read() as conn:
        files = {t.name: load_files(lk.db, conn, st, t) for t in st.tables.values()}
        inlined = {t.name: load_inlined_tables(lk.db, conn, t.table_id) for t in st.tables.values()}
    return files, inlined


def _rows(tables: list[pa.Table]) -> list[dict]:
    return sorted((r for t in tables for r in t.to_pylist()), key=lambda r: r["rowid"])


def test_one_connection_loads_every_table_and_equals_loads_of_each(
        lake: tuple[str, DuckLake], monkeypatch: pytest.MonkeyPatch) -> None:
    catalog, lk = lake
    st = lk.snapshot()
    files, inlined = _alone(lk, lk.snapshot(st.snapshot_id))
    assert files["a"] and files["p"] and any(f.delete_file for f in files["a"]) and files["c"] == []
    assert any(f.inlined_deletes for f in files["a"]) and inlined["a"]
    expected = {t.name: _rows(read_inlined(lk.snapshot(st.snapshot_id), t)) for t in st.tables.values()}
    assert [r["id"] for r in expected["a"]] == [101, 102]
    opens = count_opens(monkeypatch, lk)
    a = st.table("main", "a")
    assert st.files(a) == files["a"] and len(opens) == 1
    for t in st.tables.values():
        assert st.files_loaded(t) and st.files(t) == files[t.name]
        assert st.inlined_tables(t) == inlined[t.name]
    assert len(opens) == 2  # the files, then the inlined-data tables (both for all tables)
    for t in st.tables.values():
        assert _rows(read_inlined(st, t)) == expected[t.name]
    # rows are read for `a` only: the others' inlined-data tables are empty (DuckDB catalogs count their rows)
    assert len(opens) == (3 if catalog.startswith("duckdb") else 2 + len(st.tables))


def test_a_big_lake_loads_each_table_on_its_own(lake: tuple[str, DuckLake], monkeypatch: pytest.MonkeyPatch) -> None:
    _, lk = lake
    st = lk.snapshot()
    files, _ = _alone(lk, lk.snapshot(st.snapshot_id))
    monkeypatch.setattr(state_module, "LOAD_ALL_FILES_UP_TO", 2)  # a and p together have 3 files
    b = st.table("main", "b")
    assert st.files(b) == files["b"]
    assert [t.name for t in st.tables.values() if st.files_loaded(t)] == ["b"]
    assert st.files(st.table("main", "a")) == files["a"]
    assert sorted(t.name for t in st.tables.values() if st.files_loaded(t)) == ["a", "b"]


def test_an_inlined_insert_after_the_load_is_read_by_the_next_state(lake: tuple[str, DuckLake]) -> None:
    """Emptiness is known per state: rows DuckDB inlines into a table that was empty are read at the next snapshot,
    and a state that moved forward over a change to another table keeps what it knew."""
    catalog, lk = lake
    st = lk.snapshot()
    b = st.table("main", "b")
    assert _rows(read_inlined(st, b)) == []
    lk.close()
    reference.execute_all(catalog, ["INSERT INTO lake.b VALUES (7)", "INSERT INTO lake.c VALUES (8)"])
    new, changed = lk.advance(st)
    assert changed == {b.table_id, new.table("main", "c").table_id}
    assert [r["id"] for r in _rows(read_inlined(new, new.table("main", "b")))] == [7]
    assert [r["id"] for r in _rows(read_inlined(new, new.table("main", "c")))] == [8]
    assert _rows(read_inlined(st, b)) == []  # the old state still answers for its snapshot
