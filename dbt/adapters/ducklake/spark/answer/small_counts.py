"""How many rows a few query shapes yield over small lake tables, counted on the driver from the tables' rows.

Why: a count over a derived table (dbt's data tests: `select count(*) as failures, ... from (<test>) t`) costs Spark
2-3 jobs (0.1-0.3 s on 2 cores) even over 20 rows, and most tests of a project read small tables (seeds, dimension
models). `read_pruning` answers such a count as a literal when the derived table's rows are counted here. The shapes
(the derived table's query; dbt's generic tests have them):

- duplicates: `SELECT c [AS a], count(*) [AS n] FROM r [WHERE c IS NOT NULL] GROUP BY c HAVING count(*) > k`;
- values outside a list: `WITH v AS (SELECT c AS f, count(*) AS n FROM r GROUP BY c) SELECT * FROM v
  WHERE f NOT IN (<literals>)`;
- orphans: `WITH child AS (SELECT c AS f FROM r [WHERE c IS NOT NULL]), parent AS (SELECT d AS g FROM s)
  SELECT f FROM child LEFT JOIN parent ON child.f = parent.g WHERE parent.g IS NULL`;
- nulls: `SELECT <columns> | * FROM r WHERE c IS NULL`.

r and s are relations `resolve` maps to a lake table (a table, or a lake view projecting one table's columns).
Only where Arrow's equality is Spark's: values of integer, string, date, boolean, decimal and microsecond timestamp
columns (not floats: Spark groups NaN with NaN and -0.0 with 0.0), literals of the column's own kind (no implicit
casts, no escapes), and tables of at most SMALL_ROWS rows in at most SMALL_FILES local files. Anything else: None,
and Spark runs the query.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from ...lake.catalog.state import LakeState
from ...lake.read.inlined import read_inlined
from ...lake.read.scan import plan_scan, read_rows
from ...lake.records import Column, TableInfo
from ...lake.types import FLOAT_TYPES, INT_RANGES

SMALL_ROWS = 1_000_000
SMALL_FILES = 256
SMALL_BYTES = 64 * 2**20

_INTEGERS = frozenset(t for t in INT_RANGES if t not in ("int128", "uint128", "uint64"))  # int64 holds them all
_EQUAL_AS_SPARK = _INTEGERS | {"varchar", "date", "boolean", "timestamp", "timestamptz"}  # decimal(p,s) too

# a FROM item -> (the lake table it reads, its column names (lower) -> the table's column names), or None
Resolve = Callable[[exp.Expr], "tuple[TableInfo, dict[str, str]] | None"]


def count_rows(state: LakeState, query: exp.Expr, resolve: Resolve) -> int | None:
    """How many rows the query yields at the state's snapshot, for the shapes of the module; None for any other."""
    if not isinstance(query, exp.Select):
        return None
    for shape in (_duplicates, _outside_list, _orphans, _nulls):
        n = shape(state, query, resolve)
        if n is not None:
            return n
    return None


def _args(node: exp.Expr) -> set[str]:
    return {k for k, v in node.args.items() if v}


def _star_count(node: exp.Expr) -> bool:
    node = node.this if isinstance(node, exp.Alias) else node
    return isinstance(node, exp.Count) and isinstance(node.this, exp.Star) and node.args.get("big_int") is not False


class _Relation:
    """A FROM item read as a lake table: its column references resolved to the table's columns."""

    def __init__(self, state: LakeState, tnode: exp.Expr, resolve: Resolve) -> None:
        found = resolve(tnode)
        self.state, self.qualifier = state, tnode.alias_or_name.lower()
        self.table: TableInfo | None
        self.names: dict[str, str]
        self.table, self.names = found if found is not None else (None, {})

    def column(self, node: exp.Expr) -> Column | None:
        """The table's column a plain reference (`c` or `<qualifier>.c`) names."""
        if self.table is None or not isinstance(node, exp.Column) or not isinstance(node.this, exp.Identifier):
            return None
        if node.args.get("db") or (node.table and node.table.lower() != self.qualifier):
            return None
        name = self.names.get(node.name.lower())
        return next((c for c in self.table.columns if c.name == name and not c.is_nested), None)

    def values(self, col: Column) -> pa.ChunkedArray | None:
        """The column's values in the table's live rows, when the table is small (see the module)."""
        return _values(self.state, self.table, col) if self.table is not None else None


def _from(query: exp.Select, state: LakeState, resolve: Resolve) -> _Relation | None:
    source = query.args.get("from_")
    if source is None or query.args.get("joins") or query.args.get("laterals"):
        return None
    rel = _Relation(state, source.this, resolve)
    return rel if rel.table is not None else None


def _not_null_of(where: exp.Expr | None, rel: _Relation, col: Column) -> bool | None:
    """Whether the WHERE keeps the non-NULL values of col (True) or everything (no WHERE: False); None otherwise."""
    if where is None:
        return False
    cond = where.this
    if isinstance(cond, exp.Not) and isinstance(cond.this, exp.Is) and isinstance(cond.this.expression, exp.Null):
        return True if rel.column(cond.this.this) == col else None
    return None


