"""The retry policy of a commit that keeps losing the race, as the reference's: 10 retries, 100 ms growing x1.5
(with jitter), each logged, then CommitConflictError; nothing of the transaction is committed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dbt.adapters.ducklake.lake import Column, DuckLake
from dbt.adapters.ducklake.lake.catalog.state import latest_snapshot
from dbt.adapters.ducklake.lake.errors import CommitConflictError
from dbt.adapters.ducklake.lake.write import transaction as tx_module


def test_a_commit_that_always_loses_retries_ten_times(file_catalog_url: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    lake = DuckLake.create(file_catalog_url, str(tmp_path / "data") + "/")
    with lake.transaction() as tx:
        tx.create_table("main", "a", [Column(0, "x", "int64")])

    def stale(db, conn):  # type: ignore[no-untyped-def]
        # another writer always took the next snapshot id just before: ours clashes on the primary key
        real = latest_snapshot(db, conn)
        rows = db.query(conn, "SELECT snapshot_id FROM {p}ducklake_snapshot WHERE snapshot_id < :s ORDER BY 1 DESC "
                              "LIMIT 1", {"s": real.snapshot_id})
        from dbt.adapters.ducklake.lake.catalog.state import find_snapshot

        return find_snapshot(db, conn, rows[0][0])

    waits: list[float] = []
    monkeypatch.setattr(tx_module, "latest_snapshot", stale)
    monkeypatch.setattr(tx_module, "_sleep", waits.append)
    tx = lake.transaction()
    tx.create_table("main", "b", [Column(0, "x", "int64")])
    with caplog.at_level(logging.INFO, logger="dbt.adapters.ducklake.lake.write.transaction"), \
            pytest.raises(CommitConflictError, match="after 10 retries"):
        tx.commit()
    assert len(waits) == tx_module.MAX_RETRIES == 10
    for i, w in enumerate(waits):  # 100 ms x 1.5^i, times a jitter in [0.5, 1]
        base = tx_module.RETRY_WAIT_SECONDS * tx_module.RETRY_BACKOFF**i
        assert 0.5 * base <= w <= base
    assert sum(1 for r in caplog.records if "lost the race" in r.getMessage()) == 10
    monkeypatch.undo()
    assert [t for (_s, t) in lake.snapshot().tables] == ["a"]  # nothing of b
