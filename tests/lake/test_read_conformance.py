"""Our reader on lakes that DuckDB wrote: every table at every snapshot, and every change feed, equal to DuckDB's."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.lake.maintenance.compaction import merge_adjacent_files
from dbt.adapters.ducklake.lake.read.changes import read_changes
from dbt.adapters.ducklake.lake.read.scan import read_arrow
from tests.conftest import reference_lake_of
from tests.lake.compare import arrow_rows, plain_rows
from tests.support.coverage import pairs
from tests.support.reference import attach_sql, connect
from tests.support.reference_lakes import SCENARIOS, sort_rows


# each scenario on one of the three catalog backends, in turn (all three under DUCKLAKE_TEST_FULL=1)
@pytest.mark.parametrize(("scenario", "backend"), [
    pytest.param(s, b, id=f"{b}-{s}", marks=[pytest.mark.postgres] if b == "postgres" else [])
    for s, b in pairs(sorted(SCENARIOS), ["duckdb", "sqlite", "postgres"])])
def test_reader_matches_duckdb(scenario: str, backend: str, request: pytest.FixtureRequest,
                               tmp_path_factory: pytest.TempPathFactory) -> None:
    built = reference_lake_of(scenario, backend, request, tmp_path_factory)
    ref = built.state
    lake = DuckLake.open(built.catalog)
    try:
        with lake.db.reading():  # one catalog connection for every snapshot's reads
            checked = 0
            for (sid, schema, name), expected in sorted(ref["tables"].items()):
                state = lake.snapshot(sid)
                table = state.table(schema, name)
                assert [c.name for c in table.columns] == [n for n, _ in expected["columns"]], (sid, schema, name)
                assert table.comment == expected["comment"], (sid, schema, name)
                ours = arrow_rows(read_arrow(state, table))
                assert ours == plain_rows(expected["rows"]), f"{schema}.{name} at snapshot {sid}"
                checked += 1
            assert checked > 0
            for (sid, schema, name), expected in ref["views"].items():
                view = lake.snapshot(sid).view(schema, name)
                assert view.comment == expected["comment"]
            for (schema, name, start, end), expected in sorted(ref["changes"].items()):
                ours = arrow_rows(read_changes(lake, schema, name, start, end))
                assert ours == plain_rows(expected), f"changes of {schema}.{name} in [{start}, {end}]"
    finally:
        lake.close()


# DuckDB rewrites a data file's delete file in place (same catalog row, now with a snapshot column) at its second
# delete, so the first delete file survives in the history only while it is the file's last one: each tail ends there
# once, and the last tail shows the rewrite
TAILS = {
    "delete": ["DELETE FROM lake.c WHERE id IN (1, 20)"],
    "update": ["UPDATE lake.c SET v = 'u' WHERE id = 11"],
    "rewritten": ["DELETE FROM lake.c WHERE id IN (1, 20)", "UPDATE lake.c SET v = 'u' WHERE id = 11",
                  "DELETE FROM lake.c WHERE id = 31", "UPDATE lake.c SET v = 'w' WHERE id = 12"],
}


# each tail after one of the two mergers, in turn (both mergers before every tail under DUCKLAKE_TEST_FULL=1): every
# tail and every merger still runs by default, our merger before the longest tail (a delete and an update, then both
# again on the rewritten delete file)
@pytest.mark.parametrize(("tail", "merger"), pairs(sorted(TAILS), ["duckdb", "ours"]))
def test_changes_after_compaction_match_duckdb(merger: str, tail: str, tmp_path: Path) -> None:
    """Deletes and updates of compacted rows: the first delete file of a merged file has no snapshot column, and
    DuckDB reports those rows at their insert snapshot (update pre/postimages when the range holds the insert, a
    delete before start otherwise). Every [start, end] pair of snapshots, rows exactly equal."""
    catalog = str(tmp_path / "cat.ducklake")
    opts = {"DATA_INLINING_ROW_LIMIT": 0}
    con = connect()
    con.execute(attach_sql(catalog, data_path=str(tmp_path / "data"), options=opts))
    con.execute("CREATE TABLE lake.c (id INTEGER, v VARCHAR)")
    for k in range(4):
        con.execute(f"INSERT INTO lake.c SELECT i + {10 * k}, 'x' FROM range(3) t(i)")
    con.execute("DELETE FROM lake.c WHERE id = 0")  # the first file has deletes: merging leaves it alone
    if merger == "duckdb":
        con.execute("CALL ducklake_merge_adjacent_files('lake')")
    else:
        con.close()
        lake = DuckLake.open(catalog)
        try:
            assert merge_adjacent_files(lake) == [("main", "c", 3, 1)]
        finally:
            lake.close()
        con = connect()
        con.execute(attach_sql(catalog, options=opts))
    for sql in TAILS[tail]:
        con.execute(sql)
    ids = [r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots() WHERE snapshot_id > 0 ORDER BY 1")
           .fetchall()]
    expected = {(s, e): con.execute("SELECT * FROM ducklake_table_changes('lake', 'main', 'c', ?, ?)", [s, e]).fetchall()
                for s in ids for e in ids if s <= e}
    con.close()
    lake = DuckLake.open(catalog)
    try:
        for (start, end), rows in expected.items():
            ours = arrow_rows(read_changes(lake, "main", "c", start, end))
            assert ours == plain_rows(sort_rows([tuple(r) for r in rows])), f"changes in [{start}, {end}]"
    finally:
        lake.close()
