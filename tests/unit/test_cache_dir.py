"""Caches under XDG_CACHE_HOME when it is set (class archives and warm servers alike)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbt.adapters.ducklake.spark.env import class_archive, local_server
from dbt.adapters.ducklake.spark.env.cache_dir import cache_root


def test_caches_follow_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(class_archive.ENV_DIR, raising=False)
    monkeypatch.delenv(local_server.ROOT_ENV, raising=False)
    assert cache_root() == tmp_path / "dbt-ducklake"
    assert class_archive.archive_dir() == tmp_path / "dbt-ducklake" / "class-archives"
    assert local_server.default_root() == str(tmp_path / "dbt-ducklake" / "servers")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_root() == Path.home() / ".cache" / "dbt-ducklake"
