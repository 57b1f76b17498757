"""A DB-API-shaped cursor over Spark and the lake: the bridge of the design.

Each statement is routed (`router.route`): BEGIN/COMMIT/ROLLBACK open and close the connection's `LakeWork`;
changes to lake objects are staged in it (or, outside a transaction, committed on their own); everything else runs
in Spark after the lake names it reads are brought up to date.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from dbt_common.exceptions import DbtRuntimeError
from pyspark.sql import DataFrame
from sqlglot import exp

from .apply import apply_change
from .lake.catalog.lookups import ci_lookup
from .lake.catalog.state import LakeState
from .relation_listing import show_relations
from .router import (
    Change,
    Ctas,
    Delete,
    Insert,
    Merge,
    Passthrough,
    ShowRelations,
    TempView,
    TransactionControl,
    Update,
    route,
    split_statements,
    written_target,
)
from .spark.answer.literal_row import LiteralRow
from .spark.answer.read_pruning import PrunedQuery, pruned_reads
from .spark.env.session import tag_jobs
from .spark.read.bound_reads import parse, read_refs, rebind, unbound
from .spark.read.names import table_refs
from .spark.sql_literals import python_literal

if TYPE_CHECKING:
    from .credentials import DuckLakeCredentials
    from .runtime import Runtime
    from .spark.write.work import LakeWork


T = TypeVar("T")
# the changes whose query or conditions Spark runs (INSERT OVERWRITE is an Insert): their reads are bound
BOUND_CHANGES = (Ctas, Insert, Delete, Update, Merge)


def render_bindings(sql: str, bindings: Sequence[Any] | None) -> str:
    """%s placeholders filled with Spark SQL literals (dbt passes seed and test values this way)."""
    if not bindings:
        return sql
    return sql % tuple(python_literal(v) for v in bindings)


class StatementHost(Protocol):
    """What a cursor uses of the connection that opens it (connections.DuckLakeHandle): its runtime, its profile, its
    unit of work and its Ctrl-C state. Named here so that the cursor does not import the module that makes it."""

    runtime: Runtime
    creds: DuckLakeCredentials
    job_tag: str
    running: int
    cancelled: bool

    def begin(self) -> None: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    def read_state(self) -> LakeState: ...

    def run_change(self, stage: Callable[[LakeWork], int], change: Change, base: LakeState | None = None) -> int: ...


class DuckLakeCursor:
    def __init__(self, handle: StatementHost) -> None:
        self.handle = handle
        self._df: DataFrame | None = None
        self._description: list[tuple] | None = None  # of a result computed without Spark (`_answered`)
        self._rows: list[tuple] | None = None
        self._complete = False  # _rows holds every row of the result
        self._pos = 0
        self.rowcount = -1
        self.message = "OK"

    # DB-API ----------------------------------------------------------------------------------------------------
    def execute(self, sql: str, bindings: Sequence[Any] | None = None) -> None:
        self._df, self._rows, self._pos, self.rowcount, self._complete = None, None, 0, -1, False
        self._description = None
        h = self.handle
        if h.cancelled:
            raise DbtRuntimeError("cancelled (Ctrl-C): no more statements run on this connection")
        h.running += 1
        try:
            tag_jobs(h.runtime.spark, h.job_tag)
            for stmt in split_statements(render_bindings(sql, bindings)):
                self._execute_one(stmt)
        finally:
            h.running -= 1

    def _execute_one(self, sql: str) -> None:
        h = self.handle
        routed = route(sql)
        self._df, self._rows, self._pos, self._complete, self._description = None, None, 0, False, None
        if isinstance(routed, TransactionControl):
            {"begin": h.begin, "commit": h.commit, "rollback": h.rollback}[routed.action]()
            self.message = routed.action.upper()
            return
        rt = h.runtime
        if isinstance(routed, ShowRelations):
            state = rt.names.state()
            current = rt.spark.catalog.currentDatabase()
            self._df = show_relations(rt.spark, state, routed,
                                      current if ci_lookup(state.schemas, current) is not None else h.creds.schema)
            self.message = "OK"
            return
        if isinstance(routed, Passthrough):
            with self._pruned(rt, routed.sql, routed.refs) as q:
                if q.row is not None:  # a row of literals (a data test's counts): computed here, no Spark
                    self._answered(q.row)
                    return
                df = rt.spark.sql(q.sql)
            self._df = df if df.columns else None
            self.message = "OK"
            return
        if isinstance(routed, TempView):
            # a DataFrame's temp view holds the analyzed plan: describing it or reading it (the incremental
            # materialization does both) does not analyze the model's SQL, and the lake views it reads, again
            with self._pruned(rt, routed.query, routed.refs) as q:
                df = rt.spark.sql(q.sql)
                (df.createOrReplaceTempView if routed.replace else df.createTempView)(routed.name)
            self.message = "OK"
            return
        assert isinstance(routed, Change)
        state = h.read_state()
        with self._bound_change(rt, sql, routed, state) as change:
            self.rowcount = h.run_change(lambda work: apply_change(rt.spark, work, change), change, state)
        self.message = routed.kind.upper() + (f" {self.rowcount}" if self.rowcount >= 0 else "")

    def _bound_change(self, rt: Runtime, sql: str, routed: Change, state: LakeState
                      ) -> contextlib.AbstractContextManager[Change]:
        """The change with the lake names its query or conditions read bound to the statement's snapshot
        (spark/read/bound_reads), for the kinds whose reads Spark runs; the others (a CREATE VIEW stores its text) read
        the shared names."""
        if not isinstance(routed, BOUND_CHANGES):
            rt.names.refresh(routed.refs, self.handle.creds.schema, state)
            return contextlib.nullcontext(routed)

        def use(text: str) -> Change:
            again = routed if text == sql else route(text)
            if type(again) is type(routed):
                return again  # type: ignore[return-value]
            # the bound text routes otherwise (sqlglot reads it another way): the change reads the shared names
            rt.names.refresh(routed.refs, self.handle.creds.schema, state)
            return routed

        return self._bound(rt, sql, routed.refs, state, written_target, use)

    def _answered(self, row: LiteralRow) -> None:
        self._rows, self._complete = [row.values], True
        self._description = [(name, kind, None, None, None, None, False) for name, kind in row.columns]
        self.message = "OK"

    @contextlib.contextmanager
    def _bound(self, rt: Runtime, sql: str, refs: frozenset[tuple[str, str]], state: LakeState,
               written: Callable[[exp.Expr], exp.Expr | None] | None, use: Callable[[str], T]
               ) -> Iterator[T]:
        """use(the statement's text with its lake reads bound to the state), valid inside the block; the names it
        still reads by their shared names (unqualified, or not bindable) are made current at the state."""
        default_schema = self.handle.creds.schema
        tree = parse(sql)
        bindable = read_refs(tree, written(tree) if written else None) if tree is not None else set()
        with rt.names.bound(bindable, state) as relations:
            rt.names.refresh(unbound(refs, relations), default_schema, state)
            yield use(rebind(sql, relations, tree, written))

    @contextlib.contextmanager
    def _pruned(self, rt: Runtime, sql: str, refs: frozenset[tuple[str, str]]) -> Iterator[PrunedQuery]:
        """The statement with its filtered lake-table reads pruned to the files that can match (spark/answer/read_pruning)
        and its other lake reads bound to the statement's snapshot (spark/read/bound_reads), valid inside the block (on
        Spark Connect, which resolves a DataFrame's relations lazily, after it too: no temporary views there)."""
        h = self.handle
        default_schema = h.creds.schema
        # statements reading a build's staged state read it whole: the catalog's stats do not know staged files
        if not refs or rt.names.reads_staged(refs, default_schema):
            rt.names.refresh(refs, default_schema)
            yield PrunedQuery(sql)
            return
        state = h.read_state()
        with contextlib.ExitStack() as held:

            def bind(text: str) -> str:
                """The text with its lake reads bound to the state, valid until the statement ends (nothing is bound,
                and no Spark started, for a statement the catalog or the driver answers)."""
                tree = parse(text)
                relations = held.enter_context(rt.names.bound(read_refs(tree) if tree is not None else set(), state))
                rt.names.refresh(unbound(table_refs(text), relations), default_schema, state)
                return rebind(text, relations, tree)

            # a subquery the pruning runs reads the same snapshot (bind)
            with pruned_reads(rt.spark, state, sql, bind) as q:
                if q.row is None:  # a table read only through pruned views needs no Spark name of its own
                    q.sql = bind(q.sql)
                    # bare names (the profile's schema) resolve through the shared names
                    rt.names.refresh({r for r in refs - q.replaced if not r[0]}, default_schema, state)
                else:
                    rt.names.refresh(refs - q.replaced, default_schema, state)
                yield q

    @property
    def description(self) -> list[tuple] | None:
        if self._description is not None:
            return self._description
        if self._df is None:
            return None
        return [(f.name, f.dataType.simpleString(), None, None, None, None, f.nullable) for f in self._df.schema.fields]

    def _fetch(self, upto: int | None = None) -> list[tuple]:
        """The result's rows, at least the first `upto` of them (all when None): a fetchmany collects only what it
        needs, and a later fetch collects the rest instead of losing it."""
        if self._df is None:
            self._rows = self._rows or []
            self._complete = True
        elif self._rows is None or not (self._complete or (upto is not None and upto <= len(self._rows))):
            df = self._df if upto is None else self._df.limit(upto)
            self.handle.running += 1  # a Ctrl-C meanwhile cancels this job too
            try:
                self._rows = [tuple(r) for r in df.collect()]
            finally:
                self.handle.running -= 1
            self._complete = upto is None or len(self._rows) < upto
        return self._rows

    def fetchall(self) -> list[tuple]:
        rows = self._fetch()[self._pos:]
        self._pos += len(rows)
        return rows

    def fetchmany(self, size: int) -> list[tuple]:
        rows = self._fetch(self._pos + size)[self._pos:self._pos + size]
        self._pos += len(rows)
        return rows

    def fetchone(self) -> tuple | None:
        rows = self.fetchmany(1)
        return rows[0] if rows else None

    def close(self) -> None:
        self._df, self._rows, self._description = None, None, None
