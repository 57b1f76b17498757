"""The embedded Spark session starts in the background when the adapter is made, for the dbt commands that run Spark
statements (runtime.prestart): the first statement that needs Spark takes that session, or reports its start's error
as it would have; other commands and Spark Connect sessions start nothing early."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from dbt.adapters.ducklake import runtime
from dbt.adapters.ducklake.credentials import DuckLakeCredentials
from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.spark.env.session import LazySession


def _creds(tmp_path: Path, **extra: object) -> DuckLakeCredentials:
    catalog = f"duckdb:///{tmp_path}/l.ducklake"
    DuckLake.create(catalog, f"{tmp_path}/data/").close()
    return DuckLakeCredentials(catalog=catalog, data_path=f"{tmp_path}/data/", schema="main", **extra)  # type: ignore[arg-type]


def test_a_writing_command_starts_spark_before_the_first_connection(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "_command", lambda: "run")
    creds = _creds(tmp_path, master="local[2]")
    key = runtime._key(creds)
    before = signal.getsignal(signal.SIGINT)
    try:
        runtime.prestart(creds)
        started = runtime._PRESTARTS[key]
        runtime.prestart(creds)  # a second adapter of the invocation: the same start
        assert runtime._PRESTARTS[key] is started
        rt = runtime.runtime_for(creds)
        assert isinstance(rt.spark, LazySession) and not rt.spark.started  # a connection does not wait for it
        assert signal.getsignal(signal.SIGINT) not in (before, signal.default_int_handler)  # Ctrl-C cancels jobs
        assert rt.spark.sql("SELECT 41 + 1").collect()[0][0] == 42  # the first use takes the prestarted session
        assert rt.spark.session() is started.result()[0] and key not in runtime._PRESTARTS
        runtime.prestart(creds)  # the runtime exists: nothing more starts
        assert key not in runtime._PRESTARTS
    finally:
        signal.signal(signal.SIGINT, before)
        runtime._RUNTIMES.pop(key, None)


@pytest.mark.parametrize(("command", "extra"), [("debug", {}), ("ls", {}), ("compile", {}), (None, {}), ("test", {}),
                                                ("run", {"master": "sc://localhost:15002"}),
                                                ("run", {"master": "local-server[2]"})])
def test_other_commands_and_connect_sessions_start_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           command: str | None, extra: dict) -> None:
    monkeypatch.setattr(runtime, "_command", lambda: command)
    creds = _creds(tmp_path, **extra)
    runtime.prestart(creds)
    assert runtime._key(creds) not in runtime._PRESTARTS


def test_a_failed_start_is_reported_by_each_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "_command", lambda: "build")

    def no_java(creds: DuckLakeCredentials) -> None:
        raise RuntimeError("Java gateway process exited before sending its port number")

    monkeypatch.setattr(runtime, "_spark", no_java)
    creds = _creds(tmp_path)
    runtime.prestart(creds)
    key = runtime._key(creds)
    try:
        rt = runtime.runtime_for(creds)  # the catalog works: the connection opens
        for _ in range(2):  # the first statement that needs Spark reports the start's error, and so does the next
            with pytest.raises(runtime.SetupError,
                               match=r"Spark \(master 'local\[\*\]'\) does not work: Java gateway process"):
                rt.spark.sql("SELECT 1")
        assert key not in runtime._PRESTARTS and not rt.spark.started
    finally:
        runtime._RUNTIMES.pop(key, None)
