"""Queries that read only the data files their WHERE can match: file pruning for Spark SQL text.

A lake table read directly by a SELECT (the only relation of its FROM, no joins) under a WHERE whose conditions the
files' column statistics can decide is read from a temporary view over the matching files only (`scan.table_sql`
with a predicate, so their delete files only too). The WHERE stays as written: the pruned view yields a superset of
the rows the WHERE keeps (`lake.pruning` drops a file only when its statistics prove no row of it matches, deleted
rows included), so the query's result is unchanged. On Spark Connect, whose DataFrames are analyzed on the server
each time they are used (after the block has dropped a view), the pruned SELECT stands in the text itself, as a
derived table: its text is bounded (manifest reads, `scan.plan_sql`), as a view's is.

An uncorrelated scalar subquery compared with one of the table's columns (dbt's incremental filter
`updated_at > (SELECT max(updated_at) FROM this)`) is evaluated first (one small Spark job) and its value replaces it
in the text as an exact literal: the value that pruned is the value that filters, and Spark does not compute it
twice. Uncorrelated is proven by Spark: the subquery alone must analyze (a reference to an outer column would not
resolve), and it must not name a CTE of the statement (alone, that name would resolve to something else).

Scalar subqueries anywhere in a query that aggregate a whole lake table with max/min/count(*) (`(SELECT
coalesce(max(id), -1) FROM this)` over a source that is no lake table) are answered from the catalog when its
statistics are exact, as DuckDB answers them: Spark then reads none of the table's files (many small ones after
frequent appends).

An aggregate without GROUP BY over a derived table whose lake-table read the statistics prune to nothing (dbt's
data tests: `select count(*) as failures, ... from (select c from t where c is null) dbt_internal_test`, with no
NULL in any file's statistics) is answered without a read: one row, each count 0. Answers of literals select from a
one-row local table, which Spark projects on the driver (a FROM-less SELECT runs a Spark job).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import sqlglot
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from ...lake.catalog.lookups import ci_lookup
from ...lake.catalog.state import LakeState
from ...lake.errors import UnsupportedTypeError
from ...lake.read.inlined import read_inlined
from ...lake.read.pruning import And, IsNull, Or, Predicate, all_of
from ...lake.read.scan import ScanPlan, plan_scan, row_count
from ...lake.records import Column, TableInfo
from ...lake.types import INT_RANGES, parse_type, sort_key
from ..env.session import is_classic
from ..read.names import SPARK_SQL_TAG
from ..read.predicates import column_ref, to_predicate, unparen
from ..read.scan import plan_sql
from ..sql_literals import ident, string_literal
from ..types import to_spark
from .literal_row import LiteralRow, literal_row
from .small_counts import count_rows
from .small_queries import count_query_rows

_COMPARE = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
_TABLE_ARGS = frozenset({"this", "db", "alias"})  # a plain `schema.table [alias]`: no time travel, sample, hints
_views = itertools.count()
_log = logging.getLogger(__name__)
# a one-row local relation: Spark folds a projection of literals over it on the driver (no job; a FROM-less SELECT
# scans its one-row relation in a job)
ONE_ROW = " FROM VALUES (0) AS __ducklake_one(__ducklake_one)"


@dataclass
class PrunedQuery:
    """The query text to run, the temporary views it reads (dropped after analysis), and per pruned table
    (schema, name) the files it reads and skips."""

    sql: str
    views: list[str] = field(default_factory=list)
    files: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    replaced: set[tuple[str, str]] = field(default_factory=set)  # (schema, name) lower: no read of it is left
    row: LiteralRow | None = None  # the answer itself when `sql` is a row of literals the driver computes
    pending: list[tuple[str, Callable[[], str]]] = field(default_factory=list)  # views to make: (name, their SQL)


# makes the lake names a text reads readable at the statement's snapshot; returns the text to run (bound_reads)
Refresh = Callable[[str], str]


def _no_refresh(sql: str) -> str:
    return sql


@contextlib.contextmanager
def pruned_reads(spark: SparkSession, state: LakeState, sql: str, refresh: Refresh = _no_refresh
                 ) -> Iterator[PrunedQuery]:
    """The query with its prunable lake-table reads replaced (see the module); the views it needs live until exit.

    On a classic SparkSession, whose DataFrames hold their analyzed plan, analyze the query inside the block; on
    Spark Connect the text needs no view (derived tables) and stays valid after it.
    refresh: makes the lake names of a subquery readable before it is run, and gives the text to run (the
    statement's other names are the caller's: `PrunedQuery.replaced` need not be).
    """
    q = prune_query(spark, state, sql, refresh)
    try:
        yield q
    finally:
        for v in q.views:
            spark.catalog.dropTempView(v)


def prune_query(spark: SparkSession, state: LakeState, sql: str, refresh: Refresh = _no_refresh) -> PrunedQuery:
    """See the module; the query unchanged when nothing can be pruned (or it is not a plain query)."""
    out = PrunedQuery(sql)
    lower = sql.lower()
    if not state.tables or not any(w in lower for w in ("where", "count", "max", "min")):
        return out
    try:
        tree = sqlglot.parse_one(sql, read="spark")
        tokens = sqlglot.tokenize(sql, read="spark")
    except (ParseError, TokenError, ValueError):
        return out
    counted = _count_from_catalog(state, tree)
    if counted is not None:
        out.sql, out.replaced = counted
        return out
    if not isinstance(tree, exp.Query) or any(c.args.get("db") for c in tree.find_all(exp.Column)):
        return out  # not a query, or schema.table.column names (renaming the table would break them)
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    inline = not is_classic(spark)  # see the module: derived tables instead of temporary views
    edits: list[tuple[int, int, str]] = []  # (start, end exclusive, replacement) in the original text
    empty: set[int] = set()  # ids of the tree's SELECTs proven to yield no row
    try:
        if "where" in lower:
            done: set[int] = set()
            for select in list(tree.find_all(exp.Select)):
                if id(select) in done or any(s <= _start(select) < e for s, e, _ in edits):
                    continue  # pruned with the SELECT filtering it, or inside a subquery replaced by its value
                star = _star_subquery(select)
                if star is not None:  # dbt's `where` config: (select * from t where ...) dbt_subquery where ...
                    done.add(id(star[0]))
                    edits += _prune_select(spark, state, sql, tokens, star[0], ctes, out, refresh, inline, empty,
                                           also=(select.args["where"].this, star[1]), owner=select)
                else:
                    edits += _prune_select(spark, state, sql, tokens, select, ctes, out, refresh, inline, empty)
        if "count" in lower:
            answered = _aggregate_answer(tree, lambda q: 0 if id(q) in empty else _counted(state, q))
            if answered is not None:  # the pruned reads' views are not needed (nor made: `pending`)
                return PrunedQuery(answered.sql(dialect="spark") + ONE_ROW, row=literal_row(answered),
                                   replaced={(t.db.lower(), t.name.lower()) for t in tree.find_all(exp.Table) if t.db})
        edits += _answered_subqueries(state, tree, tokens, edits)
        for view, view_sql in out.pending:
            spark.sql(view_sql()).createOrReplaceTempView(view)
            out.views.append(view)
        out.pending = []
    except BaseException:
        for v in out.views:
            spark.catalog.dropTempView(v)
        raise
    if not edits:
        return out
    left = set()
    for t in tree.find_all(exp.Table):
        if t.db and not any(s <= _start(t) < e for s, e, _ in edits):
            left.add((t.db.lower(), t.name.lower()))
    out.replaced = {(t.db.lower(), t.name.lower()) for t in tree.find_all(exp.Table) if t.db} - left
    text = sql
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    out.sql = text
    return out


def _one_column_select(tree: exp.Expr) -> exp.Expr | None:
    """The one expression of `SELECT <expression> FROM <relation>` with nothing else (no WHERE, GROUP BY, DISTINCT,
    join, limit); None for any other shape."""
    if not isinstance(tree, exp.Select) or set(k for k, v in tree.args.items() if v) != {"expressions", "from_"}:
        return None
    return tree.expressions[0] if len(tree.expressions) == 1 else None


def _count_from_catalog(state: LakeState, tree: exp.Expr) -> tuple[str, set[tuple[str, str]]] | None:
    """`SELECT count(*) FROM schema.table` answered from the catalog, as DuckDB answers it: live files' record counts
    minus their deleted rows plus inlined rows (`lake.scan.row_count`), exact unless a partial file reaches beyond the
    snapshot. Any other shape (a WHERE, a GROUP BY, a join, DISTINCT, another expression) is left to Spark."""
    node = _one_column_select(tree)
    if node is None:
        return None
    alias = node.alias if isinstance(node, exp.Alias) else None
    agg = node.this if isinstance(node, exp.Alias) else node
    if not isinstance(agg, exp.Count) or not isinstance(agg.this, exp.Star) or agg.args.get("big_int") is False:
        return None
    table = _plain_table(state, tree.args["from_"].this)
    literal = _count_literal(state, table) if table is not None else None
    if table is None or literal is None:
        return None
    name = ident(alias) if alias else "`count(1)`"  # Spark's name for an unaliased count(*)
    return f"SELECT {literal} AS {name}{ONE_ROW}", {(table.schema_name.lower(), table.name.lower())}


def _count_literal(state: LakeState, table: TableInfo) -> str | None:
    """count(*) of the table as DuckDB answers it from the catalog (`lake.scan.row_count`), as a Spark literal; None
    when a partial file reaches beyond the snapshot (the count would not be exact)."""
    if state.has_partial_beyond(table):
        return None
    return f"CAST({row_count(state, table)} AS BIGINT)"


def _start(node: exp.Expr) -> int:
    starts = [i.meta["start"] for i in node.find_all(exp.Identifier) if "start" in i.meta]
    return min(starts) if starts else -1


def _prune_select(spark: SparkSession, state: LakeState, sql: str, tokens: list[Token], select: exp.Select,
                  ctes: set[str], out: PrunedQuery, refresh: Refresh, inline: bool, empty: set[int],
                  also: tuple[exp.Expr, str] | None = None, owner: exp.Select | None = None
                  ) -> list[tuple[int, int, str]]:
    """Edits reading the SELECT's lake table from the files its WHERE can match. also: a condition on the SELECT's
    rows applied by owner, the SELECT whose derived table it is (a `SELECT *`), as (condition, the derived table's
    alias): files that cannot match both conditions give owner no row. The SELECT proven to yield no row (owner
    when given) goes into empty."""
    where = select.args.get("where")
    source = select.args.get("from_")
    if (where is None and also is None) or source is None or select.args.get("joins") or select.args.get("laterals"):
        return []
    tnode = source.this
    table = _plain_table(state, tnode)
    if table is None:
        try:
            _prove_empty_through_views(state, tnode, where, also, owner or select, empty)
        except (KeyError, AttributeError, TypeError, ValueError, ParseError, TokenError):
            _log.debug("not proven empty (unexpected shape)", exc_info=True)  # an optimization never fails a query
        return []
    qualifier = tnode.alias or tnode.name
    columns = {c.name.lower(): c for c in table.columns}
    edits: list[tuple[int, int, str]] = []
    condition = where.this.copy() if where is not None else exp.true()
    # scalar subqueries compared with a column: evaluated, their value in place (in the copy to translate, and in
    # the text to run)
    for cmp in list(condition.find_all(*_COMPARE)):
        for side, other in (("expression", cmp.this), ("this", cmp.expression)):
            sub = unparen(cmp.args[side])
            col = _column(other, columns, qualifier)
            if not isinstance(sub, exp.Subquery) or col is None:
                continue
            span = _paren_span(tokens, sub)
            value = _scalar(spark, state, sql, span, sub, ctes, col, refresh) if span else None
            if span is None or value is None:
                continue
            literal_sql, text = value
            edits.append((span[0], span[1], f"({literal_sql})"))
            cmp.set(side, exp.Literal.string(text))
    parts = [to_predicate(condition.sql(dialect="spark"), table.columns, (None, qualifier))]
    if also is not None:
        parts.append(to_predicate(also[0].sql(dialect="spark"), table.columns, (None, also[1])))
    predicate = all_of([p for p in parts if p is not None])
    if predicate is None:
        return edits
    plan, nothing = _plan_or_nothing(state, table, predicate)
    if nothing and _no_row_of_nothing(owner or select):
        empty.add(id(owner or select))
    if not plan.pruned and not nothing:
        return edits
    if inline or nothing:  # nothing: a derived table of no row costs Spark no view (and no analysis of one)
        view = f"({plan_sql(spark, state, table, plan)})"
    else:
        # made once the query is known not to be answered without Spark (`prune_query`)
        view = f"__ducklake_pruned_{next(_views)}"
        out.pending.append((view, lambda: plan_sql(spark, state, table, plan)))
    out.files[(table.schema_name, table.name)] = (len(plan.files), plan.pruned)
    start, end = tnode.args["db"].meta["start"], tnode.this.meta["end"] + 1
    edits.append((start, end, view if tnode.alias else f"{view} AS {ident(tnode.name)}"))
    return edits


_NOT_A_COLUMN = "__ducklake_not_a_column"  # a name no table has: conditions on it translate to nothing
_VIEW_DEPTH = 16  # views of views: dbt's staging and intermediate layers


def _prove_empty_through_views(state: LakeState, tnode: exp.Expr, where: exp.Where | None,
                               also: tuple[exp.Expr, str] | None, owner: exp.Select, empty: set[int]) -> None:
    """Put owner into empty when its FROM item is a lake view that projects plain columns of one lake table
    (through nested views too, each maybe filtered) and no file of that table can hold a row meeting the views'
    conditions and these (dbt's data tests of view models): the read itself stays as written."""
    found = _projection_of(state, tnode, 0)
    if found is None or not _no_row_of_nothing(owner):
        return
    table, names, known = found
    qualifier = tnode.alias_or_name
    for condition, q in ((where.this if where is not None else None, qualifier), also or (None, "")):
        if condition is not None:
            pred = to_predicate(_renamed(condition, q, names).sql(dialect="spark"), table.columns)
            known = known + ([pred] if pred is not None else [])
    predicate = all_of(known)
    if predicate is not None and _plan_or_nothing(state, table, predicate)[1]:
        empty.add(id(owner))


def _plan_or_nothing(state: LakeState, table: TableInfo, predicate: Predicate) -> tuple[ScanPlan, bool]:
    """The table's files the predicate may match, and whether no row can (no such file, no inlined row): files and
    inlined rows read in one catalog connection when the files are not loaded yet (a DuckDB-file catalog costs a
    database open per connection)."""
    with contextlib.nullcontext() if state.files_loaded(table) else state.db.reading():
        plan = plan_scan(state, table, predicate, positions=False)
        return plan, not plan.files and _no_inlined_match(state, table, predicate)


def _no_inlined_match(state: LakeState, table: TableInfo, predicate: Predicate) -> bool:
    """Whether no inlined row of the table satisfies the predicate, decided on the rows for IS [NOT] NULL of a
    top-level column (and AND / OR of such); any other condition may match a row."""
    columns = {c.name.lower(): c for c in table.columns}

    def none(p: Predicate, rows: pa.Table) -> bool:
        if isinstance(p, IsNull):
            col = columns.get(p.column.lower())
            if col is None or col.is_nested or col.name not in rows.column_names:
                return False
            nulls = rows.column(col.name).null_count
            return nulls == len(rows) if p.negated else nulls == 0
        if isinstance(p, And):
            return any(none(x, rows) for x in p.parts)
        if isinstance(p, Or):
            return all(none(x, rows) for x in p.parts)
        return False

    return all(none(predicate, rows) for rows in read_inlined(state, table, with_rowid=False) if len(rows))


def _projection_of(state: LakeState, tnode: exp.Expr, depth: int
                   ) -> tuple[TableInfo, dict[str, str], list[Predicate]] | None:
    """(the lake table, the relation's column names (lower) -> the table's columns, conditions on the table's
    columns its rows meet) when the FROM item is a lake table, or a lake view `SELECT <columns [AS name]> | *
    FROM <such a relation> [WHERE ...]`; None for anything else."""
    table = _plain_table(state, tnode)
    if table is not None:
        return table, {c.name.lower(): c.name for c in table.columns}, []
    if depth >= _VIEW_DEPTH or not isinstance(tnode, exp.Table) or not tnode.db or tnode.catalog or set(
            k for k, v in tnode.args.items() if v) - _TABLE_ARGS:
        return None
    view = ci_lookup(state.views, (tnode.db, tnode.name))
    if view is None or view.column_aliases:
        return None  # not a view, or its columns renamed by position
    try:
        sel = sqlglot.parse_one(view.tags.get(SPARK_SQL_TAG) or view.sql, read="spark")  # as names.py registers it
    except (ParseError, TokenError, ValueError):
        return None
    if (not isinstance(sel, exp.Select) or sel.args.get("from_") is None
            or set(k for k, v in sel.args.items() if v) - {"expressions", "from_", "where"}):
        return None  # not a plain SELECT ... FROM (a FROM-less view of literals, a join, an aggregate, ...)
    inner = _projection_of(state, sel.args["from_"].this, depth + 1)
    if inner is None:
        return None
    table, names, known = inner
    qualifier = sel.args["from_"].this.alias_or_name
    out: dict[str, str] = {}
    for e in sel.expressions:
        if type(e) is exp.Star:
            for k, v in names.items():
                out[k] = _NOT_A_COLUMN if k in out else v
            continue
        ref = column_ref(e.this if isinstance(e, exp.Alias) else e)
        if ref is None or (ref[0] is not None and ref[0].lower() != qualifier.lower()) or ref[1].lower() not in names:
            return None  # an expression: its values are not the table's
        key = e.alias_or_name.lower()
        out[key] = _NOT_A_COLUMN if key in out else names[ref[1].lower()]  # a repeated name is ambiguous
    where = sel.args.get("where")
    if where is not None:
        pred = to_predicate(_renamed(where.this, qualifier, names).sql(dialect="spark"), table.columns)
        known = known + ([pred] if pred is not None else [])
    return table, out, known


def _renamed(condition: exp.Expr, qualifier: str, names: dict[str, str]) -> exp.Expr:
    """The condition with the relation's column references (bare or by qualifier) as the table's unqualified
    column names; a name the relation lacks, or another relation's column, becomes one no table has."""
    def rename(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            q = node.table
            mine = (not q or q.lower() == qualifier.lower()) and not node.args.get("db")
            name = names.get(node.name.lower(), _NOT_A_COLUMN) if mine else _NOT_A_COLUMN
            return exp.column(name, quoted=True)
        return node
    return condition.copy().transform(rename)


def _star_subquery(select: exp.Select) -> tuple[exp.Select, str] | None:
    """(the derived table's SELECT, its alias) when the SELECT filters (WHERE, no join) a derived table that is a
    `SELECT * FROM <table> [WHERE ...]`: its rows are the table's, under the table's column names."""
    source = select.args.get("from_")
    if (select.args.get("where") is None or source is None or select.args.get("joins")
            or select.args.get("laterals")):
        return None
    sub = source.this
    if not isinstance(sub, exp.Subquery) or not sub.alias or not isinstance(sub.this, exp.Select):
        return None
    inner = sub.this
    if set(k for k, v in inner.args.items() if v) - {"expressions", "from_", "where"} or len(inner.expressions) != 1:
        return None
    return (inner, sub.alias) if type(inner.expressions[0]) is exp.Star else None


def _no_row_of_nothing(select: exp.Select) -> bool:
    """Whether the SELECT yields no row when its FROM yields none: not an aggregate without GROUP BY (one row), no
    grouping sets, rollup or cube (their grand total row)."""
    group = select.args.get("group")
    if group is not None:
        return set(k for k, v in group.args.items() if v) == {"expressions"} and not any(
            isinstance(g, (exp.Rollup, exp.Cube, exp.GroupingSets)) for g in group.expressions)
    return not select.args.get("having") and not any(select.find_all(exp.AggFunc))


_LITERAL_NODES = (exp.Alias, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.Cast, exp.DataType,
                  exp.Predicate, exp.Connector, exp.Not, exp.Neg, exp.Binary, exp.Case, exp.If, exp.Coalesce)


def _aggregate_answer(tree: exp.Expr, rows: Callable[[exp.Expr], int | None]) -> exp.Select | None:
    """`SELECT <counts> FROM (<query>) alias` answered as its one row when rows(query) knows how many rows the query
    yields (0 when proven empty; see the module): every select item aliased, made of count(...) and literals only
    (dbt's `count(*) != 0 as should_warn`), count(*) then being that number (any count, when it is 0). None for any
    other shape, and when the analysis meets one it did not expect (Spark runs the query as written)."""
    try:
        if not isinstance(tree, exp.Select) or set(k for k, v in tree.args.items() if v) != {"expressions", "from_"}:
            return None
        source = tree.args["from_"].this
        if not isinstance(source, exp.Subquery):
            return None
        items = [e.copy() for e in tree.expressions]
        counts = [agg for e in items for agg in e.find_all(exp.Count)]
        if not counts or any(not isinstance(e, exp.Alias) for e in items) or any(
                a.args.get("big_int") is False for a in counts):
            return None  # no aggregate (no row, not one), or an unaliased item (Spark's name for it)
        if any(not isinstance(n, (*_LITERAL_NODES, exp.Count)) for e in items
               for n in e.walk(prune=lambda n: isinstance(n, exp.Count))):
            return None  # a column outside a count, another aggregate, a function, a window, a subquery
        n = rows(source.this)
        if n is None or (n and any(not isinstance(a.this, exp.Star) for a in counts)):
            return None  # count(c) of rows would need their values of c
        for agg in counts:
            agg.replace(exp.cast(exp.Literal.number(n), "BIGINT"))
        return exp.select(*items)
    except (KeyError, AttributeError, TypeError, ValueError, OSError, pa.ArrowException):
        _log.debug("not answered (unexpected shape or data)", exc_info=True)
        return None


def _counted(state: LakeState, query: exp.Expr) -> int | None:
    """How many rows the query yields, counted on the driver over small lake tables (spark/answer/small_counts.py, then
    spark/answer/small_queries.py)."""
    def resolve(tnode: exp.Expr) -> tuple[TableInfo, dict[str, str]] | None:
        found = _projection_of(state, tnode, 0)
        return (found[0], found[1]) if found is not None and not found[2] else None  # a view's WHERE: not its table

    n = count_rows(state, query, resolve)
    return n if n is not None else count_query_rows(state, query)


def _column(node: exp.Expr, columns: dict[str, Column], qualifier: str) -> Column | None:
    ref = column_ref(node)
    if ref is None or (ref[0] is not None and ref[0].lower() != qualifier.lower()):
        return None
    return columns.get(ref[1].lower())


def _paren_span(tokens: list[Token], sub: exp.Subquery) -> tuple[int, int] | None:
    """(start, end exclusive) of the subquery's parenthesized text: the innermost `( SELECT|WITH ... )` holding all its
    identifiers."""
    metas = [i.meta for i in sub.find_all(exp.Identifier) if "start" in i.meta]
    if not metas:
        return None
    lo, hi = min(m["start"] for m in metas), max(m["end"] for m in metas)
    best = None
    stack: list[int] = []
    for i, tok in enumerate(tokens):
        if tok.token_type == TokenType.L_PAREN:
            stack.append(i)
        elif tok.token_type == TokenType.R_PAREN and stack:
            o = stack.pop()
            opening, closing = tokens[o], tok
            if (o + 1 < len(tokens) and tokens[o + 1].token_type in (TokenType.SELECT, TokenType.WITH)
                    and opening.start < lo and closing.start > hi
                    and (best is None or opening.start > best[0])):
                best = (opening.start, closing.end + 1)
    return best


def _scalar(spark: SparkSession, state: LakeState, sql: str, span: tuple[int, int], sub: exp.Subquery,
            ctes: set[str], col: Column, refresh: Refresh) -> tuple[str, str] | None:
    """(Spark literal, the value's text in the lake's terms) of an uncorrelated scalar subquery whose type is the
    column's, or None (not provably uncorrelated, no single non-NULL value, a type not rendered exactly)."""
    if any(not t.db and t.name.lower() in ctes for t in sub.find_all(exp.Table)):
        return None
    try:
        want = to_spark(col)
    except UnsupportedTypeError:
        return None
    render = _RENDER.get(type(want))
    if render is None:
        return None
    exact = _extreme_from_stats(state, sub, want)
    if exact is not None:
        return exact
    inner = sql[span[0] + 1:span[1] - 1]
    with pruned_reads(spark, state, inner, refresh) as q:
        try:
            df = spark.sql(refresh(q.sql))  # fails to analyze when it refers to the outer query
        except Exception:  # noqa: BLE001 - AnalysisException and parse errors alike: leave the subquery to Spark
            return None
        if len(df.schema.fields) != 1 or df.schema.fields[0].dataType != want:
            return None
        rows = df.selectExpr(render[0].format(ident(df.columns[0]))).limit(2).collect()
    if len(rows) != 1 or rows[0][0] is None:
        return None  # no row or NULL: the comparison holds for no row, Spark says so quickly; several: Spark errs
    return render[1](rows[0][0], want)


_EXACT_TYPES = frozenset({*INT_RANGES, "date", "timestamp", "timestamptz"})
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?$")


def _extreme_from_stats(state: LakeState, sub: exp.Subquery, want: T.DataType) -> tuple[str, str] | None:
    """`(SELECT max(c) FROM schema.table)` (or min) from the catalog's file statistics when they are provably exact
    (`_extreme`), as (Spark literal, lake text); None for any other shape, type or a NULL answer."""
    sel = sub.this
    agg = _one_column_select(sel)
    if agg is None:
        return None
    agg = agg.this if isinstance(agg, exp.Alias) else agg
    table = _plain_table(state, sel.args["from_"].this)
    if type(agg) not in (exp.Max, exp.Min) or agg.expressions or table is None:
        return None
    tnode = sel.args["from_"].this
    col = _column(agg.this, {c.name.lower(): c for c in table.columns}, tnode.alias or tnode.name)
    try:
        if col is None or to_spark(col) != want:
            return None
    except UnsupportedTypeError:
        return None
    found = _extreme(state, table, col, isinstance(agg, exp.Max))
    return None if found is None or found[1] is None else (found[0], found[1])


def _plain_table(state: LakeState, tnode: exp.Expr) -> TableInfo | None:
    """The lake table a FROM item names plainly (`schema.table [alias]`: no time travel, sample or hints)."""
    if not isinstance(tnode, exp.Table) or not tnode.db or tnode.catalog or set(
            k for k, v in tnode.args.items() if v) - _TABLE_ARGS:
        return None
    return ci_lookup(state.tables, (tnode.db, tnode.name))


def _extreme(state: LakeState, table: TableInfo, col: Column, is_max: bool) -> tuple[str, str | None] | None:
    """max(col) (or min) of the whole table from the catalog's file statistics, when they are provably exact: every
    live file has bounds for the column (or is all NULL), no row is deleted (bounds count deleted rows), no file is
    partial, no row is inlined; integer, date and timestamp columns only (exact bounds, plain texts). As (Spark
    literal, lake text), (typed NULL, None) when the table holds no non-NULL value, None when not provable."""
    if col.is_nested:
        return None
    t = parse_type(col.type)
    try:
        if t not in _EXACT_TYPES:
            return None
        want = to_spark(col)
    except UnsupportedTypeError:
        return None
    texts = []
    for f in state.files(table):
        if f.delete_file is not None or f.inlined_deletes or f.partial_max is not None:
            return None
        st = next((s for s in f.stats if s.column_id == col.column_id), None)
        if st is None:
            return None  # e.g. a column added later: its value there is the default, not in the stats
        bound = st.max_value if is_max else st.min_value
        if bound is None:
            if st.null_count is not None and st.null_count >= f.record_count:
                continue  # every value NULL: no bound to take
            return None
        texts.append(bound)
    if any(len(x) for x in read_inlined(state, table, with_rowid=False)):
        return None  # inlined rows: the stats do not cover them
    if not texts:
        return f"CAST(NULL AS {want.simpleString()})", None
    pick = max if is_max else min
    try:
        text = pick(texts, key=lambda x: sort_key(t, x))
        if t == "date":
            return (f"CAST('{text}' AS DATE)", text) if _DATE.match(text) else None
        if t == "timestamp":
            return (f"CAST('{text}' AS TIMESTAMP_NTZ)", text) if _TIMESTAMP.match(text) else None
        if t == "timestamptz":
            micros, rest = divmod(sort_key(t, text), 1000)
            return None if rest or not isinstance(micros, int) else _RENDER[T.TimestampType][1](micros, want)
        return _RENDER[type(want)][1](int(text), want)
    except (ValueError, ArithmeticError):
        return None


def _answered_select(state: LakeState, sel: exp.Expr) -> str | None:
    """A `SELECT <aggregates> FROM schema.table` answered from the catalog, as the text of a FROM-less SELECT of
    literals (one row, as an aggregate without GROUP BY gives): every column it names must sit in a max/min that
    `_extreme` proves, or be count(*); around them any expression of literals (dbt's `coalesce(max(id), -1)`).
    None for any other shape."""
    if not isinstance(sel, exp.Select) or set(k for k, v in sel.args.items() if v) != {"expressions", "from_"}:
        return None
    tnode = sel.args["from_"].this
    table = _plain_table(state, tnode)
    if table is None:
        return None
    columns = {c.name.lower(): c for c in table.columns}
    qualifier = tnode.alias or tnode.name
    out = []
    for e in sel.expressions:
        e = e.copy()
        aggs = list(e.find_all(exp.AggFunc))
        if not aggs:
            return None  # a plain expression: one row per table row, not one
        for agg in aggs:
            if isinstance(agg, exp.Count) and isinstance(agg.this, exp.Star) and agg.args.get("big_int") is not False:
                literal = _count_literal(state, table)
                if literal is None:
                    return None
            elif type(agg) in (exp.Max, exp.Min) and not agg.expressions:
                col = _column(agg.this, columns, qualifier)
                found = _extreme(state, table, col, isinstance(agg, exp.Max)) if col is not None else None
                if found is None:
                    return None
                literal = found[0]
            else:
                return None
            new = sqlglot.parse_one(literal, read="spark")
            if agg is e:
                e = new
            else:
                agg.replace(new)
        if any(e.find_all(exp.Column, exp.Star, exp.Subquery, exp.Window, exp.AggFunc)):
            return None  # a column outside an aggregate, a window, a subquery, another aggregate
        out.append(e)
    return exp.select(*out).sql(dialect="spark")


def _answered_subqueries(state: LakeState, tree: exp.Expr, tokens: list[Token],
                         edits: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Scalar subqueries of the statement that the catalog answers (`_answered_select`), replaced by their literal
    SELECT: Spark then reads nothing of the table for them (dbt's incremental filter over a table of many files)."""
    found: list[tuple[int, int, str]] = []
    for sub in tree.find_all(exp.Subquery):
        if sub.alias or sub.parent is None or isinstance(sub.parent, (exp.From, exp.Join, exp.SetOperation, exp.CTE)):
            continue  # a derived table or set operand: its columns' names and nullability would change
        text = _answered_select(state, sub.this)
        span = _paren_span(tokens, sub.this) if text is not None else None  # the alias is outside the parens
        if span is None or any(s < span[1] and span[0] < e for s, e, _ in edits + found):
            continue
        found.append((span[0], span[1], f"({text})"))
    return found


def _micros_text(micros: int) -> str:
    return (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)).isoformat(sep=" ") + "+00:00"


# Spark type -> (projection of the value giving an exact Python value, (value, type) -> (literal, lake text))
_RENDER = {
    T.ByteType: ("{}", lambda v, t: (f"CAST({v} AS {t.simpleString()})", str(v))),
    T.ShortType: ("{}", lambda v, t: (f"CAST({v} AS {t.simpleString()})", str(v))),
    T.IntegerType: ("{}", lambda v, t: (f"CAST({v} AS {t.simpleString()})", str(v))),
    T.LongType: ("{}", lambda v, t: (f"CAST({v} AS {t.simpleString()})", str(v))),
    T.DecimalType: ("CAST({} AS STRING)", lambda v, t: (f"CAST('{v}' AS {t.simpleString()})", v)),
    T.DateType: ("CAST({} AS STRING)", lambda v, t: (f"CAST('{v}' AS DATE)", v)),
    T.TimestampNTZType: ("CAST({} AS STRING)", lambda v, t: (f"CAST('{v}' AS TIMESTAMP_NTZ)", v)),
    # with a time zone: the instant as microseconds, independent of the session's zone
    T.TimestampType: ("unix_micros({})", lambda v, t: (f"timestamp_micros({v})", _micros_text(v))),
    T.StringType: ("{}", lambda v, t: (string_literal(v), v)),
}
