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

Change tokens (`file_token`): every commit to a DuckDB database file writes it or its WAL, so their modification
times, sizes and inodes change, but only to a time stamp of the file system's clock, which moves in ticks (4 ms
here): a token read within a tick of the last write could equal the one after a next write. A token is trusted
once its newest stamp is older than two ticks (STABLE_NS), or 2 s on file systems that stamp whole milliseconds or
coarser. The last connection of a thread that wrote the file checkpoints it, waits out those two ticks while it
still holds the file's lock (so no other process's write can carry the same stamps) and keeps the token of the file
as it leaves it (`released_token`): the state its own commit made. The file is never opened to read it: closing any
descriptor of a file drops every POSIX lock this process holds on it, DuckDB's included.

Deferred releases (`connect(path, defer=True)`, for a dbt build): that checkpoint, wait and DETACH after a write run
in a thread of their own, so the caller goes on with its next work instead of waiting 20-30 ms per commit. The file
is locked by this process until the DETACH, exactly as long as before; until then nobody else can have changed it, so
its token is the pending release itself (`PendingRelease`), equal to the settled token once the release is done. A
connection to the file from any thread of the process waits for its pending release first, as does
`wait_released` (the end of a build, before the file is handed to anyone else).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass

import duckdb
from duckdb_engine import ConnectionWrapper

_NAMES = itertools.count()
logger = logging.getLogger(__name__)


def _stable_ns() -> int:
    """How long after a file's newest time stamp another write surely stamps a later time: two ticks of the clock
    that stamps files and a margin. Linux stamps with the coarse real-time clock (CLOCK_REALTIME_COARSE, id 5,
    which Python's time module does not name); elsewhere 50 ms covers Windows' 15.6 ms system-time tick."""
    if sys.platform.startswith("linux"):
        try:
            return 2 * int(time.clock_getres(5) * 1e9) + 2_000_000
        except OSError:
            pass
    return 50_000_000


STABLE_NS = _stable_ns()
# The storage format of catalog files, as DuckDB 1.5's ducklake extension attaches them: v1.5 (its 'latest'), which a
# new file is created in and a file of an older format is moved to at its next checkpoint. The default (v1.0 format)
# would differ from the lakes DuckDB 1.5 writes, and costs more per operation: at 105 tables, an ATTACH took 10 ms
# against 4 and a commit's CHECKPOINT 25 ms against 12 (the old format kept three times the metadata blocks).
# Named, not 'latest': with duckdb 2.x installed, 'latest' is v2.0, which DuckDB 1.5 cannot open, and a file is
# moved to it at its first checkpoint. So a new file is v1.5 whatever duckdb is installed, and with duckdb 2.x an
# existing file keeps its own format (a file DuckDB 2.0 wrote stays v2.0; one DuckDB 1.5 wrote stays v1.5).
STORAGE_VERSION = "v1.5.0"
NEWER_DUCKDB = int(duckdb.__version__.split(".")[0]) >= 2
# whole-millisecond stamps: a coarse file system (FAT, HFS+, some network ones), where a tick can be 2 s
COARSE_STABLE_NS = 2_000_000_000


@dataclass
class _Attachment:
    alias: str
    users: int = 0
    defer: bool = False  # its release after a write runs in the background


class PendingRelease:
    """A file's release (checkpoint, wait, DETACH) running in the background, standing as the file's change token:
    while it runs this process holds the file, so the file is as this process's last commit left it. Equal only to
    itself until it is done, then to the token it settled (to nothing if it settled none)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.done = threading.Event()
        self.detaching = False  # from here on the file may be let go at any moment: wait for `done`
        self.token: tuple[object, ...] | None = None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PendingRelease):
            return other is self
        return self.done.is_set() and self.token is not None and self.token == other

    __hash__ = object.__hash__


_PENDING: dict[str, PendingRelease] = {}  # by absolute path: releases running in the background
_PENDING_LOCK = threading.Lock()


def _pending(key: str) -> PendingRelease | None:
    with _PENDING_LOCK:
        pending = _PENDING.get(key)
    return pending if pending is not None and pending.pid == os.getpid() else None  # a forked child has none


class _Host(threading.local):
    """The thread's in-memory DuckDB and the catalog files attached to it."""

    def __init__(self) -> None:
        self.pid = -1
        self.db: duckdb.DuckDBPyConnection | None = None
        self.attached: dict[str, _Attachment] = {}  # by absolute path
        # by absolute path: the token at the last detach (its pending release while that runs)
        self.released: dict[str, tuple[object, ...] | PendingRelease | None] = {}

    def instance(self) -> duckdb.DuckDBPyConnection:
        if self.db is None or self.pid != os.getpid():  # a forked child makes its own
            self.db, self.pid, self.attached = duckdb.connect(":memory:"), os.getpid(), {}
        return self.db


_HOST = _Host()


def connect(path: str, defer: bool = False) -> ConnectionWrapper:
    """A DB-API connection (duckdb_engine's wrapper) whose default database is the catalog file at path; with
    defer, the release after a write runs in the background (see the module's note).

    Raises:
        duckdb.Error: the file cannot be opened (duckdb.IOException when another process holds its lock).
    """
    key = os.path.abspath(path)
    wait_released(key)
    cur = _HOST.instance().cursor()
    _HOST.released.pop(key, None)  # a new use: the token kept from the last one no longer says where the file is
    try:
        entry = _HOST.attached.get(key)
        if entry is None:
            alias = f"ducklake_catalog_{next(_NAMES)}"
            cur.execute(f"ATTACH {_literal(key)} AS {alias}{attach_options(key)}")
            entry = _HOST.attached[key] = _Attachment(alias, defer=defer)
        cur.execute(f"USE {entry.alias}")
        entry.users += 1
    except BaseException:
        cur.close()
        raise
    return _Attached(cur, key)


