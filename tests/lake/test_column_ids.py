"""A new column's id is above every id the table ever had (dropped columns' included), as DuckDB gives it: a reused id
would map old files' values of the dropped column to the new one (found by the differential fuzzer: an INTEGER
column added after a VARCHAR column was dropped read the old strings)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from dbt.adapters.ducklake.lake import Column, DuckLake, write_data_files
from dbt.adapters.ducklake.lake.read.scan import read_arrow
from tests.support import reference
from tests.support.invariants import violations


@pytest.mark.parametrize("one_commit", [False, True], ids=["separate", "same_commit"])
def test_added_column_never_reuses_a_dropped_id(file_catalog_url: str, tmp_path: Path, one_commit: bool) -> None:
    lake = DuckLake.create(file_catalog_url, str(tmp_path / "data") + "/")
    with lake.transaction() as tx:
        t = tx.create_table("main", "t", [Column(0, "a", "int32"), Column(0, "b", "varchar")])
        tx.add_data_files("main", "t", write_data_files(
            t, tx.table_path(t), pa.table({"a": pa.array([1, 2], pa.int32()), "b": ["v49", "x"]})))
    if one_commit:
        with lake.transaction() as tx:
            tx.drop_column("main", "t", "b")
            tx.add_column("main", "t", Column(0, "c", "int32"))
    else:
        with lake.transaction() as tx:
            tx.drop_column("main", "t", "b")
        with lake.transaction() as tx:
            tx.add_column("main", "t", Column(0, "c", "int32"))
    st = lake.snapshot()
    info = st.table("main", "t")
    assert [(c.name, c.column_id) for c in info.columns] == [("a", 1), ("c", 3)]
    assert read_arrow(st, info, with_rowid=False).to_pylist() == [{"a": 1, "c": None}, {"a": 2, "c": None}]
    lake.close()
    assert violations(file_catalog_url) == []
    with reference.attached(file_catalog_url) as con:
        assert sorted(con.execute("SELECT * FROM lake.main.t").fetchall()) == [(1, None), (2, None)]
        # DuckDB continues the same numbering
        con.execute("ALTER TABLE lake.main.t DROP COLUMN c")
        con.execute("ALTER TABLE lake.main.t ADD COLUMN e INTEGER")
        ids = con.execute("SELECT DISTINCT column_id, column_name FROM __ducklake_metadata_lake.ducklake_column "
                          "ORDER BY 1").fetchall()
    assert ids == [(1, "a"), (2, "b"), (3, "c"), (4, "e")]
