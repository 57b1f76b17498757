"""dbt itself (not only the format layer) on SQLite and PostgreSQL catalogs: the basic materializations, an
incremental model and a timestamp snapshot per backend, through dbt-tests-adapter's suites."""

from __future__ import annotations

import uuid

import pytest
from dbt.tests.adapter.basic.test_base import BaseSimpleMaterializations
from dbt.tests.adapter.basic.test_incremental import BaseIncremental
from dbt.tests.adapter.basic.test_snapshot_timestamp import BaseSnapshotTimestamp

from tests.support.coverage import full_only


def _target(catalog: str, ducklake_root: str, unique_schema: str) -> dict[str, object]:
    return {
        "type": "ducklake", "catalog": catalog, "data_path": f"{ducklake_root}/{unique_schema}_data/",
        "master": "local[2]", "threads": 1, "spark_config": {"spark.sql.shuffle.partitions": "4"},
    }


class OnSQLite:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, ducklake_root: str, unique_schema: str) -> dict[str, object]:
        return _target(f"sqlite:///{ducklake_root}/{unique_schema}.sqlite", ducklake_root, unique_schema)


class OnPostgres:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, pg_server, ducklake_root: str, unique_schema: str) -> dict[str, object]:
        url = pg_server.create_database(f"dbt_{unique_schema[-12:]}_{uuid.uuid4().hex[:8]}")
        return _target(url, ducklake_root, unique_schema)


class TestSimpleMaterializationsSQLite(OnSQLite, BaseSimpleMaterializations):
    pass


@full_only("the incremental suite on SQLite: the same catalog SQL as its table suite and PostgreSQL's")
class TestIncrementalSQLite(OnSQLite, BaseIncremental):
    pass


@full_only("a snapshot on SQLite: the same catalog SQL as PostgreSQL's snapshot suite")
class TestSnapshotTimestampSQLite(OnSQLite, BaseSnapshotTimestamp):
    pass


@pytest.mark.postgres
class TestSimpleMaterializationsPostgres(OnPostgres, BaseSimpleMaterializations):
    pass


@pytest.mark.postgres
class TestIncrementalPostgres(OnPostgres, BaseIncremental):
    pass


@pytest.mark.postgres
class TestSnapshotTimestampPostgres(OnPostgres, BaseSnapshotTimestamp):
    pass
