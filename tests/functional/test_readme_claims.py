"""What the README promises a dbt user, in one small project: source freshness from DuckLake snapshots and from a
loaded_at_field, merge_update_columns, a view's Spark text in its `spark_sql` tag, the profile's author on every
snapshot, and unqualified names resolved in the profile's schema. Checked with DuckDB reading the same lake."""

from __future__ import annotations

import datetime
import json
import os

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference

SOURCES = """
sources:
  - name: raw
    schema: "{{ target.schema }}"
    freshness:
      warn_after: {count: 1, period: day}
    tables:
      - name: events
        loaded_at_field: loaded_at
      - name: events_by_snapshot
        identifier: events
"""
MERGED = """
{{ config(materialized='incremental', unique_key='id', incremental_strategy='merge',
          merge_update_columns=['amount']) }}
{% if is_incremental() %}
select 1 as id, 99 as amount, 'new' as label union all select 3 as id, 30 as amount, 'new' as label
{% else %}
select 1 as id, 10 as amount, 'old' as label union all select 2 as id, 20 as amount, 'old' as label
{% endif %}
"""
VIEW = "{{ config(materialized='view') }} select id, amount * 2 as doubled from {{ ref('merged') }}"
TESTS = """
models:
  - name: merged
    data_tests:
      - ducklake_no_rows_lost: {arguments: {key: id}, name: lost_by_key}
      - ducklake_no_rows_lost: {name: lost_whole_rows}
      - ducklake_equal_to_version: {arguments: {version: "{{ var('v', 1) }}"}, name: equal_to_v}
"""
UNQUALIFIED = "{{ config(materialized='table') }} select count(*) as n from events"