def _grouped(query: exp.Select, state: LakeState, resolve: Resolve) -> tuple[_Relation, Column] | None:
    """(relation, column) of `... FROM r GROUP BY c`, c a column whose values Arrow compares as Spark does."""
    rel = _from(query, state, resolve)
    group = query.args["group"]
    if rel is None or _args(group) != {"expressions"} or len(group.expressions) != 1:
        return None
    col = rel.column(group.expressions[0])
    return (rel, col) if col is not None and _equal_as_spark(col) else None


def _duplicates(state: LakeState, query: exp.Select, resolve: Resolve) -> int | None:
    if _args(query) - {"expressions", "from_", "where", "group", "having"} or not {"group", "having"} <= _args(query):
        return None
    grouped = _grouped(query, state, resolve)
    if grouped is None:
        return None
    rel, col = grouped
    if any(not _star_count(e) and rel.column(e.this if isinstance(e, exp.Alias) else e) != col
           for e in query.expressions):
        return None  # only the grouped column and count(*): nothing that could fail or change the row count
    having = query.args["having"].this
    if not isinstance(having, (exp.GT, exp.GTE)) or not _star_count(having.this):
        return None
    least = _integer(having.expression)
    non_null = _not_null_of(query.args.get("where"), rel, col)
    if least is None or non_null is None:
        return None
    values = rel.values(col)
    if values is None:
        return None
    least += isinstance(having, exp.GT)  # groups of at least this many rows
    present = values.drop_null()
    counts = pc.value_counts(present).field("counts") if len(present) else pa.array([], pa.int64())
    n = pc.sum(pc.greater_equal(counts, least)).as_py() or 0
    return n + (not non_null and values.null_count >= max(least, 1))


def _outside_list(state: LakeState, query: exp.Select, resolve: Resolve) -> int | None:
    if (_args(query) != {"expressions", "from_", "where", "with_"} or _args(query.args["with_"]) != {"expressions"}
            or len(query.args["with_"].expressions) != 1):
        return None
    cte = query.args["with_"].expressions[0]
    source = query.args["from_"].this
    if (len(query.expressions) != 1 or type(query.expressions[0]) is not exp.Star or not isinstance(source, exp.Table)
            or _args(source) != {"this"} or source.name.lower() != cte.alias_or_name.lower()):
        return None
    inner = cte.this
    if not isinstance(inner, exp.Select) or _args(inner) != {"expressions", "from_", "group"}:
        return None
    grouped = _grouped(inner, state, resolve)
    if grouped is None:
        return None
    rel, col = grouped
    field = None
    for e in inner.expressions:
        if _star_count(e):
            continue
        if rel.column(e.this if isinstance(e, exp.Alias) else e) != col:
            return None
        field = e.alias_or_name.lower()
    cond = query.args["where"].this
    if field is None or not isinstance(cond, exp.Not) or not isinstance(cond.this, exp.In):
        return None
    within = cond.this
    target = within.this
    if (_args(within) != {"this", "expressions"} or not isinstance(target, exp.Column) or target.table
            or target.name.lower() != field):
        return None
    literals = [_literal(e, col) for e in within.expressions]
    if any(v is _NOT_LITERAL for v in literals):
        return None
    values = rel.values(col)
    if values is None:
        return None
    if any(v is None for v in literals):
        return 0  # `v NOT IN (..., NULL)` is never true
    distinct = pc.unique(values.drop_null())
    listed = pa.array(literals, type=distinct.type) if literals else pa.array([], distinct.type)
    return len(distinct) - (pc.sum(pc.is_in(distinct, value_set=listed)).as_py() or 0)


