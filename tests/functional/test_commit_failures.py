"""dbt runs whose catalog COMMIT fails (SQLite catalog): a lost acknowledgement is found to be a commit, so the model
stays whole and readable; an outcome that cannot be read keeps every file and fails the node with a message that
says so, and the next run settles it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt.adapters.ducklake.lake.catalog import database as catalog_module
from dbt.adapters.ducklake.lake.catalog.database import CatalogDB
from tests.support import reference
from tests.support.invariants import violations

MODEL = "{{ config(materialized='table') }}\nselect id, id * 2 as v from range(5)"


class LostConnection(Exception):
    pass


@pytest.fixture
def hook() -> Iterator[list]:
    calls: list = []
    yield calls
    catalog_module.COMMIT_HOOK = None


class TestCommitFailures:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, ducklake_root: str, unique_schema: str) -> dict[str, object]:
        return {"type": "ducklake", "catalog": f"sqlite:///{ducklake_root}/{unique_schema}.sqlite",
                "data_path": f"{ducklake_root}/{unique_schema}_data/", "master": "local[2]", "threads": 1}

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"m.sql": MODEL}

    def _catalog(self, project: object) -> str:
        return project.adapter.config.credentials.catalog  # type: ignore[attr-defined]

    def test_lost_acknowledgement_keeps_the_model(self, project: object, hook: list) -> None:
        def lose_ack(db: CatalogDB, at: str) -> None:
            if at == "after" and not hook:
                hook.append(at)
                raise LostConnection("server closed the connection unexpectedly")

        catalog_module.COMMIT_HOOK = lose_ack
        results, out = run_dbt_and_capture(["run"])
        assert results[0].status == "success" and hook == ["after"]
        assert "the acknowledgement was lost but the snapshot is in the catalog" in out  # said in dbt's log
        catalog_module.COMMIT_HOOK = None
        url = self._catalog(project)
        with reference.attached(url, read_only=True) as con:
            assert con.execute(f"SELECT count(*), sum(v) FROM lake.{project.test_schema}.m").fetchone() == (5, 20)
        # the next run reads and replaces it (it used to fail: the committed files had been removed)
        assert run_dbt(["run"])[0].status == "success"
        assert violations(url) == []

    def test_unknown_outcome_fails_the_node_and_is_settled_later(self, project: object, hook: list,
                                                                 tmp_path: Path) -> None:
        url = self._catalog(project)
        path = url.removeprefix("sqlite:///")

        def unreachable(db: CatalogDB, at: str) -> None:
            if at == "after" and not hook:
                hook.append(at)
                os.rename(path, path + ".away")
                raise LostConnection("disk I/O error")

        catalog_module.COMMIT_HOOK = unreachable
        results = run_dbt(["run"], expect_pass=False)
        catalog_module.COMMIT_HOOK = None
        message = str(results[0].message)
        assert "cannot be read to tell whether it landed" in message and "Its files are kept" in message
        if os.path.exists(path):
            os.remove(path)
        os.rename(path + ".away", path)
        # the commit had landed: the next run finds out, keeps its files, and builds on it
        assert run_dbt(["run"])[0].status == "success"
        with reference.attached(url, read_only=True) as con:
            assert con.execute(f"SELECT count(*), sum(v) FROM lake.{project.test_schema}.m").fetchone() == (5, 20)
        assert violations(url) == []
