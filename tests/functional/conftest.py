"""dbt's adapter test suite and our functional scenarios: one lake (a DuckDB-file catalog) per test class, in its own
schema, one local SparkSession for the process (shared with the Spark-layer tests)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ducklake_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("dbt_lake"))


@pytest.fixture(scope="class")
def dbt_profile_target(ducklake_root: str, unique_schema: str) -> dict[str, object]:
    # a lake per test class: each class's commits read a small catalog, and classes cannot see each other's tables
    return {
        "type": "ducklake",
        "catalog": f"{ducklake_root}/{unique_schema}.ducklake",
        "data_path": f"{ducklake_root}/{unique_schema}_data/",
        "master": "local[2]",
        "threads": 1,
        "spark_config": {"spark.sql.shuffle.partitions": "4"},
    }


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/functional/" in str(item.fspath):
            item.add_marker(pytest.mark.dbt)