def _orphans(state: LakeState, query: exp.Select, resolve: Resolve) -> int | None:
    if (_args(query) != {"expressions", "from_", "joins", "where", "with_"} or _args(query.args["with_"]) != {"expressions"}
            or len(query.args["joins"]) != 1):
        return None
    ctes = {c.alias_or_name.lower(): c.this for c in query.args["with_"].expressions}
    left, join = query.args["from_"].this, query.args["joins"][0]
    right = join.this
    if (not all(isinstance(t, exp.Table) and _args(t) - {"this", "alias"} == set() for t in (left, right))
            or join.side != "LEFT" or join.kind not in (None, "", "OUTER") or _args(join) - {"kind"} != {"this", "on", "side"}):
        return None
    child, parent = ctes.get(left.name.lower()), ctes.get(right.name.lower())
    if not isinstance(child, exp.Select) or not isinstance(parent, exp.Select) or child is parent:
        return None
    from_field, to_field = _single_column(child, state, resolve), _single_column(parent, state, resolve)
    if from_field is None or to_field is None or _args(parent) != {"expressions", "from_"}:
        return None
    (crel, ccol, cname), (prel, pcol, pname) = from_field, to_field
    lq, rq = left.alias_or_name.lower(), right.alias_or_name.lower()

    def ref(node: exp.Expr) -> tuple[str, str] | None:
        if not isinstance(node, exp.Column) or node.args.get("db") or not node.table:
            return None
        return node.table.lower(), node.name.lower()

    on = join.args["on"]
    sides = {ref(on.this), ref(on.expression)} if isinstance(on, exp.EQ) else set()
    where = query.args["where"].this
    if (sides != {(lq, cname), (rq, pname)} or not isinstance(where, exp.Is)
            or not isinstance(where.expression, exp.Null) or ref(where.this) != (rq, pname)):
        return None
    for e in query.expressions:  # the child's column, qualified or (when the parent's is named otherwise) not
        if not isinstance(e, exp.Column) or e.args.get("db") or ref(e) not in (None, (lq, cname)):
            return None
        if ref(e) is None and (e.name.lower() != cname or cname == pname):
            return None
    non_null = _not_null_of(child.args.get("where"), crel, ccol)
    kinds = {ccol.type in _INTEGERS, pcol.type in _INTEGERS}
    if non_null is None or not (kinds == {True} or (ccol.type == pcol.type and _equal_as_spark(ccol))):
        return None
    cvalues, pvalues = crel.values(ccol), prel.values(pcol)
    if cvalues is None or pvalues is None:
        return None
    if kinds == {True}:  # Spark widens both sides to one integer type
        cvalues, pvalues = cvalues.cast(pa.int64()), pvalues.cast(pa.int64())
    found = pc.is_in(cvalues.drop_null(), value_set=pc.unique(pvalues.drop_null()))
    return (0 if non_null else cvalues.null_count) + (len(found) - (pc.sum(found).as_py() or 0))


def _single_column(query: exp.Select, state: LakeState, resolve: Resolve
                   ) -> tuple[_Relation, Column, str] | None:
    """(relation, column, output name) of `SELECT c [AS name] FROM r [WHERE ...]`."""
    if _args(query) - {"expressions", "from_", "where"} or len(query.expressions) != 1:
        return None
    rel = _from(query, state, resolve)
    e = query.expressions[0]
    if rel is None:
        return None
    col = rel.column(e.this if isinstance(e, exp.Alias) else e)
    return (rel, col, e.alias_or_name.lower()) if col is not None else None


def _nulls(state: LakeState, query: exp.Select, resolve: Resolve) -> int | None:
    if _args(query) != {"expressions", "from_", "where"}:
        return None
    rel = _from(query, state, resolve)
    cond = query.args["where"].this
    if rel is None or not isinstance(cond, exp.Is) or not isinstance(cond.expression, exp.Null):
        return None
    col = rel.column(cond.this)
    if col is None or not (_equal_as_spark(col) or col.type in FLOAT_TYPES):  # a NaN is no NULL in either
        return None
    if any(type(e) is not exp.Star and rel.column(e) is None for e in query.expressions):
        return None  # plain columns only: nothing that could fail
    values = rel.values(col)
    return values.null_count if values is not None else None


def _equal_as_spark(col: Column) -> bool:
    return col.type in _EQUAL_AS_SPARK or col.type.startswith("decimal(")


def _integer(node: exp.Expr) -> int | None:
    if isinstance(node, exp.Neg):
        inner = _integer(node.this)
        return -inner if inner is not None else None
    if isinstance(node, exp.Literal) and not node.is_string and node.is_int:
        return int(node.this)
    return None


_NOT_LITERAL = object()


def _literal(node: exp.Expr, col: Column) -> Any:
    """The Python value of a literal of the column's own kind (None for NULL); _NOT_LITERAL for anything Spark would
    cast or unescape."""
    if isinstance(node, exp.Null):
        return None
    if col.type == "varchar" and isinstance(node, exp.Literal) and node.is_string:
        return node.this if "\\" not in node.this and "'" not in node.this else _NOT_LITERAL
    if col.type in _INTEGERS:
        value = _integer(node)
        lo, hi = INT_RANGES[col.type]
        return value if value is not None and lo <= value <= hi else _NOT_LITERAL
    if col.type == "boolean" and isinstance(node, exp.Boolean):
        return bool(node.this)
    return _NOT_LITERAL


def driver_readable(state: LakeState, table: TableInfo) -> bool:
    """Whether the driver reads the table whole: few small files, all local (see SMALL_FILES, SMALL_ROWS)."""
    files = state.files(table)
    return (len(files) <= SMALL_FILES and sum(f.record_count for f in files) <= SMALL_ROWS
            and sum(f.file_size_bytes for f in files) <= SMALL_BYTES
            and all("://" not in f.path.replace("file://", "", 1) for f in files))


def _values(state: LakeState, table: TableInfo, col: Column) -> pa.ChunkedArray | None:
    """The column's values in the table's live rows at the state's snapshot (files with their deletes applied, and
    inlined rows); None when the table is not small."""
    with contextlib.nullcontext() if state.files_loaded(table) else state.db.reading():
        if not driver_readable(state, table):
            return None
        plan = plan_scan(state, table)  # reads the delete files: small too
        inlined = read_inlined(state, table, with_rowid=False)
    return read_rows(plan, inlined, [col], with_rowid=False).column(col.name)
