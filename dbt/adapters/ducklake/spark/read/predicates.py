"""Spark SQL conditions -> the lake's pruning predicates (`lake.pruning`), with sqlglot's Spark parser.

Only what statistics can decide is translated: comparisons, IN, BETWEEN and IS [NOT] NULL between one target column
and literals, under AND/OR. Anything else becomes "no constraint" inside an AND, and makes a whole OR unknown, so a
translated predicate is always implied by the condition: pruning with it never drops a matching row.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from ...lake.read.pruning import And, Compare, InValues, IsNull, Or, Predicate, all_of
from ...lake.records import Column
from ...lake.types import INT_RANGES, parse_type

_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_OPS: dict[type[exp.Expr], str] = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">",
                                         exp.GTE: ">="}
_TEXT_TYPES = frozenset({"varchar", "json"})
_TEMPORAL = frozenset({"date", "timestamp", "timestamptz", "timestamp_s", "timestamp_ms", "timestamp_ns"})
_INTEGRAL = frozenset(INT_RANGES) - {"int128", "uint128"}  # HUGEINT is not read as a Spark integral type
# Spark's integral cast targets as the lake type of the same range: an out-of-range literal is not read
_INTEGRAL_CASTS = {exp.DataType.Type.TINYINT: "int8", exp.DataType.Type.SMALLINT: "int16",
                   exp.DataType.Type.INT: "int32", exp.DataType.Type.BIGINT: "int64"}
_TEMPORAL_CASTS = frozenset({exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ,
                             exp.DataType.Type.TIMESTAMPNTZ, exp.DataType.Type.TIMESTAMPLTZ, exp.DataType.Type.DATETIME})


def to_predicate(condition: str | None, columns: Sequence[Column], qualifiers: Sequence[str | None] = (None,)
                 ) -> Predicate | None:
    """The pruning predicate implied by a Spark SQL boolean condition on a table with these columns.

    qualifiers: how the table's columns may be written (None = unqualified, "t" = t.col). None when nothing in the
    condition can be used (or it does not parse: Spark reports the error when it runs the statement).
    """
    if not condition:
        return None
    try:
        tree = sqlglot.parse_one(condition, read="spark")
    except (ParseError, ValueError):
        return None
    quals = {q.lower() if q else None for q in qualifiers}
    return _Translator({c.name.lower(): c for c in columns}, quals).translate(tree)


def conjuncts(condition: str) -> list[exp.Expr]:
    """The top-level AND terms of a condition (one term when it is not an AND)."""
    tree = sqlglot.parse_one(condition, read="spark")
    return list(tree.flatten()) if isinstance(tree, exp.And) else [unparen(tree)]


def column_ref(node: exp.Expr) -> tuple[str | None, str] | None:
    """(qualifier, column name) when the node is a column reference."""
    node = unparen(node)
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        return (node.table or None), node.name
    return None


def unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


class _Translator:
    def __init__(self, columns: dict[str, Column], qualifiers: set[str | None]) -> None:
        self.columns = columns
        self.qualifiers = qualifiers

    def translate(self, node: exp.Expr) -> Predicate | None:
        node = unparen(node)
        if isinstance(node, exp.And):
            parts = [p for p in (self.translate(x) for x in node.flatten()) if p is not None]
            return all_of(parts)
        if isinstance(node, exp.Or):
            alts = [self.translate(x) for x in node.flatten()]
            return None if any(a is None for a in alts) else Or(tuple(a for a in alts if a is not None))
        if isinstance(node, exp.Not):
            inner = unparen(node.this)
            if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
                col = self._column(inner.this)
                return IsNull(col.name, negated=True) if col else None
            return None
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            col = self._column(node.this)
            return IsNull(col.name) if col else None
        if type(node) in _OPS:
            return self._compare(node.this, _OPS[type(node)], node.expression)
        if isinstance(node, exp.Between):
            col = self._column(node.this)
            lo, hi = (self._value(col, node.args.get(k)) if col else None for k in ("low", "high"))
            if col is None or lo is None or hi is None:
                return None
            return And((Compare(col.name, ">=", lo), Compare(col.name, "<=", hi)))
        if isinstance(node, exp.In) and not node.args.get("query"):
            col = self._column(node.this)
            values = [self._value(col, v) for v in node.expressions] if col else [None]
            if col is None or any(v is None for v in values):
                return None
            return InValues(col.name, tuple(v for v in values if v is not None))
        return None

    def _compare(self, left: exp.Expr, op: str, right: exp.Expr) -> Predicate | None:
        col = self._column(left)
        if col is None:
            col, op, right = self._column(right), _FLIP[op], left
        if col is None:
            return None
        value = self._value(col, right)
        return None if value is None else Compare(col.name, op, value)

    def _column(self, node: exp.Expr) -> Column | None:
        ref = column_ref(node)
        if ref is None:
            return None
        qualifier, name = ref
        if (qualifier.lower() if qualifier else None) not in self.qualifiers:
            return None
        return self.columns.get(name.lower())

    def _value(self, col: Column | None, node: exp.Expr | None) -> str | None:
        """The literal's text, when comparing it with the column compares values of the column's own type."""
        if col is None or node is None:
            return None
        t = parse_type(col.type)
        node = unparen(node)
        exact = _exact_numeric_cast(node, t)
        if exact is not None:
            return exact
        if isinstance(node, (exp.Cast, exp.TryCast)):
            if node.to.this not in _TEMPORAL_CASTS or t not in _TEMPORAL:
                return None
            node = unparen(node.this)
            if not (isinstance(node, exp.Literal) and node.is_string):
                return None
        negative = isinstance(node, exp.Neg)
        if negative:
            node = unparen(node.this)
        if isinstance(node, exp.Boolean):
            return ("true" if node.this else "false") if t == "boolean" and not negative else None
        if not isinstance(node, exp.Literal):
            return None
        text = str(node.this)
        if node.is_string:
            # Spark casts a string literal to a numeric or temporal column's type; text columns compare as text
            return None if negative else text
        if t in _TEXT_TYPES or t in _TEMPORAL or t in ("boolean", "blob"):
            return None  # a number against text or time: Spark compares after casting the column, not the literal
        return f"-{text}" if negative else text


def _exact_numeric_cast(node: exp.Expr, t: str) -> str | None:
    """The text of a number literal cast to a numeric type without changing its value, for a column of numeric
    type t; None for anything else. Spark's analysis writes `id >= CAST(120 AS BIGINT)` for `id >= 120` (a filter
    of a DataFrame comes here as analyzed SQL), and a cast that rounds (CAST(1.5 AS INT)) must not be read as 1.5."""
    if not isinstance(node, exp.Cast):  # sqlglot reads Spark's CAST as TryCast: the same for an in-range literal
        return None
    inner = unparen(node.this)
    negative = isinstance(inner, exp.Neg)
    if negative:
        inner = unparen(inner.this)
    if not isinstance(inner, exp.Literal) or inner.is_string:
        return None
    text = str(inner.this)
    to = node.to.this
    if to in _INTEGRAL_CASTS:
        lo, hi = INT_RANGES[_INTEGRAL_CASTS[to]]
        ok = t in _INTEGRAL and text.isdigit() and lo <= int(f"-{text}" if negative else text) <= hi
    elif to == exp.DataType.Type.DECIMAL and (t.startswith("decimal(") or t in _INTEGRAL):
        params = [p.name for p in node.to.expressions]
        scale = int(params[1]) if len(params) > 1 and params[1].isdigit() else 0
        whole, _, frac = text.partition(".")
        ok = whole.isdigit() and (not frac or (frac.isdigit() and len(frac.rstrip("0")) <= scale))
    elif to == exp.DataType.Type.DOUBLE:
        ok = t == "float64" and text.replace(".", "", 1).isdigit()  # a float32 column is cast, not the literal
    else:
        ok = False
    return (f"-{text}" if negative else text) if ok else None
