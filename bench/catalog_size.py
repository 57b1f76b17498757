"""What one catalog operation costs as a lake grows to many tables, per catalog backend (no Spark).

For each backend and table count N, a fresh lake gets N tables (4 columns each, one CREATE TABLE commit each, as
dbt models make them), then:

- `commit_ms`: the median of the last 10 CREATE TABLE commits (each opens the catalog, writes, closes);
- `open_ms`: open the catalog, read the latest snapshot, close (what every statement's freshness check costs when
  the catalog changed);
- `attach_ms` / `detach_ms` (DuckDB files): DuckDB's ATTACH and DETACH of the file alone (it reads every DuckDB
  table's definition: each lake table has an inlined-data table there, as the reference makes them);
- `load_state_ms`: a full state load (schemas, tables, columns, views, tags) with its open.

`--delete-positions P` also times the commit of P deleted positions of one data file (a MERGE or DELETE of many
rows: the positions' dedup and the delete file's write), on the first backend.

    .venv/bin/python -m bench.catalog_size                              # 100 and 1,000 tables; duckdb and sqlite
    .venv/bin/python -m bench.catalog_size --tables 20 --delete-positions 100000   # a quick smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from dbt.adapters.ducklake.lake import Column, DuckLake
from dbt.adapters.ducklake.lake.catalog.state import find_snapshot, load_state
from dbt.adapters.ducklake.lake.write.writer import write_data_files

COLUMNS = (Column(0, "id", "int64"), Column(0, "name", "varchar"), Column(0, "amount", "float64"),
           Column(0, "kind", "varchar"))


def _ms(f: Any, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 1)


def measure(backend: str, n: int, root: str) -> dict[str, Any]:
    ext = "ducklake" if backend == "duckdb" else "sqlite"
    path = os.path.join(root, f"{backend}-{n}.{ext}")
    lake = DuckLake.create(f"{backend}:///{path}", os.path.join(root, f"data-{backend}-{n}"))
    commits = []
    for i in range(n):
        t0 = time.perf_counter()
        with lake.transaction() as tx:
            tx.create_table("main", f"t{i}", COLUMNS)
        commits.append((time.perf_counter() - t0) * 1000)
    db = lake.db

    def open_read() -> None:
        with db.read() as conn:
            find_snapshot(db, conn)

    def load() -> None:
        with db.read() as conn:
            load_state(db, conn, find_snapshot(db, conn), lake.data_path)

    out: dict[str, Any] = {"backend": backend, "tables": n, "commit_ms": round(statistics.median(commits[-10:]), 1),
                           "open_ms": _ms(open_read), "load_state_ms": _ms(load)}
    lake.close()
    if backend == "duckdb":
        con = duckdb.connect()
        attach, detach = [], []
        for _ in range(3):
            t0 = time.perf_counter()
            con.execute(f"ATTACH '{path}' AS c")
            t1 = time.perf_counter()
            con.execute("DETACH c")
            attach.append((t1 - t0) * 1000)
            detach.append((time.perf_counter() - t1) * 1000)
        con.close()
        out.update(attach_ms=round(statistics.median(attach), 1), detach_ms=round(statistics.median(detach), 1))
    return out


def big_delete(backend: str, positions: int, root: str) -> dict[str, Any]:
    ext = "ducklake" if backend == "duckdb" else "sqlite"
    lake = DuckLake.create(f"{backend}:///{root}/delete.{ext}", os.path.join(root, "data-delete"))
    with lake.transaction() as tx:
        tx.create_table("main", "t", (Column(0, "id", "int64"),))
    rows = int(positions / 0.9)
    with lake.transaction() as tx:
        info = tx.table("main", "t")
        tx.add_data_files("main", "t", write_data_files(info, tx.table_path(info),
                                                        pa.table({"id": pa.array(np.arange(rows))})))
    st = lake.snapshot()
    (f,) = st.files(st.table("main", "t"))
    tx = lake.transaction()
    t0 = time.perf_counter()
    tx.delete_rows("main", "t", f.data_file_id, np.arange(positions))
    t1 = time.perf_counter()
    tx.commit()
    t2 = time.perf_counter()
    st = lake.snapshot()
    (after,) = st.files(st.table("main", "t"))
    assert after.delete_file is not None and after.delete_file.delete_count == positions
    lake.close()
    return {"backend": backend, "file_rows": rows, "positions": positions, "stage_s": round(t1 - t0, 3),
            "commit_s": round(t2 - t1, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", default="100,1000", help="comma-separated table counts")
    ap.add_argument("--backends", default="duckdb,sqlite")
    ap.add_argument("--delete-positions", type=int, default=900_000, help="0: skip the delete commit")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="bench-catalog-size-", dir=args.workdir)
    results: dict[str, Any] = {"load_start": os.getloadavg(), "sizes": []}
    try:
        backends = args.backends.split(",")
        for n in (int(x) for x in args.tables.split(",")):
            for backend in backends:
                r = measure(backend, n, root)
                results["sizes"].append(r)
                print(json.dumps(r), flush=True)
        if args.delete_positions:
            results["delete"] = big_delete(backends[0], args.delete_positions, root)
            print(json.dumps(results["delete"]), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results["load_end"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
