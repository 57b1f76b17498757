"""One local SparkSession per test process (2 cores here), shared by every Spark test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.spark.env.session import build_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session("local[2]", "dbt-ducklake-tests", {"spark.sql.shuffle.partitions": "4"})
    # the dbt tests of the same process may have set dbt-spark's ANSI-off; the Spark layer is tested with Spark's default
    session.conf.set("spark.sql.ansi.enabled", "true")
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in str(item.fspath):
            item.add_marker(pytest.mark.spark)
