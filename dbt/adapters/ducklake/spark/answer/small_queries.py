"""How many rows a query over small lake tables yields, computed on the driver by DuckDB when Spark's answer is
provably the same.

Why: a data test is `select count(*) as failures, ... from (<test query>) t`, and most tests of real projects are
SQL of their own (package tests: expressions, equality of two relations, cardinality; singular tests). Over the
small tables tests mostly read, Spark spends 0.1-0.3 s a test in planning, view registration and two jobs, where
DuckDB over the tables' rows (read by the format layer, as `small_counts` reads them) takes milliseconds.
`read_pruning` asks here for the row count of a test's query when its own shapes do not know it, and answers the
test as a row of literals.

Only a row count is taken from DuckDB, and only for a query made of a whitelist on which the two engines agree
(Spark with ANSI mode off, as the adapter runs it):

- SELECT (DISTINCT), FROM, JOIN (inner, left, right, full, cross) ON, WHERE, GROUP BY, HAVING, LIMIT n, WITH, derived
  tables, UNION [ALL], EXCEPT, INTERSECT (DISTINCT);
- column references, `*`, aliases, literals (integers, plain decimals, strings without escapes, TRUE, FALSE, NULL),
  a minus sign before a number, the six comparisons, AND, OR, NOT, IS [NOT] NULL, parentheses, count(*), count(c),
  min, max, and a CAST to the type its operand already has (a view's `cast(d as date)` of a date);
- comparisons between two numbers (integers, decimals, DOUBLE), two strings, two dates or two booleans, never across
  kinds (Spark and DuckDB cast a string compared with a number or a date in different ways); two decimals (or a
  decimal and an integer) only where their common type fits 38 digits (wider, Spark rounds one side to fewer
  decimals); set operations only of columns of the same type on both sides;
- columns of integer (8 to 64 bit), VARCHAR, BOOLEAN, DATE, DECIMAL and DOUBLE types. A DOUBLE is only compared
  with the six comparisons (IEEE order, NaN the greatest and equal to itself in both) or counted: never grouped,
  made distinct, joined on, set-compared or taken min/max of (Spark normalises -0.0 and NaN there). FLOAT is out
  (DuckDB compares a FLOAT with a decimal literal as FLOAT, Spark as DOUBLE);
- relations: lake tables of at most `small_counts.SMALL_ROWS` rows in local files, and lake views whose own SQL is of
  the whitelist (expanded as derived tables, up to a depth); names schema-qualified (a bare name may be a temporary
  view of the session).

Anything else (a function, arithmetic, a window, a cast that converts, a timestamp, an unknown name, a query DuckDB
rejects) gives None, and Spark runs the statement as written. The differential tests
(`tests/spark/test_small_queries.py`) run each accepted construct over edge values through both engines.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import weakref

import duckdb
import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError, TokenError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from ...lake.catalog.lookups import ci_lookup
from ...lake.catalog.state import LakeState
from ...lake.read.inlined import read_inlined
from ...lake.read.scan import plan_scan, read_rows
from ...lake.records import Column, TableInfo
from ..read.names import SPARK_SQL_TAG
from .small_counts import driver_readable

_log = logging.getLogger(__name__)
_VIEW_DEPTH = 4
T = exp.DataType.Type
# lake column types -> the SQL type both engines give their values
_TYPES = {"int8": "TINYINT", "int16": "SMALLINT", "int32": "INT", "int64": "BIGINT", "uint8": "SMALLINT",
          "uint16": "INT", "uint32": "BIGINT", "varchar": "VARCHAR", "boolean": "BOOLEAN", "date": "DATE",
          "float64": "DOUBLE"}
_NUMBERS = {T.TINYINT, T.SMALLINT, T.INT, T.BIGINT, T.DECIMAL, T.DOUBLE}
_KINDS = {**{t: "number" for t in _NUMBERS}, T.VARCHAR: "string", T.TEXT: "string", T.BOOLEAN: "boolean",
          T.DATE: "date"}
_NODES = (exp.Select, exp.From, exp.Join, exp.Where, exp.Group, exp.Having, exp.Limit, exp.With, exp.CTE,
          exp.TableAlias, exp.Subquery, exp.Table, exp.Identifier, exp.Column, exp.Star, exp.Alias, exp.Literal,
          exp.Null, exp.Boolean, exp.Paren, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.And, exp.Or,
          exp.Not, exp.Is, exp.Count, exp.Min, exp.Max, exp.Union, exp.Except, exp.Intersect, exp.Distinct,
          exp.Cast, exp.DataType, exp.DataTypeParam, exp.Neg)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_names = itertools.count()
_local = threading.local()
# id(LakeState) -> table id -> its rows (dropped with the state)
_kept: dict[int, dict[int, pa.Table]] = {}
_KEPT = 32
_KEPT_BYTES = 4 * 2**20


class _Refused(Exception):
    pass


def count_query_rows(state: LakeState, query: exp.Expr) -> int | None:
    """How many rows the query yields at the state's snapshot (see the module), or None when Spark must say."""
    try:
        tree, tables = _expand(state, query.copy(), 0)
        _check(tree, tables)
        arrow = {name: _rows(state, table) for name, table in tables.items()}
        if any(a is None for a in arrow.values()):
            return None
        return _run(tree, arrow)  # type: ignore[arg-type]
    except (_Refused, SqlglotError, duckdb.Error, KeyError, ValueError, TypeError, AttributeError):
        _log.debug("not counted on the driver", exc_info=True)
        return None


