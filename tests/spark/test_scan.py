"""Spark SQL over DuckDB-written lakes: every table at every snapshot equals DuckDB's answer."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.lake.errors import UnsupportedTypeError
from dbt.adapters.ducklake.spark import scan
from dbt.adapters.ducklake.spark.scan import register_at, register_table
from dbt.adapters.ducklake.spark.types import to_spark
from tests.lake.compare import arrow_rows, plain_rows
from tests.support.reference_lakes import SCENARIOS, build, reference_state


def spark_supports(table: object) -> bool:
    try:
        for c in table.columns:  # type: ignore[attr-defined]
            to_spark(c)
    except UnsupportedTypeError:
        return False
    return True


@pytest.mark.parametrize("deletes", ["literal", "from_files"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_spark_reads_what_duckdb_reads(spark: SparkSession, scenario: str, deletes: str, tmp_path: object,
                                       data_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One catalog backend is enough here (the lake layer's tests cover all three); every snapshot at which a table's
    rows changed is checked, so time travel over every file layout the scenario produced is covered. Deleted rows
    are removed by literal keys in the view (few deletes) or by keys Spark reads from the delete files (many)."""
    if deletes == "from_files":
        monkeypatch.setattr(scan, "MAX_LITERAL_DELETES", 0)
    catalog = f"duckdb:///{tmp_path}/metadata.ducklake"
    build(catalog, data_path, scenario)
    ref = reference_state(catalog)
    lake = DuckLake.open(catalog)
    latest = lake.snapshot().snapshot_id
    checked = refused = 0
    seen: dict[tuple[str, str], object] = {}
    for (sid, schema, name), expected in sorted(ref["tables"].items()):
        if seen.get((schema, name)) == expected["rows"] and sid != latest:
            continue
        seen[(schema, name)] = expected["rows"]
        state = lake.snapshot(sid)
        table = state.table(schema, name)
        if not spark_supports(table):
            with pytest.raises(UnsupportedTypeError, match="which Spark cannot use"):
                register_at(spark, state, table)
            refused += 1
            continue
        view = register_table(spark, state, table) if sid == latest else register_at(spark, state, table)
        ours = arrow_rows(spark.sql(f"SELECT * FROM {view}").toArrow())
        theirs = plain_rows([row[1:] for row in expected["rows"]])  # DuckDB's rows without rowid
        assert ours == theirs, f"{schema}.{name} at snapshot {sid}"
        assert spark.sql(f"SELECT count(*) FROM {view}").collect()[0][0] == expected["count"]
        checked += 1
    lake.close()
    # the types scenario holds every DuckLake type in one table, some of which Spark has no type for
    assert checked > 0 if scenario != "types" else refused > 0
