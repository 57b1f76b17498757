"""A state held while another process expires its snapshot: expiry deletes the catalog rows only expired snapshots
saw (data files, delete files, inlined rows), so a load of what the state shows, made after that, would be silently
partial. Each load checks its snapshot is still there and otherwise names it; what the state loaded before stays."""

from __future__ import annotations

import pytest

from dbt.adapters.ducklake.lake import DuckLake, read_arrow
from dbt.adapters.ducklake.lake.errors import NoSuchSnapshotError
from tests.support import reference


def _lake_with_history(url: str, data_path: str) -> None:
    DuckLake.create(url, data_path).close()
    reference.execute_all(url, [
        "CREATE TABLE lake.main.f AS SELECT range AS id FROM range(100)",  # a data file (over the inlining limit)
        "CREATE TABLE lake.main.i (id INTEGER)",
        "CALL lake.set_option('data_inlining_row_limit', 10)",
        "INSERT INTO lake.main.i VALUES (1), (2)",  # inlined rows
        # the snapshot the state holds; then the file is rewritten and the inlined rows deleted
        "DELETE FROM lake.main.i",
        "CREATE OR REPLACE TABLE lake.main.f AS SELECT range AS id FROM range(50)",
    ])


def test_a_held_state_refuses_loads_after_its_snapshot_expired(catalog_url: str, data_path: str) -> None:
    _lake_with_history(catalog_url, data_path)
    lake = DuckLake.open(catalog_url)
    try:
        latest = lake.snapshot().snapshot_id
        held = lake.snapshot(latest - 2)  # before the delete and the rewrite
        f, i = held.table("main", "f"), held.table("main", "i")
        reference.execute_all(catalog_url, [f"CALL ducklake_expire_snapshots('lake', versions => [{latest - 2}])"])
        with pytest.raises(NoSuchSnapshotError, match=rf"snapshot {latest - 2} was expired"):
            held.files(f)
        with pytest.raises(NoSuchSnapshotError, match=rf"snapshot {latest - 2} was expired"):
            held.live_rows_in_files(f)
        with pytest.raises(NoSuchSnapshotError, match=rf"snapshot {latest - 2} was expired"):
            read_arrow(held, i)
        # a retained snapshot reads as DuckDB reads it
        now = lake.snapshot()
        assert read_arrow(now, now.table("main", "f")).num_rows == 50
        assert read_arrow(now, now.table("main", "i")).num_rows == 0
    finally:
        lake.close()


def test_what_a_state_loaded_before_the_expiry_is_kept(catalog_url: str, data_path: str) -> None:
    _lake_with_history(catalog_url, data_path)
    lake = DuckLake.open(catalog_url)
    try:
        latest = lake.snapshot().snapshot_id
        held = lake.snapshot(latest - 2)
        f = held.table("main", "f")
        before = held.files(f)
        reference.execute_all(catalog_url, [f"CALL ducklake_expire_snapshots('lake', versions => [{latest - 2}])"])
        assert held.files(f) == before  # loaded while the snapshot was there: complete
    finally:
        lake.close()
