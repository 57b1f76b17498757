"""The change feed as a Spark DataFrame equals DuckDB's ducklake_table_changes on DuckDB-written lakes."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.spark.read import scan
from dbt.adapters.ducklake.spark.read.changes import table_changes
from dbt.adapters.ducklake.spark.types import spark_schema
from tests.conftest import reference_lake_of
from tests.lake.compare import arrow_rows, plain_rows
from tests.support.coverage import FULL

_SCENARIOS = ["updates", "repeated_deletes", "inlined", "compaction", "schema_evolution", "deletion_vectors"]


# by default every scenario once: through manifests, but for the evolved schema and the repeated deletes through
# the footer-based path (test_scan reads both through manifests by default)
_FOOTERS = ("schema_evolution", "repeated_deletes")


@pytest.mark.parametrize(("scenario", "reader"), [(s, "manifest") for s in _SCENARIOS if FULL or s not in _FOOTERS] + [
    (s, "footers") for s in _SCENARIOS if FULL or s in _FOOTERS])
def test_change_feed_equals_duckdb(spark: SparkSession, scenario: str, reader: str, request: pytest.FixtureRequest,
                                   tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Changed files read through a manifest (deleted positions as a Parquet file), or by the footer-based path
    (a branch per file: name-mapped files, remote storage, HUGEINT columns)."""
    monkeypatch.setattr(scan, "USE_MANIFESTS", reader == "manifest")
    built = reference_lake_of(scenario, "duckdb", request, tmp_path_factory)  # shared, read only
    catalog, ref = built.catalog, built.state
    lake = DuckLake.open(catalog)
    checked = kinds = 0
    per_table: dict[tuple[str, str], int] = {}
    seen_kinds: set[str] = set()
    for (schema, name, start, end), expected in sorted(ref["changes"].items(), key=lambda kv: kv[0][3] - kv[0][2]):
        table = lake.snapshot(end).table(schema, name)
        spark_schema(table.columns)  # every table of these scenarios has Spark types
        if not expected and per_table.get((schema, name), 0) >= 2:
            continue  # a few empty ranges are enough
        if per_table.get((schema, name), 0) >= 8 and end - start < 3:
            continue  # keep the Spark work bounded: the widest ranges come last and are always checked
        per_table[(schema, name)] = per_table.get((schema, name), 0) + 1
        ours = arrow_rows(table_changes(spark, lake, schema, name, start, end).toArrow())
        assert ours == plain_rows(expected), f"{schema}.{name} changes in [{start}, {end}]"
        seen_kinds |= {r[2] for r in expected}
        checked += 1
    lake.close()
    kinds = len(seen_kinds)
    assert checked > 0 and kinds >= 2, (checked, seen_kinds)
    if scenario == "updates":
        assert {"update_preimage", "update_postimage"} <= seen_kinds
