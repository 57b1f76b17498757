"""dbt-tests-adapter's dbt_clone suites. A ducklake clone of a table is a copy written in one snapshot (see
macros/materializations/clone.sql for why files are not shared); views clone as views."""

from __future__ import annotations

from dbt.tests.adapter.dbt_clone.test_dbt_clone import (
    BaseCloneNotPossible,
    BaseClonePossible,
    BaseCloneSameSourceAndTarget,
    BaseCloneSameTargetAndState,
)
from dbt.tests.util import run_dbt

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
    """The clone keeps the source's rows after the source is rebuilt and DuckDB expires and cleans the source's
    lake (the reason a clone shares no file with its source)."""

    test_can_clone_true = None  # type: ignore[assignment]  # run once above
    test_clone_no_state = None  # type: ignore[assignment]

    def test_clone_survives_rebuild_expire_and_cleanup(self, project, unique_schema, other_schema) -> None:
        catalog = project.adapter.config.credentials.catalog
        project.create_test_schema(other_schema)
        self.run_and_save_state(project.project_root)
        run_dbt(["clone", "--state", "state", "--target", "otherschema", "--select", "table_model"])
        source, clone = f"lake.{unique_schema}.table_model", f"lake.{other_schema}.table_model"
        with reference.attached(catalog) as con:
            old = sorted(con.execute(f"SELECT * FROM {source}").fetchall())
            assert old and sorted(con.execute(f"SELECT * FROM {clone}").fetchall()) == old
            version = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
            # the source rebuilt (CREATE OR REPLACE schedules its old files), then DuckDB's own maintenance
            con.execute(f"CREATE OR REPLACE TABLE {source} AS SELECT * FROM {source} WHERE false")
            con.execute("CALL ducklake_expire_snapshots('lake', older_than => now())")
            con.execute("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
            assert con.execute("SELECT count(*) FROM lake.snapshots() WHERE snapshot_id = ?",
                               [version]).fetchone()[0] == 0  # the clone's snapshot expired too
            assert con.execute(f"SELECT count(*) FROM {source}").fetchone()[0] == 0
            assert sorted(con.execute(f"SELECT * FROM {clone}").fetchall()) == old
        # our reader (Spark) agrees, and the lake passes the reference's invariants
        ours = project.run_sql(f"select * from {other_schema}.table_model", fetch="all")
        assert sorted(tuple(r) for r in ours) == old
        assert invariants.violations(catalog) == []
