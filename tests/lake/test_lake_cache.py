"""What a lake keeps between operations stays true when files go (lake/lake_cache.py): a file this process found on
storage, then deleted by cleanup, is checked again, so a state still listing it fails its read on the missing file
instead of reading it as no rows (Spark's manifest read leaves out a missing file without a word)."""

from __future__ import annotations

import pytest

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.lake.errors import MissingDataFileError
from dbt.adapters.ducklake.lake.maintenance.cleanup import cleanup_old_files
from dbt.adapters.ducklake.lake.read import file_checks
from tests.support import reference


def test_a_state_held_across_a_cleanup_finds_its_deleted_file_missing(file_catalog_url: str, data_path: str) -> None:
    DuckLake.create(file_catalog_url, data_path).close()
    reference.execute_all(file_catalog_url, [
        "CALL lake.set_option('data_inlining_row_limit', 0)",
        "CREATE TABLE lake.main.t AS SELECT range AS id FROM range(100)",
    ])
    lake = DuckLake.open(file_catalog_url)
    try:
        held = lake.snapshot()
        table = held.table("main", "t")
        files = held.files(table)
        context = file_checks.table_context("main", "t", held.snapshot_id)
        file_checks.verify_scan(context, files, held.snapshot_id)  # found on storage: kept as checked

        # DuckDB drops the table and expires its snapshots (the file is scheduled for deletion); our cleanup deletes it
        reference.execute_all(file_catalog_url, [
            "DROP TABLE lake.main.t",
            "CALL ducklake_expire_snapshots('lake', older_than => now())",
        ])
        deleted = cleanup_old_files(lake, all=True)
        assert deleted == [f.path for f in files]

        with pytest.raises(MissingDataFileError, match="is missing") as info:
            file_checks.verify_scan(context, files, held.snapshot_id)
        assert info.value.path == files[0].path
    finally:
        lake.close()
