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


def test_delete_files_are_written_before_the_catalog_transaction(file_catalog_url: str, tmp_path: Path,
                                                                  hook: list, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """As the reference: a commit's delete files are on storage before its catalog transaction begins. After another
    writer committed, a delete file that holds the commit's snapshot is written again for the new one, outside the
    catalog transaction, and only the file the commit lists stays."""
    lake = _lake_with_table(file_catalog_url, tmp_path)
    tx, paths, folder = _owned(lake, list(range(10)))
    tx.commit()
    data_file_id = lake.snapshot().files(lake.snapshot().table("main", "t"))[0].data_file_id

    def deletes() -> set[str]:
        return {n for n in os.listdir(folder) if n.endswith("-delete.parquet")}

    at_begin: list[set[str]] = []
    at_commit: list[set[str]] = []
    real_write = lake.db.write

    def write():  # type: ignore[no-untyped-def]
        at_begin.append(deletes())
        return real_write()

    monkeypatch.setattr(lake.db, "write", write)
    catalog_module.COMMIT_HOOK = lambda db, at: at_commit.append(deletes()) if at == "before" else None
    with lake.transaction() as tx:
        tx.delete_rows("main", "t", data_file_id, [0])
    assert len(at_begin) == 1 and at_begin == at_commit and len(at_begin[0]) == 1  # written before BEGIN
    first = set(at_begin[0])

    tx = lake.transaction()  # the file has deletes: the new one carries each position's snapshot
    tx.delete_rows("main", "t", data_file_id, [1])
    with lake.transaction() as other:  # the snapshot moves on, without a conflict
        other.create_schema("s2")
    at_begin.clear()
    at_commit.clear()
    tx.commit()
    assert len(at_begin) == 2 and len(at_commit) == 1  # the first attempt asked for the new snapshot's file
    assert at_commit[0] == at_begin[1]  # nothing written inside the catalog transaction
    listed = {os.path.basename(f.delete_file.path) for f in lake.snapshot().files(lake.snapshot().table("main", "t"))
              if f.delete_file is not None}
    assert deletes() == first | listed  # the stale file is gone; the replaced one is scheduled for deletion
    assert _rows(file_catalog_url) == list(range(2, 10))
    assert violations(file_catalog_url) == []
