"""dbt-tests-adapter's snapshot suites on this adapter: basic check-cols and timestamp, and simple_snapshot (simple,
check, column names, unique key lists, dbt_valid_to_current, hard_deletes='new_record' in timestamp and check modes,
ephemeral sources with hard deletes)."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import pytest
import sqlglot
from dbt.tests.adapter.basic.test_snapshot_check_cols import BaseSnapshotCheckCols
from dbt.tests.adapter.basic.test_snapshot_timestamp import BaseSnapshotTimestamp
from dbt.tests.adapter.simple_snapshot import test_various_configs as base
from dbt.tests.adapter.simple_snapshot.new_record_check_mode import BaseSnapshotNewRecordCheckMode
from dbt.tests.adapter.simple_snapshot.new_record_dbt_valid_to_current import (
    BaseSnapshotNewRecordDbtValidToCurrent,
)
from dbt.tests.adapter.simple_snapshot.new_record_timestamp_mode import (
    BaseSnapshotNewRecordTimestampMode,
)
from dbt.tests.adapter.simple_snapshot.test_ephemeral_snapshot_hard_deletes import (
    BaseSnapshotEphemeralHardDeletes,
)
from dbt.tests.adapter.simple_snapshot.test_snapshot import BaseSimpleSnapshot, BaseSnapshotCheck
from dbt.tests.adapter.simple_snapshot.test_various_configs import (
    BaseSnapshotColumnNames,
    BaseSnapshotColumnNamesFromDbtProject,
    BaseSnapshotDbtValidToCurrent,
    BaseSnapshotInvalidColumnNames,
    BaseSnapshotMultiUniqueKey,
)
from dbt.tests.util import check_relations_equal, run_dbt, run_sql_with_adapter

from tests.support.coverage import full_only


@pytest.fixture(autouse=True)
def spark_dialect_setup_sql(project: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """The suites set up and check their data with PostgreSQL SQL (`::text`, `interval '1 hour'`); dbt-spark rewrites
    those fixtures by hand. Here they are transpiled to Spark SQL (test setup only, never the adapter's own SQL)."""
    cls = type(project.adapter)  # type: ignore[attr-defined]  # each dbt command makes a new adapter
    original = cls.run_sql_for_tests

    def run_sql_for_tests(self: object, sql: str, fetch: object, conn: object) -> object:
        sql = re.sub(r"`[^`]*None[^`]*`\.", "", sql)  # {database}.{schema}.t: this adapter has no databases
        spark_sql = ";\n".join(sqlglot.transpile(sql, read="postgres", write="spark"))
        return original(self, spark_sql, fetch, conn)

    monkeypatch.setattr(cls, "run_sql_for_tests", run_sql_for_tests)
    # their snapshot files read `{{target.database}}.{{target.schema}}.seed`: relations here have no database
    for path in Path(project.project_root).rglob("*.sql"):  # type: ignore[attr-defined]
        text = path.read_text()
        fixed = re.sub(r"\{\{\s*target\.database\s*\}\}\.", "", text)
        if fixed != text:
            path.write_text(fixed)


class TestSnapshotCheckCols(BaseSnapshotCheckCols):
    pass


class TestSnapshotTimestamp(BaseSnapshotTimestamp):
    pass


class TestSimpleSnapshot(BaseSimpleSnapshot):
    pass


class TestSnapshotCheck(BaseSnapshotCheck):
    pass


class TestSnapshotColumnNames(BaseSnapshotColumnNames):
    pass


@full_only("column names from the project file: the same macros as TestSnapshotColumnNames")
class TestSnapshotColumnNamesFromDbtProject(BaseSnapshotColumnNamesFromDbtProject):
    pass


class TestSnapshotInvalidColumnNames(BaseSnapshotInvalidColumnNames):
    pass


@full_only("a key of several columns: the check and timestamp suites' SQL with a longer join")
class TestSnapshotMultiUniqueKey(BaseSnapshotMultiUniqueKey):
    pass


@full_only("hard_deletes='new_record': TestSnapshotNewRecordDbtValidToCurrent takes it by default")
class TestSnapshotNewRecordTimestampMode(BaseSnapshotNewRecordTimestampMode):
    pass


@full_only("hard_deletes='new_record': TestSnapshotNewRecordDbtValidToCurrent takes it by default")
class TestSnapshotNewRecordCheckMode(BaseSnapshotNewRecordCheckMode):
    pass


class TestSnapshotNewRecordDbtValidToCurrent(BaseSnapshotNewRecordDbtValidToCurrent):
    pass


class TestSnapshotEphemeralHardDeletes(BaseSnapshotEphemeralHardDeletes):
    pass


class TestSnapshotDbtValidToCurrent(BaseSnapshotDbtValidToCurrent):
    """The base test reads rows by position with no ORDER BY (PostgreSQL's heap order: the 20 first versions by id,
    then the new ones). A lake read has no such order, so the same rows are checked here in an explicit order: the
    first versions by id, then the new versions by id."""

    def test_valid_to_current(self, project: object) -> None:
        current = datetime.datetime(2099, 12, 31, 0, 0)
        select = ("select id, test_scd_id, test_valid_to from (select *, row_number() over (partition by id order by "
                  "test_valid_from) as version from {schema}.snapshot_actual) as s order by version, id")
        for sql in (base.create_seed_sql, base.create_snapshot_expected_sql, base.seed_insert_sql,
                    base.populate_snapshot_expected_valid_to_current_sql):
            project.run_sql(sql)  # type: ignore[attr-defined]
        assert len(run_dbt(["snapshot"])) == 1
        original = run_sql_with_adapter(project.adapter, select, "all")  # type: ignore[attr-defined]
        assert len(original) == 20 and all(r[2] == current for r in original)

        project.run_sql(base.invalidate_sql)  # type: ignore[attr-defined]
        project.run_sql(base.update_with_current_sql)  # type: ignore[attr-defined]
        assert len(run_dbt(["snapshot"])) == 1
        updated = run_sql_with_adapter(project.adapter, select, "all")  # type: ignore[attr-defined]
        assert len(updated) == 31
        assert updated[0][2] == current
        # the first version of id 10 is closed at its update time; its new version is current
        assert updated[9][0] == 10 and updated[9][2] == datetime.datetime(2016, 8, 20, 16, 44, 49)
        assert updated[20][0] == 10 and updated[20][2] == current
        check_relations_equal(project.adapter, ["snapshot_actual", "snapshot_expected"])  # type: ignore[attr-defined]
