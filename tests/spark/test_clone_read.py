"""Spark reads a clone (lake/write/clone.py) of a DuckDB-written table as DuckDB does, after the source's files are
cleaned up: linked data files, linked delete files (whose file_path names the source's files), rewritten deletes and
the source's inlined rows written with their row ids; then a Spark DELETE on the clone equals DuckDB's."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.spark.read import scan
from dbt.adapters.ducklake.spark.write.one_shot import delete_where
from tests.lake.test_clone import SOURCE, _clone, _duck, _rows
from tests.support.invariants import violations
from tests.support.reference_lakes import sort_rows


@pytest.mark.parametrize("manifests", [True, False], ids=["manifest", "footers"])
def test_spark_reads_and_deletes_a_clone(spark: SparkSession, tmp_path: object, manifests: bool,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "USE_MANIFESTS", manifests)
    cat = f"duckdb:///{tmp_path}/m.ducklake"
    _duck(cat, f"{tmp_path}/data/", *SOURCE)
    expected = _rows(cat, "s.src")
    _clone(cat)
    _duck(cat, None, "DROP TABLE s.src", "CALL ducklake_expire_snapshots('lake', older_than => now())",
          "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
    lake = DuckLake.open(cat)
    try:
        state = lake.snapshot()
        df = scan.read_table(spark, state, state.table("c", "dst"))
        got = sort_rows([tuple(r) for r in df.select("id", "cat", "value", "tags", "extra").collect()])
        assert got == sort_rows([r[1:] for r in expected])
        delete_where(spark, lake, "c", "dst", "id % 5 = 0 OR id >= 1000", author="tests", commit_message="delete")
    finally:
        lake.close()
    assert _rows(cat, "c.dst") == [r for r in expected if not (r[1] % 5 == 0 or r[1] >= 1000)]
    assert violations(cat) == []
