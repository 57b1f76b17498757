"""Creating and opening lakes on every backend, reading any snapshot, paths, and what DuckDB sees of them."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sqlite3
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt.adapters.ducklake.lake import (
    Column,
    DuckLake,
    NoSuchSnapshotError,
    NoSuchTableError,
    NotALakeError,
    UnsupportedVersionError,
    read_arrow,
    write_data_files,
)
from dbt.adapters.ducklake.lake.errors import CatalogConnectionError, LakeExistsError, MissingDataFileError
from tests.lake.compare import arrow_rows
from tests.support import reference

HERE = os.path.dirname(__file__)


def test_new_lake_is_what_duckdb_expects(catalog_url: str, data_path: str) -> None:
    lake = DuckLake.create(catalog_url, data_path)
    state = lake.snapshot()
    assert state.snapshot_id == 0 and list(state.schemas) == ["main"]
    assert lake.options["version"] == "1.0" and lake.options["data_path"] == data_path
    lake.close()
    with reference.attached(catalog_url) as con:
        assert con.execute("SELECT snapshot_id, changes FROM lake.snapshots()").fetchall() == [
            (0, {"schemas_created": ["main"]})]
        con.execute("CREATE TABLE lake.t AS SELECT range AS i FROM range(3)")  # DuckDB writes into our new lake
        assert con.execute("SELECT sum(i) FROM lake.t").fetchone()[0] == 3
    lake = DuckLake.open(catalog_url)
    st = lake.snapshot()
    assert arrow_rows(read_arrow(st, st.table("main", "t"), with_rowid=False)) == [(0,), (1,), (2,)]
    with pytest.raises(LakeExistsError, match="already holds a DuckLake"):
        DuckLake.create(catalog_url, data_path)


def test_snapshots_by_version_and_timestamp(catalog_url: str, data_path: str) -> None:
    lake = DuckLake.create(catalog_url, data_path)
    times = []
    for i in range(3):
        with lake.transaction() as tx:
            tx.create_schema(f"s{i}")
        times.append(tx.committed.snapshot_time)
        time.sleep(0.01)
    assert [s.snapshot_id for s in lake.snapshots()] == [0, 1, 2, 3]
    assert list(lake.snapshot(2).schemas) == ["main", "s0", "s1"]
    assert lake.snapshot(timestamp=times[1]).snapshot_id == 2
    assert lake.snapshot(timestamp=times[1] + dt.timedelta(microseconds=1)).snapshot_id == 2
    assert lake.snapshot(timestamp=times[2] + dt.timedelta(days=1)).snapshot_id == 3
    with pytest.raises(NoSuchSnapshotError, match="snapshot version 9 does not exist"):
        lake.snapshot(9)
    with pytest.raises(NoSuchSnapshotError, match="no snapshot at or before"):
        lake.snapshot(timestamp=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    with pytest.raises(NoSuchTableError, match="table s0.nope does not exist at snapshot 3"):
        lake.snapshot().table("s0", "nope")
    lake.close()
    # DuckDB's AT (TIMESTAMP => …) picks the same snapshot
    with reference.attached(catalog_url, read_only=True, options={"SNAPSHOT_TIME": times[1].isoformat()}) as con:
        names = sorted(r[0] for r in con.execute(
            "SELECT schema_name FROM duckdb_schemas() WHERE database_name = 'lake'").fetchall())
        assert names == ["main", "s0", "s1"]


def test_duckdb_add_data_files_absolute_paths_and_name_mapping(file_catalog_url: str, data_path: str,
                                                              tmp_path: object) -> None:
    """DuckDB's ducklake_add_data_files registers a foreign file by absolute path with a name mapping."""
    outside = os.path.join(str(tmp_path), "elsewhere", "foreign.parquet")
    os.makedirs(os.path.dirname(outside))
    pq.write_table(pa.table({"b": ["x", "y"], "a": [1, 2], "l": [[1], None]}), outside)
    with reference.attached(file_catalog_url, data_path=data_path) as con:
        con.execute("CREATE TABLE lake.t (a BIGINT, b VARCHAR, l BIGINT[])")
        con.execute(f"CALL ducklake_add_data_files('lake', 't', '{outside}')")
        expected = con.execute("SELECT rowid, * FROM lake.t").to_arrow_table()
    lake = DuckLake.open(file_catalog_url)
    st = lake.snapshot()
    (f,) = st.files(st.table("main", "t"))
    assert f.path == outside and not f.path_is_relative and f.mapping_id is not None
    assert arrow_rows(read_arrow(st, st.table("main", "t"))) == arrow_rows(expected)


