"""A DuckDB-file catalog held open by another process (a DuckDB session with the lake attached): the error says what
to do, after the configured wait."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.lake.catalog import database as catalog_module
from dbt.adapters.ducklake.lake.errors import CatalogConnectionError


def test_locked_catalog_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "metadata.ducklake"
    DuckLake.create(str(path), str(tmp_path / "data") + "/").close()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); time.sleep(60)", str(path)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        monkeypatch.setattr(catalog_module, "DUCKDB_LOCK_WAIT_SECONDS", 2.0)
        start, wall = time.monotonic(), time.time()
        with caplog.at_level(logging.INFO, logger=catalog_module.__name__), \
                pytest.raises(CatalogConnectionError) as err:
            DuckLake.open(str(path))
        assert time.monotonic() - start < 15
        message = str(err.value)
        assert f"locked by PID {holder.pid}" in message and "DETACH" in message
        assert "SQLite or PostgreSQL catalog" in message and "read-only mode" not in message
        # while it waited, a line at once said who holds the file and how long it waits
        (notice,) = [r for r in caplog.records if "waiting up to" in r.getMessage()]
        assert f"PID {holder.pid}" in notice.getMessage()
        assert notice.created - wall < 1.5
    finally:
        holder.kill()
        holder.wait()
