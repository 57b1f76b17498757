"""dbt's adapter test suite and our functional scenarios: one lake (a DuckDB-file catalog) per test session, each
test class in its own schema, one local SparkSession for the process (shared with the Spark-layer tests)."""

from __future__ import annotations

import pytest

pytest_plugins = ["dbt.tests.fixtures.project"]


@pytest.fixture(scope="session")
def ducklake_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("dbt_lake"))


@pytest.fixture(scope="class")
def dbt_profile_target(ducklake_root: str) -> dict[str, object]:
    return {
        "type": "ducklake",
        "catalog": f"{ducklake_root}/catalog.ducklake",
        "data_path": f"{ducklake_root}/data/",
        "master": "local[2]",
        "threads": 1,
        "spark_config": {"spark.sql.shuffle.partitions": "4"},
    }


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/functional/" in str(item.fspath):
            item.add_marker(pytest.mark.dbt)
