"""Incremental strategies checked with DuckDB: merge-on-read touches only the files holding its keys, every run is
one snapshot DuckDB reads, bad runs (duplicate keys, a failure halfway, an impossible type change) leave the lake as
it was, insert_overwrite replaces partitions, on_schema_change evolves the schema without rewriting files, and a
failed microbatch batch is retried alone."""

from __future__ import annotations

import os

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference

# batch 0: ids 0..299,999 in three files (one per Spark partition, disjoint id ranges; more rows than a result the
# driver collects and writes as one file: spark/write/local_write.SMALL_RESULT_ROWS); later batches: vars
MERGE_MODEL = """
{{ config(materialized='incremental', unique_key='id') }}
{% set b = var('batch', 0) %}
{% if b == 0 %}
select id, 'v0' as val from range(0, 300000, 1, 3)
{% elif b == 1 %}
select id, 'v1' as val from range(10, 20, 1, 1) union all select id, 'v1' as val from range(300000, 300010, 1, 1)
{% else %}
select id, 'dup' as val from range(10, 12, 1, 1) union all select 10 as id, 'dup2' as val
{% endif %}
"""
# delete+insert whose insert fails after its delete was staged (the failing column is not read by the delete)
DELINS_MODEL = """
{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='id') }}
select id, {{ "cast(assert_true(id < 0) as string)" if var('fail', false) else "'ok'" }} as val
from range(0, {{ var('n', 5) }}, 1, 1)
"""


def _lake(project: object) -> tuple[str, str]:
    return project.adapter.config.credentials.catalog, project.test_schema  # type: ignore[attr-defined]


def _snapshot(catalog: str) -> int:
    with reference.attached(catalog, read_only=True) as con:
        return con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]


def _files(con: object, schema: str, table: str) -> dict[str, str | None]:
    return dict(con.execute(f"SELECT data_file, delete_file FROM ducklake_list_files('lake', '{table}', "  # type: ignore[attr-defined]
                            f"schema => '{schema}')").fetchall())


class TestMergeOnRead:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"tgt.sql": MERGE_MODEL, "delins.sql": DELINS_MODEL}

    def test_merge_touches_only_files_with_its_keys(self, project: object) -> None:
        catalog, schema = _lake(project)
        run_dbt(["run", "--select", "tgt"])
        with reference.attached(catalog, read_only=True) as con:
            first = _files(con, schema, "tgt")
            v0 = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        assert len(first) == 3 and not any(first.values())

        run_dbt(["run", "--select", "tgt", "--vars", "{batch: 1}"])
        with reference.attached(catalog, read_only=True) as con:
            after = _files(con, schema, "tgt")
            v1 = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
            # the three files stay; only the one holding ids 10..19 gets a delete file; new rows are new files
            assert set(first) <= set(after)
            assert sum(1 for f in first if after[f]) == 1
            assert all(after[f] is None for f in set(after) - set(first))
            assert v1 == v0 + 1  # one snapshot
            rows = con.execute(f"SELECT val, count(*), min(id), max(id) FROM lake.{schema}.tgt GROUP BY val "
                               "ORDER BY val").fetchall()
            assert rows == [("v0", 299990, 0, 299999), ("v1", 20, 10, 300009)]
            # time travel: the snapshot before the merge is the first batch exactly
            assert con.execute(f"SELECT count(*), count(DISTINCT val) FROM lake.{schema}.tgt AT (VERSION => {v0})"
                               ).fetchone() == (300000, 1)
            changes = dict(con.execute(f"SELECT change_type, count(*) FROM ducklake_table_changes('lake', "
                                       f"'{schema}', 'tgt', {v1}, {v1}) GROUP BY ALL").fetchall())
            assert changes == {"update_preimage": 10, "update_postimage": 10, "insert": 10}

    def test_duplicate_source_keys_fail_and_change_nothing(self, project: object) -> None:
        catalog, schema = _lake(project)
        before = _snapshot(catalog)
        results = run_dbt(["run", "--select", "tgt", "--vars", "{batch: 2}"], expect_pass=False)
        assert "the source repeats keys (id)" in results[0].message and "(2 rows)" in results[0].message
        assert _snapshot(catalog) == before
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute(f"SELECT count(*) FROM lake.{schema}.tgt WHERE val LIKE 'dup%'").fetchone()[0] == 0

    def test_failure_after_the_delete_leaves_the_lake_as_it_was(self, project: object) -> None:
        catalog, schema = _lake(project)
        run_dbt(["run", "--select", "delins"])
        run_dbt(["run", "--select", "delins", "--vars", "{n: 7}"])
        before = _snapshot(catalog)
        data_dir = project.adapter.config.credentials.data_path  # type: ignore[attr-defined]
        files_before = {os.path.join(d, f) for d, _, fs in os.walk(data_dir) for f in fs if "_ducklake_spark" not in d}
        results = run_dbt(["run", "--select", "delins", "--vars", "{fail: true}"], expect_pass=False)
        assert "is not true" in results[0].message
        assert _snapshot(catalog) == before
        files_after = {os.path.join(d, f) for d, _, fs in os.walk(data_dir) for f in fs if "_ducklake_spark" not in d}
        assert files_after == files_before  # nothing written by the failed run is left behind
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute(f"SELECT count(*), min(val), max(val) FROM lake.{schema}.delins").fetchone() == \
                (7, "ok", "ok")


