"""A DuckDB delete whose commit another writer overtook: the change feed reports it at the snapshot it committed as.

DuckDB 1.5.5 writes the rewritten delete file's per-row snapshot ids before its commit; when another writer commits
first, the delete lands under the next id but its rows name the other writer's snapshot (docs/design/
snapshot-isolation.md). DuckDB's own ducklake_table_changes then reports the delete in the other writer's snapshot,
where it was not while that snapshot was the latest, and none in the snapshot that committed it: a feed read up to
the other snapshot first never sees the delete. Ours reports it where it was committed. The oracle is what DuckDB
answered while the other writer's snapshot was the latest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.lake.read.changes import read_changes
from tests.support import reference

pytestmark = pytest.mark.postgres


def test_overtaken_delete_is_reported_where_it_committed(pg_server: object, tmp_path: Path) -> None:
    catalog = pg_server.create_database("overtaken")  # type: ignore[attr-defined]
    data = f"{tmp_path}/data/"
    a, b = reference.connect(), reference.connect()
    try:
        a.execute(reference.attach_sql(catalog, data_path=data))
        a.execute("CALL lake.set_option('data_inlining_row_limit', 0)")  # deletes go to delete files
        a.execute("CREATE TABLE lake.t AS SELECT range AS id FROM range(1000)")  # snapshot 1
        a.execute("DELETE FROM lake.t WHERE id < 10")  # 2
        a.execute("DELETE FROM lake.t WHERE id BETWEEN 10 AND 19")  # 3: the delete file gets a snapshot column
        b.execute(reference.attach_sql(catalog, data_path=data))
        a.execute("BEGIN")
        a.execute("DELETE FROM lake.t WHERE id BETWEEN 500 AND 509")
        b.execute("CREATE TABLE lake.other AS SELECT 1 AS x")  # 4: commits first
        at_the_time = b.execute("SELECT count(*) FROM lake.t AT (VERSION => 4)").fetchone()[0]
        feed_then = b.execute("SELECT count(*) FROM ducklake_table_changes('lake', 'main', 't', 4, 4)").fetchone()[0]
        a.execute("COMMIT")  # 5
        ids = [r[0] for r in a.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]
        assert ids == [0, 1, 2, 3, 4, 5]
        # the reference's answer after the fact moved the delete into snapshot 4
        assert (at_the_time, feed_then) == (980, 0)
        assert a.execute("SELECT count(*) FROM lake.t AT (VERSION => 4)").fetchone()[0] == 970
        assert a.execute("SELECT count(*) FROM ducklake_table_changes('lake', 'main', 't', 5, 5)").fetchone()[0] == 0
    finally:
        a.close()
        b.close()
    lake = DuckLake.open(catalog)
    assert read_changes(lake, "main", "t", 4, 4).num_rows == feed_then
    five = read_changes(lake, "main", "t", 5, 5).to_pydict()
    assert sorted(zip(five["snapshot_id"], five["change_type"], five["id"], strict=True)) == [
        (5, "delete", i) for i in range(500, 510)]
    # the earlier deletes keep their own snapshots
    two_three = read_changes(lake, "main", "t", 2, 3).to_pydict()
    assert sorted(zip(two_three["snapshot_id"], two_three["id"], strict=True)) == [
        (2, i) for i in range(10)] + [(3, i) for i in range(10, 20)]
