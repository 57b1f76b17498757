"""Small model results committed as inlined rows: by the lake's data_inlining_row_limit (set by DuckDB) and by a
model's config; merges and deletes meet inlined rows; DuckDB and our reader agree at every snapshot, before and
after a flush; without the option, files as before."""

from __future__ import annotations

import json

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt.adapters.ducklake.lake import DuckLake, read_arrow
from dbt.adapters.ducklake.lake.maintenance.compaction import flush_inlined_data
from tests.lake.compare import arrow_rows, plain_rows
from tests.support import reference
from tests.support.invariants import violations

SEED = "id,v\n1,a\n2,b\n3,c\n"
TABLE = "{{ config(materialized='table', data_inlining_row_limit=5) }}\nselect id, v from {{ ref('src') }}\n"
INC = ("{{ config(materialized='incremental', unique_key='id', incremental_strategy='merge') }}\n"
       "select id + {{ var('k', 0) }} as id, concat(v, '{{ var('k', 0) }}') as v from {{ ref('src') }}\n")
BAD = "{{ config(materialized='table', data_inlining_row_limit=-2) }}\nselect 1 as id\n"


class TestInlinedWrites:
    @pytest.fixture(scope="class")
    def seeds(self) -> dict[str, str]:
        return {"src.csv": SEED}

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"tbl.sql": TABLE, "inc.sql": INC, "bad.sql": BAD}

    def test_small_results_are_inlined(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        md = "__ducklake_metadata_lake"
        run_dbt(["seed"])  # no option in the lake: a file, as before
        with reference.attached(catalog) as con:
            assert con.execute("SELECT changes_made FROM lake.snapshots() s JOIN "
                               f"{md}.ducklake_snapshot_changes c USING (snapshot_id) ORDER BY snapshot_id DESC LIMIT 1"
                               ).fetchone()[0].startswith("created_table")
            assert con.execute(f"SELECT count(*) FROM {md}.ducklake_data_file").fetchone()[0] == 1
            con.execute("CALL lake.set_option('data_inlining_row_limit', 10)")

        run_dbt(["run", "--select", "tbl", "inc"])  # the table by its config, the incremental by the lake's option
        run_dbt(["run", "--select", "inc", "--vars", json.dumps({"k": 2})])  # merge: 1 updated, 2 inserted
        with reference.attached(catalog) as con:
            con.execute(f"DELETE FROM lake.{schema}.inc WHERE id = 5")  # DuckDB deletes one of our inlined rows
        with reference.attached(catalog, read_only=True) as con:
            changes = [r[0] for r in con.execute(f"SELECT changes_made FROM {md}.ducklake_snapshot_changes "
                                                 "WHERE snapshot_id > 2 ORDER BY snapshot_id").fetchall()]
            # the CTAS of each model inlined; the merge's update keeps its row id in a file (and ends the inlined
            # row), its inserts are inlined
            assert changes == [f'created_table:"{schema}"."inc",inlined_insert:3',
                               f'created_table:"{schema}"."tbl",inlined_insert:4',
                               "inserted_into_table:3,inlined_insert:3,inlined_delete:3", "inlined_delete:3"]
            assert con.execute(f"SELECT count(*) FROM {md}.ducklake_data_file").fetchone()[0] >= 1
            tbl_id = con.execute(f"SELECT table_id FROM {md}.ducklake_table WHERE table_name = 'tbl' "
                                 "AND end_snapshot IS NULL").fetchone()[0]
            assert con.execute(f"SELECT value FROM {md}.ducklake_metadata WHERE scope = 'table' AND scope_id = {tbl_id}"
                               ).fetchall() == [("5",)]
            assert con.execute(f"SELECT * FROM lake.{schema}.inc ORDER BY id").fetchall() == [
                (1, "a0"), (2, "b0"), (3, "a2"), (4, "b2")]
            latest = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
            theirs = {s: plain_rows(con.execute(f"SELECT rowid, * FROM lake.{schema}.inc AT (VERSION => {s})")
                                    .fetchall()) for s in range(4, latest + 1)}
        lake = DuckLake.open(catalog)
        try:
            for s, rows in theirs.items():  # our reader, at every snapshot, equals DuckDB's
                state = lake.snapshot(s)
                assert arrow_rows(read_arrow(state, state.table(schema, "inc"))) == rows, s
        finally:
            lake.close()
        assert violations(catalog) == []

        lake = DuckLake.open(catalog)
        try:
            assert flush_inlined_data(lake) == [(schema, "inc", 5), (schema, "tbl", 3)]  # deleted ones too
        finally:
            lake.close()
        with reference.attached(catalog, read_only=True) as con:
            for s, rows in theirs.items():
                assert plain_rows(con.execute(f"SELECT rowid, * FROM lake.{schema}.inc AT (VERSION => {s})")
                                  .fetchall()) == rows, s
            assert con.execute(f"SELECT * FROM lake.{schema}.tbl ORDER BY id").fetchall() == [
                (1, "a"), (2, "b"), (3, "c")]
        assert violations(catalog) == []

    def test_bad_limit_fails_and_leaves_the_lake(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        with reference.attached(catalog, read_only=True) as con:
            before = con.execute("SELECT count(*) FROM lake.snapshots()").fetchone()[0]
        _, log = run_dbt_and_capture(["run", "--select", "bad"], expect_pass=False)
        assert "data_inlining_row_limit must be a non-negative integer (0 disables inlining), got -2" in log
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute("SELECT count(*) FROM lake.snapshots()").fetchone()[0] == before


SMALL = "{{ config(materialized='table') }}\nselect id, v from {{ ref('src') }}\n"
WIDER = "{{ config(materialized='table') }}\nselect id, 'w' as v from range(12)\n"


class TestProfileInliningLimit:
    """The profile's data_inlining_row_limit is DuckDB's ATTACH option: at 10 (DuckDB's default where the lake stores
    none) small seeds and models are inlined as DuckDB's plain ATTACH inlines the same inserts; a limit the lake
    stores wins over it, in both."""

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, ducklake_root: str, unique_schema: str) -> dict[str, object]:
        return {"type": "ducklake", "catalog": f"{ducklake_root}/{unique_schema}.ducklake",
                "data_path": f"{ducklake_root}/{unique_schema}_data/", "master": "local[2]", "threads": 1,
                "spark_config": {"spark.sql.shuffle.partitions": "4"}, "data_inlining_row_limit": 10}

    @pytest.fixture(scope="class")
    def seeds(self) -> dict[str, str]:
        return {"src.csv": SEED}

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"small.sql": SMALL, "wider.sql": WIDER}

    def test_profile_limit_inlines_as_duckdb(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        md = "__ducklake_metadata_lake"

        def last_change(con: object) -> str:
            return con.execute(f"SELECT changes_made FROM {md}.ducklake_snapshot_changes "  # type: ignore[attr-defined]
                               "ORDER BY snapshot_id DESC LIMIT 1").fetchone()[0]

        run_dbt(["seed"])
        run_dbt(["run"])
        with reference.attached(catalog) as con:  # DuckDB's plain ATTACH: its default limit, 10
            ids = dict(con.execute(f"SELECT table_name, table_id FROM {md}.ducklake_table "
                                   "WHERE end_snapshot IS NULL").fetchall())
            files = dict(con.execute(f"SELECT t.table_name, count(f.data_file_id) FROM {md}.ducklake_table t LEFT JOIN "
                                     f"{md}.ducklake_data_file f USING (table_id) WHERE t.end_snapshot IS NULL "
                                     "GROUP BY ALL").fetchall())
            assert files == {"src": 0, "small": 0, "wider": 1}
            con.execute(f"CREATE TABLE lake.{schema}.theirs AS SELECT * FROM lake.{schema}.src")
            assert last_change(con) == f'created_table:"{schema}"."theirs",inlined_insert:{ids["small"] + 2}'
            con.execute(f"CREATE TABLE lake.{schema}.wide_theirs AS SELECT * FROM lake.{schema}.wider")
            assert last_change(con) == f'created_table:"{schema}"."wide_theirs",inserted_into_table:{ids["small"] + 3}'
            assert con.execute(f"SELECT * FROM lake.{schema}.small ORDER BY id").fetchall() == [
                (1, "a"), (2, "b"), (3, "c")]
            con.execute("CALL lake.set_option('data_inlining_row_limit', 2)")  # stored: wins over the profile's
        run_dbt(["run", "--select", "small"])
        with reference.attached(catalog, read_only=True) as con:
            assert last_change(con) == (f'dropped_table:{ids["small"]},created_table:"{schema}"."small",'
                                        f'inserted_into_table:{ids["small"] + 4}')
        assert violations(catalog) == []