class TestReadmeClaims:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, ducklake_root: str, unique_schema: str) -> dict[str, object]:
        return {
            "type": "ducklake", "catalog": f"{ducklake_root}/{unique_schema}.ducklake",
            "data_path": f"{ducklake_root}/{unique_schema}_data/", "master": "local[2]", "threads": 1,
            "author": "ci-bot", "spark_config": {"spark.sql.shuffle.partitions": "4"},
        }

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"sources.yml": SOURCES, "merged.sql": MERGED, "doubled.sql": VIEW, "unqualified.sql": UNQUALIFIED,
                "tests.yml": TESTS}

    def test_readme_claims(self, project) -> None:
        catalog, schema = project.adapter.config.credentials.catalog, project.test_schema
        with reference.attached(catalog) as con:
            con.execute(f"CREATE SCHEMA IF NOT EXISTS lake.{schema}")
            con.execute(f"CREATE TABLE lake.{schema}.events AS SELECT 1 AS id, "
                        "TIMESTAMP '2020-01-02 03:04:05' AS loaded_at")
            before = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
            events_committed = con.execute(
                "SELECT snapshot_time FROM lake.snapshots() WHERE snapshot_id = ?", [before]).fetchone()[0]
        run_dbt(["run"])
        run_dbt(["run", "--select", "merged"])
        with reference.attached(catalog, read_only=True) as con:
            # merge_update_columns: a matched row gets only `amount` updated, its label stays
            assert con.execute(f"SELECT * FROM lake.{schema}.merged ORDER BY id").fetchall() == [
                (1, 99, "old"), (2, 20, "old"), (3, 30, "new")]
            # the view: DuckDB SQL that DuckDB runs, the model's Spark text in the spark_sql tag
            assert con.execute(f"SELECT * FROM lake.{schema}.doubled ORDER BY id").fetchall() == [
                (1, 198), (2, 40), (3, 60)]
            tag = con.execute(
                "SELECT t.value FROM __ducklake_metadata_lake.ducklake_tag t JOIN __ducklake_metadata_lake.ducklake_view v "
                "ON v.view_id = t.object_id WHERE v.view_name = 'doubled' AND v.end_snapshot IS NULL "
                "AND t.end_snapshot IS NULL AND t.key = 'spark_sql'").fetchone()[0]
            assert "amount * 2 as doubled" in tag and "merged" in tag
            # every snapshot of the runs carries the profile's author
            authors = {r[0] for r in con.execute(
                f"SELECT author FROM lake.snapshots() WHERE snapshot_id > {before}").fetchall()}
            assert authors == {"ci-bot"}
            # `from events` (unqualified) read the profile's schema
            assert con.execute(f"SELECT n FROM lake.{schema}.unqualified").fetchone()[0] == 1
        # freshness: from the column, and (no loaded_at_field) from the snapshot that last changed the table
        run_dbt(["source", "freshness"], expect_pass=True)
        with open(os.path.join(project.project_root, "target", "sources.json")) as f:
            results = {r["unique_id"].rsplit(".", 1)[1]: r for r in json.load(f)["results"]}
        assert results["events"]["max_loaded_at"].startswith("2020-01-02T03:04:05")
        assert results["events"]["status"] == "warn"
        by_snapshot = results["events_by_snapshot"]
        assert by_snapshot["status"] == "pass"
        assert by_snapshot["max_loaded_at"][:19] == events_committed.astimezone(
            datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")

        # history tests: keyed no_rows_lost passes, whole-row fails (row 1 changed), equal_to_version by version
        with reference.attached(catalog, read_only=True) as con:
            first, last = con.execute(
                f"SELECT min(snapshot_id), max(snapshot_id) FROM lake.snapshots() WHERE snapshot_id > {before}"
            ).fetchone()
        status = {r.node.name: r.status for r in run_dbt(["test", "--select", "merged", "--vars", f"v: {last}"],
                                                         expect_pass=False)}
        assert status == {"lost_by_key": "pass", "lost_whole_rows": "fail", "equal_to_v": "pass"}
        status = {r.node.name: r.status for r in run_dbt(["test", "--select", "equal_to_v", "--vars", f"v: {first}"],
                                                         expect_pass=False)}
        assert status == {"equal_to_v": "fail"}
        # an expired version: an error naming it
        with reference.attached(catalog) as con:
            con.execute(f"CALL ducklake_expire_snapshots('lake', versions => [{first}])")
        results = run_dbt(["test", "--select", "equal_to_v", "--vars", f"v: {first}"], expect_pass=False)
        assert results[0].status == "error" and str(first) in results[0].message, results[0].message


OVERWRITTEN = """
{{ config(materialized='incremental', incremental_strategy='insert_overwrite',
          partition_by=['year(ts)', 'month(ts)', 'day(ts)', 'hour(ts)', 'bucket(4, id)']) }}
{% if is_incremental() %}
select 1 as id, timestamp'2026-03-04 05:30:00' as ts, 'new' as v
{% else %}
select 1 as id, timestamp'2026-03-04 05:10:00' as ts, 'old' as v
union all select 1 as id, timestamp'2026-03-04 06:10:00' as ts, 'old' as v
union all select 2 as id, timestamp'2026-03-04 05:20:00' as ts, 'old' as v
{% endif %}
"""


class TestInsertOverwriteTransforms:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"overwritten.sql": OVERWRITTEN}

    def test_insert_overwrite_replaces_only_the_new_rows_partitions(self, project) -> None:
        catalog, schema = project.adapter.config.credentials.catalog, project.test_schema
        run_dbt(["run"])
        run_dbt(["run"])
        with reference.attached(catalog, read_only=True) as con:
            rows = con.execute(f"SELECT id, strftime(ts, '%H:%M'), v FROM lake.{schema}.overwritten ORDER BY ALL"
                               ).fetchall()
            # (year, month, day, hour 5, bucket of id 1) replaced; hour 6 and id 2's bucket (if it differs) kept
            same_bucket = con.execute(
                "SELECT count(DISTINCT partition_value) FROM __ducklake_metadata_lake.ducklake_file_partition_value "
                "WHERE partition_key_index = 4").fetchone()[0] == 1
            keys = con.execute(
                "SELECT list(transform ORDER BY partition_key_index) FROM "
                "__ducklake_metadata_lake.ducklake_partition_column").fetchone()[0]
        assert keys == ["year", "month", "day", "hour", "bucket(4)"]
        expected = [(1, "05:30", "new"), (1, "06:10", "old")] + ([] if same_bucket else [(2, "05:20", "old")])
        assert rows == sorted(expected)
