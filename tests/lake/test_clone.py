"""Clones (lake/write/clone.py) of tables DuckDB wrote: the clone reads as the source did at the snapshot, in DuckDB and in
our reader, and keeps doing so after the source is rebuilt and DuckDB's own expire_snapshots + cleanup_old_files run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dbt.adapters.ducklake.lake import DuckLake, read_arrow
from dbt.adapters.ducklake.lake.errors import NoSuchTableError
from tests.lake.compare import arrow_rows
from tests.support import reference
from tests.support.coverage import FULL
from tests.support.invariants import violations
from tests.support.reference_lakes import sort_rows

# A partitioned table with a comment and a column comment; rows in files and inlined; deletes (a delete file, an
# inlined delete, then a second delete on a file: a partial delete file); an UPDATE (rows with explicit row ids);
# columns added (one with a default older files read), one dropped with the highest id, one renamed.
SOURCE = [
    "CREATE SCHEMA s",
    "CREATE TABLE s.src (id INTEGER, cat VARCHAR, v DOUBLE, tags VARCHAR[])",
    "ALTER TABLE s.src SET PARTITIONED BY (cat)",
    "COMMENT ON TABLE s.src IS 'the source'",
    "COMMENT ON COLUMN s.src.id IS 'the key'",
    "INSERT INTO s.src SELECT i, CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END, i / 10, [i::VARCHAR, 'x'] "
    "FROM range(100) t(i)",
    "INSERT INTO s.src VALUES (1000, 'a', 1.5, ['y']), (1001, 'b', 2.5, NULL)",
    "DELETE FROM s.src WHERE id % 7 = 0",
    "UPDATE s.src SET v = v + 100 WHERE id BETWEEN 10 AND 40",
    "ALTER TABLE s.src ADD COLUMN extra INTEGER DEFAULT 7",
    "ALTER TABLE s.src ADD COLUMN junk VARCHAR",
    "INSERT INTO s.src SELECT i, 'c', i, NULL, i, 'junk' || i FROM range(200, 230) t(i)",
    "ALTER TABLE s.src DROP COLUMN junk",
    "ALTER TABLE s.src RENAME COLUMN v TO value",
    "DELETE FROM s.src WHERE id IN (1, 3, 201)",
    "INSERT INTO s.src VALUES (2000, 'a', 9.0, ['z'], 1)",
]


def _duck(catalog: str, data: str | None, *sql: str) -> list[Any]:
    with reference.attached(catalog, data_path=data) if data else reference.attached(catalog) as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("USE lake")
        out: list[Any] = []
        for s in sql:
            out = con.execute(s).fetchall()
        return out


def _rows(catalog: str, table: str, version: int | None = None) -> list[tuple[Any, ...]]:
    at = f" AT (VERSION => {version})" if version is not None else ""
    return sort_rows(_duck(catalog, None, f"SELECT rowid, * FROM {table}{at}"))


def _data_files(catalog: str, schema: str, table: str, column: str = "data_file, delete_file") -> list[str]:
    """The absolute paths of a table's live data and delete files (through DuckDB's ducklake_list_files)."""
    got = _duck(catalog, None, f"SELECT {column} FROM ducklake_list_files('lake', '{table}', schema => '{schema}')")
    return [p for row in got for p in row if p]


def _latest(catalog: str) -> int:
    return _duck(catalog, None, "SELECT max(snapshot_id) FROM lake.snapshots()")[0][0]


def _clone(catalog: str, *, snapshot: int | None = None, link: bool = True, replace: bool = False,
           schema: str = "c", name: str = "dst") -> str:
    lake = DuckLake.open(catalog)
    try:
        with lake.transaction(author="tester", commit_message="clone s.src", commit_extra_info='{"k": 1}') as tx:
            if not tx.has_schema(schema):
                tx.create_schema(schema)
            kind = tx.clone_table("s", "src", schema, name, snapshot=snapshot, replace=replace, link=link)
        return kind
    finally:
        lake.close()


def _ours(catalog: str, schema: str, table: str) -> list[tuple[Any, ...]]:
    lake = DuckLake.open(catalog)
    try:
        state = lake.snapshot()
        got = read_arrow(state, state.table(schema, table))
        return sort_rows(arrow_rows(got))
    finally:
        lake.close()


def test_clone_survives_rebuild_expire_and_cleanup(catalog_url: str, data_path: str) -> None:
    _duck(catalog_url, data_path, *SOURCE)
    version = _latest(catalog_url)
    expected = _rows(catalog_url, "s.src", version)
    source_files = _data_files(catalog_url, "s", "src")
    assert len(expected) > 100 and any(r[-1] == 7 for r in expected)  # rows read the default of `extra`

    assert _clone(catalog_url) == "hard_link"

    # one snapshot, with the provenance the transaction was given and the reference's change strings
    snap = _duck(catalog_url, None, "SELECT snapshot_id, changes, author, commit_message, commit_extra_info "
                                    "FROM lake.snapshots() ORDER BY snapshot_id DESC LIMIT 1")[0]
    assert snap[0] == version + 1
    assert snap[2:] == ("tester", "clone s.src", '{"k": 1}')
    assert {"schemas_created", "tables_created", "tables_inserted_into"} <= set(snap[1])
    # the clone reads as the source did, row ids included; its comments came along; its files are the source's bytes
    assert _rows(catalog_url, "c.dst") == expected
    assert _duck(catalog_url, None, "SELECT comment FROM duckdb_tables() WHERE table_name = 'dst'") == [("the source",)]
    assert _duck(catalog_url, None, "SELECT comment FROM duckdb_columns() WHERE table_name = 'dst' AND "
                                    "column_name = 'id'") == [("the key",)]
    clone_files = _data_files(catalog_url, "c", "dst")
    assert not set(clone_files) & set(source_files)
    # every source data file is linked (the clone's other data files hold the source's inlined rows)
    clone_inodes = {os.stat(p).st_ino for p in _data_files(catalog_url, "c", "dst", "data_file")}
    assert {os.stat(p).st_ino for p in _data_files(catalog_url, "s", "src", "data_file")} <= clone_inodes

    # the source rebuilt, then DuckDB's own maintenance: the source's files are deleted, the clone reads the same
    _duck(catalog_url, None,
          "CREATE OR REPLACE TABLE s.src AS SELECT 1 AS id",
          "CALL ducklake_expire_snapshots('lake', older_than => now())",
          "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
    assert not any(os.path.exists(p) for p in source_files)
    assert _duck(catalog_url, None, f"SELECT count(*) FROM lake.snapshots() WHERE snapshot_id <= {version + 1}") == [(0,)]
    assert _rows(catalog_url, "c.dst") == expected
    assert _ours(catalog_url, "c", "dst") == expected
    assert violations(catalog_url) == []

    # DuckDB writes on: a new column takes no id a linked file holds data under (the dropped `junk`)
    _duck(catalog_url, None, "ALTER TABLE c.dst ADD COLUMN newcol VARCHAR",
          "INSERT INTO c.dst VALUES (3000, 'b', 1.0, NULL, 2, 'n')", "DELETE FROM c.dst WHERE id = 2")
    got = _duck(catalog_url, None, "SELECT count(*), count(newcol), count(*) FILTER (WHERE id = 2) FROM c.dst")
    assert got == [(len(expected), 1, 0)]
    assert violations(catalog_url) == []


# the tests below on one file catalog each by default, in turn (both in the full run); the one above clones on all
# three backends
def _one_file_backend(backend: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("file_catalog_url", ["duckdb", "sqlite"] if FULL else [backend], indirect=True)


@_one_file_backend("duckdb")
def test_clone_at_an_earlier_version(file_catalog_url: str, data_path: str) -> None:
    """Cloning a past snapshot takes only what was visible then: rows of a flushed (partial) file added later, and
    positions a later delete added to a data file's delete file, are not in the clone."""
    cat = file_catalog_url
    _duck(cat, data_path, "CREATE SCHEMA s", "CREATE TABLE s.src (id INTEGER, name VARCHAR)",
          "INSERT INTO s.src SELECT i, 'r' || i FROM range(50) t(i)",
          "INSERT INTO s.src VALUES (100, 'a'), (101, 'b')",
          "DELETE FROM s.src WHERE id IN (5, 100)")
    middle = _latest(cat)
    _duck(cat, None, "INSERT INTO s.src VALUES (102, 'c')", "DELETE FROM s.src WHERE id IN (6, 7)",
          "CALL ducklake_flush_inlined_data('lake')")
    expected = _rows(cat, "s.src", middle)
    partial = _duck(cat, None, "SELECT count(*) FROM __ducklake_metadata_lake.ducklake_data_file "
                               f"WHERE end_snapshot IS NULL AND partial_max > {middle}")
    assert partial == [(1,)]  # the flushed file holds a row added after `middle`

    _clone(cat, snapshot=middle)
    assert _rows(cat, "c.dst") == expected
    assert _ours(cat, "c", "dst") == expected
    _duck(cat, None, "CREATE OR REPLACE TABLE s.src AS SELECT 1 AS id",
          "CALL ducklake_expire_snapshots('lake', older_than => now())",
          "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
    assert _rows(cat, "c.dst") == expected
    assert violations(cat) == []


def _other_device(path: str) -> str | None:
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK) and os.stat(shm).st_dev != os.stat(path).st_dev:
        return shm
    return None


