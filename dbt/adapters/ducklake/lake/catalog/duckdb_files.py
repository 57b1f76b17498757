"""DuckDB catalog files opened by ATTACH on an in-memory DuckDB of the thread, instead of a database each time.

Each catalog operation opens the file and closes it when it ends, so that DuckDB users and other processes can open
it between operations. Opening a file as its own database starts a DuckDB instance each time; attaching it to an
instance that lives on costs half (measured on a 100-table catalog: a read 20 -> 9.5 ms, a write 32 -> 19 ms, open
to close). DETACH closes the file (and checkpoints it) as closing the database did, so the file lock is held exactly
as long as before.

One instance per thread: a query of one connection can hold on to every database attached to its instance (DuckDB's
information_schema lists them all), and then another thread's DETACH leaves the file open. Callers hold the file's
thread lock (database._file_lock) around a connection, so one thread at a time has a given file attached; a thread
that opens the file again inside its own connection shares the attachment (counted).
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass

import duckdb
from duckdb_engine import ConnectionWrapper

_NAMES = itertools.count()


@dataclass
class _Attachment:
    alias: str
    users: int = 0


class _Host(threading.local):
    """The thread's in-memory DuckDB and the catalog files attached to it."""

    def __init__(self) -> None:
        self.pid = -1
        self.db: duckdb.DuckDBPyConnection | None = None
        self.attached: dict[str, _Attachment] = {}  # by absolute path

    def instance(self) -> duckdb.DuckDBPyConnection:
        if self.db is None or self.pid != os.getpid():  # a forked child makes its own
            self.db, self.pid, self.attached = duckdb.connect(":memory:"), os.getpid(), {}
        return self.db


_HOST = _Host()


def connect(path: str) -> ConnectionWrapper:
    """A DB-API connection (duckdb_engine's wrapper) whose default database is the catalog file at path.

    Raises:
        duckdb.Error: the file cannot be opened (duckdb.IOException when another process holds its lock).
    """
    key = os.path.abspath(path)
    cur = _HOST.instance().cursor()
    try:
        entry = _HOST.attached.get(key)
        if entry is None:
            alias = f"ducklake_catalog_{next(_NAMES)}"
            cur.execute(f"ATTACH {_literal(key)} AS {alias}")
            entry = _HOST.attached[key] = _Attachment(alias)
        cur.execute(f"USE {entry.alias}")
        entry.users += 1
    except BaseException:
        cur.close()
        raise
    return _Attached(cur, key)


class _Attached(ConnectionWrapper):
    """duckdb_engine's connection wrapper whose close also lets go of the attachment."""

    def __init__(self, cur: duckdb.DuckDBPyConnection, key: str) -> None:
        super().__init__(cur)
        self._key = key

    def close(self) -> None:
        if self.closed:
            return
        try:
            super().close()
        finally:
            _release(self._key)


def _release(key: str) -> None:
    """One connection to the file is closed: the last one detaches it (closing the file for other processes)."""
    entry = _HOST.attached.get(key)
    if entry is None or _HOST.db is None:
        return
    entry.users -= 1
    if entry.users > 0:
        return
    cur = _HOST.db.cursor()
    try:
        cur.execute(f"DETACH {entry.alias}")
    finally:
        cur.close()
    # only once detached: after a failed DETACH the next connection of the thread takes the attachment up again
    del _HOST.attached[key]


def attached() -> list[str]:
    """The catalog files this thread has attached now (tests: none is left open between operations)."""
    return sorted(_HOST.attached)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
