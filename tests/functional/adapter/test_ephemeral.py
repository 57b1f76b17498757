"""dbt-tests-adapter's ephemeral suite on this adapter (the basic suite's BaseEphemeral lives in test_basic.py).

BaseEphemeralMulti and BaseEphemeralNested end by comparing the rendered view DDL with Postgres's text
(`create view "dbt"."schema"."x__dbt_tmp" as (...)`); this adapter replaces views in place
(`create or replace view schema.x as ...`), so those two checks are repeated here with this adapter's DDL. The data
checks before them are the base classes' own."""

from __future__ import annotations

import os
import re

from dbt.tests.adapter.ephemeral.test_ephemeral import (
    BaseEphemeralErrorHandling,
    BaseEphemeralMulti,
    BaseEphemeralNested,
)
from dbt.tests.util import check_relations_equal, run_dbt


def _rendered(path: str) -> str:
    assert os.path.exists(path)
    with open(path) as fp:
        return "".join(re.sub(r"\d+", "", fp.read()).split())


def _squash(sql: str) -> str:
    return "".join(sql.split())


class TestEphemeralMulti(BaseEphemeralMulti):
    def test_ephemeral_multi(self, project):
        run_dbt(["seed"])
        results = run_dbt(["run"])
        assert len(results) == 3

        check_relations_equal(project.adapter, ["seed", "dependent"])
        check_relations_equal(project.adapter, ["seed", "double_dependent"])
        check_relations_equal(project.adapter, ["seed", "super_dependent"])

        expected = (
            "create or replace view test_test_ephemeral.double_dependent as "
            "with __dbt__cte__base as (select * from test_test_ephemeral.seed), "
            "__dbt__cte__base_copy as (select * from __dbt__cte__base) "
            "-- base_copy just pulls from base. Make sure the listed"
            "-- graph of CTEs all share the same dbt_cte__base cte"
            "select * from __dbt__cte__base where gender = 'Male' "
            "union all "
            "select * from __dbt__cte__base_copy where gender = 'Female'"
        )
        assert _rendered("./target/run/test/models/double_dependent.sql") == _squash(expected)


class TestEphemeralNested(BaseEphemeralNested):
    def test_ephemeral_nested(self, project):
        results = run_dbt(["run"])
        assert len(results) == 2

        expected = (
            "create or replace view test_test_ephemeral.root_view as "
            "with __dbt__cte__ephemeral_level_two as (select * from test_test_ephemeral.source_table), "
            "__dbt__cte__ephemeral as (select * from __dbt__cte__ephemeral_level_two) "
            "select * from __dbt__cte__ephemeral"
        )
        assert _rendered("./target/run/test/models/root_view.sql") == _squash(expected)


class TestEphemeralErrorHandling(BaseEphemeralErrorHandling):
    pass