def _expand(state: LakeState, tree: exp.Expr, depth: int) -> tuple[exp.Expr, dict[str, TableInfo]]:
    """The tree with every lake table renamed to a driver name (kept as the alias it was read by) and every lake
    view replaced by its query as a derived table; the driver names' tables."""
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    tables: dict[str, TableInfo] = {}
    for t in list(tree.find_all(exp.Table)):
        if not t.db:
            if t.name.lower() in ctes and not t.catalog:
                continue
            raise _Refused("a bare name")
        if t.catalog or set(k for k, v in t.args.items() if v) - {"this", "db", "alias"}:
            raise _Refused("time travel, a sample, hints or a catalog")
        alias = t.alias or t.name
        table = ci_lookup(state.tables, (t.db, t.name))
        if table is not None:
            name = f"__ducklake_q{next(_names)}"
            tables[name] = table
            t.replace(exp.Table(this=exp.to_identifier(name), alias=exp.TableAlias(this=exp.to_identifier(alias))))
            continue
        view = ci_lookup(state.views, (t.db, t.name))
        if view is None or view.column_aliases or depth >= _VIEW_DEPTH:
            raise _Refused("not a lake table or view")
        try:
            inner = sqlglot.parse_one(view.tags.get(SPARK_SQL_TAG) or view.sql, read="spark")
        except (ParseError, TokenError, ValueError) as e:
            raise _Refused("view SQL") from e
        inner, more = _expand(state, inner, depth + 1)
        tables.update(more)
        t.replace(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias))))
    return tree, tables


def _sql_type(col: Column) -> str:
    t = col.type
    if t.startswith("decimal("):
        return t.upper()
    if col.is_nested or t not in _TYPES:
        return "UNKNOWN"
    return _TYPES[t]


