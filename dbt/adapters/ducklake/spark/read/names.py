"""Keep DuckLake tables and views resolvable by their `schema.name` in Spark SQL, at the lake's latest snapshot.

Before a statement runs, `LakeNames.refresh(refs)` checks the latest snapshot (one catalog query) and (re)creates the
Spark views of the referenced lake objects whose definition changed since they were registered. A DuckLake view
whose Spark text is kept (tag `spark_sql`) becomes a Spark view of that text. Objects that no longer exist lose their
Spark view, so a dropped table fails to resolve instead of showing stale rows.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from typing import Protocol

import sqlglot
from pyspark.sql import SparkSession
from sqlglot import exp
from sqlglot.errors import ParseError

from ...lake.catalog.lookups import ci_lookup
from ...lake.catalog.state import LakeState
from ...lake.errors import MissingDataFileError
from ...lake.lake import DuckLake
from ...lake.records import TableInfo
from ..env.session import ensure_database, is_classic, is_started, session_of
from ..sql_literals import ident
from ..types import typed_reads
from .bound_reads import Key, rebind, view_refs
from .first_read import MARK as FIRST_READ
from .scan import create_view, is_time_travel_name, table_sql

# A table's view SQL is reused while the table is unchanged, but recomputed after this long: planning touches the
# manifest it reads, which keeps other processes' cleanup (manifest.KEEP_UNUSED_SECONDS) off it.
SQL_REUSE_SECONDS = 600.0
GLOBAL_TEMP = "global_temp"  # Spark's database of global temp views: never a lake schema
# the layer's own Spark databases (manifest and footer tables: spark/read/manifest.py DATABASE), never lake schemas
INTERNAL_PREFIX = "_ducklake_"
SPARK_SQL_TAG = "spark_sql"  # the Spark SQL text of a DuckLake view created from Spark (its row holds DuckDB SQL)
PRIVATE = "__ducklake_read_"  # the temporary views of bound reads (bound_reads): then a hash of their SQL
_VIEW_DEPTH = 32  # views of views bound for one statement (dbt's staging and intermediate layers)
_log = logging.getLogger(__name__)

ABSENT = ""  # a staged read of an object the unit does not have (dropped or renamed away): see staged_reads


def table_refs(sql: str) -> set[tuple[str, str]]:
    """The two-part names (schema, name), lower case, that a Spark SQL text refers to (empty if it does not parse)."""
    try:
        trees = sqlglot.parse(sql, read="spark")
    except (ParseError, ValueError):
        return set()
    refs = set()
    for tree in trees:
        if tree is None:
            continue
        for t in tree.find_all(exp.Table):
            if t.db and t.name:
                refs.add((t.db.lower(), t.name.lower()))
    return refs


class StagedReader(Protocol):
    """An open unit of work whose staged state statements must read (a build published as one snapshot)."""

    @property
    def touched(self) -> Collection[tuple[str, str]]: ...

    def read_sql(self, schema: str, name: str) -> str | None: ...


def aliased_sql(spark: SparkSession, sql: str, column_aliases: str) -> str:
    """A DuckLake view's SQL with its column aliases applied (`CREATE VIEW v(a, b) AS ...`, stored as '"a","b"'): the
    first columns renamed by position, the rest keep their names, as DuckDB reads the view."""
    aliases = next(csv.reader([column_aliases], skipinitialspace=True), [])
    columns = spark.sql(sql).columns  # the names the aliases do not cover
    names = [aliases[i] if i < len(aliases) else c for i, c in enumerate(columns)]
    return f"SELECT * FROM ({sql}) AS __ducklake_view({', '.join(ident(n) for n in names)})"


class LakeNames:
    """The Spark views standing for one lake's tables and views (one per lake and SparkSession, thread-safe)."""

    def __init__(self, spark: SparkSession, lake: DuckLake) -> None:
        self.spark = spark
        self.lake = lake
        self._lock = threading.RLock()
        self._state: LakeState | None = None
        # table id -> (its view SQL at self._state, when computed): carried to a newer state while the table is
        # unchanged (an unrelated commit does not re-plan 10,000 files)
        self._table_sql: dict[int, tuple[str, float]] = {}
        self._registered: dict[tuple[str, str], str] = {}  # (schema, name) lower -> SQL of the Spark view
        self._absent: dict[tuple[str, str], int] = {}  # Connect: not a lake object, server's view dropped at snapshot
        # while set, the objects it changed resolve to its staged state (staged_reads), not the latest snapshot
        self.staged: StagedReader | None = None
        # bound reads (see `bound`): private view -> the object it reads; each object's newest private view; how
        # many running statements read each private view (a view no statement reads and none newer stands for is
        # dropped)
        self._private: dict[str, Key] = {}
        self._newest: dict[Key, tuple[int, str]] = {}  # (snapshot bound at, private view)
        self._uses: Counter[str] = Counter()

    def reads_staged(self, refs: Iterable[tuple[str, str]], default_schema: str | None = None) -> bool:
        """Whether any of the names is an object the staged unit changed."""
        staged = self.staged
        if staged is None:
            return False
        touched = staged.touched
        return any(((s or default_schema or "").lower(), n.lower()) in touched for s, n in refs)

    def state(self) -> LakeState:
        """The lake at its latest snapshot (re-read only when a new snapshot exists). A snapshot is known by its id
        and time: a catalog restored from a copy can hold another snapshot under the same id."""
        with self._lock:
            new, changed = self.lake.advance(self._state)
            if new is not self._state:
                self._table_sql = {} if changed is None else {
                    tid: v for tid, v in self._table_sql.items() if tid not in changed}
                self._state = new
            return new

    def _sql_of(self, st: LakeState, table: TableInfo) -> str:
        """The table's view SQL at the state: reused from an earlier statement while the table is unchanged."""
        now = time.monotonic()
        if st is self._state:
            hit = self._table_sql.get(table.table_id)
            if hit is not None and now - hit[1] < SQL_REUSE_SECONDS:
                return hit[0]
        sql = table_sql(self.spark, st, table)
        if st is self._state and FIRST_READ not in sql:  # a first read's SQL gives way to the manifest once built
            self._table_sql[table.table_id] = (sql, now)
        return sql

    def refresh(self, refs: Iterable[tuple[str, str]], default_schema: str | None = None,
                state: LakeState | None = None) -> LakeState:
        """Make each referenced (schema, name) that is a lake table or view resolve to its latest version (or to its
        version in the given state: one statement reads one snapshot); the state they were registered from. An
        unqualified name (schema "") is looked up in `default_schema`; when the lake has it there, that schema becomes
        Spark's current database, so the bare name resolves to it (as a dbt-spark connection opened on the profile's
        schema does)."""
        refs = list(refs)
        st = state or self.state()
        if any(self._known(st, schema or default_schema or "", name) for schema, name in refs):
            session_of(self.spark)  # a lazy session starts here, not under the lock that other threads need
        with self._lock:
            for schema, name in refs:
                if schema:
                    self._refresh_one(st, schema, name)
                elif default_schema and (ci_lookup(st.tables, (default_schema, name)) is not None
                                         or ci_lookup(st.views, (default_schema, name)) is not None):
                    self._refresh_one(st, default_schema, name)
                    if self.spark.catalog.currentDatabase().lower() != default_schema.lower():
                        self.spark.catalog.setCurrentDatabase(default_schema)
            return st

    @contextlib.contextmanager
    def bound(self, refs: Iterable[Key], state: LakeState) -> Iterator[dict[Key, str]]:
        """Private relations reading the named lake tables and views at the state (bound_reads), valid inside the
        block: (schema, name) lower -> the relation to put in their place. Names that are no lake object at the
        state, objects of a staged build, and views whose SQL cannot be bound are left out (the shared names serve
        them: `refresh`)."""
        refs = [(s.lower(), n.lower()) for s, n in refs if s]
        if any(self._known(state, s, n) for s, n in refs):
            session_of(self.spark)  # a lazy session starts here, not under the lock that other threads need
        used: list[str] = []
        with self._lock:
            relations = {}
            for key in refs:
                rel = self._bind(state, key, used, 0)
                if rel is not None:
                    relations[key] = rel
            self._uses.update(used)
        try:
            yield relations
        finally:
            with self._lock:
                self._uses.subtract(used)
                self._drop_unused()

    def _bind(self, st: LakeState, key: Key, used: list[str], depth: int) -> str | None:
        if self.staged is not None and key in self.staged.touched:
            return None
        table = ci_lookup(st.tables, key)
        view = ci_lookup(st.views, key) if table is None else None
        columns = None
        if table is not None:
            sql = self._sql_of(st, table)
            what = f"{table.schema_name}.{table.name}"
            columns = table.columns
        elif view is not None and depth < _VIEW_DEPTH:
            text = view.tags.get(SPARK_SQL_TAG) or view.sql
            refs = view_refs(text)
            if refs is None:
                return None
            inner = {}
            for ref in refs - {key}:
                if ci_lookup(st.tables, ref) is None and ci_lookup(st.views, ref) is None:
                    continue  # not a lake object: Spark resolves it as it would in the view
                rel = self._bind(st, ref, used, depth + 1)
                if rel is None:
                    return None
                inner[ref] = rel
            sql = rebind(text, inner)
            if view.column_aliases:
                sql = aliased_sql(self.spark, sql, view.column_aliases)
            what = f"{view.schema_name}.{view.name}"
        else:
            return None
        if not is_classic(self.spark):
            return f"({sql})"  # Connect: the text itself (see bound_reads)
        name = PRIVATE + hashlib.sha256(sql.encode()).hexdigest()[:32]
        if name not in self._private:
            create_view(self.spark, name, sql, what, st.snapshot_id, temporary=True,
                        typed=lambda df: typed_reads(df, columns or ()))
            self._private[name] = key
        if self._newest.get(key, (-1, ""))[0] <= st.snapshot_id:  # a unit reading an older snapshot retires nothing
            self._newest[key] = (st.snapshot_id, name)
        used.append(name)
        return name

    def _drop_unused(self) -> None:
        """Drop the private views that no running statement reads and that stand for no object's newest version."""
        newest = {name for _, name in self._newest.values()}
        for name in [n for n in self._private if n not in newest and self._uses[n] <= 0]:
            del self._private[name]
            self._uses.pop(name, None)
            self.spark.catalog.dropTempView(name)

    def readable(self, sql: str, default_schema: str | None = None, state: LakeState | None = None) -> str:
        """The text, after the shared names of the lake objects it reads are made current (`refresh`)."""
        self.refresh(table_refs(sql), default_schema, state)
        return sql

    def _known(self, st: LakeState, schema: str, name: str) -> bool:
        """Whether refreshing (schema, name) may touch Spark: a lake object, or one registered before."""
        return bool(schema) and (ci_lookup(st.tables, (schema, name)) is not None
                                 or ci_lookup(st.views, (schema, name)) is not None
                                 or (schema.lower(), name.lower()) in self._registered)

    def refresh_all(self) -> None:
        """Re-register every lake object at the latest snapshot (after maintenance changed files). An object that
        cannot be read now (a missing or damaged file) loses its view: a statement naming it fails then, naming the
        file, and the others stay readable."""
        with self._lock:
            st = self.state()
            for schema, name in list(st.tables) + list(st.views):
                try:
                    self._refresh_one(st, schema, name)
                except MissingDataFileError:
                    _log.debug("%s.%s not registered: a file of it is missing or damaged", schema, name,
                                exc_info=True)
                    self.forget(schema, name)

    def invalidate(self, refs: Iterable[tuple[str, str]]) -> None:
        """After a commit changed these objects: drop their Spark views rather than re-register them now (a CREATE
        VIEW analysis per object); the next statement naming one registers it at its new version (`refresh`), and
        a direct Spark read of one meanwhile fails instead of reading the previous version.

        On Spark Connect the views are the server's, shared by other processes: a drop would make their next read
        of a name they think current fail. Only this process's registration is forgotten, so its next statement
        naming one re-registers it; the server's view reads the previous version until then. Every other process
        re-registers when its own state shows the change (its SQL of the table differs from what it registered)."""
        classic = is_classic(self.spark)
        with self._lock:
            for schema, name in refs:
                key = (schema.lower(), name.lower())
                if key not in self._registered:
                    continue
                if classic:
                    self.forget(schema, name)
                else:
                    del self._registered[key]

    def forget(self, schema: str, name: str) -> None:
        """Drop the Spark view of an object (after the lake dropped or renamed it)."""
        with self._lock:
            key = (schema.lower(), name.lower())
            self._newest.pop(key, None)  # its private views go once no statement reads them
            if not is_started(self.spark):  # a Spark that never started holds no view
                self._registered.pop(key, None)
                return
            if self._registered.pop(key, None) is not None or self._exists(schema):
                self.spark.sql(f"DROP VIEW IF EXISTS {ident(schema)}.{ident(name)}")

    def _refresh_staged(self, st: LakeState, schema: str, name: str) -> bool:
        """Register the object as the staged unit has it; False when the unit did not change it."""
        assert self.staged is not None
        sql = self.staged.read_sql(schema, name)
        if sql is None:
            return False
        key = (schema.lower(), name.lower())
        if sql == ABSENT:
            if key in self._registered:
                self.forget(schema, name)
            return True
        for ref in table_refs(sql):  # a staged view: what it reads must resolve too (a table's SQL reads files)
            if ref != key and (ref in self.staged.touched or ci_lookup(st.tables, ref) is not None
                               or ci_lookup(st.views, ref) is not None):
                self._refresh_one(st, *ref)
        if self._registered.get(key) != sql:
            ensure_database(self.spark, schema)
            create_view(self.spark, f"{ident(schema)}.{ident(name)}", sql, f"{schema}.{name} (staged)", st.snapshot_id)
            self._registered[key] = sql
        return True

    def _exists(self, schema: str) -> bool:
        return any(d.name.lower() == schema.lower() for d in self.spark.catalog.listDatabases())

    def _refresh_one(self, st: LakeState, schema: str, name: str) -> None:
        key = (schema.lower(), name.lower())
        if self.staged is not None and self._refresh_staged(st, schema, name):
            return
        table = ci_lookup(st.tables, (schema, name))
        view = ci_lookup(st.views, (schema, name)) if table is None else None
        if table is not None:
            sql = self._sql_of(st, table)
            schema, name = table.schema_name, table.name
        elif view is not None:
            sql = view.tags.get(SPARK_SQL_TAG) or view.sql
            schema, name = view.schema_name, view.name
            for ref in table_refs(sql):  # what the view reads must resolve too
                if ref != key:
                    self._refresh_one(st, *ref)
            if view.column_aliases:
                sql = aliased_sql(self.spark, sql, view.column_aliases)
        else:
            if key in self._registered:
                self.forget(schema, name)
            elif (not is_classic(self.spark) and schema.lower() != GLOBAL_TEMP and not is_time_travel_name(name)
                  and not schema.lower().startswith(INTERNAL_PREFIX) and self._absent.get(key) != st.snapshot_id):
                # a Connect server outlives this process: its view of an object the lake no longer has (dropped by
                # an earlier process or by DuckDB) would show stale rows; dropped once per snapshot (time-travel
                # views are not lake objects, and never stale)
                self.spark.sql(f"DROP VIEW IF EXISTS {ident(schema)}.{ident(name)}")
                self._absent[key] = st.snapshot_id
            return
        if self._registered.get(key) == sql:
            return
        ensure_database(self.spark, schema)
        create_view(self.spark, f"{ident(schema)}.{ident(name)}", sql, f"{schema}.{name}", st.snapshot_id)
        self._registered[key] = sql
        self._absent.pop(key, None)
