"""The session keeps Spark's warehouse folders out of the working directory (a dbt project stays clean)."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession


def test_databases_make_no_folder_in_the_working_directory(spark: SparkSession) -> None:
    warehouse = spark.conf.get("spark.sql.warehouse.dir")
    assert "dbt-ducklake-warehouse-" in warehouse and os.getcwd() not in warehouse
    spark.sql("CREATE DATABASE IF NOT EXISTS session_dirs_check")
    try:
        assert not os.path.exists(os.path.join(os.getcwd(), "spark-warehouse", "session_dirs_check.db"))
        assert os.path.isdir(os.path.join(warehouse.removeprefix("file:"), "session_dirs_check.db"))
    finally:
        spark.sql("DROP DATABASE IF EXISTS session_dirs_check")
