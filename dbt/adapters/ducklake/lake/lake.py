"""DuckLake: create or open a lake, read it at any snapshot, and start transactions."""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .catalog import ddl
from .catalog.database import CatalogDB
from .catalog.spec import READABLE_VERSIONS, V1_0, spec_for
from .catalog.state import LakeState, find_snapshot, list_snapshots, load_state, option_value
from .catalog.url import CatalogLocation, parse_catalog
from .errors import InvalidOptionError, LakeExistsError, NotALakeError, UnsupportedVersionError
from .lake_cache import LakeCache
from .option_values import parse_interval, parse_threshold
from .paths import as_dir, to_local
from .records import SchemaInfo, Snapshot, TableInfo
from .write import catalog_rows

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from .write.builder import CatalogBuilder
    from .write.commit_outcome import CommitAttempt
    from .write.layout import WriteOptions
    from .write.transaction import Transaction

CREATED_BY = "dbt-ducklake"
logger = logging.getLogger(__name__)


class DuckLake:
    """One lake: a catalog database plus a data path. Cheap to hold; connections open per operation."""

    def __init__(self, db: CatalogDB, data_path: str, options: dict[str, str]) -> None:
        self.db = db
        self.data_path = data_path
        self.options = options  # global ducklake_metadata rows (version, data_path, encrypted, set_option values)
        self.inlining_limits: dict[tuple[str, str], int] = {}  # see set_inlining_limit
        # the inlining limit where the lake stores no data_inlining_row_limit, as DuckDB's ATTACH option
        # DATA_INLINING_ROW_LIMIT is (never stored). None: inserts are not inlined, and a created table gets the
        # inlined-data table DuckDB's default (10) makes; 0: no inlining, no such table (lake/write/inlining)
        self.default_inlining_limit: int | None = None
        self._unknown: list[CommitAttempt] = []  # commits whose outcome could not be read yet
        self._unknown_lock = threading.Lock()
        self.cache = LakeCache(db, data_path)  # the latest state and the rules that keep it (lake_cache.py)

    # opening -----------------------------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        catalog: str | CatalogLocation,
        data_path: str,
        *,
        metadata_schema: str | None = None,
        options: dict[str, str] | None = None,
        version: str = "1.0",
    ) -> DuckLake:
        """Create a new lake in an empty catalog database, the way DuckDB's extension initialises one. version:
        the spec, '1.0' (DuckDB 1.5 and 2.0 read it) or '1.1' (DuckDB 2.0's default; DuckDB 1.5 cannot read it).

        Raises:
            LakeExistsError: the database already holds a lake.
            CatalogConnectionError: the database cannot be reached.
        """
        if version not in ("1.0", "1.1"):
            raise UnsupportedVersionError(f"cannot create a DuckLake of spec version {version!r}: use '1.0' or '1.1'")
        loc = parse_catalog(catalog) if isinstance(catalog, str) else catalog
        db = CatalogDB(loc, metadata_schema)
        stored = _store_data_path(data_path)
        with db.write() as conn:
            if db.has_table(conn, "ducklake_metadata"):
                raise LakeExistsError(f"catalog {loc.render()!r} already holds a DuckLake; open it instead")
            if metadata_schema:
                db.execute(conn, f"CREATE SCHEMA IF NOT EXISTS {db.prefix.rstrip('.')}")
            for stmt in ddl.catalog_tables(version):
                db.execute(conn, db.dialect.ddl(stmt.replace("{schema}", db.prefix)))
            # snapshot 0 holds the schema main, as DuckDB's extension creates it
            first = Snapshot(0, dt.datetime.now(dt.timezone.utc), 0, 1, 0, changes_made='created_schema:"main"')
            db.execute(conn, *catalog_rows.snapshot(db.dialect, first))
            db.execute(conn, *catalog_rows.snapshot_changes(first))
            rows = [("version", version), ("created_by", CREATED_BY), ("data_path", stored),
                    ("encrypted", "false")]
            rows += sorted((options or {}).items())
            db.execute(conn, "INSERT INTO {p}ducklake_metadata (key, value) VALUES (:k, :v)",
                       [{"k": k, "v": v} for k, v in rows])
            main = SchemaInfo(0, str(uuid.uuid4()), "main", "main/", True, 0)
            db.execute(conn, *catalog_rows.schema(db.dialect, main, 0))
        return cls.open(loc, metadata_schema=metadata_schema)

    @classmethod
    def open(
        cls,
        catalog: str | CatalogLocation,
        *,
        data_path: str | None = None,
        metadata_schema: str | None = None,
    ) -> DuckLake:
        """Open an existing lake (written by this layer or by DuckDB 1.5). data_path overrides the stored one.

        Raises:
            CatalogConnectionError: the database cannot be reached.
            NotALakeError: the database holds no DuckLake.
            UnsupportedVersionError: the lake is of another spec version.
        """
        loc = parse_catalog(catalog) if isinstance(catalog, str) else catalog
        if loc.file_path and not os.path.exists(loc.file_path):
            raise NotALakeError(f"catalog file {loc.file_path!r} does not exist (create the lake first)")
        db = CatalogDB(loc, metadata_schema)
        with db.read() as conn:
            if not db.has_table(conn, "ducklake_metadata"):
                raise NotALakeError(
                    f"catalog {loc.render()!r} is not a DuckLake: it has no ducklake_metadata table"
                )
            # the catalog's layout first (its version is one of the options it holds)
            layout = spec_for(V1_0, db.catalog_columns(conn))
            # a 1.1 development layout versions options and scopes global ones 'global' instead of NULL
            current = " AND end_snapshot IS NULL" if layout.versioned_options else ""
            options = {
                k: v
                for k, v in db.query(conn, "SELECT key, value FROM {p}ducklake_metadata "
                                           f"WHERE (scope IS NULL OR scope = 'global'){current}")
            }
        version = options.get("version")
        if version not in READABLE_VERSIONS:
            raise UnsupportedVersionError(_version_message(loc, version))
        db.spec = replace(layout, version=version)
        if options.get("encrypted") == "true":
            raise UnsupportedVersionError(
                f"catalog {loc.render()!r} is an encrypted DuckLake; this layer cannot read or write encrypted files"
            )
        stored = options.get("data_path")
        if data_path is None and not stored:
            raise NotALakeError(f"catalog {loc.render()!r} has no data_path in ducklake_metadata")
        resolved = as_dir(_resolve_data_path(data_path if data_path is not None else stored or ""))
        return cls(db, resolved, options)

    @classmethod
    def exists(cls, catalog: str | CatalogLocation, *, metadata_schema: str | None = None) -> bool:
        """Whether the catalog database holds a lake (a file catalog that does not exist is not created).

        Raises:
            CatalogConnectionError: a server catalog cannot be reached.
        """
        loc = parse_catalog(catalog) if isinstance(catalog, str) else catalog
        if loc.file_path and not os.path.exists(loc.file_path):
            return False
        db = CatalogDB(loc, metadata_schema)
        try:
            with db.read() as conn:
                return db.has_table(conn, "ducklake_metadata")
        finally:
            db.dispose()

    @classmethod
    def open_or_create(cls, catalog: str | CatalogLocation, data_path: str, **kw: Any) -> DuckLake:
        """Open the lake if the catalog holds one, else create it with this data path."""
        loc = parse_catalog(catalog) if isinstance(catalog, str) else catalog
        db = CatalogDB(loc, kw.get("metadata_schema"))
        exists = True
        if loc.file_path and not os.path.exists(loc.file_path):
            exists = False
        else:
            with db.read() as conn:
                exists = db.has_table(conn, "ducklake_metadata")
        if exists:
            return cls.open(loc, metadata_schema=kw.get("metadata_schema"))
        return cls.create(loc, data_path, **kw)

    # reading -----------------------------------------------------------------------------------------------
    def snapshot(self, version: int | None = None, *, timestamp: dt.datetime | None = None) -> LakeState:
        """The lake at a snapshot: the latest, a version, or the last one at or before a timestamp.

        Raises:
            NoSuchSnapshotError: no such version (or it was expired), or the time is before the lake.
        """
        if version is None and timestamp is None:
            return self.cache.latest()
        with self.db.read() as conn:
            snap = find_snapshot(self.db, conn, version, timestamp)
            return load_state(self.db, conn, snap, self.data_path)

    def note_commit(self, done: CatalogBuilder, snapshot: Snapshot, token: object | None = None) -> None:
        """A transaction of this lake committed (LakeCache.on_commit)."""
        self.cache.on_commit(done, snapshot, token)

    def files_deleted(self, paths: Collection[str]) -> None:
        """Files of this lake were deleted (LakeCache.on_files_deleted)."""
        self.cache.on_files_deleted(paths)

    def advance(self, state: LakeState | None) -> tuple[LakeState, frozenset[int] | None]:
        """The lake at its latest snapshot and the ids of the tables changed since `state` (LakeCache.advance)."""
        return self.cache.advance(state)

    def snapshots(self) -> list[Snapshot]:
        """Every snapshot that exists, oldest first, with changes, author, message and extra info."""
        with self.db.read() as conn:
            return list_snapshots(self.db, conn)

    def latest_snapshot_id(self) -> int:
        return self.latest_snapshot().snapshot_id

    def latest_snapshot(self) -> Snapshot:
        """The latest snapshot's row (id, time, schema version, next ids), without loading the catalog state."""
        with self.db.read() as conn:
            return find_snapshot(self.db, conn)

    def option(self, name: str, table_id: int | None = None, schema_id: int | None = None) -> str | None:
        """A set_option value (table scope, then schema scope, then global), as DuckDB resolves it."""
        with self.db.read() as conn:
            return option_value(self.db, conn, name, table_id, schema_id)

    def write_options(self, table: TableInfo, staged: Mapping[str, str] | None = None) -> WriteOptions:
        """The Parquet layout options of the table's data files (table, schema, lake scope; DuckDB's defaults)."""
        from .write.layout import resolve

        return resolve(self.write_option_rows(), table, staged)

    def write_option_rows(self) -> list[tuple[str | None, int | None, str, str]]:
        """The write options set in the lake, any scope: (scope, scope_id, key, value), read in one query."""
        from .write.layout import WRITE_OPTIONS

        names = ", ".join(f"'{n}'" for n in WRITE_OPTIONS)
        current = " AND end_snapshot IS NULL" if self.db.spec.versioned_options else ""
        with self.db.read() as conn:
            rows = self.db.query(conn, "SELECT NULLIF(scope, 'global'), scope_id, key, value FROM {p}ducklake_metadata "
                                       f"WHERE key IN ({names}){current}")
        return [(s, None if s is None else i, k, v) for s, i, k, v in rows]

    def table_options(self, table_id: int) -> dict[str, str]:
        """The options set for one table (table scope only), as set_option(..., table_name => ...) stored them."""
        current = " AND end_snapshot IS NULL" if self.db.spec.versioned_options else ""
        with self.db.read() as conn:
            rows = self.db.query(conn, "SELECT key, value FROM {p}ducklake_metadata WHERE scope = 'table' AND "
                                       f"scope_id = :i{current}", {"i": table_id})
        return {k: v for k, v in rows}

    def set_option(self, name: str, value: str, *, schema_id: int | None = None, table_id: int | None = None) -> None:
        """Persist an option in ducklake_metadata (global, schema or table scope), as DuckDB's set_option does.

        Like the reference, this writes no snapshot. Example: set_option('data_inlining_row_limit', '0').
        As DuckDB does, target_file_size is stored in bytes ('512MB' -> '512000000': DuckDB reads it as an
        integer), auto_compact as 'true'/'false', and the *_older_than intervals are checked.

        Raises:
            ValueError: a value DuckDB would refuse for that option.
        """
        value = _option_text(name, value)
        if self.db.spec.versioned_options:
            raise UnsupportedVersionError(
                f"setting option {name!r}: this catalog versions its options by snapshot (a DuckLake 1.1 development "
                "layout of ducklake_metadata), which this version reads but does not write; set it with DuckDB")
        scope, scope_id = ("table", table_id) if table_id is not None else (
            ("schema", schema_id) if schema_id is not None else (None, None))
        with self.db.write() as conn:
            self.db.execute(conn, *catalog_rows.delete_option(name, scope, scope_id))
            self.db.execute(conn, *catalog_rows.option(name, str(value), scope, scope_id))
        if scope is None:
            self.options[name] = str(value)

    def set_inlining_limit(self, schema: str, table: str, limit: object) -> None:
        """The data_inlining_row_limit of schema.table for this process's commits, whatever the lake's options say
        (e.g. a dbt model's config). A commit that inserts into the table also stores it as the table's option, as
        DuckDB's set_option(..., table_name => ...) does, so DuckDB's inserts into it follow it too.

        Raises:
            ValueError: the limit is not a non-negative integer.
        """
        from .write.inlined_rows import parse_limit

        self.inlining_limits[(schema.lower(), table.lower())] = parse_limit(limit)

    def note_unknown_commit(self, attempt: CommitAttempt) -> None:
        """Remember a commit whose outcome is unknown: its files stay until the catalog says it did not land."""
        with self._unknown_lock:
            self._unknown.append(attempt)

    def resolve_unknown_commits(self) -> list[CommitAttempt]:
        """Ask the catalog about the commits whose outcome was unknown: those that landed are forgotten, the files of
        those that provably did not are removed; the rest stay unknown. Returns the attempts still unknown."""
        from .write.commit_outcome import outcome, remove_files

        with self._unknown_lock:
            pending, self._unknown = self._unknown, []
        still = []
        for attempt in pending:
            landed = outcome(self.db, attempt)
            if landed is None:
                still.append(attempt)
            elif not landed:
                remove_files(attempt)
                self.files_deleted(attempt.files)
        with self._unknown_lock:
            self._unknown[:0] = still
        return still

    def transaction(self, **kw: Any) -> Transaction:
        """Start staging changes; commit them as one snapshot (see Transaction)."""
        from .write.transaction import Transaction

        return Transaction(self, **kw)

    def duckdb_attach(self, alias: str = "lake") -> str:
        """The DuckDB statement that opens this lake: ATTACH 'ducklake:…' AS alias."""
        return f"ATTACH '{self.db.location.duckdb_attach_target()}' AS {alias}"

    def close(self) -> None:
        self.db.dispose()



