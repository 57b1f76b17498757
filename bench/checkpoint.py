"""Reads before and after the lake's upkeep: a table of many appends with 1 % deleted, before and after
`checkpoint`; and a MERGE-heavy table, before and after `rewrite_data_files`.

Appends: the table bench/append_runs.py leaves (`--appends` appends of 100 rows `id, kind, amount`, one file and
one snapshot each; written here by the format layer, which is what each dbt run commits, without 1,000 dbt runs),
then a DELETE of 1 % of the rows through the Spark layer (a delete file on every data file). Then `checkpoint` with
the lake options expire_older_than and delete_older_than '00:00:00' (expire and delete all they may) and
rewrite_delete_threshold `--threshold` (default 0.01: files with at least 1 % deleted are rewritten; DuckDB's
default 0.95 would leave these files alone, and merge_adjacent_files skips files with deletes).

MERGE-heavy: a table of `--size` rows in 8 files (Spark), then `--merges` MERGE rounds each updating 5 % of the rows
at random (merge-on-read: a delete file on each target file touched, a file of post-images), then
`rewrite_data_files` with delete_threshold `--threshold`.

Reads, each the median of `--repeat` after one untimed run: Spark through the lake's view of the table (view planned
once per state, as the adapter does: `register_table`), `count(*)` and `sum(amount) WHERE kind = 3`; and DuckDB's
same aggregate on the same lake. Upkeep steps are timed once. Every read after is checked against the read before.

Run: .venv/bin/python -m bench.checkpoint [--appends 1000] [--size 1000000] [--merges 20] [--repeat 3]
     [--threshold 0.01] [--workdir DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from dbt.adapters.ducklake.lake import Column, DuckLake, write_data_files
from dbt.adapters.ducklake.lake.maintenance.checkpoint import checkpoint
from dbt.adapters.ducklake.lake.maintenance.cleanup import rewrite_data_files
from dbt.adapters.ducklake.spark.env.session import build_session
from dbt.adapters.ducklake.spark.read.scan import register_table
from dbt.adapters.ducklake.spark.write.one_shot import create_table_as, delete_where, merge_into
from tests.support import reference

AGGREGATE = "SELECT count(*), sum(amount) FROM {t} WHERE kind = 3"


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The median wall time of repeat runs after one untimed run, and the result."""
    got = fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        again = fn()
        times.append(time.perf_counter() - t)
        assert again == got, (again, got)
    return round(statistics.median(times), 4), got


def reads(spark: Any, lake: DuckLake, catalog: str, table: str, repeat: int) -> dict[str, Any]:
    state = lake.snapshot()
    info = state.table("main", table)
    t = time.perf_counter()
    name = register_table(spark, state, info, view=f"{table}_{state.snapshot_id}")
    plan = time.perf_counter() - t
    count_s, count = timed(lambda: spark.sql(f"SELECT count(*) FROM {name}").collect()[0][0], repeat)
    agg_s, agg = timed(lambda: tuple(spark.sql(AGGREGATE.format(t=name)).collect()[0]), repeat)
    with reference.attached(catalog, read_only=True) as con:
        duck_s, duck = timed(lambda: con.execute(AGGREGATE.format(t=f"lake.main.{table}")).fetchone(), repeat)
    assert duck[0] == agg[0] and abs(float(duck[1]) - float(agg[1])) < 1e-6 * max(1.0, abs(float(agg[1]))), (duck, agg)
    files = len(state.files(info))
    deletes = sum(f.delete_file is not None for f in state.files(info))
    return {"files": files, "delete_files": deletes, "rows": count, "plan_s": round(plan, 4), "spark_count_s": count_s,
            "spark_aggregate_s": agg_s, "duckdb_aggregate_s": duck_s, "aggregate": [agg[0], float(agg[1])]}


def appends(spark: Any, root: str, n: int, threshold: float, repeat: int) -> dict[str, Any]:
    catalog, data = f"{root}/appends.ducklake", f"{root}/appends-data/"
    lake = DuckLake.create(catalog, data)
    with lake.transaction() as tx:
        table = tx.create_table("main", "events", [Column(0, "id", "int64"), Column(0, "kind", "int64"),
                                                   Column(0, "amount", "float64")])
    t = time.perf_counter()
    for i in range(n):
        ids = list(range(i * 100, i * 100 + 100))
        rows = pa.table({"id": ids, "kind": [x % 7 for x in ids], "amount": [x * 1.5 for x in ids]})
        st = lake.snapshot()
        with lake.transaction(commit_message=f"append {i}") as tx:
            tx.add_data_files("main", "events", write_data_files(table, st.table_path(table), rows))
    build = time.perf_counter() - t
    delete_where(spark, lake, "main", "events", "id % 100 = 7")
    for key in ("expire_older_than", "delete_older_than"):
        lake.set_option(key, "00:00:00")
    lake.set_option("rewrite_delete_threshold", str(threshold))
    before = reads(spark, lake, catalog, "events", repeat)
    t = time.perf_counter()
    steps = {}
    for s in checkpoint(lake):
        steps[s.step] = s.summary()
    upkeep = time.perf_counter() - t
    after = reads(spark, lake, catalog, "events", repeat)
    assert after["aggregate"] == before["aggregate"] and after["rows"] == before["rows"]
    return {"appends": n, "build_s": round(build, 1), "checkpoint_s": round(upkeep, 2), "steps": steps,
            "before": before, "after": after}


def merges(spark: Any, root: str, size: int, rounds: int, threshold: float, repeat: int) -> dict[str, Any]:
    catalog, data = f"{root}/merges.ducklake", f"{root}/merges-data/"
    lake = DuckLake.create(catalog, data)
    base = spark.range(size).selectExpr("id", "id % 7 AS kind", "id * 1.5 AS amount").repartition(8)
    create_table_as(spark, lake, "main", "facts", base)
    t = time.perf_counter()
    for r in range(rounds):
        source = spark.range(size).where(f"rand({r}) < 0.05").selectExpr("id", "id % 7 AS kind",
                                                                        f"id * 1.5 + {r + 1} AS amount")
        merge_into(spark, lake, "main", "facts", source, "t.id = s.id", matched="update", not_matched_insert=True)
    build = time.perf_counter() - t
    before = reads(spark, lake, catalog, "facts", repeat)
    t = time.perf_counter()
    got = rewrite_data_files(lake, delete_threshold=threshold)
    upkeep = time.perf_counter() - t
    after = reads(spark, lake, catalog, "facts", repeat)
    assert after["aggregate"] == before["aggregate"] and after["rows"] == before["rows"]
    return {"size": size, "merges": rounds, "build_s": round(build, 1), "rewrite_s": round(upkeep, 2),
            "rewritten": [list(g) for g in got], "before": before, "after": after}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--appends", type=int, default=1000)
    ap.add_argument("--size", type=int, default=1_000_000, help="rows of the MERGE-heavy table")
    ap.add_argument("--merges", type=int, default=20)
    ap.add_argument("--threshold", type=float, default=0.01)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    root = args.workdir or tempfile.mkdtemp(prefix="checkpoint-bench-")
    os.makedirs(root, exist_ok=True)
    spark = build_session("local[2]")
    out = {"load_1min": os.getloadavg()[0],
           "appends": appends(spark, root, args.appends, args.threshold, args.repeat),
           "merges": merges(spark, root, args.size, args.merges, args.threshold, args.repeat)}
    out["load_1min_end"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
