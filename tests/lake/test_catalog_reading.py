"""`CatalogDB.reading()`: many reads (every snapshot of a table, its files and inlined rows) in one catalog
connection, the same answers as reads one connection each, and no write inside it."""

from __future__ import annotations

import pyarrow as pa
import pytest
import sqlalchemy as sa

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.lake.read.scan import read_arrow
from dbt.adapters.ducklake.lake.records import Column
from dbt.adapters.ducklake.lake.write.writer import write_data_files


def _lake_with_history(catalog_url: str, data_path: str) -> DuckLake:
    lake = DuckLake.create(catalog_url, data_path)
    with lake.transaction() as tx:
        t = tx.create_table("main", "t", [Column(0, "id", "int64"), Column(0, "v", "varchar")])
    for k in range(3):
        st = lake.snapshot()
        with lake.transaction() as tx:
            tx.add_data_files("main", "t", write_data_files(t, st.table_path(t), pa.table(
                {"id": range(k * 10, k * 10 + 4), "v": [f"r{i}" for i in range(4)]})))
    return lake


def _connections(lake: DuckLake) -> list[int]:
    opened: list[int] = []
    sa.event.listen(lake.db.engine, "connect", lambda *_: opened.append(1))
    return opened


def test_reads_in_one_connection_give_the_same_rows(catalog_url: str, data_path: str) -> None:
    lake = _lake_with_history(catalog_url, data_path)
    try:
        ids = [s.snapshot_id for s in lake.snapshots()]
        apart = {}
        for sid in ids[1:]:
            st = lake.snapshot(sid)
            apart[sid] = read_arrow(st, st.table("main", "t")).to_pylist()
        opened = _connections(lake)
        together = {}
        with lake.db.reading():
            for sid in ids[1:]:
                st = lake.snapshot(sid)
                together[sid] = read_arrow(st, st.table("main", "t")).to_pylist()
            with lake.db.reading():  # nested: still the same connection
                lake.snapshot(ids[-1]).files(lake.snapshot(ids[-1]).table("main", "t"))
        assert together == apart
        assert [len(apart[sid]) for sid in ids[1:]] == [0, 4, 8, 12]
        assert len(opened) == 1
    finally:
        lake.close()


def test_no_write_inside_reading_and_the_lake_is_unchanged(catalog_url: str, data_path: str) -> None:
    lake = _lake_with_history(catalog_url, data_path)
    try:
        before = lake.latest_snapshot_id()
        with lake.db.reading(), pytest.raises(RuntimeError, match="inside CatalogDB.reading"), \
                lake.transaction() as tx:
            tx.create_schema("other")
        assert lake.latest_snapshot_id() == before
        with lake.transaction() as tx:  # after the block, writes work again
            tx.create_schema("other")
        assert lake.latest_snapshot_id() == before + 1
    finally:
        lake.close()
