"""Files written for a transaction (`Transaction.own_files`): the one place that decides what happens to a writer's
files. Removed when the transaction is abandoned (or its `with` block raises) or its commit definitely fails; kept
once the COMMIT succeeded or may have."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from dbt.adapters.ducklake.lake import write_data_files
from dbt.adapters.ducklake.lake.catalog import database as catalog_module
from dbt.adapters.ducklake.lake.catalog.database import CatalogDB
from dbt.adapters.ducklake.lake.catalog.url import parse_catalog
from dbt.adapters.ducklake.lake.errors import CommitConflictError, CommitStateUnknownError
from dbt.adapters.ducklake.lake.write.transaction import Transaction
from tests.lake.test_commit_outcome import _fail_once, _lake_with_table, _rows, hook  # noqa: F401
from tests.support.invariants import violations


def _write(tx: Transaction, values: list[int]) -> list[str]:
    """Rows written as files for tx (which owns them) and staged."""
    info = tx.table("main", "t")
    files = write_data_files(info, tx.table_path(info), pa.table({"x": pa.array(values, pa.int64())}))
    tx.own_files([f.path for f in files], tx.table_path(info))
    tx.add_data_files("main", "t", files)
    return [f.path for f in files]


def _owned(lake: object, values: list[int]) -> tuple[Transaction, list[str], str]:
    tx = lake.transaction()
    paths = _write(tx, values)
    return tx, paths, os.path.dirname(paths[0])


def test_kept_after_a_commit_and_removed_when_abandoned(file_catalog_url: str, tmp_path: Path) -> None:
    lake = _lake_with_table(file_catalog_url, tmp_path)
    tx, paths, _ = _owned(lake, [1, 2])
    assert tx.commit() is not None
    tx.abandon()  # after the commit: nothing to remove
    assert all(os.path.exists(p) for p in paths)
    tx, paths, _ = _owned(lake, [3])
    tx.abandon()
    assert not any(os.path.exists(p) for p in paths)
    assert _rows(file_catalog_url) == [1, 2]
    assert violations(file_catalog_url) == []


def test_removed_when_the_with_block_raises_or_the_commit_definitely_fails(file_catalog_url: str,
                                                                           tmp_path: Path) -> None:
    lake = _lake_with_table(file_catalog_url, tmp_path)
    written: list[str] = []
    with pytest.raises(RuntimeError), lake.transaction() as tx:
        written += _write(tx, [1])
        raise RuntimeError("the statement failed")
    assert written
    assert not any(os.path.exists(p) for p in written)
    tx, paths, root = _owned(lake, [2])
    with lake.transaction() as other:
        other.drop_table("main", "t")
    with pytest.raises(CommitConflictError):  # the table was dropped meanwhile
        tx.commit()
    assert not any(os.path.exists(p) for p in paths)
    assert not os.path.exists(root) or os.listdir(root) == []


def test_kept_when_the_outcome_is_unknown(file_catalog_url: str, tmp_path: Path, hook: list) -> None:  # noqa: F811
    lake = _lake_with_table(file_catalog_url, tmp_path)
    path = parse_catalog(file_catalog_url).file_path
    assert path
    tx, paths, _ = _owned(lake, [7, 8])

    def unreachable(_db: CatalogDB) -> None:
        os.rename(path, path + ".away")  # reading the outcome fails too

    _fail_once("after", hook, unreachable)
    with pytest.raises(CommitStateUnknownError):
        tx.commit()
    tx.abandon()  # what a caller's cleanup does: the files must stay
    catalog_module.COMMIT_HOOK = None
    assert all(os.path.exists(p) for p in paths)
    os.remove(path) if os.path.exists(path) else None
    os.rename(path + ".away", path)
    assert len(lake.resolve_unknown_commits()) == 0
    assert _rows(file_catalog_url) == [7, 8]
