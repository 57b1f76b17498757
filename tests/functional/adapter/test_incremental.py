"""dbt-tests-adapter's incremental suites on this adapter (every strategy, on_schema_change, predicates)."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.basic.test_incremental import BaseIncrementalBadStrategy
from dbt.tests.adapter.incremental.test_incremental_merge_exclude_columns import BaseMergeExcludeColumns
from dbt.tests.adapter.incremental.test_incremental_microbatch import BaseMicrobatch
from dbt.tests.adapter.incremental.test_incremental_on_schema_change import BaseIncrementalOnSchemaChange
from dbt.tests.adapter.incremental.test_incremental_predicates import BaseIncrementalPredicates
from dbt.tests.adapter.incremental.test_incremental_unique_id import BaseIncrementalUniqueKey

from tests.support.coverage import full_only_tests


class TestIncrementalUniqueKeyMerge(BaseIncrementalUniqueKey):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+incremental_strategy": "merge"}}


# delete+insert by default on one key, three keys (with and without updates) and a refused key: the other cases vary
# how the key list is written, which the merge class above runs in full
@full_only_tests("a unique-key list variant: TestIncrementalUniqueKeyMerge runs it by default",
                 "test__empty_unique_key_list", "test__bad_unique_key_list", "test__no_unique_keys",
                 "test__empty_str_unique_key", "test__unary_unique_key_list", "test__duplicated_unary_unique_key_list")
class TestIncrementalUniqueKeyDeleteInsert(BaseIncrementalUniqueKey):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+incremental_strategy": "delete+insert"}}


class TestIncrementalOnSchemaChange(BaseIncrementalOnSchemaChange):
    pass


class TestIncrementalPredicatesDeleteInsert(BaseIncrementalPredicates):
    pass


class TestPredicatesDeleteInsert(BaseIncrementalPredicates):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+predicates": ["id != 2"], "+incremental_strategy": "delete+insert"}}


class TestIncrementalPredicatesMerge(BaseIncrementalPredicates):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+incremental_predicates": ["dbt_internal_dest.id != 2"],
                           "+incremental_strategy": "merge"}}


class TestPredicatesMerge(BaseIncrementalPredicates):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+predicates": ["dbt_internal_dest.id != 2"], "+incremental_strategy": "merge"}}


class TestMergeExcludeColumns(BaseMergeExcludeColumns):
    pass


class TestMicrobatch(BaseMicrobatch):
    pass


class TestIncrementalBadStrategy(BaseIncrementalBadStrategy):
    pass
