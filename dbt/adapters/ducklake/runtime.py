"""What the connections of one dbt process share: the SparkSession, the lake, and the lake's names in Spark.

A SparkSession is a process-wide singleton in PySpark (one SparkContext per JVM), so dbt's threads share one; so do
the lake handle (connections to the catalog open per operation) and the registry of Spark views. Keyed by the
profile's catalog, data path and Spark settings; created on the first connection and kept for the process.

An embedded Spark session starts in the background as soon as the adapter is made (`prestart`), for the dbt commands
whose nodes run Spark statements: the JVM's start (2-4 s) then overlaps dbt's parse of the project instead of
following it. The embedded session is lazy (`LazySession`): the first statement that needs Spark takes the started
session, or the start's error, as if it had started it; statements answered without Spark (data tests the catalog's
statistics or the driver answer) do not wait for it. With `master: local-server` the session is lazy too: the warm
server (a shared driver JVM) is found or started when the runtime is made, and joined at the first statement.

How a session is started or joined, and with which settings, is the Spark layer's (spark/env/profile_session); this
module decides when, and reports failures as the profile's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from .change_feed import Cursors
from .invocation import dbt_command as _command
from .lake.lake import DuckLake
from .lake.paths import to_local
from .lake.storage import check_object_store, configure_object_store, file_io
from .spark.env import profile_session
from .spark.env.local_server import LocalServer
from .spark.env.session import LazySession
from .spark.read.names import LakeNames

if TYPE_CHECKING:
    from .credentials import DuckLakeCredentials
    from .publish import Build


@dataclass
class Runtime:
    spark: SparkSession
    lake: DuckLake  # None only in `dbt debug` on a catalog that holds no lake yet (it creates nothing)
    names: LakeNames
    cursors: Cursors = field(default_factory=Cursors)  # change-feed cursors waiting for their model's commit
    server: LocalServer | None = None  # the warm local server this process uses (`master: local-server`)
    build: Build | None = None  # the invocation's write-audit-publish build (publish.py)


_LOCK = threading.Lock()
_RUNTIMES: dict[tuple, Runtime] = {}
_PRESTARTS: dict[tuple, Future] = {}  # profile key -> the session starting in the background (prestart)


class SetupError(RuntimeError):
    """One part of the profile does not work: says which (Spark, the catalog, the data path) and why."""


@contextlib.contextmanager
def _component(what: str, creds: DuckLakeCredentials) -> Iterator[None]:
    try:
        yield
    except Exception as e:  # noqa: BLE001 - any failure here is reported as this part's
        raise SetupError(creds.redact(f"{what} does not work: {e}")) from None  # the cause may hold secrets


class _ToDbtLog(logging.Handler):
    """The format and Spark layers' log records (commit retries, settled commit outcomes) in dbt's log."""

    def emit(self, record: logging.LogRecord) -> None:
        from dbt.adapters.events.logging import AdapterLogger

        log = AdapterLogger("DuckLake")
        (log.info if record.levelno >= logging.INFO else log.debug)(record.getMessage())


def _quiet_spark_logs() -> None:
    # PySpark 4 logs a full stack trace for every failed query; dbt reports the error itself
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    logging.getLogger("py4j").setLevel(logging.ERROR)
    layers = logging.getLogger("dbt.adapters.ducklake.lake")
    if not any(isinstance(h, _ToDbtLog) for h in layers.handlers):
        layers.addHandler(_ToDbtLog())
        layers.setLevel(logging.INFO)


def _key(creds: DuckLakeCredentials) -> tuple:
    return (creds.catalog, os.path.abspath(creds.data_path) if "://" not in creds.data_path else creds.data_path,
            creds.master, tuple(sorted(creds.spark_config.items())))


def existing_runtime(creds: DuckLakeCredentials) -> Runtime | None:
    """The profile's runtime if this process has one (never starts one)."""
    with _LOCK:
        return _RUNTIMES.get(_key(creds))


