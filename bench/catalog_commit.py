"""Time of one catalog commit that registers many data files, per catalog backend (no Spark).

For each file count N and backend, a fresh lake gets, each in one transaction whose `commit()` alone is timed:

- ctas: CREATE TABLE (6 columns: bigint, int, double, string, date, timestamp) + N data files;
- append: N more data files into that table (updates the table stats instead of inserting them);
- delete: one row deleted from each of the first N files (N delete files, written inside the commit).

Besides, `footers` times what the Spark writer does per written file before the commit (`spark.write.write._describe`:
footer, sizes, stats, the writer's name) over the same N files.

The data files are real Parquet files (1,000 rows each, written once per N and shared by the backends) described
from their footers, so each carries the column stats Spark's writes carry. Each commit is run `--repeat` times on
fresh lakes; the report gives the median and the range.

Run: .venv/bin/python -m bench.catalog_commit [--files 1,64,256,1024] [--backends duckdb,sqlite] [--repeat 3]
     (`postgresql` in --backends starts a throwaway server as the tests do: needs the PostgreSQL server binaries)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pyarrow as pa

from dbt.adapters.ducklake.lake import Column, DuckLake
from dbt.adapters.ducklake.lake.paths import join_path
from dbt.adapters.ducklake.lake.records import TableInfo
from dbt.adapters.ducklake.lake.write.datafiles import DataFileSpec
from dbt.adapters.ducklake.lake.write.writer import write_data_files

SCHEMA = "main"
TABLE = "t"
ROWS_PER_FILE = 1000
COLUMNS = (
    Column(0, "a", "int64"), Column(0, "b", "int32"), Column(0, "c", "float64"), Column(0, "s", "varchar"),
    Column(0, "d", "date"), Column(0, "ts", "timestamp"),
)
OPS = ("ctas", "append", "delete", "footers")


def file_data(i: int) -> pa.Table:
    """The rows of file i: each file has its own value ranges, so every file has distinct stats."""
    base = i * ROWS_PER_FILE
    ids = list(range(base, base + ROWS_PER_FILE))
    return pa.table({
        "a": pa.array(ids, pa.int64()),
        "b": pa.array([x % 100_000 for x in ids], pa.int32()),
        "c": pa.array([x / 7.0 for x in ids], pa.float64()),
        "s": pa.array([f"customer#{x:09d}" for x in ids]),
        "d": pa.array([dt.date(2000, 1, 1) + dt.timedelta(days=x % 9000) for x in ids], pa.date32()),
        "ts": pa.array([dt.datetime(2000, 1, 1) + dt.timedelta(seconds=x) for x in ids], pa.timestamp("us")),
    })


def write_files(table: TableInfo, directory: str, n: int) -> list[DataFileSpec]:
    """n one-file writes into directory (outside any lake: the specs are re-pointed per lake)."""
    os.makedirs(directory, exist_ok=True)
    return [spec for i in range(n) for spec in write_data_files(table, directory, file_data(i))]


class Run:
    """One backend's fresh lake per repetition, with the commits timed."""

    count = 0  # lakes made so far (names them)

    def __init__(self, backend: str, root: str, pg_url: Callable[[str], str] | None) -> None:
        self.backend = backend
        self.root = root
        self.pg_url = pg_url

    def new_lake(self) -> tuple[DuckLake, str]:
        Run.count += 1
        d = os.path.join(self.root, f"{self.backend}-{Run.count}")
        os.makedirs(d)
        if self.backend == "duckdb":
            catalog = "duckdb:///" + os.path.join(d, "catalog.duckdb")
        elif self.backend == "sqlite":
            catalog = "sqlite:///" + os.path.join(d, "catalog.sqlite")
        else:
            assert self.pg_url is not None
            catalog = self.pg_url(f"bench_{os.getpid()}_{os.path.basename(d).replace('-', '_')}")
        data = os.path.join(d, "data")
        return DuckLake.create(catalog, data), d


def place(specs: list[DataFileSpec], table_dir: str, tag: str) -> list[DataFileSpec]:
    """The specs' files copied under the table's directory (so paths are relative, as Spark's writes are)."""
    os.makedirs(table_dir, exist_ok=True)
    out = []
    for spec in specs:
        target = join_path(table_dir, f"{tag}-{os.path.basename(spec.path)}")
        shutil.copyfile(spec.path, target)
        out.append(replace(spec, path=target))
    return out


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def one_round(run: Run, specs: list[DataFileSpec]) -> dict[str, float]:
    lake, d = run.new_lake()
    try:
        out: dict[str, float] = {}
        tx = lake.transaction()
        tx.create_table(SCHEMA, TABLE, COLUMNS)
        table_dir = tx.table_path(tx.table(SCHEMA, TABLE))
        tx.add_data_files(SCHEMA, TABLE, place(specs, table_dir, "ctas"))
        out["ctas"] = timed(tx.commit)

        tx = lake.transaction()
        tx.add_data_files(SCHEMA, TABLE, place(specs, table_dir, "append"))
        out["append"] = timed(tx.commit)

        state = lake.snapshot()
        files = sorted(state.files(state.table(SCHEMA, TABLE)), key=lambda f: f.data_file_id)[: len(specs)]
        tx = lake.transaction()
        for f in files:
            tx.delete_rows(SCHEMA, TABLE, f.data_file_id, [0])
        out["delete"] = timed(tx.commit)

        from dbt.adapters.ducklake.spark.write.write import _describe

        table = lake.snapshot().table(SCHEMA, TABLE)
        out["footers"] = timed(lambda: [_describe(spec.path, table, [], [], "field_id") for spec in specs])
        return out
    finally:
        lake.close()
        shutil.rmtree(d, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", default="1,64,256,1024", help="comma-separated file counts")
    p.add_argument("--backends", default="duckdb,sqlite", help="duckdb, sqlite, postgresql (comma-separated)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workdir", default=None)
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    counts = [int(x) for x in args.files.split(",")]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]

    server = None
    if "postgresql" in backends:
        from tests.support import postgres

        server = postgres.start()
    root = tempfile.mkdtemp(prefix="bench-commit-", dir=args.workdir)
    results: list[dict[str, Any]] = []
    try:
        template = DuckLake.create("duckdb:///" + os.path.join(root, "template.duckdb"), os.path.join(root, "tdata"))
        with template.transaction() as tx:
            tx.create_table(SCHEMA, TABLE, COLUMNS)
        table = template.snapshot().table(SCHEMA, TABLE)
        template.close()
        print(f"load average at start: {os.getloadavg()}")
        print(f"{'backend':<11}{'files':>6}  " + "  ".join(f"{op + ' (median, range)':>28}" for op in OPS))
        for n in counts:
            specs = write_files(table, os.path.join(root, f"files-{n}"), n)
            for backend in backends:
                run = Run(backend, root, server.create_database if server else None)
                rounds = [one_round(run, specs) for _ in range(args.repeat)]
                row: dict[str, Any] = {"backend": backend, "files": n}
                cells = []
                for op in OPS:
                    times = [r[op] for r in rounds]
                    row[op] = times
                    cells.append(f"{statistics.median(times):8.3f} s ({min(times):.3f}-{max(times):.3f})")
                results.append(row)
                print(f"{backend:<11}{n:>6}  " + "  ".join(f"{c:>28}" for c in cells), flush=True)
            shutil.rmtree(os.path.join(root, f"files-{n}"), ignore_errors=True)
        print(f"load average at end: {os.getloadavg()}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if server is not None:
            server.stop()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"results": results, "repeat": args.repeat}, fh, indent=1)


if __name__ == "__main__":
    main()
