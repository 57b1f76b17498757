"""Orphan deletion never deletes another lake's files unless forced, and removes what a killed Spark writer left
(its staging directory: part files, .crc, _SUCCESS) but nothing else."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from dbt.adapters.ducklake.lake import Column, DuckLake, write_data_files
from dbt.adapters.ducklake.lake.maintenance import cleanup as mt


def _lake_with_rows(catalog: str, data: str) -> tuple[DuckLake, list[str]]:
    lake = DuckLake.create(catalog, data)
    with lake.transaction() as tx:
        t = tx.create_table("main", "t", [Column(0, "x", "int64")])
        files = write_data_files(t, tx.table_path(t), pa.table({"x": [1, 2, 3]}))
        tx.add_data_files("main", "t", files)
    return lake, [f.path for f in files]


def test_a_stray_lake_on_the_same_data_path_deletes_nothing(tmp_path: Path) -> None:
    data = str(tmp_path / "data") + "/"
    real, files = _lake_with_rows(f"duckdb:///{tmp_path}/real.ducklake", data)
    stray = DuckLake.create(f"sqlite:///{tmp_path}/stray.sqlite", data)  # e.g. a typo'd catalog path
    with pytest.raises(mt.ForeignFilesError, match="look like another lake's files") as err:
        mt.delete_orphaned_files(stray, all=True, dry_run=True)
    assert files[0] in str(err.value)
    with pytest.raises(mt.ForeignFilesError):
        mt.delete_orphaned_files(stray, all=True)
    assert all(os.path.exists(f) for f in files)
    assert mt.delete_orphaned_files(real, all=True) == []  # the real lake: nothing is an orphan
    assert mt.delete_orphaned_files(stray, all=True, dry_run=True, force=True) == sorted(files)  # forced: as DuckDB


def test_a_killed_writers_staging_directory_goes_whole(tmp_path: Path) -> None:
    data = str(tmp_path / "data") + "/"
    lake, files = _lake_with_rows(f"duckdb:///{tmp_path}/m.ducklake", data)
    table_dir = os.path.dirname(files[0])
    staging = os.path.join(table_dir, "ducklake-write-0192f0c0-aaaa-7bbb-8ccc-000000000000")
    os.makedirs(os.path.join(staging, "_temporary", "0"))
    for name in ("part-00000-x.snappy.parquet", ".part-00000-x.snappy.parquet.crc", "_SUCCESS", "._SUCCESS.crc"):
        Path(staging, name).write_bytes(b"x")
    Path(staging, "_temporary", "0", "part-00001.parquet").write_bytes(b"x")
    assert mt.delete_orphaned_files(lake) == []  # younger than the default age: kept
    assert mt.delete_orphaned_files(lake, all=True, dry_run=True) == [staging]
    assert os.path.isdir(staging)
    assert mt.delete_orphaned_files(lake, all=True) == [staging]
    assert not os.path.exists(staging) and all(os.path.exists(f) for f in files)
    left = sorted(os.path.relpath(os.path.join(d, f), data) for d, _, fs in os.walk(data) for f in fs)
    assert left == sorted(os.path.relpath(f, data) for f in files)
