"""A one-row answer of literals computed on the driver, as Spark would compute it, so that no JVM is needed for it.

`read_pruning` answers dbt's data tests as `SELECT CAST(n AS BIGINT) AS failures, CAST(n AS BIGINT) <> 0 AS
should_warn, ...`: counts it knows, compared with the test's thresholds. Only that small grammar is evaluated here:
BIGINT casts of integers, integer literals, the six comparisons, NOT, AND, OR and parentheses. Each item must be
aliased; its value is a BIGINT (a cast) or a BOOLEAN (a comparison or logic of them). Anything else (another type, a
NULL, an arithmetic that could overflow, a function) gives None, and Spark computes the row from the text.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from ...lake.types import INT_RANGES

_LONG, _INT = INT_RANGES["int64"], INT_RANGES["int32"]
_COMPARE: dict[type, Callable[[int, int], bool]] = {
    exp.EQ: operator.eq, exp.NEQ: operator.ne, exp.GT: operator.gt, exp.GTE: operator.ge, exp.LT: operator.lt,
    exp.LTE: operator.le,
}


@dataclass(frozen=True)
class LiteralRow:
    """The row's columns as (name, Spark type name) and its values."""

    columns: list[tuple[str, str]]
    values: tuple


class _NotEvaluated(Exception):
    pass


def literal_row(select: exp.Select) -> LiteralRow | None:
    """The one row of a FROM-less SELECT of aliased literals (see the module), or None when it holds anything else."""
    if set(k for k, v in select.args.items() if v) != {"expressions"}:
        return None
    columns: list[tuple[str, str]] = []
    values: list[object] = []
    try:
        for item in select.expressions:
            if not isinstance(item, exp.Alias) or not item.alias:
                return None
            top = item.this.unnest()
            if isinstance(top, (exp.Literal, exp.Neg)):
                return None  # a bare number: Spark's type for it (INT, BIGINT, DECIMAL) is not decided here
            kind, value = _evaluate(top)
            columns.append((item.alias, kind))
            values.append(value)
    except _NotEvaluated:
        return None
    return LiteralRow(columns, tuple(values))


def _evaluate(node: exp.Expr) -> tuple[str, object]:
    """(Spark type name, value) of an expression of the grammar; _NotEvaluated for anything else."""
    if isinstance(node, exp.Paren):
        return _evaluate(node.this)
    if isinstance(node, exp.Cast):
        to = node.args.get("to")
        if not isinstance(to, exp.DataType) or to.this != exp.DataType.Type.BIGINT:
            raise _NotEvaluated
        kind, value = _evaluate(node.this)
        if kind not in ("int", "bigint"):
            raise _NotEvaluated
        return "bigint", value
    if isinstance(node, exp.Literal):
        if node.is_string:
            raise _NotEvaluated
        try:
            value = int(node.this)
        except ValueError:
            raise _NotEvaluated from None  # a decimal or a float literal
        if not _LONG[0] <= value <= _LONG[1]:
            raise _NotEvaluated
        # Spark types an integer literal INT when it fits, else BIGINT
        return ("int" if _INT[0] <= value <= _INT[1] else "bigint"), value
    if isinstance(node, exp.Neg):
        kind, value = _evaluate(node.this)
        if kind not in ("int", "bigint") or not isinstance(value, int) or value == _LONG[0]:
            raise _NotEvaluated
        return kind, -value
    compare = _COMPARE.get(type(node))
    if compare is not None:
        (left_kind, left), (right_kind, right) = _evaluate(node.this), _evaluate(node.expression)
        if {left_kind, right_kind} - {"int", "bigint"}:
            raise _NotEvaluated
        return "boolean", compare(left, right)  # type: ignore[arg-type]
    if isinstance(node, exp.Not):
        kind, value = _evaluate(node.this)
        if kind != "boolean":
            raise _NotEvaluated
        return "boolean", not value
    if isinstance(node, (exp.And, exp.Or)):
        (left_kind, left), (right_kind, right) = _evaluate(node.this), _evaluate(node.expression)
        if left_kind != "boolean" or right_kind != "boolean":
            raise _NotEvaluated
        return "boolean", (left and right) if isinstance(node, exp.And) else (left or right)
    raise _NotEvaluated
