"""dbt-tests-adapter's Python model suites on the embedded default (Python models run in the adapter's Spark)."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.python_model.test_python_model import (
    BasePythonEmptyTests,
    BasePythonIncrementalTests,
    BasePythonMetaGetTests,
    BasePythonModelTests,
    BasePythonSampleTests,
)
from dbt.tests.adapter.python_model.test_spark import PANDAS_MODEL, PANDAS_ON_SPARK_MODEL, PYSPARK_MODEL, BasePySparkTests
from dbt.tests.util import run_dbt


class TestPythonModel(BasePythonModelTests):
    pass


class TestPythonIncremental(BasePythonIncrementalTests):
    pass


class TestPythonMetaGet(BasePythonMetaGetTests):
    pass


class TestPythonEmpty(BasePythonEmptyTests):
    pass


class TestPythonSample(BasePythonSampleTests):
    pass


class TestPySpark(BasePySparkTests):
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        # databricks.koalas is Databricks' predecessor of pandas API on Spark (end of life, not on PyPI for Spark 4)
        return {"pandas_df.py": PANDAS_MODEL, "pyspark_df.py": PYSPARK_MODEL,
                "pandas_on_spark_df.py": PANDAS_ON_SPARK_MODEL}

    def test_different_dataframes(self, project: object) -> None:
        assert len(run_dbt(["run"])) == 3
        rows = project.run_sql(  # type: ignore[attr-defined]
            f"select City, Latitude from {project.test_schema}.pandas_on_spark_df order by City",  # type: ignore[attr-defined]
            fetch="all")
        assert [tuple(r) for r in rows][:2] == [("Bogota", 4.60), ("Brasilia", -15.78)]
