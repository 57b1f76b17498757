"""DuckDB catalog files attached to one in-memory DuckDB per process (lake/catalog/duckdb_files.py): the file is
closed between operations (another process can take it), a connection opened inside another one of the same thread
shares the attachment, and lakes used at once from several threads each see their own catalog."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from dbt.adapters.ducklake.lake import Column, DuckLake
from dbt.adapters.ducklake.lake.catalog import duckdb_files

from ..support import reference


def _lake(tmp_path: Path, name: str) -> DuckLake:
    return DuckLake.create(str(tmp_path / f"{name}.ducklake"), str(tmp_path / f"{name}_data") + "/")


def _other_process_writes(path: Path, sql: str) -> str:
    """Run SQL on the catalog file in another process: it fails if this process still holds the file."""
    code = "import duckdb, sys; con = duckdb.connect(sys.argv[1]); print(con.execute(sys.argv[2]).fetchall())"
    done = subprocess.run([sys.executable, "-c", code, str(path), sql], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_file_is_closed_between_operations(tmp_path: Path) -> None:
    lake = _lake(tmp_path, "a")
    with lake.db.write() as conn:
        lake.db.execute(conn, "INSERT INTO {p}ducklake_metadata (key, value) VALUES ('probe', 'ours')")
        assert duckdb_files.attached() == [str(tmp_path / "a.ducklake")]
    assert duckdb_files.attached() == []
    # another process opens and changes the file at once (no lock left), and we see its change
    assert _other_process_writes(tmp_path / "a.ducklake",
                                 "UPDATE ducklake_metadata SET value = 'theirs' WHERE key = 'probe' RETURNING value"
                                 ) == "[('theirs',)]"
    assert lake.option("probe") == "theirs"
    # DuckDB's extension reads the lake we wrote after the attachment ended
    reference.execute_all(lake.db.location, ["CREATE TABLE lake.t AS SELECT 1 AS x"])
    assert [t.name for t in lake.snapshot().tables.values()] == ["t"]


def test_a_nested_connection_of_the_same_thread_shares_the_attachment(tmp_path: Path) -> None:
    lake = _lake(tmp_path, "a")
    with lake.db.write() as outer:
        lake.db.execute(outer, "INSERT INTO {p}ducklake_metadata (key, value) VALUES ('k', 'outer')")
        with lake.db.read() as inner:  # its own transaction: the outer write is not committed yet
            assert lake.db.query(inner, "SELECT value FROM {p}ducklake_metadata WHERE key = 'k'") == []
        assert duckdb_files.attached() == [str(tmp_path / "a.ducklake")]
    assert duckdb_files.attached() == []
    assert lake.option("k") == "outer"


def test_lakes_used_at_once_from_threads_see_their_own_catalogs(tmp_path: Path) -> None:
    lakes = [_lake(tmp_path, name) for name in ("a", "b", "c")]
    errors: list[BaseException] = []

    def work(i: int, lake: DuckLake) -> None:
        try:
            for n in range(30):
                with lake.db.write() as conn:
                    lake.db.execute(conn, "INSERT INTO {p}ducklake_metadata (key, value) VALUES (:k, :v)",
                                    {"k": f"n{n}", "v": f"lake{i}"})
                    assert lake.db.has_table(conn, "ducklake_snapshot")
                    assert not lake.db.has_table(conn, "some_other_table")
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i, lake)) for i, lake in enumerate(lakes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert duckdb_files.attached() == []
    for i, lake in enumerate(lakes):
        con = duckdb.connect(str(lake.db.location.file_path), read_only=True)
        rows = con.execute("SELECT DISTINCT value FROM ducklake_metadata WHERE key LIKE 'n%'").fetchall()
        con.close()
        assert rows == [(f"lake{i}",)]


def test_a_failed_operation_lets_go_of_the_file(tmp_path: Path) -> None:
    lake = _lake(tmp_path, "a")
    with pytest.raises(Exception, match="no_such_table"), lake.db.write() as conn:
        lake.db.execute(conn, "INSERT INTO {p}no_such_table VALUES (1)")
    assert duckdb_files.attached() == []
    assert "1" in _other_process_writes(tmp_path / "a.ducklake", "SELECT 1")


def _create_table(lake: DuckLake, name: str) -> None:
    with lake.transaction() as tx:
        tx.create_table("main", name, (Column(0, "x", "int64"),))


def test_catalog_files_are_in_the_storage_format_the_reference_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ours = _lake(tmp_path, "ours")
    _create_table(ours, "t")
    reference.execute_all(str(tmp_path / "ref.ducklake"), ["CREATE TABLE lake.t AS SELECT 1 AS x"],
                          data_path=str(tmp_path / "ref_data") + "/")
    assert reference.storage_version(tmp_path / "ours.ducklake") == reference.storage_version(tmp_path / "ref.ducklake")
    assert reference.storage_version(tmp_path / "ours.ducklake") != "v1.0.0+"  # DuckDB's default for a new file

    # a catalog file in the old format (as this adapter wrote them before) moves to the reference's at our first
    # commit, as it would at DuckDB's, and both still read it
    monkeypatch.setattr(duckdb_files, "STORAGE_VERSION", "v1.0.0")
    old = _lake(tmp_path, "old")
    _create_table(old, "t")
    assert reference.storage_version(tmp_path / "old.ducklake") == "v1.0.0+"
    monkeypatch.undo()
    _create_table(old, "u")
    assert reference.storage_version(tmp_path / "old.ducklake") == reference.storage_version(tmp_path / "ref.ducklake")
    assert sorted(t.name for t in old.snapshot().tables.values()) == ["t", "u"]
    with reference.attached(str(tmp_path / "old.ducklake")) as con:
        assert con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake' ORDER BY 1"
                           ).fetchall() == [("t",), ("u",)]
