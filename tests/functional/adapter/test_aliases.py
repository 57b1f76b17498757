"""dbt-tests-adapter's aliases suite on this adapter.

The suite's `string_literal` macro casts with Postgres's `::text`; Spark SQL has no TEXT type, so the mixin serves
the same macro with `::string`."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.aliases import fixtures
from dbt.tests.adapter.aliases.test_aliases import (
    BaseAliasErrors,
    BaseAliases,
    BaseSameAliasDifferentDatabases,
    BaseSameAliasDifferentSchemas,
)


class SparkCastMacro:
    @pytest.fixture(scope="class")
    def macros(self):
        return {
            "cast.sql": fixtures.MACROS__CAST_SQL.replace("::text", "::string"),
            "expect_value.sql": fixtures.MACROS__EXPECT_VALUE_SQL,
        }


class TestAliases(SparkCastMacro, BaseAliases):
    pass


class TestAliasErrors(SparkCastMacro, BaseAliasErrors):
    pass


class TestSameAliasDifferentSchemas(SparkCastMacro, BaseSameAliasDifferentSchemas):
    pass


class TestSameAliasDifferentDatabases(SparkCastMacro, BaseSameAliasDifferentDatabases):
    pass
