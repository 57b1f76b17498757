"""Deletion vectors (delete files of format 'puffin'), both ways against DuckDB 1.5.5.

* DuckDB writes them (a lake with `write_deletion_vectors`): a first delete, a second delete of the same file, a
  delete across files, an update; our reader returns DuckDB's rows at every snapshot, and our change feed DuckDB's.
* We write them when the option is on (lake, schema or table scope, as DuckDB resolves it): the files are DuckDB's
  bytes for the same positions, DuckDB reads our lake at every snapshot, and DuckDB and we keep deleting on top of each
  other's vectors.
* A damaged vector is refused with a message naming the file.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.lake.read.changes import read_changes
from dbt.adapters.ducklake.lake.read.deletes import (
    DeleteFileFormatError,
    read_delete_arrays,
    read_deletion_vector,
    write_deletion_vector,
)
from dbt.adapters.ducklake.lake.read.scan import read_arrow
from dbt.adapters.ducklake.lake.records import Column
from tests.lake.compare import arrow_rows
from tests.lake.test_write_conformance import append, delete_ids
from tests.support import reference
from tests.support.invariants import violations
from tests.support.reference_lakes import build

COLUMNS = [Column(0, "id", "int64", nullable=False), Column(0, "v", "varchar")]


def _rows(con: Any, sql: str) -> list[tuple]:
    return sorted(con.execute(sql).fetchall())


def _ours(lake: DuckLake, version: int, name: str = "t") -> list[tuple]:
    st = lake.snapshot(version)
    table = st.table("main", name)
    return sorted(arrow_rows(read_arrow(st, table, with_rowid=False)))


def _formats(con: Any) -> list[str]:
    return [r[0] for r in con.execute("SELECT format FROM __ducklake_metadata_lake.ducklake_delete_file "
                                      "ORDER BY delete_file_id").fetchall()]


def test_we_read_the_vectors_duckdb_writes(catalog_url: str, data_path: str) -> None:
    with reference.attached(catalog_url, data_path=data_path) as con:
        con.execute("CALL lake.set_option('write_deletion_vectors', true)")
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        con.execute("CREATE TABLE lake.t AS SELECT i AS id, 'v' || i AS v FROM range(3000) t(i)")
        con.execute("DELETE FROM lake.t WHERE id % 10 = 0")
        con.execute("DELETE FROM lake.t WHERE id % 7 = 0")  # the same data file again
        con.execute("INSERT INTO lake.t SELECT i, 'w' || i FROM range(5000, 5100) t(i)")
        con.execute("DELETE FROM lake.t WHERE id >= 5090 OR id IN (1, 2, 3)")  # both files
        con.execute("UPDATE lake.t SET v = 'updated' WHERE id % 11 = 0")
        assert set(_formats(con)) == {"puffin"}
        last = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        want = {v: _rows(con, f"SELECT id, v FROM lake.t AT (VERSION => {v})") for v in range(1, last + 1)}
        changes = _rows(con, f"SELECT snapshot_id, rowid, change_type, id, v FROM "
                             f"ducklake_table_changes('lake', 'main', 't', 2, {last})")
    lake = DuckLake.open(catalog_url)
    for v, rows in want.items():
        assert _ours(lake, v) == rows, f"snapshot {v}"
    ours = read_changes(lake, "main", "t", 2, last).select(["snapshot_id", "rowid", "change_type", "id", "v"])
    assert sorted(arrow_rows(ours)) == changes
    lake.close()


def test_duckdb_reads_the_vectors_we_write(catalog_url: str, data_path: str) -> None:
    lake = DuckLake.create(catalog_url, data_path)
    lake.set_option("write_deletion_vectors", "true")
    with lake.transaction() as tx:
        tx.create_table("main", "t", COLUMNS)
    table = lake.snapshot().table("main", "t")
    versions = [append(lake, table, [{"id": i, "v": f"v{i}"} for i in range(2000)], "first")]
    versions.append(append(lake, table, [{"id": i, "v": f"w{i}"} for i in range(3000, 3500)], "second"))
    versions.append(delete_ids(lake, "main", "t", {i for i in range(0, 2000, 3)}, "delete a third"))
    versions.append(delete_ids(lake, "main", "t", {i for i in range(1, 2000, 5)} | {3001, 3499}, "delete again"))
    ours = {v: _ours(lake, v) for v in versions}
    lake.close()  # a DuckDB-file catalog is open in one DuckDB instance at a time
    with reference.attached(catalog_url) as con:
        assert _formats(con) == ["puffin", "puffin"]  # the first vector of file 1 was replaced, as DuckDB does
        for v in versions:
            assert _rows(con, f"SELECT id, v FROM lake.t AT (VERSION => {v})") == ours[v], f"snapshot {v}"
        # DuckDB deletes on top of our vectors, and we read its
        con.execute("DELETE FROM lake.t WHERE id % 13 = 0")
        after = _rows(con, "SELECT id, v FROM lake.t")
    lake = DuckLake.open(catalog_url)
    assert _ours(lake, lake.latest_snapshot_id()) == after
    last = delete_ids(lake, "main", "t", {4, 3002}, "ours on top of DuckDB's")
    mine = _ours(lake, last)
    lake.close()
    with reference.attached(catalog_url, read_only=True) as con:
        assert _rows(con, "SELECT id, v FROM lake.t") == mine
    assert violations(catalog_url) == []


def test_vector_bytes_are_duckdbs(catalog_url: str, data_path: str, tmp_path: Any) -> None:
    """For the same positions our file is DuckDB's, byte for byte (array and bitmap containers, no runs)."""
    with reference.attached(catalog_url, data_path=data_path) as con:
        con.execute("CALL lake.set_option('write_deletion_vectors', true)")
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        con.execute("CREATE TABLE lake.t AS SELECT i AS id FROM range(200000) t(i)")
        con.execute("DELETE FROM lake.t WHERE id % 3 = 0 OR id BETWEEN 70000 AND 140000")  # dense and sparse
        path = con.execute("SELECT path FROM __ducklake_metadata_lake.ducklake_delete_file").fetchone()[0]
    theirs = f"{data_path}main/t/{path}"
    positions = read_deletion_vector(theirs)
    mine = str(tmp_path / "mine-delete.puffin")
    write_deletion_vector(mine, positions)
    with open(theirs, "rb") as a, open(mine, "rb") as b:
        assert a.read() == b.read()
    pos, snaps = read_delete_arrays(mine, 7)
    assert pos.equals(pa.array(positions, pa.int64())) and set(snaps.to_pylist()) == {7}


