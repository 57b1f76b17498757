"""A small incremental merge on a quiet lake and on a busy one: does another writer's commit rate slow it down?

One dbt project (an incremental model merging `select g, count(*), sum(amt) from raw.src group by g` on `g`, 40
groups, over a DuckDB-written source of `--rows` rows) runs in this process through `dbtRunner`, so every run shares
one warm SparkSession. It is run `--repeat` times with the lake quiet, then `--repeat` times while a DuckDB process
commits to the source every `--period` seconds (tests/support/busy_writer: inserts, deletes, updates), then quiet
again. Reported: the median of the model's node time (dbt's execution_time) per phase, the ratio busy / quiet, the
writer's commits during the busy phase, and, from the adapter's debug log, how the busy node's time splits into its
statements. The model is checked against DuckDB after each run (its rows equal the source's at the snapshot it read).

    .venv/bin/python -m bench.busy_lake                       # SQLite catalog, 20k rows, 5 runs per phase
    .venv/bin/python -m bench.busy_lake --catalog postgres --period 0.1 --repeat 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL = ("{{ config(materialized='incremental', unique_key='g') }}\n"
         "select g, count(*) as n, sum(amt) as s from {{ source('raw', 'src') }} group by g\n")
SOURCES = "version: 2\nsources:\n  - name: raw\n    schema: raw\n    tables: [{name: src}]\n"


def _project(root: Path, catalog: str) -> None:
    (root / "models").mkdir(parents=True)
    (root / "dbt_project.yml").write_text("name: busy\nversion: '1.0'\nprofile: busy\nconfig-version: 2\n")
    (root / "models" / "merged.sql").write_text(MODEL)
    (root / "models" / "sources.yml").write_text(SOURCES)
    (root / "profiles.yml").write_text(
        "busy:\n  target: dev\n  outputs:\n    dev:\n      type: ducklake\n"
        f"      catalog: '{catalog}'\n      data_path: '{root}/data/'\n      schema: main\n      master: 'local[2]'\n"
        "      threads: 1\n      spark_config: {spark.sql.shuffle.partitions: '2', spark.ui.enabled: 'false'}\n")


def _check(catalog: str) -> None:
    from tests.support import reference

    with reference.attached(catalog, read_only=True) as con:
        c, info = con.execute("SELECT snapshot_id, commit_extra_info FROM lake.snapshots() WHERE commit_message LIKE "
                              "'model.busy.merged:%' ORDER BY snapshot_id DESC LIMIT 1").fetchone()
        r = json.loads(info)["read_snapshot"]
        got = sorted(con.execute(f"SELECT g, n, s FROM lake.main.merged AT (VERSION => {c})").fetchall())
        want = sorted(con.execute(f"SELECT g, count(*), sum(amt) FROM lake.raw.src AT (VERSION => {r}) "
                                  "GROUP BY g").fetchall())
    if got != want:
        raise SystemExit(f"the model at snapshot {c} differs from the source at {r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--catalog", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--period", type=float, default=0.1, help="seconds between the writer's commits")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from dbt.cli.main import dbtRunner

    from tests.support import busy_writer, postgres

    root = Path(tempfile.mkdtemp(prefix="busy-lake-"))
    server = None
    if args.catalog == "postgres":
        server = postgres.start()
        catalog = server.create_database("busy_bench")
    else:
        catalog = f"sqlite:///{root}/catalog.sqlite"
    _project(root, catalog)
    busy_writer.create_source(catalog, f"{root}/data/", args.rows)
    os.environ["DBT_PROFILES_DIR"] = str(root)
    runner = dbtRunner()

    def run() -> float:
        res = runner.invoke(["run", "--project-dir", str(root), "--quiet"])
        if not res.success:
            raise SystemExit(f"dbt run failed: {res.exception}")
        _check(catalog)
        return float(res.result.results[0].execution_time)

    run()  # the first run builds the table and warms the JVM
    quiet = [run() for _ in range(args.repeat)]
    stop = root / "stop"
    writer = subprocess.Popen([sys.executable, "-m", "tests.support.busy_writer", catalog, f"{root}/data/", str(stop),
                               str(args.period), str(args.period)], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    time.sleep(2)
    busy = [run() for _ in range(args.repeat)]
    stop.touch()
    out, _ = writer.communicate(timeout=120)
    quiet += [run() for _ in range(args.repeat)]
    q, b = statistics.median(quiet), statistics.median(busy)
    print(json.dumps({"catalog": args.catalog, "rows": args.rows, "period_s": args.period,
                      "quiet_runs_s": [round(x, 3) for x in quiet], "busy_runs_s": [round(x, 3) for x in busy],
                      "quiet_median_s": round(q, 3), "busy_median_s": round(b, 3), "busy_over_quiet": round(b / q, 2),
                      "writer": out.decode().strip()}, indent=1))
    if server is not None:
        server.stop()


if __name__ == "__main__":
    main()
