"""dbt-tests-adapter's unit_testing suite on this adapter."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.unit_testing import test_quoted_reserved_word_column_names as reserved_word
from dbt.tests.adapter.unit_testing.test_case_insensitivity import BaseUnitTestCaseInsensivity
from dbt.tests.adapter.unit_testing.test_invalid_input import BaseUnitTestInvalidInput
from dbt.tests.adapter.unit_testing.test_quoted_reserved_word_column_names import (
    BaseUnitTestQuotedReservedWordColumnNames,
)
from dbt.tests.adapter.unit_testing.test_types import BaseUnitTestingTypes


class TestUnitTestingTypes(BaseUnitTestingTypes):
    @pytest.fixture
    def data_types(self):
        # sql_value, yaml_value: Spark SQL literals (the base list is Postgres's: ::json, TIMESTAMPTZ)
        return [
            ["1", "1"],
            ["2.0", "2.0"],
            ["'12345'", "12345"],
            ["'string'", "string"],
            ["true", "true"],
            ["date '2011-11-11'", "2011-11-11"],
            ["timestamp '2013-11-03 00:00:00'", "2013-11-03 00:00:00"],
            ["cast(1 as decimal(10, 2))", "1"],
            ["array(1, 2, 3)", "'array(1, 2, 3)'"],
            ["map('10', 't', '15', 'f')", """'map("10", "t", "15", "f")'"""],
            ['named_struct("a", 1, "b", 2)', """'named_struct("a", 1, "b", 2)'"""],
        ]


class TestUnitTestCaseInsensitivity(BaseUnitTestCaseInsensivity):
    pass


class TestUnitTestInvalidInput(BaseUnitTestInvalidInput):
    pass


class TestUnitTestQuotedReservedWordColumnNames(BaseUnitTestQuotedReservedWordColumnNames):
    """Spark SQL quotes identifiers with backticks (`"GROUP"` is a syntax error in an alias)."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model.sql": reserved_word.my_model_sql,
            "my_upstream_model.sql": reserved_word.my_upstream_model_with_reserved_word_column_name_sql.replace(
                '"GROUP"', "`GROUP`"),
            "unit_tests.yml": reserved_word.test_my_model_csv_fixtures_yml,
        }