def test_a_damaged_vector_is_refused(tmp_path: Any) -> None:
    path = str(tmp_path / "x-delete.puffin")
    write_deletion_vector(path, [1, 5, 9])
    with open(path, "r+b") as fh:
        fh.seek(12)
        fh.write(b"\xff")
    with pytest.raises(DeleteFileFormatError, match="checksum"):
        read_deletion_vector(path)


def test_a_clone_of_a_table_with_vectors(file_catalog_url: str, data_path: str) -> None:
    """A clone's deletes are written anew as a Parquet delete file (a vector is not linked under a Parquet name);
    DuckDB reads the clone as the source, also after DuckDB's cleanup of the source."""
    build(file_catalog_url, data_path, "deletion_vectors")
    lake = DuckLake.open(file_catalog_url)
    with lake.transaction() as tx:
        tx.clone_table("main", "dv", "main", "dv_copy")
    lake.close()
    with reference.attached(file_catalog_url) as con:
        source = _rows(con, "SELECT * FROM lake.dv")
        assert _rows(con, "SELECT * FROM lake.dv_copy") == source
        con.execute("DROP TABLE lake.dv")
        con.execute("CALL ducklake_expire_snapshots('lake', older_than => now())")
        con.execute("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
        assert _rows(con, "SELECT * FROM lake.dv_copy") == source
    assert violations(file_catalog_url) == []