def _check(tree: exp.Expr, tables: dict[str, TableInfo]) -> None:
    """_Refused unless every node is of the whitelist, typed, and used as the module allows."""
    for node in tree.walk():
        if not isinstance(node, _NODES):
            raise _Refused(type(node).__name__)
        if isinstance(node, exp.Literal) and node.is_string and "\\" in node.this:
            raise _Refused("an escape")
        if isinstance(node, exp.Literal) and not node.is_string and not node.this.replace(".", "", 1).isdigit():
            raise _Refused("a number literal Spark may type otherwise")
        if isinstance(node, exp.Neg) and not (isinstance(node.this, exp.Literal) and not node.this.is_string):
            raise _Refused("a negation of other than a number")
        if isinstance(node, exp.Join) and (node.args.get("kind") or "").upper() not in ("", "INNER", "OUTER", "CROSS"):
            raise _Refused("a semi or anti join")
        if isinstance(node, exp.Join) and node.args.get("using"):
            raise _Refused("USING")
        if isinstance(node, exp.Count) and isinstance(node.this, exp.Distinct):
            raise _Refused("count(DISTINCT)")
    schema: dict[str, object] = {name: {c.name: _sql_type(c) for c in table.columns} for name, table in tables.items()}
    typed = annotate_types(qualify(tree.copy(), schema=schema, dialect="spark", validate_qualify_columns=True,
                                   quote_identifiers=False, identify=False),
                           schema=schema, dialect="spark")
    for node in typed.walk():
        if isinstance(node, (exp.Column, exp.Min, exp.Max, exp.Cast, exp.Alias)):
            _kind(node)
        if isinstance(node, (exp.And, exp.Or)) and {_kind(node.left), _kind(node.right)} - {"boolean", "null"}:
            raise _Refused("logic of a non-boolean")
        if isinstance(node, exp.Not) and _kind(node.this) not in ("boolean", "null"):
            raise _Refused("NOT of a non-boolean")
        if isinstance(node, (exp.Where, exp.Having)) and _kind(node.this) not in ("boolean", "null"):
            raise _Refused("a condition of a non-boolean")
        if isinstance(node, exp.Join) and node.args.get("on") is not None and _kind(node.args["on"]) != "boolean":
            raise _Refused("a join condition of a non-boolean")
        if isinstance(node, _COMPARISONS) and len({_kind(node.left), _kind(node.right)} - {"null"}) > 1:
            raise _Refused("a comparison across kinds")
        if isinstance(node, _COMPARISONS) and not _exact_common_decimal(node.left, node.right):
            raise _Refused("decimals whose common type Spark rounds")
        if isinstance(node, exp.SetOperation) and not _same_columns(node):
            raise _Refused("a set operation of columns of other types")
        if isinstance(node, exp.Cast) and node.this.type != node.to and not (
                node.this.type and node.this.type.this == node.to.this == T.DECIMAL
                and node.this.type.sql() == node.to.sql()):
            raise _Refused("a cast that converts")
        if isinstance(node, (exp.Min, exp.Max)) and _is_double(node.this):
            raise _Refused("min/max of a DOUBLE")
        if isinstance(node, exp.Group) and any(_is_double(e) for e in node.expressions):
            raise _Refused("a DOUBLE grouped")
        if isinstance(node, exp.Join) and node.args.get("on") is not None and any(
                _is_double(c) for c in node.args["on"].find_all(exp.Column)):
            raise _Refused("a join on a DOUBLE")
        if isinstance(node, exp.Select) and (node.args.get("distinct") or _set_operand(node)) and any(
                _is_double(e) for e in node.expressions):
            raise _Refused("a DOUBLE made distinct or set-compared")


def _set_operand(select: exp.Select) -> bool:
    """Whether the SELECT's rows are compared as sets: under an EXCEPT, INTERSECT or UNION (DISTINCT)."""
    node: exp.Expr = select
    while isinstance(node.parent, (exp.SetOperation, exp.Subquery, exp.Paren)):
        node = node.parent
        if isinstance(node, exp.SetOperation) and (type(node) is not exp.Union or node.args.get("distinct")):
            return True
    return False


def _decimal_digits(node: exp.Expr) -> tuple[int, int] | None:
    """(precision, scale) of a number Spark compares as a decimal: a decimal or integer column, a number literal
    (`0.5` is DECIMAL(1,1) in Spark); None for a DOUBLE (both engines compare as DOUBLE then) or a NULL."""
    node = node.this if isinstance(node, (exp.Neg, exp.Paren)) else node
    if isinstance(node, exp.Literal) and not node.is_string:
        whole, _, frac = node.this.partition(".")
        return max(len(whole.lstrip("0")) + len(frac), len(frac), 1), len(frac)
    t = node.type
    if t is None or t.this in (T.DOUBLE, T.NULL):
        return None
    if t.this == T.DECIMAL:
        params = [int(p.this.this if isinstance(p.this, exp.Literal) else p.name) for p in t.expressions]
        return (params[0], params[1] if len(params) > 1 else 0) if params else (10, 0)
    return {T.TINYINT: (3, 0), T.SMALLINT: (5, 0), T.INT: (10, 0), T.BIGINT: (20, 0)}.get(t.this)


