"""What one lake keeps between operations about its catalog, and the rules by which each kept thing stays true.

A `DuckLake` holds one `LakeCache`; it is the only place where the lake's latest state changes. Everything else the
package keeps across calls is listed here with the rule that keeps it right, so that a new cache has one place to
be judged against.

Kept here (the lake's freshness; one lock):
- the latest state (`LakeState`): replaced when a catalog look finds a newer snapshot, or by our own commit's state
  (`on_commit`); handed out only after the catalog is known to be still at its snapshot (same id and time);
- the last look at the catalog (its change token and the latest snapshot then): while the token is the same, so is
  the latest snapshot (`CatalogDB.change_token`; DuckDB-file catalogs only);
- this lake's own commits (base snapshot, snapshot, tables changed): a state moves over them without asking the
  catalog what they changed; bounded to the last `OWN_COMMITS_KEPT` ids.

Kept elsewhere, with their rules:
- on a `LakeState` (files, inlined-data tables and rows of tables it loaded): a state is one snapshot's and never
  changes (a load made after its snapshot was expired fails: `require_snapshot`); a newer state takes them over for
  the tables no commit in between changed (`carry_files`, from the tables `advance` finds changed: our own commits,
  else the catalog's changes).
- by file path (`read/file_checks`: files found on storage with their catalog size; the Spark layer's readable
  copies and delete-file positions): a lake file is never rewritten under its name, so these stay true while the file
  exists. Deleting files (cleanup, orphan deletion, the files of a commit that did not land) goes through
  `on_files_deleted`, which forgets their checks: a state still holding them then fails its read on the missing file
  instead of reading it as empty. The Spark layer's path-keyed caches are bounded and only cost memory when stale.
- process facts (Spark tables and views this process made, background manifest builds, the warm server's lease,
  catalog-file locks): what this process did; no catalog change makes them wrong. Facts about Spark tables are kept
  per Spark catalog (a session made again in the process starts an empty one).

`DUCKLAKE_CHECK_COMMITTED_STATE` (set in the test suite) compares the state kept after every commit (its objects, and
the files of the tables whose files it holds) with a load of the catalog at that snapshot.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Collection
from typing import TYPE_CHECKING

from .catalog.database import CatalogDB
from .catalog.state import LakeState, find_snapshot, load_state
from .catalog.state_advance import changed_by, tables_changed
from .read import file_checks
from .records import DataFile, Snapshot

if TYPE_CHECKING:
    from .write.builder import CatalogBuilder

# set (tests): after each commit, the state the lake keeps is compared with a load of the catalog (on_commit)
CHECK_COMMITTED_STATE_ENV = "DUCKLAKE_CHECK_COMMITTED_STATE"
OWN_COMMITS_KEPT = 256
CHECKED_FILES_PER_COMMIT = 2000  # the check compares the files of kept tables up to this many
logger = logging.getLogger(__name__)


class LakeCache:
    """The latest state of one lake's catalog as this process knows it (see the module)."""

    def __init__(self, db: CatalogDB, data_path: str) -> None:
        self.db = db
        self.data_path = data_path
        self._lock = threading.Lock()
        # the last state loaded at the latest snapshot: while no commit follows, a transaction's base and the Spark
        # names' state are this one object instead of a full catalog load each (states are read-only)
        self._latest: LakeState | None = None
        # (change token, latest snapshot) of the last look at the catalog
        self._seen: tuple[object, Snapshot] | None = None
        # this lake's own commits by snapshot id: (the snapshot it was made on, the snapshot, the tables it changed or
        # None)
        self._own: dict[int, tuple[Snapshot, Snapshot, frozenset[int] | None]] = {}

    # the latest state ------------------------------------------------------------------------------------------
    def latest(self) -> LakeState:
        """The lake at its latest snapshot: the state kept when the catalog is provably still there (its change token
        unchanged, or the same snapshot found), else a new load."""
        token = self.db.change_token()
        cached = self._latest
        if token is not None and cached is not None and self._unchanged(token, cached.snapshot):
            return cached
        with self.db.read() as conn:
            snap = find_snapshot(self.db, conn)
            self._saw(token, snap)
            if cached is not None and cached.snapshot.same_as(snap):
                return cached
            state = load_state(self.db, conn, snap, self.data_path)
        self._keep(state)
        return state

    def advance(self, state: LakeState | None) -> tuple[LakeState, frozenset[int] | None]:
        """The lake at its latest snapshot and the ids of the tables changed since `state` (None: unknown, treat all
        as changed). `state` itself when nothing was committed since (a snapshot is known by id and time: a catalog
        restored from a copy can hold another snapshot under the same id); otherwise a new state that keeps the
        files `state` loaded for unchanged tables. One catalog connection."""
        token = self.db.change_token()  # before the query: a commit after it changes the token
        if token is not None and state is not None and self._unchanged(token, state.snapshot):
            return state, frozenset()
        known = self._proven_latest(token)
        if known is not None:  # the catalog is still where this lake's own last commit left it
            if state is None:
                return known, None
            changed = self._own_changes(state.snapshot, known.snapshot)
            if changed is not None:
                known.carry_files(state, changed)
                return known, changed
        with self.db.read() as conn:
            latest = find_snapshot(self.db, conn)
            self._saw(token, latest)
            old = state.snapshot if state is not None else None
            if old is not None and old.same_as(latest):
                return state, frozenset()  # type: ignore[return-value]
            cached = self._latest
            if cached is not None and cached.snapshot.same_as(latest):
                new = cached  # loaded since by latest() (a transaction's base): the same snapshot's state
            else:
                new = load_state(self.db, conn, latest, self.data_path)
                self._keep(new)
            if state is None:
                return new, None
            changed = tables_changed(self.db, conn, state.snapshot, latest)
        if changed is not None:
            new.carry_files(state, changed)
        return new, changed

    def on_commit(self, done: CatalogBuilder, snapshot: Snapshot, token: object | None = None) -> None:
        """A transaction of this lake committed with this working catalog: its state after the commit becomes the
        latest state known (a later look that finds the catalog still at that snapshot loads nothing), and with the
        catalog's change token as the commit left it (CatalogDB.released_token), that is found without opening the
        catalog. Never raises unless CHECK_COMMITTED_STATE_ENV is set (tests): then the state is compared with a load
        of the snapshot."""
        check = os.environ.get(CHECK_COMMITTED_STATE_ENV)
        changed = changed_by(snapshot.changes_made)
        with self._lock:
            self._own[snapshot.snapshot_id] = (done.latest.snapshot, snapshot, changed)
            for old in [i for i in self._own if i <= snapshot.snapshot_id - OWN_COMMITS_KEPT]:
                del self._own[old]
        try:
            state = done.state_after(snapshot, changed)
            if check:
                self.check(state)
        except Exception:
            if check:
                raise
            logger.warning("the state after a commit could not be kept (the next read loads it)", exc_info=True)
            return
        with self._lock:
            cached = self._latest
            if cached is None or cached.snapshot_id < state.snapshot_id:
                self._latest = state
            seen = self._seen
            if token is not None and (seen is None or seen[1].snapshot_id <= snapshot.snapshot_id):
                self._seen = (token, snapshot)

    def on_files_deleted(self, paths: Collection[str]) -> None:
        """Files of this lake were deleted (cleanup, orphan deletion, a commit that did not land): their checks are
        forgotten, so that a read of a state that still lists one finds it missing."""
        file_checks.forget(paths)

    # the check --------------------------------------------------------------------------------------------------
    def check(self, state: LakeState) -> None:
        """Raise AssertionError if `state` differs from a load of the catalog at its snapshot: its objects, ids and the
        files of the tables whose files it holds."""
        with self.db.read() as conn:
            snap = find_snapshot(self.db, conn, state.snapshot_id)
            loaded = load_state(self.db, conn, snap, self.data_path)

        def full(kind: str, st: LakeState) -> dict:  # tags take no part in the records' equality
            return {k: (v, v.tags, getattr(v, "column_tags", None)) for k, v in getattr(st, kind).items()}

        wrong = [] if snap == state.snapshot else [f"snapshot {snap} != {state.snapshot}"]
        for kind in ("schemas", "tables", "views"):
            a, b = full(kind, loaded), full(kind, state)
            if a != b:
                diff = {n: (a.get(n), b.get(n)) for n in set(a) | set(b) if a.get(n) != b.get(n)}
                wrong.append(f"{kind}: (loaded, kept) {diff}")
        # the files the kept state holds (carried over unchanged tables, or made by the commit), up to a bound that
        # keeps a commit into a table of thousands of files from loading them all again after each commit
        compared = 0
        for table in state.tables.values():
            if not state.files_loaded(table) or wrong:
                continue
            kept = state.files(table)
            compared += len(kept)
            if compared > CHECKED_FILES_PER_COMMIT:
                break
            fresh = loaded.files(table)
            if sorted(kept, key=_file_key) != sorted(fresh, key=_file_key):
                ids = {f.data_file_id for f in kept} ^ {f.data_file_id for f in fresh}
                wrong.append(f"files of {table.schema_name}.{table.name}: (loaded, kept) ids differ in {sorted(ids)}"
                             if ids else f"files of {table.schema_name}.{table.name}: a file's record differs")
        if wrong:
            raise AssertionError(f"the state kept after commit {state.snapshot_id} differs from the catalog's: "
                                 + "; ".join(wrong))

    # helpers ----------------------------------------------------------------------------------------------------
    def _keep(self, state: LakeState) -> None:
        with self._lock:
            cached = self._latest
            if cached is None or cached.snapshot_id <= state.snapshot_id:
                self._latest = state

    def _unchanged(self, token: object, snap: Snapshot) -> bool:
        """Whether the catalog is provably still at `snap`: its change token is the one seen with it."""
        seen = self._seen
        return seen is not None and seen[0] == token and seen[1].same_as(snap)

    def _proven_latest(self, token: object | None) -> LakeState | None:
        """The latest state kept, if the change token proves the catalog is still at its snapshot."""
        seen, cached = self._seen, self._latest
        if token is None or seen is None or cached is None or seen[0] != token:
            return None
        return cached if cached.snapshot.same_as(seen[1]) else None

    def _own_changes(self, old: Snapshot, new: Snapshot) -> frozenset[int] | None:
        """The tables changed from `old` to `new` when every snapshot in between is one of this lake's own commits,
        each made on the one before (None otherwise: the catalog knows)."""
        changed: set[int] = set()
        parent = old
        with self._lock:
            for sid in range(old.snapshot_id + 1, new.snapshot_id + 1):
                own = self._own.get(sid)
                if own is None or not own[0].same_as(parent) or own[2] is None:
                    return None
                parent = own[1]
                changed |= own[2]
        return frozenset(changed) if parent.same_as(new) else None

    def _saw(self, token: object | None, latest: Snapshot) -> None:
        with self._lock:
            self._seen = None if token is None else (token, latest)


def _file_key(f: DataFile) -> int:
    return f.data_file_id
