"""threads > 1: a project of 20 models on 4 threads runs repeatedly with no failures, and every snapshot is right."""

from __future__ import annotations

import json

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference

N = 20


def _model(i: int) -> str:
    # five independent chains of four models: tables and views, each reading the one before
    if i < 5:
        return f"{{{{ config(materialized='table') }}}}\nselect id, id * {i} as v from range(1000)"
    mat = "view" if i % 4 == 1 else "table"
    return f"{{{{ config(materialized='{mat}') }}}}\nselect id, v + 1 as v from {{{{ ref('m{i - 5:02d}') }}}}"


class TestManyModelsOnFourThreads:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, ducklake_root: str) -> dict[str, object]:
        return {"type": "ducklake", "catalog": f"{ducklake_root}/threads.ducklake",
                "data_path": f"{ducklake_root}/threads_data/", "master": "local[2]", "threads": 4,
                "spark_config": {"spark.sql.shuffle.partitions": "4"}}

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {f"m{i:02d}.sql": _model(i) for i in range(N)}

    def test_repeated_runs(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        for run in range(3):
            with reference.attached(catalog, read_only=True) as con:
                before = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
            results = run_dbt(["run"])
            assert len(results) == N and all(r.status == "success" for r in results)
            with reference.attached(catalog, read_only=True) as con:
                snaps = con.execute("SELECT snapshot_id, commit_message, commit_extra_info FROM lake.snapshots() "
                                    f"WHERE snapshot_id > {before} ORDER BY snapshot_id").fetchall()
                # one snapshot per model, each naming its own node, none lost or merged
                nodes = sorted(json.loads(s[2])["node_unique_id"] for s in snaps)
                assert nodes == sorted(f"model.test.m{i:02d}" for i in range(N)), (run, snaps)
                for i in range(N):
                    depth, base = i // 5, i % 5
                    got = con.execute(f"SELECT count(*), sum(v) FROM lake.{schema}.m{i:02d}").fetchone()
                    assert got == (1000, sum(k * base + depth for k in range(1000))), (run, i, got)
