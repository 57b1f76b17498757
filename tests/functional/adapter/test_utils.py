"""dbt-tests-adapter's utils suite (cross-database macros) on this adapter.

Two fixtures are adjusted for Spark SQL (the idea borrowed from dbt-spark's own tests):
* listagg: Spark's collect_list has no ORDER BY, so the two ordered variants are dropped from the model;
* get_intervals_between: ISO date literals instead of '09/01/2023' strings.

Each class is a dbt project of its own (seeds, a model, a test through Spark). The default run takes the classes whose
results pass through what is ours: the lake's types (casts, dates and times with their zones, arrays, hashes), set
operations and aggregates over lake tables, the listagg we override and the adapter's own methods; the other macros
are dbt-spark's string and comparison helpers, run under `DUCKLAKE_TEST_FULL=1`.
"""

from __future__ import annotations

import re

import pytest
from dbt.tests.adapter.utils import fixture_get_intervals_between, fixture_listagg
from dbt.tests.adapter.utils.test_any_value import BaseAnyValue
from dbt.tests.adapter.utils.test_array_append import BaseArrayAppend
from dbt.tests.adapter.utils.test_array_concat import BaseArrayConcat
from dbt.tests.adapter.utils.test_array_construct import BaseArrayConstruct
from dbt.tests.adapter.utils.test_bool_or import BaseBoolOr
from dbt.tests.adapter.utils.test_cast import BaseCast
from dbt.tests.adapter.utils.test_cast_bool_to_text import BaseCastBoolToText
from dbt.tests.adapter.utils.test_concat import BaseConcat
from dbt.tests.adapter.utils.test_current_timestamp import BaseCurrentTimestampNaive
from dbt.tests.adapter.utils.test_date import BaseDate
from dbt.tests.adapter.utils.test_date_spine import BaseDateSpine
from dbt.tests.adapter.utils.test_date_trunc import BaseDateTrunc
from dbt.tests.adapter.utils.test_dateadd import BaseDateAdd
from dbt.tests.adapter.utils.test_datediff import BaseDateDiff
from dbt.tests.adapter.utils.test_equals import BaseEquals
from dbt.tests.adapter.utils.test_escape_single_quotes import BaseEscapeSingleQuotesBackslash
from dbt.tests.adapter.utils.test_except import BaseExcept
from dbt.tests.adapter.utils.test_generate_series import BaseGenerateSeries
from dbt.tests.adapter.utils.test_get_intervals_between import BaseGetIntervalsBetween
from dbt.tests.adapter.utils.test_get_powers_of_two import BaseGetPowersOfTwo
from dbt.tests.adapter.utils.test_hash import BaseHash
from dbt.tests.adapter.utils.test_intersect import BaseIntersect
from dbt.tests.adapter.utils.test_last_day import BaseLastDay
from dbt.tests.adapter.utils.test_length import BaseLength
from dbt.tests.adapter.utils.test_listagg import BaseListagg
from dbt.tests.adapter.utils.test_null_compare import BaseMixedNullCompare, BaseNullCompare
from dbt.tests.adapter.utils.test_position import BasePosition
from dbt.tests.adapter.utils.test_replace import BaseReplace
from dbt.tests.adapter.utils.test_right import BaseRight
from dbt.tests.adapter.utils.test_safe_cast import BaseSafeCast
from dbt.tests.adapter.utils.test_source_freshness_custom_info import BaseCalculateFreshnessMethod
from dbt.tests.adapter.utils.test_split_part import BaseSplitPart
from dbt.tests.adapter.utils.test_string_literal import BaseStringLiteral
from dbt.tests.adapter.utils.test_timestamps import BaseCurrentTimestamps
from dbt.tests.adapter.utils.test_validate_sql import BaseValidateSqlMethod

from tests.support.coverage import FULL

full_only = pytest.mark.skipif(not FULL, reason="dbt-spark's own helper macro (the whole suite: DUCKLAKE_TEST_FULL=1)")


class TestAnyValue(BaseAnyValue):
    pass


