"""We never inline, but DuckDB does on our tables: its inlined rows and inlined file deletes meet our deletes."""

from __future__ import annotations

import pyarrow as pa

from dbt.adapters.ducklake.lake import Column, DuckLake, read_arrow, write_data_files
from dbt.adapters.ducklake.lake.read.changes import read_changes
from tests.lake.compare import arrow_rows
from tests.support import reference
from tests.support.invariants import violations


def duck(catalog_url: str, *statements: str, query: str | None = None) -> list[tuple]:
    with reference.attached(catalog_url) as con:
        for sql in statements:
            con.execute(sql)
        return con.execute(query).fetchall() if query else []


def test_deletes_and_updates_on_duckdb_inlined_data(catalog_url: str, data_path: str) -> None:
    lake = DuckLake.create(catalog_url, data_path)
    with lake.transaction() as tx:
        table = tx.create_table("main", "t", [Column(0, "id", "int64"), Column(0, "v", "varchar")])
    with lake.transaction() as tx:
        tx.add_data_files("main", "t", write_data_files(table, lake.snapshot().table_path(table),
                                                        pa.table({"id": range(100), "v": [f"f{i}" for i in range(100)]})))
    lake.close()
    # DuckDB's default inlining limit (10) applies to our lake: small inserts and small deletes go inline
    duck(catalog_url,
         "INSERT INTO lake.t VALUES (1000, 'inl-a'), (1001, 'inl-b'), (1002, 'inl-c')",
         "DELETE FROM lake.t WHERE id IN (3, 4)")
    lake = DuckLake.open(catalog_url)
    st = lake.snapshot()
    t = st.table("main", "t")
    assert sum(1 for _ in st.inlined_tables(t)) >= 1
    (f,) = st.files(t)
    assert sorted(p for p, _ in f.inlined_deletes) == [3, 4] and f.delete_file is None
    rows = {r["id"]: r["rowid"] for r in read_arrow(st, t).to_pylist()}

    # ours: delete an inlined row, and rows of the file overlapping DuckDB's inlined deletes
    with lake.transaction(commit_message="delete inlined + file rows") as tx:
        tx.delete_inlined_rows("main", "t", [rows[1001]])
        tx.delete_rows("main", "t", f.data_file_id, [3, 4, 5, 6])  # 3 and 4 are already gone: not counted twice
    after_delete = tx.committed.snapshot_id
    # ours: update an inlined row (post-image in a file with the preserved row id)
    st = lake.snapshot()
    t = st.table("main", "t")
    specs = write_data_files(t, st.table_path(t), pa.table({"id": [1000], "v": ["inl-a-updated"]}),
                             row_ids=[rows[1000]])
    with lake.transaction(commit_message="update inlined") as tx:
        tx.delete_inlined_rows("main", "t", [rows[1000]])
        tx.add_data_files("main", "t", specs)
    updated = tx.committed.snapshot_id
    st = lake.snapshot()
    ours = arrow_rows(read_arrow(st, st.table("main", "t")))
    ours_changes = arrow_rows(read_changes(lake, "main", "t", after_delete, updated))
    lake.close()

    with reference.attached(catalog_url) as con:
        assert arrow_rows(con.execute("SELECT rowid, * FROM lake.t").to_arrow_table()) == ours
        count, ids = con.execute("SELECT count(*), list(id ORDER BY id) FROM lake.t").fetchone()
        assert count == 100 - 4 + 3 - 1 and 1001 not in ids and 5 not in ids and 1000 in ids
        theirs = con.execute(f"SELECT * FROM ducklake_table_changes('lake', 'main', 't', {after_delete}, {updated})"
                             ).to_arrow_table()
        assert arrow_rows(theirs) == ours_changes
        kinds = sorted(r[2] for r in arrow_rows(theirs))
        assert "update_postimage" in kinds and "update_preimage" in kinds
        # DuckDB keeps inlining on top of what we wrote
        con.execute("INSERT INTO lake.t VALUES (2000, 'late')")
        assert con.execute("SELECT v FROM lake.t WHERE id = 2000").fetchone()[0] == "late"
    assert violations(catalog_url) == []


