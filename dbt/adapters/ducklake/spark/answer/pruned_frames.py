"""DataFrames of lake tables whose filters skip files by catalog statistics, as SQL reads do (spark/answer/read_pruning).

A Python model's `dbt.ref(...)` is a DataFrame over the table's Spark view, which reads every live file (Spark then
skips row groups by footers, after opening each file). `prunable` returns that DataFrame with `filter` / `where`
that, on a condition the catalog statistics can decide, read only the files that can match: the condition (its text
from Spark's analysis of the filter) becomes the WHERE of `SELECT * FROM <table>`, which read_pruning rewrites to a
view of those files. Anything it cannot decide
filters the full DataFrame as before. Classic sessions only (as for SQL: Connect DataFrames resolve views lazily).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlglot
from pyspark.sql import Column, DataFrame
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from ...lake.catalog.state import LakeState
from .read_pruning import Refresh, pruned_reads

ALIAS = "__ducklake_pruned"  # the table's alias in the pruning SELECT, and the filter's column qualifier


def condition_sql(df: DataFrame, condition: Column | str) -> str | None:
    """The Spark SQL text of a filter condition on df, its columns qualified by ALIAS: the analyzed condition of
    `df.alias(ALIAS).filter(condition)` (None when analysis gives no single filter)."""
    try:
        plan = df.alias(ALIAS).filter(condition)._jdf.queryExecution().analyzed()  # type: ignore[operator]
        if plan.getClass().getSimpleName() != "Filter":
            return None
        return _between_as_operator(str(plan.condition().sql()))
    except Exception:  # noqa: BLE001 - not analyzable here (the caller's filter reports the user's error)
        return None


_BETWEEN = "__ducklake_between"


def _between_as_operator(sql: str) -> str | None:
    """Spark writes an analysed BETWEEN as `between(x, low, high)`, which sqlglot (and so read_pruning) cannot
    parse: rewritten as `(x BETWEEN low AND high)` (the same test). None when the text does not parse."""
    try:
        tokens = sqlglot.tokenize(sql, read="spark")
        calls = [t for t, nxt in zip(tokens, tokens[1:], strict=False)
                 if t.token_type == TokenType.BETWEEN and nxt.token_type == TokenType.L_PAREN]
        if not calls:
            return sql
        for t in reversed(calls):  # by token position: a string literal holding "between(" is left alone
            sql = sql[:t.start] + _BETWEEN + sql[t.end + 1:]
        tree = sqlglot.parse_one(sql, read="spark")
    except (ParseError, TokenError, ValueError):
        return None

    def operator(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Anonymous) and node.name.lower() == _BETWEEN and len(node.expressions) == 3:
            x, low, high = node.expressions
            return exp.paren(exp.Between(this=x, low=low, high=high))
        return node

    return tree.transform(operator).sql("spark")


class PrunableDataFrame(ClassicDataFrame):
    """A lake table's DataFrame whose filter/where prune its files by catalog statistics when they can."""

    def __init__(self, df: DataFrame, prune: Callable[[str], DataFrame | None]) -> None:
        super().__init__(df._jdf, df.sparkSession)  # type: ignore[attr-defined]
        self._ducklake_prune = prune

    def filter(self, condition: Column | str) -> DataFrame:  # type: ignore[override]
        sql = condition_sql(ClassicDataFrame(self._jdf, self.sparkSession), condition)
        pruned = self._ducklake_prune(sql) if sql else None
        return pruned if pruned is not None else super().filter(condition)

    def where(self, condition: Column | str) -> DataFrame:  # type: ignore[override]
        return self.filter(condition)


def prunable(df: DataFrame, table: str, state: Callable[[], LakeState], refresh: Refresh) -> DataFrame:
    """df (a classic DataFrame reading the lake table `table`, a quoted schema.name) with pruning filters.

    state: the lake's current state; refresh: makes lake names current in Spark (see read_pruning)."""
    if not isinstance(df, ClassicDataFrame):
        return df
    spark = df.sparkSession

    def prune(where: str) -> DataFrame | None:
        sql = f"SELECT * FROM {table} {ALIAS} WHERE {where}"
        try:
            with pruned_reads(spark, state(), sql, refresh) as q:
                if not q.replaced:
                    return None
                out: Any = spark.sql(q.sql)  # analyzed here: the plan holds once the block drops its views
                return out
        except Exception:  # noqa: BLE001 - a condition this SQL cannot state (e.g. a Python UDF's)
            return None

    return PrunableDataFrame(df, prune)