@full_only
class TestArrayAppend(BaseArrayAppend):
    pass


@full_only
class TestArrayConcat(BaseArrayConcat):
    pass


class TestArrayConstruct(BaseArrayConstruct):
    pass


@full_only
class TestBoolOr(BaseBoolOr):
    pass


class TestCast(BaseCast):
    pass


@full_only
class TestCastBoolToText(BaseCastBoolToText):
    pass


@full_only
class TestConcat(BaseConcat):
    pass


@full_only
class TestCurrentTimestamp(BaseCurrentTimestampNaive):
    pass


class TestCurrentTimestamps(BaseCurrentTimestamps):
    @pytest.fixture(scope="class")
    def models(self):
        return {"get_current_timestamp.sql": "select {{ current_timestamp() }} as current_timestamp"}

    @pytest.fixture(scope="class")
    def expected_schema(self):
        return {"current_timestamp": "timestamp"}

    @pytest.fixture(scope="class")
    def expected_sql(self):
        return "select current_timestamp() as current_timestamp"


@full_only
class TestDate(BaseDate):
    pass


class TestDateSpine(BaseDateSpine):
    pass


@full_only
class TestDateTrunc(BaseDateTrunc):
    pass


class TestDateAdd(BaseDateAdd):
    pass


class TestDateDiff(BaseDateDiff):
    pass


@full_only
class TestEquals(BaseEquals):
    pass


@full_only
class TestEscapeSingleQuotes(BaseEscapeSingleQuotesBackslash):
    pass


class TestExcept(BaseExcept):
    pass


@full_only
class TestGenerateSeries(BaseGenerateSeries):
    pass


@full_only
class TestGetIntervalsBetween(BaseGetIntervalsBetween):
    """The base model passes '09/01/2023' strings to datediff outside Postgres; Spark reads only ISO dates (the
    MM/DD/YYYY text becomes NULL and the macro renders `None`), so the model uses date literals."""

    @pytest.fixture(scope="class")
    def models(self):
        sql = """
select
  {{ get_intervals_between("date '2023-09-01'", "date '2023-09-12'", "day") }} as intervals,
  11 as expected
"""
        return {
            "test_get_intervals_between.yml": fixture_get_intervals_between.models__test_get_intervals_between_yml,
            "test_get_intervals_between.sql": self.interpolate_macro_namespace(sql, "get_intervals_between"),
        }


@full_only
class TestGetPowersOfTwo(BaseGetPowersOfTwo):
    pass


class TestHash(BaseHash):
    pass


@full_only
class TestIntersect(BaseIntersect):
    pass


@full_only
class TestLastDay(BaseLastDay):
    pass


@full_only
class TestLength(BaseLength):
    pass


def _listagg_unordered_model() -> str:
    """The base listagg model without the two `order by` variants (the first two union branches)."""
    sql = fixture_listagg.models__test_listagg_sql
    sql, n = re.subn(r"calculate as \(.*?'bottom_ordered_limited' as version.*?union all\s*",
                     "calculate as (\n", sql, count=1, flags=re.S)
    assert n == 1, "the base listagg fixture changed shape"
    return sql


class TestListagg(BaseListagg):
    pass  # ordered and limited variants included: ducklake__listagg honours ORDER BY


@full_only
class TestMixedNullCompare(BaseMixedNullCompare):
    pass


@full_only
class TestNullCompare(BaseNullCompare):
    pass


@full_only
class TestPosition(BasePosition):
    pass


@full_only
class TestReplace(BaseReplace):
    pass


@full_only
class TestRight(BaseRight):
    pass


class TestSafeCast(BaseSafeCast):
    pass


@full_only
class TestSplitPart(BaseSplitPart):
    pass


@full_only
class TestStringLiteral(BaseStringLiteral):
    pass


class TestValidateSqlMethod(BaseValidateSqlMethod):
    pass


class TestCalculateFreshnessMethod(BaseCalculateFreshnessMethod):
    @pytest.fixture(scope="class")
    def valid_sql(self) -> str:
        return "select current_timestamp()"
