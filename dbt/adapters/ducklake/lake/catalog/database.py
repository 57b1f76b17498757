"""The catalog database: short-lived SQLAlchemy connections, consistent reads, write transactions, lake discovery."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import registry
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

from ..errors import CatalogConnectionError, CommitStateUnknownError
from ..faults import fault_point
from . import duckdb_files
from .arrow_insert import insert_from_arrow
from .dialect import Dialect, dialect_for
from .spec import SPEC_1_0, CatalogSpec
from .url import CatalogLocation

# A DuckDB catalog file is locked by the process that has it open; another process waits this long for it.
_log = logging.getLogger(__name__)
DUCKDB_LOCK_WAIT_SECONDS = 30.0
LOCK_NOTICE_SECONDS = 0.5  # a lock held longer than this is reported while waiting (another dbt's commit is shorter)
SQLITE_BUSY_TIMEOUT_SECONDS = 30.0
POSTGRES_CONNECT_TIMEOUT_SECONDS = 10
# From this many rows a DuckDB-catalog INSERT goes through Arrow instead of executemany (see arrow_insert)
ARROW_INSERT_MIN_ROWS = 2


# the pip extra that installs each backend's driver (DuckDB's and SQLite's come with the package)
_DRIVER_EXTRAS = {"postgresql": "postgres"}

# Tests only: called with "before" and "after" around a write transaction's COMMIT (raising there simulates a
# COMMIT that fails, or one whose acknowledgement is lost)
COMMIT_HOOK: Callable[[CatalogDB, str], None] | None = None

_FILE_LOCKS: dict[str, threading.RLock] = {}
_FILE_LOCKS_GUARD = threading.Lock()


@contextmanager
def _file_lock(loc: CatalogLocation) -> Iterator[None]:
    """Threads of one process take turns on a DuckDB catalog file: DuckDB refuses a second open of a file that the
    same process holds ("Unique file handle conflict"), and connections stay per operation so DuckDB users can ATTACH
    between commits."""
    if loc.backend != "duckdb" or not loc.file_path:
        yield
        return
    key = os.path.abspath(loc.file_path)
    with _FILE_LOCKS_GUARD:
        lock = _FILE_LOCKS.setdefault(key, threading.RLock())
    with lock:
        yield


class CatalogDB:
    """Connections to one catalog database. Opened per transaction, so DuckDB can ATTACH between commits."""

    def __init__(self, location: CatalogLocation, metadata_schema: str | None = None) -> None:
        self.location = location
        self.dialect: Dialect = dialect_for(location.backend)
        self.metadata_schema = metadata_schema
        self._engine: sa.Engine | None = None
        self._held = threading.local()  # this thread's connection inside reading()
        # a DuckDB file's release after a write runs in the background (duckdb_files); settle() waits for it
        self.defer_releases = False
        # the catalog's spec version and added columns: set when the lake is opened (1.0 until then)
        self.spec: CatalogSpec = SPEC_1_0

    # naming ------------------------------------------------------------------------------------------------
    @property
    def prefix(self) -> str:
        """What goes before a catalog table name in SQL ('' or '"schema".')."""
        if not self.metadata_schema:
            return ""
        return '"' + self.metadata_schema.replace('"', '""') + '".'

    def t(self, name: str) -> str:
        """A catalog table name, qualified with the metadata schema if any."""
        return self.prefix + name

    def change_token(self) -> object | None:
        """Without opening the catalog: a value that every commit to a DuckDB catalog file changes (the stat of the
        file and its WAL, or its pending release: see duckdb_files), or None when there is none (other backends).
        Take it before reading the catalog: a commit after it then changes it."""
        path = self.location.file_path if self.location.backend == "duckdb" else None
        return duckdb_files.file_token(path) if path else None

    def released_token(self) -> object | None:
        """Right after a write() block of this thread: the change token of the catalog as the block's commit left it
        (read before the file was let go, so no other writer's commit can be in it); None for other backends."""
        path = self.location.file_path if self.location.backend == "duckdb" else None
        return duckdb_files.released_token(path) if path else None

    def settle(self) -> None:
        """Wait until a DuckDB catalog file is let go by the releases of this process running in the background
        (`defer_releases`): then other processes and DuckDB sessions can open it."""
        if self.location.backend == "duckdb" and self.location.file_path:
            duckdb_files.wait_released(self.location.file_path)

    # connections -------------------------------------------------------------------------------------------
    @property
    def engine(self) -> sa.Engine:
        """The SQLAlchemy engine. Raises CatalogConnectionError naming the extra to install when the backend's
        driver is missing."""
        if self._engine is None:
            try:
                self._engine = self._make_engine()
            except (ImportError, sa.exc.NoSuchModuleError) as e:
                extra = _DRIVER_EXTRAS.get(self.location.backend, "")
                raise CatalogConnectionError(
                    f"the {self.location.backend} catalog {self.location.render()!r} needs a driver that is not "
                    f"installed ({e}): pip install 'dbt-ducklake[{extra}]'" if extra else
                    f"the catalog {self.location.render()!r} needs a driver that is not installed: {e}") from None
        return self._engine

    def _make_engine(self) -> sa.Engine:
        loc = self.location
        if loc.backend == "duckdb":
            # by name: SQLAlchemy would otherwise look for the dialect among every installed package's entry points
            # (0.2 s in a dbt process)
            registry.register("duckdb", "duckdb_engine", "Dialect")
            # no pool: an open DuckDB connection keeps the file locked against DuckDB CLI users and other processes
            if loc.file_path and not loc.url.query:
                path = loc.file_path
                return sa.create_engine("duckdb:///:memory:", poolclass=NullPool,
                                        creator=lambda: duckdb_files.connect(path, self.defer_releases))
            return sa.create_engine(loc.url, poolclass=NullPool)
        if loc.backend == "sqlite":
            engine = sa.create_engine(
                loc.url, poolclass=NullPool, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS}
            )

            @sa.event.listens_for(engine, "connect")
            def _no_implicit_tx(dbapi_conn: Any, _rec: Any) -> None:
                # we issue BEGIN / BEGIN IMMEDIATE ourselves (pysqlite's implicit BEGIN cannot take the write lock)
                dbapi_conn.isolation_level = None

            return engine
        return sa.create_engine(
            loc.url, poolclass=NullPool, connect_args={"connect_timeout": POSTGRES_CONNECT_TIMEOUT_SECONDS}
        )

    def _raw_connect(self) -> Connection:
        loc = self.location
        if loc.backend in ("duckdb", "sqlite"):
            path = loc.file_path or ""
            parent = os.path.dirname(path) or "."
            if not os.path.isdir(parent):
                raise CatalogConnectionError(
                    f"catalog {loc.render()!r}: directory {parent!r} does not exist"
                )
        deadline = time.monotonic() + DUCKDB_LOCK_WAIT_SECONDS
        delay = 0.05
        noticed = False
        while True:
            try:
                conn = self.engine.connect()
                if loc.backend == "postgresql":
                    # driver autocommit, so that our own BEGIN (with its isolation level) opens the transaction
                    conn = conn.execution_options(isolation_level="AUTOCOMMIT")
                return conn
            except sa.exc.DBAPIError as e:
                if loc.backend == "duckdb" and _is_duckdb_lock(e.orig) and time.monotonic() < deadline:
                    if not noticed and time.monotonic() > deadline - DUCKDB_LOCK_WAIT_SECONDS + LOCK_NOTICE_SECONDS:
                        # a user whose DuckDB session holds the file sees why nothing happens, at once
                        _log.info("catalog %s is locked by %s: waiting up to %.0f s for it to be released",
                                  loc.render(), _lock_holder(e.orig), DUCKDB_LOCK_WAIT_SECONDS)
                        noticed = True
                    time.sleep(delay)
                    delay = min(delay * 1.5, 1.0)
                    continue
                raise CatalogConnectionError(_connect_message(loc, e)) from e

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection with one consistent view of the catalog for several queries (the held one inside
        `reading()`)."""
        held = getattr(self._held, "conn", None)
        if held is not None:
            yield held
            return
        begin = {"sqlite": "BEGIN", "postgresql": "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"}
        with self._transaction(begin.get(self.location.backend), commit=False) as conn:
            yield conn

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Every `read()` of this thread inside the block shares one connection and read transaction: a reader
        that loads a table's files, inlined rows and stats for many snapshots opens the catalog once, not per
        query (a DuckDB-file catalog costs a database open each). Holds a DuckDB file open (locked for other
        processes) until the block ends, so keep it around catalog reads; no write() inside it."""
        if getattr(self._held, "conn", None) is not None:
            yield
            return
        with self.read() as conn:
            self._held.conn = conn
            try:
                yield
            finally:
                self._held.conn = None

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction: committed when the block ends, rolled back if it raises."""
        if getattr(self._held, "conn", None) is not None:
            raise RuntimeError("a catalog write inside CatalogDB.reading(): end the reading block first")
        # SQLite: take the write lock first, so writers queue instead of failing on lock upgrade
        begin = {"sqlite": "BEGIN IMMEDIATE", "postgresql": "BEGIN"}
        with self._transaction(begin.get(self.location.backend), commit=True) as conn:
            yield conn

    @contextmanager
    def _transaction(self, begin_sql: str | None, commit: bool) -> Iterator[Connection]:
        # duckdb-engine opens the DBAPI transaction itself (begin_sql None); the others run in driver
        # autocommit and get our explicit BEGIN
        with _file_lock(self.location), self._open_transaction(begin_sql, commit) as conn:
            yield conn

    @contextmanager
    def _open_transaction(self, begin_sql: str | None, commit: bool) -> Iterator[Connection]:
        conn = self._raw_connect()
        try:
            if begin_sql:
                conn.exec_driver_sql(begin_sql)
            try:
                yield conn
            except BaseException:
                self._end(conn, begin_sql, "ROLLBACK")
                raise
            if not commit:
                self._end(conn, begin_sql, "ROLLBACK")
                return
            try:
                fault_point("catalog_transaction")
                if COMMIT_HOOK is not None:
                    COMMIT_HOOK(self, "before")
                self._end(conn, begin_sql, "COMMIT")
                fault_point("after_commit")
                if COMMIT_HOOK is not None:
                    COMMIT_HOOK(self, "after")
            except BaseException as e:
                # the COMMIT may or may not have been applied: only reading the catalog again can tell
                cause = str(getattr(e, "orig", None) or e).strip().splitlines()[:1]
                raise CommitStateUnknownError(
                    f"the catalog {self.location.render()!r} failed while committing "
                    f"({cause[0] if cause else type(e).__name__})") from e
        finally:
            with contextlib.suppress(Exception):  # a connection that died with the commit cannot close cleanly
                conn.close()

    @staticmethod
    def _end(conn: Connection, begin_sql: str | None, how: str) -> None:
        if begin_sql:
            conn.exec_driver_sql(how)
        elif how == "COMMIT":
            conn.commit()
        else:
            conn.rollback()

    def dispose(self) -> None:
        self.settle()
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    # helpers -----------------------------------------------------------------------------------------------
    def backend_pid(self, conn: Connection) -> int | None:
        """PostgreSQL: the server process of a connection (a failed COMMIT is settled once it has ended)."""
        if self.location.backend != "postgresql":
            return None
        return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())

    def has_table(self, conn: Connection, name: str) -> bool:
        """Whether a catalog table exists (used to tell a lake from another database)."""
        schema = self.metadata_schema or self.dialect.default_schema
        if self.location.backend == "sqlite":
            row = conn.execute(
                sa.text("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :n"), {"n": name}
            ).first()
        else:
            # current_database(): a DuckDB file is attached beside others (duckdb_files)
            where = " AND table_catalog = current_database()" if self.location.backend == "duckdb" else ""
            row = conn.execute(
                sa.text(
                    "SELECT 1 FROM information_schema.tables WHERE table_name = :n AND table_schema = :s" + where
                ),
                {"n": name, "s": schema},
            ).first()
        return row is not None

    def catalog_columns(self, conn: Connection) -> dict[str, set[str]]:
        """The columns of each ducklake_* table of the catalog's schema (lower case), by table."""
        schema = self.metadata_schema or self.dialect.default_schema
        out: dict[str, set[str]] = {}
        if self.location.backend == "sqlite":
            names = [r[0] for r in conn.execute(sa.text(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'ducklake%'"))]
            for name in names:
                if name.startswith("ducklake_inlined_"):
                    continue
                rows = conn.execute(sa.text(f"SELECT name FROM pragma_table_info('{name}')"))
                out[name] = {r[0].lower() for r in rows}
            return out
        where = " AND table_catalog = current_database()" if self.location.backend == "duckdb" else ""
        rows = conn.execute(sa.text(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = :s "
            "AND table_name LIKE 'ducklake%' AND table_name NOT LIKE 'ducklake_inlined%'" + where), {"s": schema})
        for table, column in rows:
            out.setdefault(table, set()).add(column.lower())
        return out

    def table_sizes(self, conn: Connection) -> dict[str, int | None]:
        """Every table of the catalog's schema, by name, with its row count where the database keeps one exactly
        enough to tell an empty table (DuckDB: a table without a row, once checkpointed, counts 0; None elsewhere)."""
        schema = self.metadata_schema or self.dialect.default_schema
        if self.location.backend == "sqlite":
            return {r[0]: None for r in conn.execute(sa.text("SELECT name FROM sqlite_master WHERE type = 'table'"))}
        if self.location.backend == "duckdb":
            rows = conn.execute(sa.text(
                "SELECT table_name, estimated_size FROM duckdb_tables() WHERE schema_name = :s "
                "AND database_name = current_database()"), {"s": schema})
            return {r[0]: int(r[1]) if r[1] is not None else None for r in rows}
        rows = conn.execute(sa.text("SELECT table_name FROM information_schema.tables WHERE table_schema = :s"),
                            {"s": schema})
        return {r[0]: None for r in rows}

    def query(self, conn: Connection, sql: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Run one catalog query; '{p}' in the SQL becomes the metadata schema prefix."""
        return list(conn.execute(sa.text(self.spec.adapt(sql).replace("{p}", self.prefix)),
                                 dict(params or {})).fetchall())

    def execute(self, conn: Connection, sql: str, params: Any = None) -> None:
        """Run one catalog statement (params may be a list of dicts for executemany)."""
        sql = self.spec.adapt(sql)
        if (self.location.backend == "duckdb" and isinstance(params, list) and len(params) >= ARROW_INSERT_MIN_ROWS
                and insert_from_arrow(conn, self.prefix, sql, params)):
            return  # DuckDB's executemany runs row by row: many-row INSERTs go through Arrow (see arrow_insert)
        conn.execute(sa.text(sql.replace("{p}", self.prefix)), params if params is not None else {})


def _is_duckdb_lock(orig: BaseException | None) -> bool:
    import duckdb

    # DuckDB reports a lock held by another process as an IOException when opening the file
    return isinstance(orig, duckdb.IOException) and "lock" in str(orig).lower()


def _lock_holder(orig: BaseException | None) -> str:
    """Who holds a DuckDB file's lock, from DuckDB's message ('... held in /usr/bin/python3 (PID 123) ...')."""
    m = re.search(r"held in (.+?) \(PID (\d+)\)", str(orig))
    return f"PID {m.group(2)} ({m.group(1)})" if m else "another process"


def _connect_message(loc: CatalogLocation, e: sa.exc.DBAPIError) -> str:
    cause = str(e.orig).strip().splitlines()[0] if e.orig is not None else str(e)
    if loc.backend == "duckdb" and _is_duckdb_lock(e.orig):
        # DuckDB's own text goes on to suggest read-only mode, which no writer can use: not quoted
        return (
            f"catalog {loc.render()!r} is locked by {_lock_holder(e.orig)} (a DuckDB session that has the lake "
            f"attached, even READ_ONLY, holds the file) and stayed locked for {DUCKDB_LOCK_WAIT_SECONDS:.0f} s. "
            "DETACH the lake in that session (or close it), then run again; to share a lake with DuckDB sessions "
            "that stay open, use a SQLite or PostgreSQL catalog"
        )
    if loc.backend == "duckdb" and duckdb_files.is_newer_storage(e.orig):
        import duckdb

        return (
            f"catalog {loc.render()!r} is a DuckDB file of a newer storage format than the installed duckdb "
            f"{duckdb.__version__} reads (DuckDB 2.0 writes new files in its own format). Install duckdb 2.x beside "
            "the adapter (pip install 'duckdb>=2.0,<2.1'), which opens it and keeps it in its format; or have DuckDB "
            f"2.0 create lakes to share with DuckDB 1.5 users as ATTACH 'ducklake:…' AS lake "
            f"(STORAGE_VERSION '{duckdb_files.STORAGE_VERSION}')"
        )
    return f"cannot connect to catalog {loc.render()!r}: {cause}"
