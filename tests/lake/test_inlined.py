"""We never inline, but DuckDB does on our tables: its inlined rows and inlined file deletes meet our deletes."""

from __future__ import annotations

import pyarrow as pa

from dbt.adapters.ducklake.lake import Column, DuckLake, read_arrow, write_data_files
from dbt.adapters.ducklake.lake.changes import read_changes
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
