"""What a table's sort (`sorted_by`, DuckDB's SET SORTED BY) buys a selective read, and what sorting costs a write.

Two tables of the same rows (id, k: a well-mixed key in [0, 1e9), v, s), written through the Spark layer with the
same write options: `unsorted` as Spark produces the rows, `sorted` with sort key k (one order over the write, as
DuckDB sorts an insert). For each table:

- write: wall time (after a warm-up write) of the staged CREATE TABLE AS (Spark's write job, footers, moves)
  plus the catalog commit;
- a selective read, `SELECT count(*), sum(v) FROM t WHERE k BETWEEN lo AND hi` (0.1 % of k's range):
  the files our read pruning reads and skips by the catalog's column stats, the row groups of the files read whose
  min/max overlap the range (what Parquet's row-group skipping leaves to decode), and the wall time (median of
  --repeat runs) through Spark (read pruning + Spark's own row-group skipping) and through DuckDB 1.5.5 on the lake.

Run: .venv/bin/python -m bench.sorted_read [--rows 10000000] [--repeat 5] [--workdir DIR]
100M rows: --rows 100000000 (about 6 GB of data files and a few minutes per table on 2 cores; --workdir on a disk
with room).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

import pyarrow.parquet as pq
from pyspark.sql import functions as F

from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.spark.answer.read_pruning import pruned_reads
from dbt.adapters.ducklake.spark.env.session import build_session
from dbt.adapters.ducklake.spark.read.names import LakeNames
from dbt.adapters.ducklake.spark.write.write import stage_create_table_as
from tests.support import reference

KEYS = 1_000_000_000
WIDTH = KEYS // 1000  # 0.1 % of the key range


def _rows(spark: object, n: int) -> object:
    return (spark.range(n)  # type: ignore[attr-defined]
            .withColumn("k", F.pmod(F.xxhash64("id"), F.lit(KEYS)))
            .withColumn("v", (F.col("id") % 1000).cast("double"))
            .withColumn("s", F.concat(F.lit("row-"), F.col("id").cast("string"))))


def _write(spark: object, lake: DuckLake, name: str, n: int, sorted_by: str | None) -> float:
    start = time.perf_counter()
    with lake.transaction(commit_message=f"bench {name}") as tx:
        stage_create_table_as(spark, tx, "main", name, _rows(spark, n), sorted_by=sorted_by)  # type: ignore[arg-type]
    return time.perf_counter() - start


def _row_groups(lake: DuckLake, name: str, lo: int, hi: int) -> tuple[int, int]:
    """(row groups whose k range overlaps [lo, hi], all row groups) over the table's files."""
    state = lake.snapshot()
    hit = total = 0
    for f in state.files(state.table("main", name)):
        meta = pq.ParquetFile(f.path).metadata
        k = [i for i in range(meta.num_columns) if meta.schema.column(i).name == "k"][0]
        for g in range(meta.num_row_groups):
            st = meta.row_group(g).column(k).statistics
            total += 1
            hit += int(st is None or not (st.max < lo or st.min > hi))
    return hit, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    root = args.workdir or tempfile.mkdtemp(prefix="sorted_read_")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    spark = build_session("local[2]")
    lake = DuckLake.create(os.path.join(root, "m.ducklake"), os.path.join(root, "data"))
    _write(spark, lake, "warmup", max(1, args.rows // 10), "k")  # the JVM's first jobs are slower: not measured
    writes = {name: _write(spark, lake, name, args.rows, sort) for name, sort in (("unsorted", None), ("sorted", "k"))}
    lo = KEYS // 3
    hi = lo + WIDTH
    print(f"rows {args.rows:,}, predicate k BETWEEN {lo} AND {hi} (0.1 % of the key range), repeat {args.repeat}")
    print("| table | write s | files read / skipped | row groups to read / all | Spark read s | DuckDB read s | answer |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for name in ("unsorted", "sorted"):
        sql = f"SELECT count(*), sum(v) FROM main.{name} WHERE k BETWEEN {lo} AND {hi}"
        names = LakeNames(spark, lake)
        times, answer, files = [], None, (0, 0)
        for _ in range(args.repeat):
            start = time.perf_counter()
            state = names.refresh([("main", name)])
            with pruned_reads(spark, state, sql) as q:
                answer = tuple(spark.sql(q.sql).collect()[0])
            times.append(time.perf_counter() - start)
            files = q.files.get(("main", name), (len(state.files(state.table("main", name))), 0))
        duck = []
        with reference.attached(lake.db.location, read_only=True) as con:
            for _ in range(args.repeat):
                start = time.perf_counter()
                theirs = con.execute(sql.replace("main.", "lake.main.")).fetchone()
                duck.append(time.perf_counter() - start)
        assert tuple(theirs) == answer, (theirs, answer)
        groups = _row_groups(lake, name, lo, hi)
        print(f"| {name} | {writes[name]:.2f} | {files[0]} / {files[1]} | {groups[0]} / {groups[1]} | "
              f"{statistics.median(times):.3f} | {statistics.median(duck):.3f} | {answer} |")
    lake.close()
    spark.stop()
    if args.workdir is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
