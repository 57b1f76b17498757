"""The profile's `master: local-server` and `server_idle_timeout`: accepted forms, refused ones, what `dbt debug`
shows before any server runs (nothing is started to show it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.ducklake.credentials import DuckLakeCredentials
from dbt.adapters.ducklake.spark.env import local_server


@pytest.fixture(autouse=True)
def _as_dbt_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    """What `dbt debug` shows (an earlier dbt invocation of this process leaves its command in dbt's flags)."""
    from dbt.adapters.ducklake import credentials

    monkeypatch.setattr(credentials, "dbt_command", lambda: "debug")


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
    assert "spark_class_archive" not in info


def test_debug_shows_the_class_archive_for_an_embedded_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dbt.adapters.ducklake.spark.env import class_archive

    monkeypatch.setenv(class_archive.ENV_DIR, str(tmp_path / "archives"))
    monkeypatch.delenv(class_archive.ENV_SWITCH, raising=False)
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    shown = dict(creds(tmp_path).connection_info())["spark_class_archive"]
    assert shown.startswith("not built yet: the next Spark start builds it in the background")
    assert not os.path.exists(tmp_path / "archives")  # showing it builds nothing
    key = class_archive.archive_key()
    assert key is not None
    path = class_archive.archive_path(key)
    path.parent.mkdir()
    path.write_bytes(b"x" * 2**20)
    assert dict(creds(tmp_path).connection_info())["spark_class_archive"].startswith(f"{path} (1 MB)")
    jars = creds(tmp_path, spark_config={"spark.jars.packages": "org.example:x:1"})
    assert dict(jars.connection_info())["spark_class_archive"].startswith("not used")
    monkeypatch.setenv(class_archive.ENV_SWITCH, "off")
    assert dict(creds(tmp_path).connection_info())["spark_class_archive"] == f"off ({class_archive.ENV_SWITCH})"
    assert "spark_class_archive" not in dict(creds(tmp_path, master="sc://localhost:15002").connection_info())


@pytest.mark.parametrize("master", ["local[2]", "local-server[2]"])
def test_other_commands_see_no_runtime_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, master: str) -> None:
    """dbt reads connection_info for each node's `target` while parsing and hashes it to keep or drop its saved
    parse: outside `dbt debug` it holds the profile only, so a server's start (a new pid) or a class archive built
    since does not force a full parse, and no node pays for listing Spark's jars."""
    from dbt.adapters.ducklake import credentials
    from dbt.adapters.ducklake.spark.env import class_archive

    monkeypatch.setenv(local_server.ROOT_ENV, str(tmp_path / "servers"))
    monkeypatch.setattr(class_archive, "archive_key", lambda conf=None: pytest.fail("jars listed"))
    profile = creds(tmp_path, master=master)
    for command in ("parse", "run", "test", "build", "seed"):
        monkeypatch.setattr(credentials, "dbt_command", lambda c=command: c)
        shown = dict(profile.connection_info())
        assert "spark_server" not in shown and "spark_class_archive" not in shown
        assert shown["master"] == master and shown["catalog"] == str(tmp_path / "c.ducklake")
    monkeypatch.setattr(credentials, "dbt_command", lambda: "debug")
    if "server" in master:  # dbt debug still shows the server (the class archive's display is tested above)
        assert dict(profile.connection_info())["spark_server"].startswith("not running")
