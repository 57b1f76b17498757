"""Spark SQL conditions -> pruning predicates: only what the condition implies, never more."""

from __future__ import annotations

import pytest

from dbt.adapters.ducklake.lake.read.pruning import And, Compare, InValues, IsNull, Or
from dbt.adapters.ducklake.lake.records import Column
from dbt.adapters.ducklake.spark.read.predicates import to_predicate

COLS = (Column(1, "id", "int64"), Column(2, "name", "varchar"), Column(3, "d", "date"), Column(4, "ok", "boolean"),
        Column(5, "s", "struct", children=(Column(6, "a", "int32"),)), Column(7, "amt", "decimal(10,2)"),
        Column(8, "f", "float64"), Column(9, "i", "int32"))


@pytest.mark.parametrize(("cond", "expected"), [
    ("id = 5", Compare("id", "=", "5")),
    ("5 < id", Compare("id", ">", "5")),
    ("ID >= -3", Compare("id", ">=", "-3")),
    ("id <> 1", Compare("id", "!=", "1")),
    ("id BETWEEN 20 AND 60", And((Compare("id", ">=", "20"), Compare("id", "<=", "60")))),
    ("id IN (1, 2)", InValues("id", ("1", "2"))),
    ("name IS NULL OR id = 42", Or((IsNull("name"), Compare("id", "=", "42")))),
    ("name IS NOT NULL", IsNull("name", negated=True)),
    ("d > DATE '2024-01-01'", Compare("d", ">", "2024-01-01")),
    ("d = CAST('2024-01-01' AS DATE)", Compare("d", "=", "2024-01-01")),
    ("d <= '2024-01-01'", Compare("d", "<=", "2024-01-01")),
    ("ok = true", Compare("ok", "=", "true")),
    ("t.id = 1", Compare("id", "=", "1")),
    ("(id > 1) AND (name LIKE 'a%')", Compare("id", ">", "1")),  # LIKE is dropped from the AND: still implied
    ("id > 1 AND name = 'x'", And((Compare("id", ">", "1"), Compare("name", "=", "x")))),
    # Spark's analysed conditions (a DataFrame filter's SQL): the literal cast to the column's type, value unchanged
    ("((t.id >= CAST(120 AS BIGINT)) AND (t.id < CAST(130 AS BIGINT)))",
     And((Compare("id", ">=", "120"), Compare("id", "<", "130")))),
    ("i > CAST(-3 AS INT)", Compare("i", ">", "-3")),
    ("amt <= CAST(5.25 AS DECIMAL(10,2))", Compare("amt", "<=", "5.25")),
    ("f > CAST(1.5 AS DOUBLE)", Compare("f", ">", "1.5")),
])
def test_translates(cond: str, expected: object) -> None:
    assert to_predicate(cond, COLS, (None, "t")) == expected


@pytest.mark.parametrize("cond", [
    "name LIKE 'r2%' OR id = 1",  # an OR with an untranslatable branch is unknown as a whole
    "NOT (id = 1)",
    "id % 3 = 0",
    "name = 5",  # Spark casts the column, not the literal: text bounds say nothing
    "d = 20240101",
    "s.a = 1",  # nested fields are not pruned
    "id = other_col",
    "x.id = 1",  # another relation's column
    "id IN (SELECT 1)",
    "not valid sql (((",
    "",
    "true",
    "id >= CAST(1.5 AS INT)",  # the cast rounds: 1.5 is not the value compared
    "amt <= CAST(5.255 AS DECIMAL(10,2))",
    "i > CAST(99999999999 AS INT)",  # out of range
    "id = CAST('7' AS BIGINT)",
])
def test_untranslatable_gives_no_predicate(cond: str) -> None:
    assert to_predicate(cond, COLS, (None, "t")) is None


def test_qualifiers_choose_the_target() -> None:
    assert to_predicate("t.id = s.id AND t.id > 3", COLS, ("t",)) == Compare("id", ">", "3")
    assert to_predicate("id > 3", COLS, ("t",)) is None  # unqualified columns may be the source's in a MERGE