def attach_options(path: str) -> str:
    """The ATTACH options of a catalog file (see STORAGE_VERSION)."""
    if not os.path.exists(path) or not NEWER_DUCKDB:
        return f" (STORAGE_VERSION '{STORAGE_VERSION}')"
    return ""


def is_newer_storage(error: BaseException | None) -> bool:
    """Whether DuckDB refused a file for being of a storage format newer than it reads (a file DuckDB 2.0 wrote)."""
    text = str(error or "")
    # the file's header (a version number above those it reads), or its storage format tag
    return ("version number" in text and "can only read" in text) or (
        "storage version" in text and "greater than" in text)


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
    if entry.defer and _wal_size(key):
        pending = PendingRelease()
        _HOST.released[key] = pending
        with _PENDING_LOCK:
            _PENDING[key] = pending
        # not a daemon: the interpreter waits for it at exit, so the file is left checkpointed
        threading.Thread(target=_finish_release, args=(cur, key, entry, _HOST.attached, pending),
                         name="ducklake-catalog-release").start()
        return
    try:
        token = _detach(cur, key, entry)
    finally:
        cur.close()
    _HOST.released[key] = token
    # only once detached: after a failed DETACH the next connection of the thread takes the attachment up again
    del _HOST.attached[key]


def _detach(cur: duckdb.DuckDBPyConnection, key: str, entry: _Attachment,
            pending: PendingRelease | None = None) -> tuple[object, ...] | None:
    """CHECKPOINT (after a write), wait for a token to trust, DETACH; the token (None if none can be trusted)."""
    token = None
    if _wal_size(key):
        # what this thread committed, into the file now, and its stamps made old enough to tell from any later
        # write: the token then stays true after the DETACH (which would checkpoint otherwise). A failed
        # CHECKPOINT leaves it to the DETACH, and the token then differs.
        with contextlib.suppress(duckdb.Error):
            cur.execute(f"CHECKPOINT {entry.alias}")
        token = _settled_token(key)
    if pending is not None:
        pending.detaching = True
    cur.execute(f"DETACH {entry.alias}")
    return token


def _finish_release(cur: duckdb.DuckDBPyConnection, key: str, entry: _Attachment,
                    attached: dict[str, _Attachment], pending: PendingRelease) -> None:
    """A deferred release, in its own thread (the owner thread's connections to the file wait for it)."""
    try:
        pending.token = _detach(cur, key, entry, pending)
        del attached[key]
    except Exception:  # noqa: BLE001 - left attached: the owner thread's next connection takes it up again
        logger.debug("releasing the catalog file %s failed", key, exc_info=True)
    finally:
        cur.close()
        with _PENDING_LOCK:
            if _PENDING.get(key) is pending:
                del _PENDING[key]
        pending.done.set()


def wait_released(path: str) -> None:
    """Wait until a pending release of the file at path (if any) is done."""
    pending = _pending(os.path.abspath(path))
    if pending is not None:
        pending.done.wait()


def released_token(path: str) -> tuple[object, ...] | PendingRelease | None:
    """The token of the file as this thread's last connection to it left it (None if it is in use or none was
    kept): taken before the DETACH, while the process still held the file's lock; its pending release while that
    runs."""
    return _HOST.released.get(os.path.abspath(path))


def file_token(path: str) -> tuple[object, ...] | PendingRelease | None:
    """A value that every later commit to the DuckDB database file changes (see the module's note); None when there
    is none to trust yet (the file was written too recently) or the file cannot be looked at. While a release of
    the file runs in the background, that release (the file is as this process left it)."""
    pending = _pending(os.path.abspath(path))
    if pending is not None:
        if not pending.detaching:
            return pending
        pending.done.wait()  # being let go: another process may take it now
    return _stat_token(path)


def _stat_token(path: str) -> tuple[object, ...] | None:
    """The file's token from its stat, if its stamps are old enough to trust."""
    parts = _stamps(path)
    if parts is None:
        return None
    newest, stable, token = parts
    return token if time.time_ns() - newest >= stable else None


def _settled_token(path: str) -> tuple[object, ...] | None:
    """The file's token once it can be trusted: waits (at most STABLE_NS, holding the file) until the last write's
    stamps are old enough; None on a coarse file system (a wait of seconds would cost more than it saves)."""
    parts = _stamps(path)
    if parts is None or parts[1] != STABLE_NS:
        return None
    wait = parts[0] + STABLE_NS - time.time_ns()
    if wait > STABLE_NS:
        return None  # stamped ahead of this clock (a file system with a clock of its own): no wait, no token
    if wait > 0:
        time.sleep(wait / 1e9)
    return _stat_token(path)


def _stamps(path: str) -> tuple[int, int, tuple[object, ...]] | None:
    """(the newest time stamp of the file and its WAL, how long after it a token is trusted, the token)."""
    try:
        wal = _stat(path + ".wal")
        st = os.stat(path)
    except OSError:
        return None
    main = (st.st_size, st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns)
    stamps = [st.st_mtime_ns, st.st_ctime_ns] + ([wal[3], wal[4]] if wal is not None else [])
    coarse = all(t % 1_000_000 == 0 for t in stamps)
    return max(stamps), COARSE_STABLE_NS if coarse else STABLE_NS, (wal, main)


def _stat(path: str) -> tuple[int, int, int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_size, st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns


def _wal_size(path: str) -> int:
    try:
        return os.stat(path + ".wal").st_size
    except OSError:
        return 0


def attached() -> list[str]:
    """The catalog files this thread has attached now (tests: none is left open between operations)."""
    return sorted(_HOST.attached)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
