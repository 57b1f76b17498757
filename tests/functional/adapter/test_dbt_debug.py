"""dbt-tests-adapter's dbt_debug suite on this adapter.

BaseDebugPostgres's checks expect targets named `nopass` (an invalid profile entry), `wronguser` (a valid entry whose
connection check fails) and `none_target` (an empty entry): they are added here with ducklake-shaped settings."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.dbt_debug.test_dbt_debug import (
    BaseDebugInvalidProjectPostgres,
    BaseDebugPostgres,
    BaseDebugProfileVariable,
)
from dbt.tests.util import run_dbt


class DuckLakeDebugTargets:
    @pytest.fixture(scope="class")
    def profiles_config_update(self, dbt_profile_target, unique_schema):
        good = {**dbt_profile_target, "schema": unique_schema}
        return {
            "test": {
                "outputs": {
                    "default": good,
                    # not a Spark master this adapter accepts: the profile entry is invalid
                    "nopass": {**good, "master": "yarn"},
                    # valid entry, but the data path is not a writable folder: the connection check fails
                    "wronguser": {**good, "data_path": "/proc/ducklake-not-writable/"},
                    "none_target": None,
                },
                "target": "default",
            },
        }


class TestDebug(DuckLakeDebugTargets, BaseDebugPostgres):
    pass


class TestDebugInvalidProject(BaseDebugInvalidProjectPostgres):
    pass


class TestDebugProfileVariable(BaseDebugProfileVariable):
    def test_ok(self, project):
        run_dbt(["debug"])
        assert "ERROR" not in self.capsys.readouterr().out

