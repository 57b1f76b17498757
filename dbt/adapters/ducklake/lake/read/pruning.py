"""File pruning with column statistics: which data files may hold rows matching a predicate.

A predicate here is a small tree (comparisons, IN, IS [NOT] NULL, AND, OR) on top-level columns with values as text,
built by an engine from its own SQL. `may_match` answers "could this file hold a matching row?"; it answers True
whenever the statistics cannot prove otherwise (no stats, inexact bounds, NaN, a value of another type), so pruning
never drops a matching row. Inlined rows are not files and are never pruned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

from ..records import Column, ColumnStats, DataFile, TableInfo
from ..types import FLOAT_TYPES, parse_type, sort_key

COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
# DuckDB's Parquet writer may cut string bounds at 256 bytes: a bound that long may not be the true max
_STRING_BOUND_LIMIT = 256
_UNPRUNABLE = frozenset({"list", "struct", "map", "variant", "geometry", "interval"})


@dataclass(frozen=True)
class Compare:
    """column <op> value (value as text in the column's type, e.g. '5', '2024-01-31', 'abc')."""

    column: str
    op: str
    value: str

    def __post_init__(self) -> None:
        if self.op not in COMPARISONS:
            raise ValueError(f"unknown comparison {self.op!r} (expected one of {COMPARISONS})")


@dataclass(frozen=True)
class InValues:
    column: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class IsNull:
    column: str
    negated: bool = False  # IS NOT NULL


@dataclass(frozen=True)
class And:
    parts: tuple[Predicate, ...]


@dataclass(frozen=True)
class Or:
    parts: tuple[Predicate, ...]


Predicate = Union[Compare, InValues, IsNull, And, Or]  # noqa: UP007 (a runtime alias, used in isinstance-free code)


def all_of(parts: Sequence[Predicate]) -> Predicate | None:
    """The conjunction of the parts (the part itself when one, None when none)."""
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def may_match(predicate: Predicate | None, data_file: DataFile, table: TableInfo) -> bool:
    """False only when the file's statistics prove that no row of it satisfies the predicate."""
    if predicate is None:
        return True
    return _Evaluator(data_file, table).may(predicate)


def prune(files: Sequence[DataFile], table: TableInfo, predicate: Predicate | None) -> list[DataFile]:
    """The files that may hold matching rows, in their order."""
    return [f for f in files if may_match(predicate, f, table)]


class _Evaluator:
    def __init__(self, data_file: DataFile, table: TableInfo) -> None:
        self.file = data_file
        self.columns = {c.name.lower(): c for c in table.columns}
        self.stats = {s.column_id: s for s in data_file.stats}

    def may(self, p: Predicate) -> bool:
        if isinstance(p, And):
            return all(self.may(x) for x in p.parts)
        if isinstance(p, Or):
            return any(self.may(x) for x in p.parts)
        found = self._column(p.column)
        if found is None:
            return True
        col, st = found
        try:
            if isinstance(p, IsNull):
                return self._is_null(st, p.negated)
            if isinstance(p, InValues):
                return any(self._compare(col, st, "=", v) for v in p.values)
            return self._compare(col, st, p.op, p.value)
        except (ValueError, ArithmeticError):
            return True  # a value the column's type cannot hold: let the engine decide

    def _column(self, name: str) -> tuple[Column, ColumnStats] | None:
        col = self.columns.get(name.lower())
        if col is None or parse_type(col.type) in _UNPRUNABLE or col.is_nested:
            return None
        st = self.stats.get(col.column_id)
        if st is None:  # e.g. a column added after the file was written: its value is the default, not known here
            return None
        return col, st

    def _is_null(self, st: ColumnStats, negated: bool) -> bool:
        if st.null_count is None:
            return True
        if negated:  # IS NOT NULL: some row must be non-null
            return st.null_count < self.file.record_count
        return st.null_count > 0

    def _compare(self, col: Column, st: ColumnStats, op: str, value: str) -> bool:
        t = parse_type(col.type)
        if st.min_value is None and st.max_value is None:
            # no bounds: either unknown, or every value is NULL (then no comparison holds)
            return not (st.null_count is not None and st.null_count >= self.file.record_count)
        v = sort_key(t, value)
        lo = _key(t, st.min_value)
        hi = _key(t, st.max_value) if not _maybe_cut(t, st.max_value) else None
        if t in FLOAT_TYPES:
            if v == sort_key(t, "nan"):
                return True  # Spark and DuckDB order NaN differently from the bounds' writers: do not guess
            if st.contains_nan is not False and op in (">", ">=", "!="):
                return True  # NaN rows satisfy these (NaN is the largest value) whatever the bounds say
        if op == "=":
            return (lo is None or lo <= v) and (hi is None or v <= hi)
        if op == "<":
            return lo is None or lo < v
        if op == "<=":
            return lo is None or lo <= v
        if op == ">":
            return hi is None or hi > v
        if op == ">=":
            return hi is None or hi >= v
        # !=: only a file whose every non-null value equals v has no match
        return not (lo is not None and hi is not None and lo == v == hi)


def _key(t: str, text: str | None) -> Any:
    return None if text is None else sort_key(t, text)


def _maybe_cut(t: str, text: str | None) -> bool:
    if text is None or t not in ("varchar", "json", "blob"):
        return False
    size = len(text) // 2 if t == "blob" else len(text.encode("utf-8", "surrogatepass"))
    return size >= _STRING_BOUND_LIMIT