TYPES_SQL = ("id BIGINT, i8 TINYINT, u16 USMALLINT, f REAL, d DECIMAL(9,3), s VARCHAR, b BLOB, ok BOOLEAN, "
             "day DATE, ts TIMESTAMPTZ, u UUID, l INTEGER[], st STRUCT(a INTEGER)")
TYPES_COLS = [Column(0, "id", "int64"), Column(0, "i8", "int8"), Column(0, "u16", "uint16"), Column(0, "f", "float32"),
              Column(0, "d", "decimal(9,3)"), Column(0, "s", "varchar"), Column(0, "b", "blob"),
              Column(0, "ok", "boolean"), Column(0, "day", "date"), Column(0, "ts", "timestamptz"),
              Column(0, "u", "uuid"), Column(0, "l", "list", children=(Column(0, "element", "int32"),)),
              Column(0, "st", "struct", children=(Column(0, "a", "int32"),))]


def inlined_tables(catalog: str) -> list[tuple]:
    """(name, schema_version, [(column, declared type)]) of every inlined-data table, straight from the backend."""
    import sqlalchemy as sa

    from dbt.adapters.ducklake.lake.catalog.url import parse_catalog

    engine = sa.create_engine(parse_catalog(catalog).url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT table_name, schema_version FROM ducklake_inlined_data_tables "
                                        "ORDER BY schema_version")).fetchall()
            insp = sa.inspect(conn)
            return [(n, v, [(c["name"], str(c["type"])) for c in insp.get_columns(n)]) for n, v in rows]
    finally:
        engine.dispose()


def test_inlined_tables_made_like_duckdb_and_kept_usable_after_our_alters(catalog_url: str, data_path: str,
                                                                         request: object, tmp_path: object) -> None:
    """Our CREATE and ALTER make the same inlined-data tables DuckDB makes, so DuckDB keeps inlining into them."""
    from tests.conftest import _catalog_url

    theirs = _catalog_url(catalog_url.split(":")[0].replace("postgresql", "postgres"), request, tmp_path / "theirs")
    (tmp_path / "theirs").mkdir(exist_ok=True)
    with reference.attached(theirs, data_path=str(tmp_path / "theirs_data") + "/") as con:
        con.execute(f"CREATE TABLE lake.t ({TYPES_SQL})")
        con.execute("ALTER TABLE lake.t ADD COLUMN extra INTEGER")
        con.execute("ALTER TABLE lake.t RENAME COLUMN s TO s2")
    lake = DuckLake.create(catalog_url, data_path)
    with lake.transaction() as tx:
        tx.create_table("main", "t", TYPES_COLS)
    with lake.transaction() as tx:
        tx.add_column("main", "t", Column(0, "extra", "int32"))
    with lake.transaction() as tx:
        tx.rename_column("main", "t", "s", "s2")
    lake.close()
    assert inlined_tables(catalog_url) == inlined_tables(theirs)
    # DuckDB inlines small inserts into the newest one, with the new columns
    duck(catalog_url, "INSERT INTO lake.t (id, s2, extra, l) VALUES (1, 'a', 5, [1, 2])",
         "INSERT INTO lake.t (id, s2, extra) VALUES (2, 'b', 6)")
    lake = DuckLake.open(catalog_url)
    st = lake.snapshot()
    ours = arrow_rows(read_arrow(st, st.table("main", "t")))
    lake.close()
    with reference.attached(catalog_url) as con:
        assert arrow_rows(con.execute("SELECT rowid, * FROM lake.t").to_arrow_table()) == ours
        assert con.execute("SELECT id, s2, extra, l FROM lake.t ORDER BY id").fetchall() == [
            (1, "a", 5, [1, 2]), (2, "b", 6, None)]


def test_no_inlined_tables_when_the_lake_disables_inlining(catalog_url: str, data_path: str) -> None:
    lake = DuckLake.create(catalog_url, data_path)
    lake.set_option("data_inlining_row_limit", "0")
    with lake.transaction() as tx:
        tx.create_table("main", "t", [Column(0, "id", "int64")])
    lake.close()
    assert inlined_tables(catalog_url) == []
    duck(catalog_url, "INSERT INTO lake.t VALUES (1)")  # DuckDB honours the persisted limit: a file, no inlining
    assert inlined_tables(catalog_url) == []
    assert duck(catalog_url, query="SELECT count(*) FROM lake.t") == [(1,)]
