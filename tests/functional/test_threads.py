"""threads > 1: a project of 20 models on 4 threads runs repeatedly with no failures, and every snapshot is right."""

from __future__ import annotations

import json
import os

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference
from tests.support.coverage import FULL

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
        # the second run already replaces every model while the others commit; a third in the full suite
        for run in range(3 if FULL else 2):
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


def _independent(i: int) -> str:
    kind = ["view", "table", "incremental_merge", "incremental_append"][i % 4]
    if kind == "incremental_merge":
        return ("{{ config(materialized='incremental', unique_key='id') }}\n"
                f"select id, id * {i} as v from range(10)")
    if kind == "incremental_append":
        return ("{{ config(materialized='incremental') }}\n"
                f"select id, id * {i} as v from range(10)"
                "{% if is_incremental() %} where id >= (select max(id) from {{ this }}){% endif %}")
    rows = ", ".join(f"({k})" for k in range(10))  # not range(): DuckDB reads a view's SQL too
    return f"{{{{ config(materialized='{kind}', persist_docs={{'relation': true}}) }}}}\nselect id, id * {i} as v " \
           f"from (values {rows}) as t(id)"


SNAPSHOT = """
{{% snapshot snap{i} %}}
{{{{ config(unique_key='id', strategy='check', check_cols='all', target_schema=target.schema) }}}}
select id, 'v{i}' as v from range(3)
{{% endsnapshot %}}
"""
DESCRIBED = "version: 2\nmodels:\n" + "".join(
    f"  - name: i{i:02d}\n    description: 'model {i}'\n" for i in range(16))


class TestIndependentModelsOnEightThreads:
    """Sixteen models of every materialization with no refs, plus seeds and snapshots, built at once by 8 threads on
    fresh lakes: every object created concurrently lands (no spurious conflict), twice over."""

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, ducklake_root: str) -> dict[str, object]:
        lake = "{{ env_var('DUCKLAKE_EIGHT_THREADS_LAKE') }}"
        return {"type": "ducklake", "catalog": f"{lake}/metadata.ducklake", "data_path": f"{lake}/data/",
                "master": "local[2]", "threads": 8, "spark_config": {"spark.sql.shuffle.partitions": "2"}}

    @pytest.fixture(scope="class", autouse=True)
    def first_lake(self, ducklake_root: str) -> object:
        os.environ["DUCKLAKE_EIGHT_THREADS_LAKE"] = f"{ducklake_root}/eight_0"
        yield
        os.environ.pop("DUCKLAKE_EIGHT_THREADS_LAKE", None)

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {**{f"i{i:02d}.sql": _independent(i) for i in range(16)}, "schema.yml": DESCRIBED}

    @pytest.fixture(scope="class")
    def seeds(self) -> dict[str, str]:
        return {f"seed{i}.csv": f"id,name\n1,a{i}\n2,b{i}\n" for i in range(2)}

    @pytest.fixture(scope="class")
    def snapshots(self) -> dict[str, str]:
        return {f"snap{i}.sql": SNAPSHOT.format(i=i) for i in range(2)}

    def test_fresh_lakes_never_conflict(self, project: object, ducklake_root: str) -> None:
        schema = project.test_schema  # type: ignore[attr-defined]
        nodes = 16 + 2 + 2
        # one fresh lake, built twice, by default; a second fresh lake in the same process in the full suite
        for lake_no in range(2 if FULL else 1):
            lake = f"{ducklake_root}/eight_{lake_no}"
            os.environ["DUCKLAKE_EIGHT_THREADS_LAKE"] = lake
            for build in range(2):
                results = run_dbt(["build"])
                assert len(results) == nodes and all(r.status == "success" for r in results), (lake_no, build)
            with reference.attached(f"{lake}/metadata.ducklake", read_only=True) as con:
                for i in range(16):
                    rows = con.execute(f"SELECT count(*), sum(v) FROM lake.{schema}.i{i:02d}").fetchone()
                    # the append model re-reads its last id on the second build
                    assert rows == ((11, sum(k * i for k in range(10)) + 9 * i) if i % 4 == 3
                                    else (10, sum(k * i for k in range(10)))), (lake_no, i, rows)
                for i in range(2):
                    assert con.execute(f"SELECT count(*) FROM lake.{schema}.seed{i}").fetchone()[0] == 2
                    assert con.execute(f"SELECT count(*) FROM lake.{schema}.snap{i}").fetchone()[0] == 3
                messages = [r[0] for r in con.execute("SELECT commit_message FROM lake.snapshots()").fetchall()]
            # each node committed on its first build; the second build changed the incremental and seed nodes only
            for i in range(16):
                assert sum(1 for m in messages if m and m.startswith(f"model.test.i{i:02d}:")) >= 1, (i, messages)
