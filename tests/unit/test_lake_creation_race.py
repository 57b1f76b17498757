"""Two first runs at once on a fresh catalog: the one that finds the lake created between its check and its create
opens that lake instead of failing with "already holds a DuckLake" (seen in test_writers under load)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbt.adapters.ducklake import runtime
from dbt.adapters.ducklake.credentials import DuckLakeCredentials
from dbt.adapters.ducklake.lake import DuckLake


@pytest.mark.parametrize("backend", ["duckdb", "sqlite"])
def test_a_lake_created_meanwhile_is_opened(tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ext = "ducklake" if backend == "duckdb" else "sqlite"
    catalog = f"{backend}:///{tmp_path}/catalog.{ext}"
    data = f"{tmp_path}/data/"
    creds = DuckLakeCredentials(catalog=catalog, data_path=data, schema="main")
    real_exists = DuckLake.exists
    calls = []

    def exists_then_race(loc: object) -> bool:
        calls.append(loc)
        if len(calls) == 1:  # the check says "none yet"; the other process creates it right after
            DuckLake.create(catalog, data).close()
            return False
        return real_exists(loc)

    monkeypatch.setattr(DuckLake, "exists", staticmethod(exists_then_race))
    monkeypatch.setattr(runtime, "_command", lambda: "run")
    lake = runtime._open_lake(creds)
    assert lake is not None
    try:
        assert lake.latest_snapshot_id() == 0  # the other process's lake, opened, not a second one
    finally:
        lake.close()