def runtime_for(creds: DuckLakeCredentials) -> Runtime:
    key = _key(creds)
    with _LOCK:
        rt = _RUNTIMES.get(key)
        if rt is not None and rt.lake is None:
            rt = None  # dbt debug found no lake: look again (a later command of this process may create it)
        if rt is None:
            _quiet_spark_logs()
            store = creds.object_store()
            if store is not None:  # the driver's own file work on S3 (footers, moves, deletes) uses the profile's
                configure_object_store(store)
                # a missing bucket or refused keys said now, shortly, rather than by the first write (a Spark job's
                # stack trace, after the catalog was created)
                with _component(f"the data path {creds.data_path!r}", creds):
                    check_object_store(creds.data_path)
            with _component(f"the catalog {creds.catalog_display!r}", creds):
                lake = _open_lake(creds)
            server = None
            if creds.server_master is not None:  # the warm server is found (or started) now, joined on first use
                with _component(f"Spark (master {creds.master!r})", creds):
                    server = _attach_server(creds)
            if creds.session_spec().embedded or server is not None:
                spark: SparkSession = LazySession(lambda: _start_embedded(creds, key, server),  # type: ignore[assignment]
                                                  classic=True)
                profile_session.cancel_on_interrupt(spark)
            else:
                with _component(f"Spark (master {creds.master!r})", creds):
                    spark, _ = _spark(creds)
            rt = Runtime(spark, lake, LakeNames(spark, lake), server=server)  # type: ignore[arg-type]
            _RUNTIMES[key] = rt
        if rt.lake is not None:  # the profile's, also for a runtime an earlier command of this process made
            rt.lake.default_inlining_limit = creds.data_inlining_row_limit
        return rt


def _start_embedded(creds: DuckLakeCredentials, key: tuple, server: LocalServer | None = None) -> SparkSession:
    """The session, when a statement first needs it: the prestarted one (waited for), or started now (an embedded
    driver, or a session on the warm local server's driver)."""
    with _LOCK:
        future = _PRESTARTS.pop(key, None)
    with _component(f"Spark (master {creds.master!r})", creds):
        return (future.result() if future is not None else _spark(creds, server))[0]


def prestart(creds: DuckLakeCredentials) -> None:
    """Start the profile's embedded Spark session in a background thread when this dbt command will need it (see
    the module); a Spark Connect session (a remote or the warm local server) is quick to make and is not prestarted."""
    # whether or not it starts now, the session may start on one of dbt's threads: the environment it needs is set
    # here, on the thread dbt made the adapter on, before any
    spec = creds.session_spec()
    profile_session.prepare(spec)
    if _command() not in PRESTART_COMMANDS or not spec.embedded:
        return
    key = _key(creds)
    with _LOCK:
        if key in _RUNTIMES or key in _PRESTARTS:
            return
        future: Future = Future()
        _PRESTARTS[key] = future

    def start() -> None:
        try:
            _quiet_spark_logs()
            future.set_result(_spark(creds))
        except BaseException as e:  # noqa: BLE001 - handed to the first connection, which reports it
            future.set_exception(e)

    threading.Thread(target=start, name="ducklake-spark-start", daemon=True).start()


# the dbt commands that may create a lake: those that write (`dbt debug`, compile, docs, show, ls never do)
WRITING_COMMANDS = frozenset({"run", "build", "seed", "snapshot", "test", "run-operation", "retry", "clone"})
# the writing commands whose nodes run Spark statements: their embedded session starts while dbt parses the project.
# Not run-operation (a macro may not), nor test and seed: data tests over small or statistics-decided tables, and
# seeds of dbt's inferred types, are done without Spark, and a JVM starting beside them only takes their CPU (104
# tests of small tables on 2 cores: 4.5 s without a prestart, 5.7 s with one); a node that needs Spark starts it then
PRESTART_COMMANDS = WRITING_COMMANDS - {"run-operation", "test", "seed"}