def _exact_common_decimal(left: exp.Expr, right: exp.Expr) -> bool:
    """Whether Spark compares the two numbers exactly, as DuckDB does: unless one is a DOUBLE, Spark casts both to a
    common decimal, and one wider than 38 digits loses scale (a literal rounded to the column's scale)."""
    a, b = _decimal_digits(left), _decimal_digits(right)
    if a is None or b is None or (a[1] == 0 and b[1] == 0):
        return True
    return max(a[0] - a[1], b[0] - b[1]) + max(a[1], b[1]) <= 38


def _same_columns(node: exp.SetOperation) -> bool:
    """Whether both sides of a set operation give each column the same type (or a NULL): no widening of either."""
    def columns(q: exp.Expr) -> list[exp.Expr]:
        while isinstance(q, (exp.SetOperation, exp.Subquery, exp.Paren)):
            q = q.this if not isinstance(q, exp.SetOperation) else q.left
        return q.expressions if isinstance(q, exp.Select) else []

    left, right = columns(node.left), columns(node.right)
    if len(left) != len(right) or not left:
        return False
    for a, b in zip(left, right, strict=True):
        ta, tb = (e.type for e in (a, b))
        if ta is None or tb is None:
            return False
        if T.NULL not in (ta.this, tb.this) and ta.sql() != tb.sql():
            return False
    return True


def _is_double(node: exp.Expr) -> bool:
    node = node.this if isinstance(node, exp.Alias) else node
    return node.type is not None and node.type.this in (T.DOUBLE, T.FLOAT, T.UNKNOWN)


def _kind(node: exp.Expr) -> str:
    if isinstance(node, exp.Null):
        return "null"
    if isinstance(node, exp.Star):
        return "star"
    t = node.type
    if t is None or t.this not in _KINDS:
        if t is not None and t.this == T.NULL:
            return "null"
        raise _Refused(f"a value of type {t.sql() if t is not None else '?'}")
    return _KINDS[t.this]


def _rows(state: LakeState, table: TableInfo) -> pa.Table | None:
    """The table's live rows at the state's snapshot, when it is small; kept with the state (a test command's tests
    read the same few tables at one snapshot), for up to _KEPT tables."""
    kept = _kept.get(id(state))
    if kept is None:
        kept = _kept[id(state)] = {}
        weakref.finalize(state, _kept.pop, id(state), None)
    if table.table_id in kept:
        return kept[table.table_id]
    with contextlib.nullcontext() if state.files_loaded(table) else state.db.reading():
        if not driver_readable(state, table):
            return None
        plan = plan_scan(state, table)
        inlined = read_inlined(state, table, with_rowid=False)
    rows = read_rows(plan, inlined, list(table.columns), with_rowid=False)
    if len(kept) < _KEPT and rows.nbytes <= _KEPT_BYTES:
        kept[table.table_id] = rows
    return rows


def _run(tree: exp.Expr, arrow: dict[str, pa.Table]) -> int:
    con = getattr(_local, "con", None)
    if con is None:
        con = _local.con = duckdb.connect(config={"autoinstall_known_extensions": False,
                                                  "autoload_known_extensions": False, "threads": 1})
    sql = f"SELECT count(*) FROM ({tree.sql(dialect='duckdb')}) AS __ducklake_counted"
    try:
        for name, table in arrow.items():
            con.register(name, table)
        row = con.execute(sql).fetchone()
    finally:
        for name in arrow:
            con.unregister(name)
    assert row is not None
    return int(row[0])
