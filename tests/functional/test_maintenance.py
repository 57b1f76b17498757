"""Maintenance run-operations through dbt: merge the files of an incremental model, expire and clean up; DuckDB
reads the lake after each (time travel included) and the next dbt run reads the merged files through Spark."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.support import reference

SEED = "id\n1\n2\n3\n"
INC = "{{ config(materialized='incremental') }}\nselect {{ var('k', 0) }} as k, id from {{ ref('src') }}\n"
TOTAL = "{{ config(materialized='table') }}\nselect count(*) as n, sum(k) as ks from {{ ref('inc') }}\n"


def _args(**kw: object) -> str:
    return json.dumps(kw)


class TestMaintenanceOperations:
    @pytest.fixture(scope="class")
    def seeds(self) -> dict[str, str]:
        return {"src.csv": SEED}

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"inc.sql": INC, "total.sql": TOTAL}

    def test_merge_expire_cleanup(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        run_dbt(["seed"])
        history = {}  # snapshot after each incremental run -> rows DuckDB sees there
        for k in range(4):
            run_dbt(["run", "--select", "inc", "--vars", _args(k=k)])
            with reference.attached(catalog, read_only=True) as con:
                sid = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
                history[sid] = con.execute(f"SELECT count(*) FROM lake.{schema}.inc").fetchone()[0]
        assert list(history.values()) == [3, 6, 9, 12]
        with reference.attached(catalog, read_only=True) as con:
            files_before = con.execute(f"SELECT count(*) FROM ducklake_list_files('lake', 'inc', schema => '{schema}')"
                                       ).fetchone()[0]
        assert files_before >= 4  # Spark writes a file per task

        run_dbt(["run-operation", "ducklake_merge_adjacent_files", "--args",
                 _args(schema=schema, table="inc", max_compacted_files=1, min_file_size=1)])  # DuckDB's options
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute(f"SELECT count(*) FROM ducklake_list_files('lake', 'inc', schema => '{schema}')"
                               ).fetchone()[0] == 1
            last = con.execute("SELECT changes FROM lake.snapshots() ORDER BY snapshot_id DESC LIMIT 1"
                               ).fetchone()[0]
            assert "merge_adjacent" in last, last
            for sid, n in history.items():  # time travel into every snapshot before the merge is unchanged
                got = con.execute(f"SELECT count(*) FROM lake.{schema}.inc AT (VERSION => {sid})").fetchone()[0]
                assert got == n, (sid, got, n)

        future = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)).isoformat()
        run_dbt(["run-operation", "ducklake_expire_snapshots", "--args", _args(older_than=future)])
        run_dbt(["run-operation", "ducklake_cleanup_old_files", "--args", _args(cleanup_all=True)])  # DuckDB's name
        run_dbt(["run-operation", "ducklake_delete_orphaned_files", "--args", _args(dry_run=True)])
        run_dbt(["run-operation", "ducklake_flush_inlined_data"])  # nothing inlined by us: a no-op
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute("SELECT count(*) FROM lake.snapshots()").fetchone()[0] == 1
            assert con.execute(f"SELECT count(*), sum(k) FROM lake.{schema}.inc").fetchone() == (12, 18)
        # Spark reads the merged file (the old ones are gone from disk now)
        run_dbt(["run", "--select", "total"])
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute(f"SELECT n, ks FROM lake.{schema}.total").fetchone() == (12, 18)

    def test_bad_arguments_fail_cleanly(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        with reference.attached(catalog, read_only=True) as con:
            before = con.execute("SELECT snapshot_id, changes FROM lake.snapshots()").fetchall()
        # as in DuckDB, a missing id (or the latest) is skipped, not an error: the run-operation says so
        _, log = run_dbt_and_capture(["run-operation", "ducklake_expire_snapshots", "--args",
                                      _args(versions=[999999])])
        assert "skipped [999999]" in log, log
        run_dbt(["run-operation", "ducklake_expire_snapshots", "--args", _args(versions=[])], expect_pass=False)
        run_dbt(["run-operation", "ducklake_merge_adjacent_files", "--args", _args(target_file_size=-1)],
                expect_pass=False)
        run_dbt(["run-operation", "ducklake_merge_adjacent_files", "--args",
                 _args(min_file_size=10, max_file_size=5)], expect_pass=False)
        run_dbt(["run-operation", "ducklake_cleanup_old_files", "--args", _args(all=True, cleanup_all=False)],
                expect_pass=False)
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute("SELECT snapshot_id, changes FROM lake.snapshots()").fetchall() == before


COMPACTED = ("{{ config(materialized='incremental', ducklake_compact=true) }}\n"
             "select {{ var('k', 0) }} as k, id from {{ ref('src') }}\n")


class TestCompactAfterEachRun:
    """`ducklake_compact: true` merges a model's files after each run: the table stays one file however often it is
    appended to, DuckDB reads every earlier version unchanged, and the next run reads the merged file."""

    @pytest.fixture(scope="class")
    def seeds(self) -> dict[str, str]:
        return {"src.csv": SEED}

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"inc.sql": COMPACTED, "total.sql": TOTAL}

    def test_each_run_leaves_one_file(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        run_dbt(["seed"])
        history = {}
        for k in range(4):
            run_dbt(["run", "--select", "inc", "--vars", _args(k=k)])
            with reference.attached(catalog, read_only=True) as con:
                snaps = con.execute("SELECT snapshot_id, changes FROM lake.snapshots() ORDER BY snapshot_id DESC "
                                    "LIMIT 2").fetchall()
                files = con.execute(f"SELECT count(*) FROM ducklake_list_files('lake', 'inc', schema => '{schema}')"
                                    ).fetchone()[0]
                merged = "merge_adjacent" in str(snaps[0][1])
                history[snaps[1][0] if merged else snaps[0][0]] = 3 * (k + 1)  # the model's own snapshot
            assert files == 1, (k, files)
            assert merged or k == 0, snaps  # an append leaves two files: merged in a snapshot of its own
        with reference.attached(catalog, read_only=True) as con:
            for sid, n in history.items():
                got = con.execute(f"SELECT count(*) FROM lake.{schema}.inc AT (VERSION => {sid})").fetchone()[0]
                assert got == n, (sid, got, n)
            assert con.execute(f"SELECT count(*), sum(k) FROM lake.{schema}.inc").fetchone() == (12, 3 * (0 + 1 + 2 + 3))
        run_dbt(["run", "--select", "total"])
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute(f"SELECT n, ks FROM lake.{schema}.total").fetchone() == (12, 18)


BASE = "{{ config(materialized='table') }}\nselect id, concat('v', id) as v from range(10)\n"
CHECKPOINTED = ("{{ config(materialized='table', post_hook={'sql': '{{ ducklake_checkpoint() }}', "
                "'transaction': false}) }}\nselect count(*) as n from {{ ref('base') }}\n")


class TestRewriteAndCheckpoint:
    """After a DELETE through dbt (a delete file Spark wrote), ducklake_rewrite_data_files writes the remaining rows
    with their row ids into a new file in one 'rewrite_delete' snapshot, which DuckDB reads (time travel included);
    ducklake_checkpoint runs as a model's post-hook after its commit; bad arguments change nothing."""

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"base.sql": BASE, "counted.sql": CHECKPOINTED}

    def test_rewrite_then_checkpoint(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        run_dbt(["run", "--select", "base"])
        with project.adapter.connection_named("delete"):  # type: ignore[attr-defined]
            project.run_sql(f"delete from {schema}.base where id < 7")  # type: ignore[attr-defined]
        with reference.attached(catalog, read_only=True) as con:
            before = con.execute("SELECT snapshot_id, changes FROM lake.snapshots() ORDER BY 1").fetchall()
            rows = con.execute(f"SELECT rowid, * FROM lake.{schema}.base").fetchall()
            full = con.execute(f"SELECT rowid, * FROM lake.{schema}.base AT (VERSION => {before[-2][0]})").fetchall()
        assert sorted(rows) == [(i, i, f"v{i}") for i in (7, 8, 9)]
        _, log = run_dbt_and_capture(["run-operation", "ducklake_rewrite_data_files", "--args",
                                      _args(schema=schema, delete_threshold=2)], expect_pass=False)
        assert "delete_threshold must be between 0 and 1, got 2" in log, log
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute("SELECT snapshot_id, changes FROM lake.snapshots() ORDER BY 1").fetchall() == before
        _, log = run_dbt_and_capture(["run-operation", "ducklake_rewrite_data_files", "--args",
                                      _args(schema=schema, table="base", delete_threshold=0.5)])
        assert f"{schema}.base: 1 files rewritten into 1" in log, log
        with reference.attached(catalog, read_only=True) as con:
            snaps = con.execute("SELECT snapshot_id, changes FROM lake.snapshots() ORDER BY 1").fetchall()
            assert snaps[:-1] == before and "rewrite_delete" in str(snaps[-1][1]), snaps
            assert sorted(con.execute(f"SELECT rowid, * FROM lake.{schema}.base").fetchall()) == sorted(rows)
            assert sorted(con.execute(f"SELECT rowid, * FROM lake.{schema}.base AT (VERSION => {before[-2][0]})"
                                      ).fetchall()) == sorted(full)
            assert con.execute(f"SELECT count(*) FROM ducklake_list_files('lake', 'base', schema => '{schema}')"
                               ).fetchone()[0] == 1
        _, log = run_dbt_and_capture(["run", "--select", "counted"])  # its post-hook checkpoints the lake
        for step in ("flush_inlined_data", "expire_snapshots", "merge_adjacent_files", "rewrite_data_files",
                     "cleanup_old_files", "delete_orphaned_files"):
            assert f"ducklake_checkpoint: {step}:" in log, log
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute(f"SELECT n FROM lake.{schema}.counted").fetchone() == (3,)
