"""Our reader on lakes that DuckDB wrote: every table at every snapshot, and every change feed, equal to DuckDB's."""

from __future__ import annotations

import pytest

from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.lake.read.changes import read_changes
from dbt.adapters.ducklake.lake.read.scan import read_arrow
from tests.conftest import reference_lake_of
from tests.lake.compare import arrow_rows, plain_rows
from tests.support.coverage import pairs
from tests.support.reference_lakes import SCENARIOS


# each scenario on two of the three catalog backends, in turn (all three under DUCKLAKE_TEST_FULL=1)
@pytest.mark.parametrize(("scenario", "backend"), [
    pytest.param(s, b, id=f"{b}-{s}", marks=[pytest.mark.postgres] if b == "postgres" else [])
    for s, b in pairs(sorted(SCENARIOS), ["duckdb", "sqlite", "postgres"], per_first=2)])
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
