"""Whether a commit whose acknowledgement was lost landed: found out by reading the catalog again.

A commit attempt is known by its snapshot id and what only it wrote there: the snapshot time it chose (microseconds),
its change string and its commit message. It landed if the catalog has exactly that snapshot; it did not if the id
is free or taken by another snapshot, once nothing can still apply it (file catalogs: the failed call has returned;
PostgreSQL: the server process of its connection has ended). Otherwise the outcome stays unknown, the attempt's files
are kept, and the lake asks again before its next transaction; only a commit proven absent has its files removed.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass

from ..catalog.database import CatalogDB
from ..catalog.state import SNAPSHOT_SELECT, snapshot_from_row
from ..paths import file_io

logger = logging.getLogger(__name__)

# how often and how long to try reading the catalog after a failed COMMIT before leaving the outcome unknown
VERIFY_ATTEMPTS = 4
VERIFY_WAIT_SECONDS = 0.25


@dataclass(frozen=True)
class CommitAttempt:
    """What identifies one commit attempt in the catalog, and the files it would make live."""

    snapshot_id: int
    snapshot_time: dt.datetime
    changes_made: str
    commit_message: str | None
    files: tuple[str, ...]
    backend_pid: int | None = None  # PostgreSQL: the server process of the committing connection

    def describe(self) -> str:
        return f"snapshot {self.snapshot_id} ({self.changes_made or 'no changes'})"


def outcome(db: CatalogDB, attempt: CommitAttempt) -> bool | None:
    """True if the attempt's snapshot is in the catalog, False if it provably is not, None if that cannot be told
    (the catalog is unreachable, or a PostgreSQL server process may still apply the COMMIT)."""
    for i in range(VERIFY_ATTEMPTS):
        try:
            return _read_outcome(db, attempt)
        except Exception as e:  # noqa: BLE001 - any failure to read means: not known yet
            logger.debug("reading the outcome of %s failed: %s", attempt.describe(), e)
            if i + 1 < VERIFY_ATTEMPTS:
                time.sleep(VERIFY_WAIT_SECONDS * (2**i))
    return None


def _read_outcome(db: CatalogDB, attempt: CommitAttempt) -> bool | None:
    with db.read() as conn:
        rows = db.query(conn, SNAPSHOT_SELECT + " WHERE s.snapshot_id = :v", {"v": attempt.snapshot_id})
        if rows:
            snap = snapshot_from_row(db, rows[0])
            same_time = abs((snap.snapshot_time - attempt.snapshot_time).total_seconds()) < 1e-3
            return bool(same_time and (snap.changes_made or "") == attempt.changes_made
                        and snap.commit_message == attempt.commit_message)
        if attempt.backend_pid is not None and db.location.backend == "postgresql":
            alive = db.query(conn, "SELECT 1 FROM pg_stat_activity WHERE pid = :p", {"p": attempt.backend_pid})
            if alive:
                return None  # its server process may still be committing
        return False


def remove_files(attempt: CommitAttempt) -> None:
    """Remove the files of an attempt proven not to have landed (no catalog row can reference them)."""
    for path in attempt.files:
        file_io(path).delete(path)
