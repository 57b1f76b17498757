"""dbt-tests-adapter's utils/data_types suite (type_* macros) on this adapter.

The comparison seeds of the float and int cases are typed explicitly: a CSV number loads as double / bigint here (as
in dbt-spark), while type_float() / type_int() are float / int, so the base check reports a type (or EXCEPT) mismatch
that says nothing about the macros."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.utils.data_types import test_type_float, test_type_int
from dbt.tests.adapter.utils.data_types.test_type_bigint import BaseTypeBigInt
from dbt.tests.adapter.utils.data_types.test_type_boolean import BaseTypeBoolean
from dbt.tests.adapter.utils.data_types.test_type_float import BaseTypeFloat
from dbt.tests.adapter.utils.data_types.test_type_int import BaseTypeInt
from dbt.tests.adapter.utils.data_types.test_type_numeric import BaseTypeNumeric
from dbt.tests.adapter.utils.data_types.test_type_string import BaseTypeString
from dbt.tests.adapter.utils.data_types.test_type_timestamp import BaseTypeTimestamp


def _typed_seed(column: str, spark_type: str) -> str:
    return f"""
version: 2
seeds:
  - name: expected
    config:
      column_types:
        {column}: {spark_type}
"""


class TestTypeBigInt(BaseTypeBigInt):
    pass


class TestTypeBoolean(BaseTypeBoolean):
    pass


class TestTypeFloat(BaseTypeFloat):
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"expected.csv": test_type_float.seeds__expected_csv, "expected.yml": _typed_seed("float_col", "float")}


class TestTypeInt(BaseTypeInt):
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"expected.csv": test_type_int.seeds__expected_csv, "expected.yml": _typed_seed("int_col", "int")}


class TestTypeNumeric(BaseTypeNumeric):
    def numeric_fixture_type(self):
        return "decimal(28,6)"


class TestTypeString(BaseTypeString):
    pass


class TestTypeTimestamp(BaseTypeTimestamp):
    pass
