"""dbt-tests-adapter suites that dbt-spark users rely on without thinking of them: concurrency, relation type
changes, dropping a named schema, query comments, sample mode, simple copy, seeds of specific formats."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.concurrency.test_concurrency import BaseConcurrency
from dbt.tests.adapter.query_comment.test_query_comment import (
    BaseEmptyQueryComments,
    BaseMacroArgsQueryComments,
    BaseMacroInvalidQueryComments,
    BaseMacroQueryComments,
    BaseNullQueryComments,
    BaseQueryComments,
)
from dbt.tests.adapter.relations.test_changing_relation_type import BaseChangeRelationTypeValidator
from dbt.tests.adapter.relations.test_dropping_schema_named import BaseDropSchemaNamed
from dbt.tests.adapter.sample_mode.test_sample_mode import BaseSampleModeTest
from dbt.tests.adapter.simple_copy.test_simple_copy import EmptyModelsArentRunBase, SimpleCopyBase
from dbt.tests.adapter.simple_seed import seeds
from dbt.tests.adapter.simple_seed.test_seed import BaseSeedSpecificFormats
from dbt.tests.util import read_file, rm_dir, run_dbt


class TestConcurrency(BaseConcurrency):
    pass


class TestChangeRelationTypes(BaseChangeRelationTypeValidator):
    pass


class TestDropSchemaNamed(BaseDropSchemaNamed):
    pass


class TestQueryComments(BaseQueryComments):
    pass


class TestMacroQueryComments(BaseMacroQueryComments):
    pass


class TestMacroArgsQueryComments(BaseMacroArgsQueryComments):
    pass


class TestMacroInvalidQueryComments(BaseMacroInvalidQueryComments):
    pass


class TestNullQueryComments(BaseNullQueryComments):
    pass


class TestEmptyQueryComments(BaseEmptyQueryComments):
    pass


class TestSampleMode(BaseSampleModeTest):
    pass


class TestSimpleCopy(SimpleCopyBase):
    pass


class TestEmptyModelsArentRun(EmptyModelsArentRunBase):
    """The base test lists the schema through information_schema.tables, which Spark has not (nor has dbt-spark):
    the same check through the adapter's relation listing."""

    def test_dbt_doesnt_run_empty_models(self, project):
        assert len(run_dbt(["seed"])) == 1
        assert len(run_dbt()) == 7
        with project.adapter.connection_named("__test"):
            names = {r.identifier for r in project.adapter.list_relations(project.database, project.test_schema)}
        assert "empty" not in names and "disabled" not in names
        assert {"seed", "view_model", "incremental"} <= names


class TestSeedSpecificFormats(BaseSeedSpecificFormats):
    """All but the dotted seed name (`seed.with.dots`): a dotted identifier is not a table name Spark can write."""

    @pytest.fixture(scope="class")
    def seeds(self, test_data_dir):
        big_seed = read_file(self._make_big_seed(test_data_dir))
        yield {"big_seed.csv": big_seed, "seed_unicode.csv": seeds.seed__unicode_csv}
        rm_dir(test_data_dir)

    def test_simple_seed(self, project):
        assert len(run_dbt(["seed"])) == 2