def test_our_absolute_file_paths(catalog_url: str, data_path: str, tmp_path: object) -> None:
    lake = DuckLake.create(catalog_url, data_path)
    with lake.transaction() as tx:
        table = tx.create_table("main", "t", [Column(0, "a", "int64")])
    specs = write_data_files(table, os.path.join(str(tmp_path), "outside") + "/", pa.table({"a": [1, 2, 3]}))
    with lake.transaction() as tx:
        tx.add_data_files("main", "t", specs)
    st = lake.snapshot()
    (f,) = st.files(st.table("main", "t"))
    assert not f.path_is_relative and f.stored_path == specs[0].path
    lake.close()
    with reference.attached(catalog_url) as con:
        assert con.execute("SELECT sum(a) FROM lake.t").fetchone()[0] == 6


def test_data_path_override(file_catalog_url: str, data_path: str, tmp_path: object) -> None:
    lake = DuckLake.create(file_catalog_url, data_path)
    with lake.transaction() as tx:
        table = tx.create_table("main", "t", [Column(0, "a", "int64")])
    with lake.transaction() as tx:
        tx.add_data_files("main", "t", write_data_files(table, lake.snapshot().table_path(table),
                                                        pa.table({"a": [1, 2]})))
    lake.close()
    moved = os.path.join(str(tmp_path), "moved") + "/"
    os.rename(data_path, moved)
    with pytest.raises(MissingDataFileError, match="is missing"):  # the files are not where the catalog says
        st = DuckLake.open(file_catalog_url).snapshot()
        read_arrow(st, st.table("main", "t"))
    other = DuckLake.open(file_catalog_url, data_path=moved)
    st = other.snapshot()
    assert read_arrow(st, st.table("main", "t")).column("a").to_pylist() == [1, 2]


@pytest.mark.parametrize("kind", ["duckdb", "sqlite"])
def test_spec_03_lake_is_refused_with_the_migration(kind: str, tmp_path: object) -> None:
    """Lakes DuckDB 1.4.4 wrote (spec 0.3), kept in tests/data (see its README); never misread."""
    name = f"lake_v03.{'ducklake' if kind == 'duckdb' else 'sqlite'}"
    path = os.path.join(str(tmp_path), name)
    shutil.copy(os.path.join(HERE, "..", "data", name), path)  # opening may touch the file: never the original
    catalog = path if kind == "duckdb" else f"sqlite:///{path}"
    with pytest.raises(UnsupportedVersionError, match=r"spec version 0\.3 .*AUTOMATIC_MIGRATION TRUE"):
        DuckLake.open(catalog)


def test_a_newer_spec_is_refused_with_the_way_to_stay_on_ours(tmp_path: object) -> None:
    """A spec after 1.1: the message says how to keep the lakes shared with the adapter at a version it reads."""
    catalog = f"sqlite:///{tmp_path}/lake.sqlite"
    DuckLake.create(catalog, f"{tmp_path}/data/").close()
    with sqlite3.connect(f"{tmp_path}/lake.sqlite") as con:
        con.execute("UPDATE ducklake_metadata SET value = '1.2' WHERE key = 'version'")
    with pytest.raises(UnsupportedVersionError, match=r"spec version 1\.2;.*DUCKLAKE_VERSION '1\.1'.*DUCKLAKE_VERSION '1\.0'"):
        DuckLake.open(catalog)


def test_bad_locations(tmp_path: object) -> None:
    with pytest.raises(CatalogConnectionError, match="backend 'mysql'"):
        DuckLake.open("mysql://u@h/db")
    with pytest.raises(CatalogConnectionError, match="names no database file"):
        DuckLake.open("sqlite://")
    with pytest.raises(NotALakeError, match="does not exist"):
        DuckLake.open(os.path.join(str(tmp_path), "nothing.ducklake"))
    with pytest.raises(CatalogConnectionError, match="cannot connect to catalog"):
        DuckLake.open("postgresql://postgres@127.0.0.1:1/none")
    with pytest.raises(CatalogConnectionError, match="does not exist"):
        DuckLake.create(os.path.join(str(tmp_path), "no", "such", "dir", "m.ducklake"), str(tmp_path))
