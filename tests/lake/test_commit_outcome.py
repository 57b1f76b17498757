"""A COMMIT that fails is settled by reading the catalog again, and no file of a commit that may have landed is ever
removed (the data-loss path this guards: a lost acknowledgement once removed the committed snapshot's files).

The failures are real: the catalog connection raises around its COMMIT (lake.catalog.COMMIT_HOOK, test-only), the
catalog file is moved away so that the outcome cannot be read, or PostgreSQL's server process of the committing
connection is terminated.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
import sqlalchemy as sa

from dbt.adapters.ducklake.lake import Column, DuckLake, write_data_files
from dbt.adapters.ducklake.lake.catalog import database as catalog_module
from dbt.adapters.ducklake.lake.catalog.database import CatalogDB
from dbt.adapters.ducklake.lake.catalog.url import parse_catalog
from dbt.adapters.ducklake.lake.errors import CommitStateUnknownError
from tests.support import reference
from tests.support.invariants import violations


class LostConnection(Exception):
    """What a driver raises when the server or the file goes away."""


@pytest.fixture
def hook() -> Iterator[list]:
    calls: list = []
    yield calls
    catalog_module.COMMIT_HOOK = None


def _lake_with_table(url: str, tmp_path: Path) -> DuckLake:
    lake = DuckLake.create(url, str(tmp_path / "data") + "/")
    with lake.transaction() as tx:
        tx.create_table("main", "t", [Column(0, "x", "int64")])
    return lake


def _stage_rows(lake: DuckLake, values: list[int]) -> tuple[object, list[str]]:
    tx = lake.transaction(commit_message="load")
    info = tx.table("main", "t")
    files = write_data_files(info, tx.table_path(info), pa.table({"x": pa.array(values, pa.int64())}))
    tx.add_data_files("main", "t", files)
    return tx, [f.path for f in files]


def _rows(url: str) -> list[int]:
    with reference.attached(url, read_only=True) as con:
        return sorted(r[0] for r in con.execute("SELECT x FROM lake.main.t").fetchall())


def _fail_once(phase: str, calls: list, action: object = None) -> None:
    def fail(db: CatalogDB, at: str) -> None:
        if at == phase and not calls:
            calls.append(at)
            if callable(action) and action(db):
                return  # the action broke the connection for real: the COMMIT itself fails
            raise LostConnection(f"connection lost {at} COMMIT")

    catalog_module.COMMIT_HOOK = fail


def test_lost_acknowledgement_is_found_to_be_a_commit(catalog_url: str, tmp_path: Path, hook: list) -> None:
    lake = _lake_with_table(catalog_url, tmp_path)
    tx, paths = _stage_rows(lake, [1, 2, 3])
    _fail_once("after", hook)
    snap = tx.commit()
    assert hook == ["after"]
    assert snap is not None and snap.snapshot_id == 2 and snap.commit_message == "load"
    assert all(os.path.exists(p) for p in paths)  # the files of the committed snapshot are all there
    assert lake.latest_snapshot().snapshot_id == 2
    assert _rows(catalog_url) == [1, 2, 3]
    assert violations(catalog_url) == []


def test_commit_that_failed_before_applying_is_retried(catalog_url: str, tmp_path: Path, hook: list) -> None:
    lake = _lake_with_table(catalog_url, tmp_path)
    tx, paths = _stage_rows(lake, [4, 5])

    def kill_backend(db: CatalogDB) -> bool:
        # PostgreSQL: the server process of the committing connection really goes away before its COMMIT
        if db.location.backend != "postgresql":
            return False
        other = sa.create_engine(db.location.url, poolclass=sa.pool.NullPool)
        with other.connect() as c:
            killed = c.execute(sa.text(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> "
                "pg_backend_pid() AND datname = current_database() AND state LIKE 'idle in%') k")).scalar_one()
        other.dispose()
        assert killed == 1
        return True

    _fail_once("before", hook, kill_backend)
    snap = tx.commit()
    assert hook == ["before"] and snap is not None
    # proven not applied, then applied once by the retry: one snapshot, the rows once
    assert [s.snapshot_id for s in lake.snapshots()] == [0, 1, 2]
    assert _rows(catalog_url) == [4, 5]
    assert all(os.path.exists(p) for p in paths)
    assert violations(catalog_url) == []


@pytest.mark.parametrize("landed", [True, False], ids=["landed", "not_applied"])
def test_unknown_outcome_keeps_files_until_the_catalog_tells(file_catalog_url: str, tmp_path: Path, hook: list,
                                                             landed: bool) -> None:
    lake = _lake_with_table(file_catalog_url, tmp_path)
    path = parse_catalog(file_catalog_url).file_path
    assert path
    tx, paths = _stage_rows(lake, [7, 8])

    def unreachable(_db: CatalogDB) -> None:
        os.rename(path, path + ".away")  # reading the outcome fails too

    _fail_once("after" if landed else "before", hook, unreachable)
    with pytest.raises(CommitStateUnknownError, match="failed while committing"):
        tx.commit()
    catalog_module.COMMIT_HOOK = None
    assert all(os.path.exists(p) for p in paths)  # unknown: nothing removed
    os.remove(path) if os.path.exists(path) else None  # the empty file a failed read may have created
    os.rename(path + ".away", path)
    assert len(lake.resolve_unknown_commits()) == 0  # settled now
    if landed:
        assert all(os.path.exists(p) for p in paths) and _rows(file_catalog_url) == [7, 8]
    else:
        assert not any(os.path.exists(p) for p in paths) and _rows(file_catalog_url) == []
    # the next commit works, and the lake is as the reference would have it
    tx2, _ = _stage_rows(lake, [9])
    assert tx2.commit() is not None
    assert _rows(file_catalog_url) == ([7, 8, 9] if landed else [9])
    assert violations(file_catalog_url) == []
