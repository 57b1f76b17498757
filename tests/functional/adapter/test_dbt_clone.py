"""dbt-tests-adapter's dbt_clone suites. A ducklake clone of a table is a new table whose data files are hard links of
the source's, committed in one snapshot (see macros/materializations/clone.sql and lake/write/clone.py); views clone as
views."""

from __future__ import annotations

import os
from typing import Any

from dbt.tests.adapter.dbt_clone.test_dbt_clone import (
    BaseCloneNotPossible,
    BaseClonePossible,
    BaseCloneSameSourceAndTarget,
    BaseCloneSameTargetAndState,
)
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.support import invariants, reference


class TestClonePossible(BaseClonePossible):
    pass


class TestCloneNotPossible(BaseCloneNotPossible):
    pass


class TestCloneSameSourceAndTarget(BaseCloneSameSourceAndTarget):
    pass


class TestCloneSameTargetAndState(BaseCloneSameTargetAndState):
    pass


class TestCloneOutlivesSourceCleanup(BaseClonePossible):
    """dbt build -> dbt clone --state into another schema -> the source rebuilt (by dbt, then by DuckDB) -> DuckDB's
    own expire_snapshots + cleanup_old_files: the source's files are deleted, the clone (hard links of them) reads
    the rows it was cloned with, in DuckDB and in Spark."""

    test_can_clone_true = None  # type: ignore[assignment]  # run once above
    test_clone_no_state = None  # type: ignore[assignment]

    def test_clone_survives_rebuild_expire_and_cleanup(self, project, unique_schema, other_schema) -> None:
        catalog = project.adapter.config.credentials.catalog
        project.create_test_schema(other_schema)
        run_dbt(["build"])
        self.copy_state(project.project_root)
        _, log = run_dbt_and_capture(["clone", "--state", "state", "--target", "otherschema",
                                      "--select", "table_model"])
        assert f"clone of {unique_schema}.table_model as {other_schema}.table_model: hard links" in log
        source, clone = f"lake.{unique_schema}.table_model", f"lake.{other_schema}.table_model"
        with reference.attached(catalog) as con:
            old = sorted(con.execute(f"SELECT * FROM {source}").fetchall())
            assert old and sorted(con.execute(f"SELECT * FROM {clone}").fetchall()) == old
            source_files = _files(con, unique_schema)
            assert {os.stat(p).st_ino for p in source_files} == {os.stat(p).st_ino for p in _files(con, other_schema)}
            version = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        run_dbt(["run", "--select", "table_model"])  # the source rebuilt: its old files are scheduled
        with reference.attached(catalog) as con:
            con.execute(f"CREATE OR REPLACE TABLE {source} AS SELECT * FROM {source} WHERE false")
            con.execute("CALL ducklake_expire_snapshots('lake', older_than => now())")
            con.execute("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
            assert con.execute("SELECT count(*) FROM lake.snapshots() WHERE snapshot_id = ?",
                               [version]).fetchone()[0] == 0  # the clone's snapshot expired too
            assert not any(os.path.exists(p) for p in source_files)
            assert con.execute(f"SELECT count(*) FROM {source}").fetchone()[0] == 0
            assert sorted(con.execute(f"SELECT * FROM {clone}").fetchall()) == old
        # our reader (Spark) agrees, and the lake passes the reference's invariants
        ours = project.run_sql(f"select * from {other_schema}.table_model", fetch="all")
        assert sorted(tuple(r) for r in ours) == old
        assert invariants.violations(catalog) == []


def _files(con: Any, schema: str) -> list[str]:
    rows = con.execute(f"SELECT data_file FROM ducklake_list_files('lake', 'table_model', schema => '{schema}')")
    return [r[0] for r in rows.fetchall()]
