"""Counting a lake's catalog connections (each is a database open on a DuckDB-file catalog)."""

from __future__ import annotations

import pytest

from dbt.adapters.ducklake.lake import DuckLake


def count_opens(monkeypatch: pytest.MonkeyPatch, lk: DuckLake) -> list[int]:
    """A list that grows by one with each catalog connection the lake opens from now on."""
    calls: list[int] = []
    real = lk.db._raw_connect

    def counted() -> object:
        calls.append(1)
        return real()

    monkeypatch.setattr(lk.db, "_raw_connect", counted)
    return calls
