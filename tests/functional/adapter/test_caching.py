"""dbt-tests-adapter's caching suite on this adapter.

A DuckLake has schemas, not databases: relations carry `database=None` (as in dbt-spark), so the base check's
`relation.database.lower()` cannot run. The mixin repeats the base check with None-safe comparison."""

from __future__ import annotations

from dbt.tests.adapter.caching.test_caching import (
    BaseCachingLowercaseModel,
    BaseCachingSelectedSchemaOnly,
    BaseCachingUppercaseModel,
    BaseNoPopulateCache,
)
from dbt.tests.util import run_dbt


def _lower(value: str | None) -> str | None:
    return value.lower() if value is not None else None


class NoDatabaseCacheCheck:
    def run_and_inspect_cache(self, project, run_args=None):
        run_dbt(run_args)
        adapter = project.adapter
        assert len(adapter.cache.relations) == 1
        relation = list(adapter.cache.relations).pop()
        assert relation.schema == project.test_schema
        assert relation.schema == project.test_schema.lower()
        assert relation.database is None

        run_dbt(run_args)
        adapter = project.adapter
        assert len(adapter.cache.relations) == 1
        second_relation = list(adapter.cache.relations).pop()
        for key in ["database", "schema", "identifier"]:
            assert _lower(getattr(relation, key)) == _lower(getattr(second_relation, key))


class TestCachingLowercaseModel(NoDatabaseCacheCheck, BaseCachingLowercaseModel):
    pass


class TestCachingUppercaseModel(NoDatabaseCacheCheck, BaseCachingUppercaseModel):
    pass


class TestCachingSelectedSchemaOnly(NoDatabaseCacheCheck, BaseCachingSelectedSchemaOnly):
    pass


class TestNoPopulateCache(NoDatabaseCacheCheck, BaseNoPopulateCache):
    pass