def _option_text(name: str, value: Any) -> str:
    """The text DuckDB's set_option stores for a known option (others are stored as given)."""
    from .write.layout import WRITE_OPTIONS, boolean_text, option_text

    if name in WRITE_OPTIONS:
        return option_text(name, value)
    if name == "auto_compact":
        return boolean_text(name, value)
    if name in ("expire_older_than", "delete_older_than"):
        parse_interval(str(value))
    if name == "rewrite_delete_threshold":  # DuckDB stores C++'s to_string of the double: '0.500000'
        return f"{parse_threshold(value, name):f}"
    return str(value)


def _store_data_path(data_path: str) -> str:
    if not data_path:
        raise InvalidOptionError("data_path is empty: give the directory (or URI) where the lake's files go")
    if "://" in data_path and not data_path.startswith("file://"):
        return as_dir(data_path)
    local = os.path.abspath(os.path.expanduser(to_local(data_path)))
    return as_dir(local)


def _resolve_data_path(stored: str) -> str:
    if "://" in stored:
        return stored
    # DuckDB resolves a relative data_path against the working directory
    return os.path.abspath(stored) if not os.path.isabs(stored) else stored


def _version_message(loc: CatalogLocation, version: str | None) -> str:
    if version in ddl.OLDER_VERSIONS:
        return (
            f"catalog {loc.render()!r} holds a DuckLake of spec version {version} (written by DuckDB 1.4 or older); "
            f"this adapter reads and writes spec {ddl.SPEC_VERSION} (DuckDB 1.5). Migrate it once with DuckDB 1.5: "
            f"ATTACH '{loc.duckdb_attach_target()}' AS lake (AUTOMATIC_MIGRATION TRUE). Note that DuckDB's migration "
            "drops 0.3 partial-file info, so time travel into files merged under 0.3 can return duplicate rows."
        )
    if version is not None and _newer(version, "1.1"):
        return (
            f"catalog {loc.render()!r} holds a DuckLake of spec version {version}; this adapter reads and writes "
            f"specs {', '.join(READABLE_VERSIONS)} (DuckDB 1.5 and 2.0). A catalog stays at its version unless "
            "migrated: create lakes you share with this adapter as 1.1 (ATTACH 'ducklake:…' AS lake "
            "(DUCKLAKE_VERSION '1.1')) or 1.0 (DUCKLAKE_VERSION '1.0'), and do not migrate them"
        )
    return (
        f"catalog {loc.render()!r} holds a DuckLake of spec version {version!r}; this adapter reads and writes specs "
        f"{', '.join(READABLE_VERSIONS)} (in DuckDB 2.0, ATTACH ... (DUCKLAKE_VERSION '1.1') creates such a lake)"
    )


def _newer(version: str, than: str) -> bool:
    """Whether a spec version ('1.1') is after another ('1.0'); False for one that does not parse."""
    try:
        return tuple(int(x) for x in version.split(".")) > tuple(int(x) for x in than.split("."))
    except ValueError:
        return False