OVERWRITE_PARTITIONED = """
{{ config(materialized='incremental', incremental_strategy='insert_overwrite', partition_by=['day']) }}
{% if var('batch', 0) == 0 %}
select id, date_add(date'2026-01-01', cast(id % 3 as int)) as day, 'v0' as val from range(0, 30, 1, 1)
{% else %}
select id, date'2026-01-02' as day, 'v1' as val from range(100, 105, 1, 1)
{% endif %}
"""
OVERWRITE_WHOLE = """
{{ config(materialized='incremental', incremental_strategy='insert_overwrite') }}
select id, '{{ var('batch', 0) }}' as val from range(0, {{ 10 - var('batch', 0) }}, 1, 1)
"""


class TestInsertOverwrite:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"parts.sql": OVERWRITE_PARTITIONED, "whole.sql": OVERWRITE_WHOLE}

    def test_partitions_are_replaced(self, project: object) -> None:
        catalog, schema = _lake(project)
        run_dbt(["run"])
        with reference.attached(catalog, read_only=True) as con:
            first = _files(con, schema, "parts")
        run_dbt(["run", "--vars", "{batch: 1}"])
        with reference.attached(catalog, read_only=True) as con:
            rows = con.execute(f"SELECT day::VARCHAR, val, count(*) FROM lake.{schema}.parts GROUP BY ALL "
                               "ORDER BY ALL").fetchall()
            assert rows == [("2026-01-01", "v0", 10), ("2026-01-02", "v1", 5), ("2026-01-03", "v0", 10)]
            after = _files(con, schema, "parts")
            # the files of untouched partitions are the same files, unchanged
            assert len(set(first) & set(after)) == 2 and not any(after[f] for f in set(first) & set(after))
            assert con.execute(f"SELECT count(*), min(val), max(val) FROM lake.{schema}.whole").fetchone() == \
                (9, "1", "1")


SCHEMA_MODEL = """
{{ config(materialized='incremental', unique_key='id', on_schema_change=var('osc', 'sync_all_columns')) }}
{% set b = var('batch', 0) %}
select cast(id as {{ 'int' if b == 0 else 'bigint' }}) as id,
       {% if b == 2 %}cast(id as string){% else %}cast(id * 1.5 as float){% endif %} as x
       {% if b >= 1 %}, concat('n', id) as added{% endif %}
from range({{ b * 2 }}, {{ b * 2 + 3 }}, 1, 1)
"""


class TestOnSchemaChange:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"evolving.sql": SCHEMA_MODEL}

    def test_columns_widen_and_grow_without_rewriting(self, project: object) -> None:
        catalog, schema = _lake(project)
        run_dbt(["run"])
        with reference.attached(catalog, read_only=True) as con:
            first = _files(con, schema, "evolving")
        run_dbt(["run", "--vars", "{batch: 1}"])
        with reference.attached(catalog, read_only=True) as con:
            types = dict(con.execute(f"SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = "
                                     f"'lake' AND schema_name = '{schema}' AND table_name = 'evolving'").fetchall())
            assert types == {"id": "BIGINT", "x": "FLOAT", "added": "VARCHAR"}
            after = _files(con, schema, "evolving")
            assert set(first) <= set(after)  # the old file is still the data of its rows: nothing rewritten
            rows = con.execute(f"SELECT id, x, added FROM lake.{schema}.evolving ORDER BY id").fetchall()
            assert rows == [(0, 0.0, None), (1, 1.5, None), (2, 3.0, "n2"), (3, 4.5, "n3"), (4, 6.0, "n4")]

    def test_a_type_change_duckdb_cannot_make_fails_clearly(self, project: object) -> None:
        catalog, schema = _lake(project)
        before = _snapshot(catalog)
        results = run_dbt(["run", "--vars", "{batch: 2}"], expect_pass=False)
        message = results[0].message
        assert "cannot change column evolving.x from float32 to varchar" in message, message
        assert "only widening type promotions are allowed" in message
        assert _snapshot(catalog) == before

    def test_fail_names_the_differences(self, project: object) -> None:
        catalog, _ = _lake(project)
        before = _snapshot(catalog)
        results = run_dbt(["run", "--vars", "{batch: 2, osc: fail}"], expect_pass=False)
        assert "out of sync" in results[0].message
        assert _snapshot(catalog) == before


