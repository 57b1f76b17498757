"""The driver a class archive is made from (and verified with): started as the adapter starts it, running statements
of the kinds the adapter runs; run as a module by `class_archive.build`."""

from __future__ import annotations

import argparse
import os
import tempfile

from pyspark import SparkContext
from pyspark.sql import SparkSession

from .class_archive import BUILD_TIMEOUT, QUIET
from .session import build_session


def _workload(options: str, full: bool) -> None:
    """Start a driver as the adapter does and run statements of the kinds it runs (Parquet with field ids, catalog
    tables, views with file metadata, joins, aggregates, inline tables, Arrow collection); then stop it and wait for
    its JVM to exit, which is when an archive is written."""
    with tempfile.TemporaryDirectory(prefix="ducklake-class-archive-") as d:
        spark = build_session("local[1]", "dbt-ducklake-class-archive",
                              {"spark.driver.extraJavaOptions": f"{options} {QUIET}", "spark.ui.enabled": "false",
                               "spark.sql.shuffle.partitions": "2"},
                              log_file=os.path.join(d, "spark.log"))
        try:
            spark.range(3).selectExpr("sum(id)").collect()
            if full:
                _statements(spark, d)
        finally:
            spark.stop()
            proc = SparkContext._gateway.proc if SparkContext._gateway is not None else None  # noqa: SLF001
            SparkContext._gateway.shutdown()  # type: ignore[union-attr]  # noqa: SLF001
            if proc is not None:  # EOF on its stdin ends the gateway JVM; it writes the archive while exiting
                proc.stdin.close()
                proc.wait(timeout=BUILD_TIMEOUT)
                if proc.returncode not in (0, None):
                    raise SystemExit(f"the driver JVM exited with {proc.returncode}")


def _statements(spark: SparkSession, d: str) -> None:
    path = os.path.join(d, "t")
    spark.sql("SELECT id, CAST(id AS STRING) AS s, CAST(id AS DECIMAL(18, 2)) AS d, DATE'2024-01-01' + CAST(id % 9 AS INT)"
              " AS dt, TIMESTAMP'2024-01-01 00:00:00' AS ts, id % 2 = 0 AS b FROM range(1000)").write.parquet(path)
    spark.sql("CREATE DATABASE IF NOT EXISTS class_archive")
    schema = spark.read.parquet(path).schema
    spark.catalog.createTable("class_archive.t", path=path, source="parquet", schema=schema, recursiveFileLookup="true")
    spark.sql("CREATE OR REPLACE VIEW class_archive.v AS SELECT x.* FROM (SELECT *, _metadata.file_name AS f,"
              " _metadata.row_index AS p FROM class_archive.t) x LEFT ANTI JOIN (SELECT * FROM VALUES ('a', 1L)"
              " AS v(f, p)) del ON del.f = x.f AND del.p = x.p")
    queries = [
        "SELECT count(*) FROM class_archive.v WHERE s IS NULL",
        "SELECT s, count(*) AS n FROM class_archive.v WHERE s IS NOT NULL GROUP BY s HAVING count(*) > 1",
        "SELECT dt, sum(d), max(ts), min(id) FROM class_archive.v GROUP BY dt ORDER BY dt",
        "SELECT a.id, b.s FROM class_archive.v a JOIN class_archive.v b ON a.id = b.id + 1 WHERE a.b",
        "SELECT id, row_number() OVER (PARTITION BY b ORDER BY id DESC) AS r FROM class_archive.v",
        "SELECT CAST(c0 AS INT) AS i, CAST(c1 AS DATE) AS dd FROM VALUES ('1', '2024-01-02'), (NULL, NULL) AS v(c0, c1)",
        "SELECT * FROM class_archive.v UNION ALL SELECT * FROM class_archive.v WHERE id < 5",
    ]
    for q in queries:
        spark.sql(q).collect()
    spark.sql("SELECT * FROM class_archive.v WHERE id < 100").toArrow()
    spark.sql("SELECT * FROM class_archive.v").write.mode("overwrite").parquet(os.path.join(d, "u"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("step", choices=["workload", "verify"])
    ap.add_argument("--java-options", default="")
    args = ap.parse_args(argv)
    _workload(args.java_options, full=args.step == "workload")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
