"""Writers creating different objects at the same time never conflict (DuckLake's rules): a transaction that lost the
race re-reads and gives its new objects fresh ids, whatever the winners' provisional ids were.

The shape dbt's threads produce: every model's transaction starts from the same snapshot, each creates a view (with
its Spark text as a tag and a comment) or a table (with a comment and rows), and they commit one after the other.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa

from dbt.adapters.ducklake.lake import Column, DuckLake, write_data_files
from dbt.adapters.ducklake.lake.write.transaction import Transaction
from tests.support import reference
from tests.support.invariants import violations


def _stage_model(tx: Transaction, i: int) -> None:
    if i % 2:
        tx.create_view("main", f"v{i}", f"SELECT {i} AS x")
        tx.set_tag("main", f"v{i}", "spark_sql", f"select {i} as x")
        tx.set_comment("main", f"v{i}", f"view {i}")
    else:
        t = tx.create_table("main", f"t{i}", [Column(0, "x", "int64")], comment=f"table {i}")
        tx.add_data_files("main", f"t{i}", write_data_files(t, tx.table_path(t), pa.table({"x": [i, i + 1]})))
        tx.set_comment("main", f"t{i}", f"table {i}", column="x")


def _check(catalog: str, indexes: list[int]) -> None:
    assert violations(catalog) == []
    with reference.attached(catalog, read_only=True) as con:
        for i in indexes:
            name = f"v{i}" if i % 2 else f"t{i}"
            assert sorted(r[0] for r in con.execute(f"SELECT x FROM lake.main.{name}").fetchall()) == (
                [i] if i % 2 else [i, i + 1]), name
        assert con.execute("SELECT count(*) FROM lake.snapshots()").fetchone()[0] == len(indexes) + 1


def test_staged_together_committed_in_turn(catalog_url: str, tmp_path: Path) -> None:
    lake = DuckLake.create(catalog_url, str(tmp_path / "data") + "/")
    # all from snapshot 0, as dbt's threads start: views first (each one's provisional id is the next one's), then
    # tables
    indexes = [1, 3, 5, 0, 2, 4]
    txs = [lake.transaction() for _ in indexes]
    for i, tx in zip(indexes, txs, strict=True):
        _stage_model(tx, i)
    for tx in txs:
        assert tx.commit() is not None
    _check(catalog_url, indexes)


def test_threads_creating_models_at_once(catalog_url: str, tmp_path: Path) -> None:
    lake = DuckLake.create(catalog_url, str(tmp_path / "data") + "/")
    n = 8
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            tx = lake.transaction()
            _stage_model(tx, i)
            barrier.wait()
            tx.commit()
        except BaseException as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    _check(catalog_url, list(range(n)))
