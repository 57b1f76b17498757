"""A lake table Spark cannot register fails with a short error naming the table and snapshot."""
from __future__ import annotations

import logging

import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake.errors import DuckLakeError
from dbt.adapters.ducklake.spark.read.scan import create_view


def test_failed_view_error_is_short_and_full_sql_is_at_debug(spark: SparkSession,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    # A huge view SQL that Spark rejects: its parse error quotes the whole text.
    sql = "SELECT " + " + ".join(f"c{i}" for i in range(20_000)) + " FROM nowhere WHERE ((("
    with (caplog.at_level(logging.DEBUG, logger="dbt.adapters.ducklake.spark.read.scan"),
          pytest.raises(DuckLakeError) as info):
        create_view(spark, "default.readpath_bad_view", sql, "raw.events", 42)
    message = str(info.value)
    assert "raw.events" in message and "snapshot 42" in message
    assert len(message) < 600
    assert "c19999" not in message
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("c19999" in m for m in debug)  # the full text stays available at debug level
    assert not any("c19999" in r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)
    assert not spark.catalog.tableExists("default.readpath_bad_view")
