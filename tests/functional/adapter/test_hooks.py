"""dbt-tests-adapter's hooks suites (model hooks and run hooks) on this adapter.

The base classes create their hook tables from data/seed_*.sql next to the adapter's test module (dbt-postgres ships
copies), read them with `select "col", ...` (double quotes are string literals in Spark SQL), check Postgres target
values (type postgres, user root, 4 threads) and run `vacuum` outside the transaction (not a Spark statement). The
mixins here run the suite's own data files, read with backticks, check this profile's values and use a plain query
outside the transaction.

BasePrePostRunHooks' on-run-end hook writes `database_schemas` to a table: this adapter has no databases (like
dbt-spark, relations have database None), so the hook renders it as the text 'None'; the check here expects that.

The snapshot hook classes run a snapshot whose post-hooks ALTER and UPDATE the snapshot table in the transaction
that creates it: one DuckLake snapshot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dbt.tests.adapter.hooks import fixtures as hooks_fixtures
from dbt.tests.adapter.hooks.test_model_hooks import (
    MODEL_POST_HOOK,
    MODEL_PRE_HOOK,
    BaseDuplicateHooksInConfigs,
    BaseHookRefs,
    BaseHooksRefsOnSeeds,
    BasePrePostModelHooks,
    BasePrePostModelHooksInConfig,
    BasePrePostModelHooksInConfigKwargs,
    BasePrePostModelHooksInConfigWithCount,
    BasePrePostModelHooksOnSeeds,
    BasePrePostModelHooksOnSeedsPlusPrefixed,
    BasePrePostModelHooksOnSeedsPlusPrefixedWhitespace,
    BasePrePostModelHooksOnSnapshots,
    BasePrePostSnapshotHooksInConfigKwargs,
)
from dbt.tests.adapter.hooks.test_run_hooks import BaseAfterRunHooks, BasePrePostRunHooks

HOOK_FIELDS = ["test_state", "target_dbname", "target_host", "target_name", "target_schema", "target_threads",
               "target_type", "target_user", "target_pass", "run_started_at", "invocation_id", "thread_id"]

# outside the transaction: a statement Spark runs (the base classes use Postgres's `vacuum`)
OUTSIDE_TXN = {"sql": "select count(*) from {{ this.schema }}.on_model_hook", "transaction": False}


SUITE_DATA = Path(hooks_fixtures.__file__).parent / "data"


def _read_hook_rows(project, table: str, state: str) -> list[dict]:
    cols = ", ".join(f"`{f}`" for f in HOOK_FIELDS)
    rows = project.run_sql(f"select {cols} from {project.test_schema}.{table} where test_state = '{state}'",
                           fetch="all")
    return [dict(zip(HOOK_FIELDS, r, strict=True)) for r in rows]


def _check_ctx(ctx: dict, state: str, project) -> None:
    assert ctx["test_state"] == state
    assert ctx["target_name"] == "default"
    assert ctx["target_schema"] == project.test_schema
    assert ctx["target_threads"] == 1
    assert ctx["target_type"] == "ducklake"
    assert ctx["target_pass"] == ""
    assert ctx["run_started_at"], "run_started_at was not set"
    assert ctx["invocation_id"], "invocation_id was not set"
    assert ctx["thread_id"].startswith("Thread-") or ctx["thread_id"] == "MainThread"


class DuckLakeModelHookChecks:
    @pytest.fixture(scope="class", autouse=True)
    def setUp(self, project):
        project.run_sql_file(SUITE_DATA / "seed_model.sql")

    def get_ctx_vars(self, state, count, project):
        rows = _read_hook_rows(project, "on_model_hook", state)
        assert len(rows) != 0, "nothing inserted into hooks table"
        assert len(rows) == count, f"expected {count} rows in hooks table, got {len(rows)}"
        return rows

    def check_hooks(self, state, project, host, count=1):
        for ctx in self.get_ctx_vars(state, count=count, project=project):
            _check_ctx(ctx, state, project)


class TestPrePostModelHooks(DuckLakeModelHookChecks, BasePrePostModelHooks):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"test": {"pre-hook": [MODEL_PRE_HOOK, OUTSIDE_TXN],
                                    "post-hook": [OUTSIDE_TXN, MODEL_POST_HOOK]}}}


class TestPrePostModelHooksUnderscores(DuckLakeModelHookChecks, BasePrePostModelHooks):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"test": {"pre_hook": [MODEL_PRE_HOOK, OUTSIDE_TXN],
                                    "post_hook": [OUTSIDE_TXN, MODEL_POST_HOOK]}}}


class TestHookRefs(DuckLakeModelHookChecks, BaseHookRefs):
    pass



class TestHooksRefsOnSeeds(BaseHooksRefsOnSeeds):
    pass





class TestPrePostModelHooksInConfig(DuckLakeModelHookChecks, BasePrePostModelHooksInConfig):
    pass


class TestPrePostModelHooksInConfigWithCount(DuckLakeModelHookChecks, BasePrePostModelHooksInConfigWithCount):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"test": {"pre-hook": [MODEL_PRE_HOOK, OUTSIDE_TXN],
                                    "post-hook": [OUTSIDE_TXN, MODEL_POST_HOOK]}}}


class TestPrePostModelHooksInConfigKwargs(DuckLakeModelHookChecks, BasePrePostModelHooksInConfigKwargs):
    pass



class TestDuplicateHooksInConfigs(BaseDuplicateHooksInConfigs):
    pass


class TestPrePostRunHooks(BasePrePostRunHooks):
    @pytest.fixture(scope="function")
    def setUp(self, project):
        project.run_sql_file(SUITE_DATA / "seed_run.sql")
        project.run_sql(f"drop table if exists {project.test_schema}.schemas")
        project.run_sql(f"drop table if exists {project.test_schema}.db_schemas")
        os.environ["TERM_TEST"] = "TESTING"

    def get_ctx_vars(self, state, project):
        rows = _read_hook_rows(project, "on_run_hook", state)
        assert len(rows) != 0, "nothing inserted into on_run_hook table"
        assert len(rows) == 1, "too many rows in hooks table"
        return rows[0]

    def check_hooks(self, state, project, host):
        _check_ctx(self.get_ctx_vars(state, project), state, project)

    def assert_used_schemas(self, project):
        results = project.run_sql(f"select * from {project.test_schema}.schemas", fetch="all")
        assert len(results) == 1
        assert results[0][0] == project.test_schema

        # no databases here: the hook's '{{ db }}' renders the None database as the text 'None'
        assert project.database is None
        results = project.run_sql(f"select * from {project.test_schema}.db_schemas", fetch="all")
        assert len(results) == 1
        assert results[0][0] == "None"
        assert results[0][1] == project.test_schema


class TestAfterRunHooks(BaseAfterRunHooks):
    pass


# seed post-hooks ALTER and UPDATE the seed table in the transaction that creates it: one snapshot
class TestPrePostModelHooksOnSeeds(BasePrePostModelHooksOnSeeds):
    pass


class TestPrePostModelHooksOnSeedsPlusPrefixed(BasePrePostModelHooksOnSeedsPlusPrefixed):
    pass


class TestPrePostModelHooksOnSeedsPlusPrefixedWhitespace(BasePrePostModelHooksOnSeedsPlusPrefixedWhitespace):
    pass


class TestPrePostModelHooksOnSnapshots(BasePrePostModelHooksOnSnapshots):
    pass


class TestPrePostSnapshotHooksInConfigKwargs(BasePrePostSnapshotHooksInConfigKwargs):
    pass
