"""Spark reads of a DuckDB-written lake whose files were removed or damaged (tests/support/damaged_lakes.py): every read
path (manifests, the footer path, the first reader, readable copies, files elsewhere, time travel, the change feed,
DML targets) fails naming the table, the snapshot and the lake file, never with fewer rows, and commits nothing. A
file damaged after its check (or with its size intact) fails in Spark; that error is told as the lake file's
(spark/read/read_errors.py), whichever path Spark read it through."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.lake import paths as lake_paths
from dbt.adapters.ducklake.lake.errors import MissingDataFileError
from dbt.adapters.ducklake.spark.read import first_read, read_errors, scan
from dbt.adapters.ducklake.spark.read.changes import changes_sql
from dbt.adapters.ducklake.spark.write.one_shot import delete_where
from tests.support import damaged_lakes, reference
from tests.support.coverage import pairs
from tests.support.damaged_lakes import DamagedLake

READERS = ["manifest", "footers", "first_read"]


@pytest.fixture(params=READERS)
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Files read through a manifest, the footer path (name-mapped or remote files), or the first reader's data
    source (many-file tables)."""
    if request.param == "footers":
        monkeypatch.setattr(scan, "USE_MANIFESTS", False)
    if request.param == "first_read":
        monkeypatch.setattr(first_read, "MIN_FILES", 1)
    return str(request.param)


@pytest.fixture
def damaged(tmp_path: Path) -> Iterator[tuple[DuckLake, DamagedLake]]:
    catalog = f"duckdb:///{tmp_path}/lake.ducklake"
    built = damaged_lakes.build(catalog, f"{tmp_path}/data/")
    lake = DuckLake.open(catalog)
    try:
        yield lake, built
    finally:
        lake.close()


def _parts(d: DamagedLake, table: str, snapshot: int | None = None) -> list[str]:
    return [f"lake table raw.{table} at snapshot {snapshot or d.latest}: ", f" {d.paths[table]} ",
            f"the catalog lists it with {d.sizes[table]} bytes", "restore it from a backup"]


def test_views_of_damaged_tables_are_refused(spark: SparkSession, damaged: tuple[DuckLake, DamagedLake],
                                             reader: str) -> None:
    lake, d = damaged
    st = lake.snapshot()
    for table in ("gone", "bad", "del", "five"):
        with pytest.raises(MissingDataFileError) as info:
            scan.register_table(spark, st, st.table("raw", table), database="missing_files", view=table)
        assert all(p in str(info.value) for p in _parts(d, table)), str(info.value)
        assert not spark.catalog.tableExists(f"missing_files.{table}")
    name = scan.register_table(spark, st, st.table("raw", "ok"), database="missing_files", view="ok")
    assert spark.sql(f"SELECT count(*), sum(v) FROM {name}").first() == (1000, 999000)
    # time travel to a snapshot that reads the removed file of raw.old
    with pytest.raises(MissingDataFileError) as info:
        scan.register_at(spark, lake.snapshot(d.old_snapshot), lake.snapshot(d.old_snapshot).table("raw", "old"))
    assert all(p in str(info.value) for p in _parts(d, "old", d.old_snapshot)), str(info.value)
    assert spark.sql(f"SELECT count(*) FROM {scan.register_at(spark, st, st.table('raw', 'old'))}").first()[0] == 10


# by default each reader with one damage, in turn (every reader and both damages still run); every pair in the full
# suite
@pytest.mark.parametrize(("reader", "damage"), [
    pytest.param(r, d, id=f"{r}-{d}") for r, d in pairs(READERS, ["removed", "truncated"])], indirect=["reader"])
def test_a_file_damaged_after_its_check_is_named_in_sparks_error(spark: SparkSession, damaged: tuple[DuckLake, DamagedLake],
                                                                 reader: str, damage: str) -> None:
    """The view was planned (its files checked) before the file went: Spark's read fails, and its error, whichever
    path it names (a manifest link, the file, the data source's), is told as the lake file's."""
    lake, d = damaged
    st = lake.snapshot()
    name = scan.register_table(spark, st, st.table("raw", "ok"), database="missing_files", view=f"ok_{damage}")
    path = st.files(st.table("raw", "ok"))[0].path
    if damage == "removed":
        os.remove(path)
    else:
        os.truncate(path, 100)
    with pytest.raises(Exception) as info:  # noqa: B017, PT011 - Spark's or Py4J's class, by path
        spark.sql(f"SELECT count(*), sum(v) FROM {name}").collect()
    told = read_errors.lake_file_error(str(info.value))
    assert told is not None, str(info.value)[:2000]
    problem = "is missing" if damage == "removed" else "is 100 bytes, but the catalog lists it with"
    assert str(told).startswith(f"lake table raw.ok at snapshot {d.latest}: data file {path} {problem}"), str(told)


def test_a_file_damaged_with_its_size_intact_is_named(spark: SparkSession, damaged: tuple[DuckLake, DamagedLake],
                                                      reader: str) -> None:
    """Found where its bytes are first read: the footer path reads footers while planning, the others in Spark."""
    lake, d = damaged
    st = lake.snapshot()
    with pytest.raises(Exception) as info:  # noqa: B017, PT011 - ours, Spark's or Py4J's class, by path
        name = scan.register_table(spark, st, st.table("raw", "rot"), database="missing_files", view="rot")
        spark.sql(f"SELECT sum(v) FROM {name}").collect()
    assert isinstance(info.value, MissingDataFileError) == (reader == "footers")
    told = read_errors.lake_file_error(str(info.value))
    assert told is not None and told.path == d.paths["rot"], str(info.value)[:2000]
    assert "is not a Parquet file" in str(told) and "lake table raw.rot" in str(told)


def test_readable_copies_files_elsewhere_change_feed_and_dml(spark: SparkSession, tmp_path: Path,
                                                             damaged: tuple[DuckLake, DamagedLake],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    lake, d = damaged
    # a table with a GEOMETRY column is read through readable copies: its removed file is refused, not copied
    with reference.attached(f"duckdb:///{tmp_path}/lake.ducklake") as con:
        con.execute("CREATE TABLE lake.raw.geo AS SELECT range AS id, 'POINT(1 2)'::GEOMETRY AS g FROM range(20)")
        geo = con.execute("SELECT data_file FROM ducklake_list_files('lake', 'geo', schema => 'raw')").fetchone()[0]
    os.remove(geo)
    st = lake.snapshot()
    with pytest.raises(MissingDataFileError, match=f"lake table raw.geo at snapshot {st.snapshot_id}: data file {geo} "
                                                   "is missing"):
        scan.table_sql(spark, st, st.table("raw", "geo"))
    # the change feed reads the files of the snapshots in its range
    with pytest.raises(MissingDataFileError, match=r"lake table raw\.del \(changes from snapshot 1 to \d+\): delete "
                                                   f"file {d.paths['del']} is missing"):
        changes_sql(spark, lake, "raw", "del", 1, d.latest)
    # a DELETE reads its target's files: refused, nothing committed
    with pytest.raises(MissingDataFileError, match=d.paths["five"]):
        delete_where(spark, lake, "raw", "five", "v >= 0")
    assert lake.snapshot().snapshot_id == st.snapshot_id
    # files on other storage are checked through pyarrow's file systems (here: every file taken as remote)
    monkeypatch.setattr(lake_paths, "is_local", lambda p: False)
    with pytest.raises(MissingDataFileError, match=f"data file {d.paths['gone']} is missing"):
        scan.table_sql(spark, st, st.table("raw", "gone"))
