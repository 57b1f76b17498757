"""dbt-tests-adapter's snapshot suites on this adapter: basic check-cols and timestamp, simple_snapshot (column
names, unique key lists). Not yet here (issue 6, next): the dbt_valid_to_current class (it reads rows by position
without ORDER BY), the hard_deletes='new_record' classes and the ephemeral hard-deletes class (it reads an
unqualified table name)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlglot
from dbt.tests.adapter.basic.test_snapshot_check_cols import BaseSnapshotCheckCols
from dbt.tests.adapter.basic.test_snapshot_timestamp import BaseSnapshotTimestamp
from dbt.tests.adapter.simple_snapshot.test_snapshot import BaseSimpleSnapshot, BaseSnapshotCheck
from dbt.tests.adapter.simple_snapshot.test_various_configs import (
    BaseSnapshotColumnNames,
    BaseSnapshotColumnNamesFromDbtProject,
    BaseSnapshotInvalidColumnNames,
    BaseSnapshotMultiUniqueKey,
)


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


class TestSnapshotColumnNamesFromDbtProject(BaseSnapshotColumnNamesFromDbtProject):
    pass


class TestSnapshotInvalidColumnNames(BaseSnapshotInvalidColumnNames):
    pass



class TestSnapshotMultiUniqueKey(BaseSnapshotMultiUniqueKey):
    pass