MICROBATCH_MODEL = """
{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='ts', batch_size='day',
          begin=modules.datetime.datetime(2026, 1, 1)) }}
select id, ts from {{ ref('events') }}
where {{ "assert_true(day(ts) != 2) is null" if env_var('DUCKLAKE_TEST_FAIL_DAY2', '') else 'true' }}
"""
EVENTS = """
{{ config(materialized='table', event_time='ts') }}
select id, timestamp'2026-01-01 00:00:00' + make_interval(0, 0, 0, cast(id % 3 as int), 0, 0, 0) as ts
from range(0, 9, 1, 1)
"""


class TestMicrobatch:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"events.sql": EVENTS, "mb.sql": MICROBATCH_MODEL}

    def test_each_batch_is_a_snapshot_and_a_failed_batch_is_retried_alone(self, project: object) -> None:
        from dbt.tests.util import patch_microbatch_end_time

        catalog, schema = _lake(project)
        run_dbt(["run", "--select", "events"])
        before = _snapshot(catalog)
        os.environ["DUCKLAKE_TEST_FAIL_DAY2"] = "1"
        try:
            with patch_microbatch_end_time("2026-01-03 12:00:00"):
                run_dbt(["run", "--select", "mb"], expect_pass=False)
        finally:
            del os.environ["DUCKLAKE_TEST_FAIL_DAY2"]
        with reference.attached(catalog, read_only=True) as con:
            days = con.execute(f"SELECT day(ts), count(*) FROM lake.{schema}.mb GROUP BY ALL ORDER BY ALL").fetchall()
            assert days == [(1, 3), (3, 3)]
            msgs = [r[0] for r in con.execute(f"SELECT commit_message FROM lake.snapshots() WHERE snapshot_id > "
                                              f"{before} ORDER BY snapshot_id").fetchall()]
        assert len(msgs) == 2 and all(m.startswith("model.test.mb") for m in msgs)  # one snapshot per batch
        with patch_microbatch_end_time("2026-01-03 12:00:00"):
            run_dbt(["retry"])
        with reference.attached(catalog, read_only=True) as con:
            days = con.execute(f"SELECT day(ts), count(*) FROM lake.{schema}.mb GROUP BY ALL ORDER BY ALL").fetchall()
            assert days == [(1, 3), (2, 3), (3, 3)]
            assert con.execute("SELECT count(*) FROM lake.snapshots() WHERE snapshot_id > ?", [before]).fetchone()[0] == 3
        # a rerun of a batch replaces its rows (no duplicates)
        with patch_microbatch_end_time("2026-01-03 12:00:00"):
            run_dbt(["run", "--select", "mb", "--event-time-start", "2026-01-02", "--event-time-end", "2026-01-03"])
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute(f"SELECT count(*) FROM lake.{schema}.mb").fetchone()[0] == 9


LOOKBACK = """
{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='ts', batch_size='day',
          lookback=1, begin=modules.datetime.datetime(2026, 1, 1)) }}
select id, ts from {{ ref('lb_events') }}
"""
LB_EVENTS = """
{{ config(materialized='table', event_time='ts') }}
select id, timestamp'2026-01-01 06:00:00' + make_interval(0, 0, 0, cast(id as int), 0, 0, 0) as ts from range(3)
"""


class TestMicrobatchLookback:
    """lookback=1: each run also re-processes the batch before the current one, so a late row of yesterday is taken
    and a late row of the day before is not."""

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"lb.sql": LOOKBACK, "lb_events.sql": LB_EVENTS}

    def test_lookback_reprocesses_the_previous_batch(self, project: object) -> None:
        from dbt.tests.util import patch_microbatch_end_time

        catalog, schema = _lake(project)
        run_dbt(["run", "--select", "lb_events"])
        with patch_microbatch_end_time("2026-01-03 12:00:00"):
            run_dbt(["run", "--select", "lb"])
        with reference.attached(catalog) as con:
            assert sorted(r[0] for r in con.execute(f"SELECT id FROM lake.{schema}.lb").fetchall()) == [0, 1, 2]
            # late rows arrive upstream: one for Jan 2 (yesterday, seen on Jan 3) and one for Jan 1 (two days back)
            con.execute(f"INSERT INTO lake.{schema}.lb_events VALUES (10, TIMESTAMP '2026-01-02 09:00:00'), "
                        f"(11, TIMESTAMP '2026-01-01 09:00:00')")
            before = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        with patch_microbatch_end_time("2026-01-03 12:00:00"):
            results = run_dbt(["run", "--select", "lb"])
        assert len(results) == 1
        with reference.attached(catalog, read_only=True) as con:
            got = sorted(r[0] for r in con.execute(f"SELECT id FROM lake.{schema}.lb").fetchall())
            batches = con.execute(f"SELECT count(*) FROM lake.snapshots() WHERE snapshot_id > {before}").fetchone()[0]
        assert got == [0, 1, 2, 10]  # Jan 2 re-processed (lookback), Jan 1 not
        assert batches == 2  # one snapshot per batch: Jan 2 and Jan 3
