"""Rows of literals computed on the driver (spark/answer/literal_row.py) are Spark's own: same column names, same types,
same values, for dbt's data-test wrapper with default and configured thresholds; other shapes are left to Spark.
A LazySession stands for its session and starts it only when used."""

from __future__ import annotations

import time

import pytest
import sqlglot
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.spark.answer.literal_row import literal_row
from dbt.adapters.ducklake.spark.answer.read_pruning import ONE_ROW
from dbt.adapters.ducklake.spark.env.session import LazySession, cancel_tagged, is_classic, tag_jobs

ANSWERED = [
    # dbt's default wrapper: count(*) != 0 for warn and error
    "SELECT CAST(0 AS BIGINT) AS failures, CAST(0 AS BIGINT) <> 0 AS should_warn, CAST(0 AS BIGINT) <> 0 AS should_error",
    "SELECT CAST(7 AS BIGINT) AS failures, CAST(7 AS BIGINT) != 0 AS should_warn, CAST(7 AS BIGINT) != 0 AS should_error",
    # configured thresholds: `warn_if: ">10"`, `error_if: ">= 100"`, and the other comparisons
    "SELECT CAST(12 AS BIGINT) AS failures, CAST(12 AS BIGINT) > 10 AS should_warn, CAST(12 AS BIGINT) >= 100 AS e",
    "SELECT CAST(3 AS BIGINT) < 4 AS a, CAST(3 AS BIGINT) <= 3 AS b, CAST(3 AS BIGINT) = 3 AS c, (CAST(3 AS BIGINT)) = -3 AS d",
    "SELECT NOT CAST(1 AS BIGINT) > 0 AS n, CAST(1 AS BIGINT) > 0 AND CAST(1 AS BIGINT) < 5 AS a, "
    "CAST(1 AS BIGINT) > 5 OR CAST(1 AS BIGINT) = 1 AS o",
    "SELECT CAST(9223372036854775807 AS BIGINT) AS big, CAST(9223372036854775807 AS BIGINT) > 3000000000 AS w",
    "SELECT CAST(0 AS BIGINT) AS Failures",  # the alias's case kept
]
LEFT_TO_SPARK = [
    "SELECT 0 AS failures",  # an INT literal: Spark's type for a bare number is not decided here
    "SELECT -2147483648 AS x",
    "SELECT CAST(0 AS INT) AS failures",
    "SELECT CAST(0 AS BIGINT)",  # no alias: Spark names it
    "SELECT CAST(0 AS BIGINT) + 1 AS s",  # arithmetic
    "SELECT CAST(0 AS BIGINT) > 1.5 AS w",  # a decimal
    "SELECT CAST(NULL AS BIGINT) AS n",
    "SELECT CAST(0 AS BIGINT) > 0 AS w FROM t",  # a FROM
    "SELECT CAST('0' AS BIGINT) AS s",
    "SELECT coalesce(CAST(0 AS BIGINT), 1) AS c",
]


@pytest.mark.parametrize("sql", ANSWERED)
def test_rows_are_sparks(spark: SparkSession, sql: str) -> None:
    row = literal_row(sqlglot.parse_one(sql, read="spark"))
    assert row is not None
    df = spark.sql(sql + ONE_ROW)
    assert row.columns == [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
    got = tuple(df.collect()[0])
    assert row.values == got and [type(v) for v in row.values] == [type(v) for v in got]


@pytest.mark.parametrize("sql", LEFT_TO_SPARK)
def test_other_shapes_are_left_to_spark(sql: str) -> None:
    assert literal_row(sqlglot.parse_one(sql, read="spark")) is None


def test_a_lazy_session_starts_on_first_use(spark: SparkSession) -> None:
    made: list[int] = []

    def make() -> SparkSession:
        made.append(1)
        return spark

    lazy = LazySession(make, classic=True)
    assert is_classic(lazy) and not lazy.started  # answered without starting it
    tag_jobs(lazy, "lazy-tag")  # kept for this thread's first use
    cancel_tagged(lazy, "lazy-tag", lambda: False)  # nothing runs: nothing to cancel, nothing started
    time.sleep(0.3)
    assert not made and not lazy.started
    assert lazy.sql("SELECT 41 + 1 AS x").collect()[0][0] == 42
    assert made == [1] and lazy.started and lazy.session() is spark
    assert "lazy-tag" in spark.sparkContext.getJobTags()  # the pending tag was applied at the first use
    spark.sparkContext.removeJobTag("lazy-tag")
    lazy.sql("SELECT 1").collect()
    assert made == [1]  # made once


def test_a_cancel_while_the_session_starts_stops_the_job_run_after_the_start(spark: SparkSession) -> None:
    """Ctrl-C while a statement waits for the session to start (seen under load: the prestart not finished): the
    statement then starts its job, which the cancel stops; it does not run to its end."""
    import threading

    release = threading.Event()

    def make() -> SparkSession:
        release.wait(30)
        return spark

    lazy = LazySession(make, classic=True)
    outcome: list[object] = []
    running = [True]

    def statement() -> None:
        tag_jobs(lazy, "late-cancel")
        try:
            outcome.append(lazy.sql("SELECT max(a.id * b.id) FROM range(300000) a CROSS JOIN range(300000) b")
                           .collect())
        except Exception as e:  # noqa: BLE001 - the cancel's error is the outcome
            outcome.append(e)
        finally:
            running[0] = False
            spark.sparkContext.removeJobTag("late-cancel")

    worker = threading.Thread(target=statement)
    worker.start()
    cancel_tagged(lazy, "late-cancel", lambda: running[0])  # the session is not started yet
    time.sleep(0.5)
    release.set()
    worker.join(120)
    assert not worker.is_alive(), "the job ran on: the cancel was dropped because the session had not started"
    assert len(outcome) == 1 and isinstance(outcome[0], Exception) and "cancel" in str(outcome[0]).lower()


def test_a_failed_start_is_raised_to_every_use() -> None:
    calls: list[int] = []

    def make() -> SparkSession:
        calls.append(1)
        raise RuntimeError("no java here")

    lazy = LazySession(make, classic=True)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="no java here"):
            lazy.sql("SELECT 1")
    assert calls == [1] and not lazy.started