@_one_file_backend("sqlite")
def test_clone_copies_files_it_cannot_link(file_catalog_url: str, data_path: str, tmp_path: Path) -> None:
    """A source file on another file system (added with ducklake_add_data_files) cannot be hard-linked into the
    lake: its bytes are copied, and the clone outlives the source file all the same."""
    other = _other_device(data_path)
    if other is None:
        pytest.skip("no second file system to put a source file on")
    outside = os.path.join(other, f"clone-test-{tmp_path.name}.parquet")
    con = duckdb.connect()
    con.execute(f"COPY (SELECT i::INTEGER AS id, 'r' || i AS name FROM range(20) t(i)) TO '{outside}'")
    con.close()
    try:
        _duck(file_catalog_url, data_path, "CREATE SCHEMA s", "CREATE TABLE s.src (id INTEGER, name VARCHAR)",
              f"CALL ducklake_add_data_files('lake', 'src', '{outside}', schema => 's')",
              "DELETE FROM s.src WHERE id < 3")
        expected = _rows(file_catalog_url, "s.src")
        assert _clone(file_catalog_url) == "file_copy"
        _duck(file_catalog_url, None, "DROP TABLE s.src", "CALL ducklake_expire_snapshots('lake', older_than => now())",
              "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
        assert not os.path.exists(outside)  # DuckDB's cleanup deleted the source's file
        assert _rows(file_catalog_url, "c.dst") == expected
        assert _ours(file_catalog_url, "c", "dst") == expected
        assert violations(file_catalog_url) == []
    finally:
        if os.path.exists(outside):
            os.remove(outside)


@_one_file_backend("sqlite")
def test_clone_by_copy_when_asked(file_catalog_url: str, data_path: str) -> None:
    _duck(file_catalog_url, data_path, *SOURCE)
    expected = _rows(file_catalog_url, "s.src")
    assert _clone(file_catalog_url, link=False) == "file_copy"
    inodes = {os.stat(p).st_ino for p in _data_files(file_catalog_url, "s", "src")}
    assert not any(os.stat(p).st_ino in inodes for p in _data_files(file_catalog_url, "c", "dst"))
    assert _rows(file_catalog_url, "c.dst") == expected


@_one_file_backend("duckdb")
def test_clone_replaces_and_refuses(file_catalog_url: str, data_path: str) -> None:
    """CREATE OR REPLACE of an earlier clone (whose directory the new one shares) keeps the new clone whole after
    the old one's files are cleaned; a missing source, or one changed earlier in the transaction, is refused."""
    cat = file_catalog_url
    _duck(cat, data_path, "CREATE SCHEMA s", "CREATE TABLE s.src (id INTEGER)",
          "INSERT INTO s.src SELECT i FROM range(30) t(i)")
    _clone(cat)
    _duck(cat, None, "INSERT INTO s.src SELECT i FROM range(30, 60) t(i)")
    expected = _rows(cat, "s.src")
    _clone(cat, replace=True)
    _duck(cat, None, "CALL ducklake_expire_snapshots('lake', older_than => now())",
          "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
    assert _rows(cat, "c.dst") == expected
    lake = DuckLake.open(cat)
    try:
        before = lake.latest_snapshot_id()
        with pytest.raises(NoSuchTableError):
            lake.transaction().clone_table("s", "nope", "c", "x")
        tx = lake.transaction()
        tx.drop_table("s", "src")
        with pytest.raises(ValueError, match="changed earlier in this transaction"):
            tx.clone_table("s", "src", "c", "y")
        tx.abandon()
        assert lake.latest_snapshot_id() == before
    finally:
        lake.close()
