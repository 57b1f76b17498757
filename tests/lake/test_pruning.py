"""File pruning decisions from column statistics: prune only what the statistics prove cannot match."""

from __future__ import annotations

import pytest

from dbt.adapters.ducklake.lake.read.pruning import And, Compare, InValues, IsNull, Or, may_match
from dbt.adapters.ducklake.lake.records import Column, ColumnStats, DataFile, TableInfo

COLUMNS = (Column(1, "id", "int64"), Column(2, "name", "varchar"), Column(3, "x", "float64"),
           Column(4, "d", "date"), Column(5, "late", "int32"), Column(6, "ts", "timestamptz"))
TABLE = TableInfo(1, "u", 0, "main", "t", "t/", True, 1, COLUMNS)


def _file(*stats: ColumnStats, rows: int = 10) -> DataFile:
    return DataFile(1, 1, "/f.parquet", "f.parquet", True, rows, 100, None, 0, 1, stats=stats)


ID_10_20 = ColumnStats(1, None, 10, 0, "10", "20")
NAME = ColumnStats(2, None, 10, 2, "b", "m")
NO_NAN = ColumnStats(3, None, 10, 0, "1.5", "2.5", False)
MAYBE_NAN = ColumnStats(3, None, 10, 0, "1.5", "2.5", True)
DATES = ColumnStats(4, None, 10, 0, "2024-01-01", "2024-01-31")
ALL_NULL = ColumnStats(1, None, 10, 10, None, None)
TS = ColumnStats(6, None, 10, 0, "2024-01-01 00:00:00+00", "2024-01-01 12:00:00+00")


@pytest.mark.parametrize(("pred", "expected"), [
    (Compare("id", "=", "15"), True), (Compare("id", "=", "9"), False), (Compare("id", "=", "21"), False),
    (Compare("ID", "=", "20"), True),  # names are case-insensitive, as in Spark and DuckDB
    (Compare("id", "<", "10"), False), (Compare("id", "<=", "10"), True),
    (Compare("id", ">", "20"), False), (Compare("id", ">=", "20"), True),
    (Compare("id", "!=", "15"), True),
    (InValues("id", ("1", "2", "30")), False), (InValues("id", ("1", "12")), True), (InValues("id", ()), False),
    (And((Compare("id", ">=", "12"), Compare("id", "<=", "13"))), True),
    (And((Compare("id", ">=", "12"), Compare("id", ">", "99"))), False),
    (Or((Compare("id", "<", "5"), Compare("id", ">", "99"))), False),
    (Or((Compare("id", "<", "5"), Compare("id", "=", "11"))), True),
    (Compare("name", "<", "b"), False), (Compare("name", ">", "m"), False), (Compare("name", "=", "c"), True),
    (Compare("name", "=", "ma"), False),  # bytewise: 'ma' > 'm'
    (IsNull("name"), True), (IsNull("id"), False), (IsNull("id", negated=True), True),
    (Compare("d", "=", "2024-02-01"), False), (Compare("d", ">=", "2024-01-31"), True),
    (Compare("ts", ">", "2024-01-01 12:00:00"), False), (Compare("ts", ">=", "2024-01-01 11:00:00"), True),
    (Compare("x", "<", "1.5"), False), (Compare("x", ">", "2.5"), False),
    (Compare("nope", "=", "1"), True),  # unknown column: no decision
    (Compare("late", "=", "1"), True),  # no stats for the column (added later): no decision
    (Compare("id", "=", "1.5"), True),  # a value the type cannot hold: the engine decides
])
def test_may_match(pred: object, expected: bool) -> None:
    f = _file(ID_10_20, NAME, NO_NAN, DATES, TS)
    assert may_match(pred, f, TABLE) is expected  # type: ignore[arg-type]


def test_nan_keeps_upper_comparisons() -> None:
    f = _file(MAYBE_NAN)
    # NaN is larger than every number: a file that may hold NaN may match x > anything
    assert may_match(Compare("x", ">", "100"), f, TABLE)
    assert may_match(Compare("x", "!=", "2.0"), f, TABLE)
    assert not may_match(Compare("x", "<", "1.0"), f, TABLE)
    assert may_match(Compare("x", "=", "nan"), _file(NO_NAN), TABLE)  # NaN literals are never pruned


def test_all_null_column_matches_no_comparison() -> None:
    f = _file(ALL_NULL)
    assert not may_match(Compare("id", "=", "1"), f, TABLE)
    assert not may_match(IsNull("id", negated=True), f, TABLE)
    assert may_match(IsNull("id"), f, TABLE)
    # unknown bounds without a null count prove nothing
    assert may_match(Compare("id", "=", "1"), _file(ColumnStats(1, None, None, None, None, None)), TABLE)


def test_long_string_bounds_may_be_cut() -> None:
    long_max = "m" * 256
    f = _file(ColumnStats(2, None, 10, 0, "a", long_max))
    assert may_match(Compare("name", ">", "m" * 300), f, TABLE)  # the true max may be longer than the cut bound
    assert not may_match(Compare("name", "<", "a"), f, TABLE)  # a cut min is still a lower bound