def _open_lake(creds: DuckLakeCredentials) -> DuckLake | None:
    """The profile's lake. A missing one is created only by a writing command, in a data path holding no other
    lake's files; `dbt debug` gets None (nothing is created); other commands are told how to create it."""
    loc = creds.catalog_location()
    if DuckLake.exists(loc):
        return DuckLake.open(loc)
    command = _command()
    if command == "debug":
        return None
    if command is not None and command not in WRITING_COMMANDS:
        raise SetupError(f"the catalog {creds.catalog_display!r} holds no DuckLake yet: a writing command (dbt run, "
                         f"dbt seed, dbt build) creates it, with its Parquet files in {creds.data_path!r}")
    _refuse_foreign_files(creds)
    _make_local_dirs(creds)
    try:
        return DuckLake.create(loc, creds.data_path, version=creds.ducklake_version)
    except Exception as failed:
        # two first runs at once: another process created the lake between the check and the create (on
        # PostgreSQL this surfaces as a duplicate table): open theirs; anything else is a real failure, reported
        # as itself (not as whatever a second look at the catalog raises)
        try:
            created_meanwhile = DuckLake.exists(loc)
        except Exception:  # noqa: BLE001
            raise failed from None
        if created_meanwhile:
            return DuckLake.open(loc)
        raise


def _refuse_foreign_files(creds: DuckLakeCredentials) -> None:
    """A new lake never gets a data path that already holds Parquet files: they would be another lake's (a typo in
    `catalog` would otherwise make a second catalog whose orphan deletion sees all of them as orphans)."""
    if "://" in creds.data_path and not creds.data_path.startswith("file://") and creds.object_store() is None:
        return  # a shared file system the driver does not reach
    with _component(f"the data path {creds.data_path!r}", creds):  # S3: a listing error is named, secrets masked
        hit = next((f.path for f in file_io(creds.data_path).list(creds.data_path) if f.path.endswith(".parquet")),
                   None)
    if hit is not None:
        raise SetupError(
            f"the catalog {creds.catalog_display!r} holds no DuckLake, and creating one there was refused: its "
            f"data path {creds.data_path!r} already holds Parquet files (e.g. {hit}), most likely "
            "another lake's. Point `catalog` at that lake's catalog, or `data_path` at an empty folder")


def _make_local_dirs(creds: DuckLakeCredentials) -> None:
    """The embedded default writes a catalog file and a data folder: create their directories, as DuckDB's ATTACH
    creates its file (a server catalog or a remote data path is left alone)."""
    loc = creds.catalog_location()
    if loc.file_path and loc.file_path != ":memory:":
        os.makedirs(os.path.dirname(os.path.abspath(loc.file_path)), exist_ok=True)
    if "://" not in creds.data_path or creds.data_path.startswith("file://"):
        os.makedirs(to_local(creds.data_path), exist_ok=True)


def spark_log_file() -> str:
    """Where the Spark driver the adapter starts writes what it prints: spark.log beside dbt's own log."""
    try:
        from dbt.flags import get_flags

        log_path = getattr(get_flags(), "LOG_PATH", None)
    except Exception:  # noqa: BLE001 - outside a dbt invocation
        log_path = None
    return os.path.abspath(os.path.join(str(log_path or "logs"), "spark.log"))


def _attach_server(creds: DuckLakeCredentials) -> LocalServer:
    from dbt.adapters.events.logging import AdapterLogger

    server = profile_session.attach_server(creds.session_spec())
    log = AdapterLogger("DuckLake")
    # a new daemon is worth a line on the terminal (`dbt debug` shows the server in any case)
    (log.info if server.fresh and _command() != "debug" else log.debug)(f"Spark: {server.describe()}")
    return server


def _spark(creds: DuckLakeCredentials, server: LocalServer | None = None) -> tuple[SparkSession, LocalServer | None]:
    """The profile's session; with `master: local-server`, joined on `server` (the one the runtime attached: not
    attached again) or on the server attached now."""
    return profile_session.start_session(creds.session_spec(), log_file=spark_log_file(), server=server,
                                         attach=lambda: _attach_server(creds))
