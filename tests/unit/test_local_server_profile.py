"""The profile's `master: local-server` and `server_idle_timeout`: accepted forms, refused ones, what `dbt debug`
shows before any server runs (nothing is started to show it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.ducklake.credentials import DuckLakeCredentials
from dbt.adapters.ducklake.spark import local_server


def creds(tmp_path: Path, **kw: object) -> DuckLakeCredentials:
    return DuckLakeCredentials.from_dict({"catalog": str(tmp_path / "c.ducklake"), "data_path": str(tmp_path / "d/"),
                                          "schema": "main", **kw})


@pytest.mark.parametrize(("master", "runs"), [("local-server", "local[*]"), ("local-server[2]", "local[2]"),
                                              ("local-server[*]", "local[*]"), ("local[*]", None),
                                              ("sc://localhost:15002", None)])
def test_server_master(tmp_path: Path, master: str, runs: str | None) -> None:
    assert creds(tmp_path, master=master).server_master == runs


@pytest.mark.parametrize("master", ["local-server[x]", "local-servers", "local-server[2"])
def test_bad_local_server_master_names_the_key(tmp_path: Path, master: str) -> None:
    with pytest.raises(DbtRuntimeError, match="`master`.*local-server"):
        creds(tmp_path, master=master)


def test_idle_timeout_must_be_positive(tmp_path: Path) -> None:
    assert creds(tmp_path, master="local-server", server_idle_timeout=5).server_idle_timeout == 5
    with pytest.raises(DbtRuntimeError, match="server_idle_timeout"):
        creds(tmp_path, master="local-server", server_idle_timeout=0)


def test_debug_shows_a_server_that_is_not_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(local_server.ROOT_ENV, str(tmp_path / "servers"))
    info = dict(creds(tmp_path, master="local-server").connection_info())
    assert info["server_idle_timeout"] == 1800
    assert info["spark_server"].startswith("not running (the first command starts it); its log: "
                                           f"{tmp_path / 'servers'}")
    assert not os.path.exists(tmp_path / "servers")  # showing it starts nothing, creates nothing
    assert "spark_server" not in dict(creds(tmp_path).connection_info())
