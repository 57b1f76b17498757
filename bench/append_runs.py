"""Append runs: one incremental append model run N times in one process, a snapshot and a file
(or more) per run, timed per run. The figure is how the per-run time grows: the median of the last 10 runs over
the median of runs 2-11 (the first run creates the table). `--compact` runs the same model with
`ducklake_compact: true` (its files merged after each run) beside it, in the same process.

The model's incremental filter reads the table it appends to (`max(id)`), so each run also reads a table of as many
files as runs so far: the read path's cost per file shows up here, as does the catalog's per snapshot.

    .venv/bin/python -m bench.append_runs --runs 1000 [--compact | --only-compact] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

MODEL = """{{{{ config(materialized='incremental'{extra}) }}}}
select id, id % 7 as kind, id * 1.5 as amount from range({{{{ var('start') }}}}, {{{{ var('start') }}}} + 100)
{{% if is_incremental() %}} where id > (select coalesce(max(id), -1) from {{{{ this }}}}) {{% endif %}}
"""


def write_project(root: Path, compact: bool) -> None:
    (root / "models").mkdir(parents=True)
    (root / "dbt_project.yml").write_text('name: appends\nversion: "1.0"\nconfig-version: 2\nprofile: appends\n'
                                          'model-paths: ["models"]\n')
    (root / "profiles.yml").write_text(
        "appends:\n  target: dev\n  outputs:\n    dev:\n      type: ducklake\n"
        f'      catalog: "{root}/lake/catalog.ducklake"\n      data_path: "{root}/lake/data/"\n'
        '      schema: main\n      master: "local[2]"\n      threads: 1\n'
        '      spark_config:\n        spark.sql.shuffle.partitions: "2"\n')
    (root / "models" / "events.sql").write_text(MODEL.format(extra=", ducklake_compact=true" if compact else ""))


def run(runs: int, compact: bool) -> dict[str, Any]:
    from dbt.cli.main import dbtRunner

    root = Path(tempfile.mkdtemp(prefix="appends-"))
    write_project(root, compact)
    runner = dbtRunner()
    times, cpu = [], []
    for i in range(runs):
        t, c = time.perf_counter(), time.process_time()
        res = runner.invoke(["run", "--project-dir", str(root), "--profiles-dir", str(root), "--quiet",
                             "--vars", json.dumps({"start": i * 100})])
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)  # the driver's Python CPU: steadier than wall time on a shared machine
        if not res.success:
            raise SystemExit(f"run {i} failed: {res.exception}")
        if (i + 1) % 50 == 0:
            print(f"  {'compact' if compact else 'plain'}: {i + 1} runs, last {times[-1]:.2f}s", flush=True)
    first = statistics.median(times[1:11])
    last = statistics.median(times[-10:])
    cpu_first, cpu_last = statistics.median(cpu[1:11]), statistics.median(cpu[-10:])
    return {"runs": runs, "compact": compact, "first_s": round(first, 3), "last_s": round(last, 3),
            "growth": round(last / first, 2), "cpu_first_s": round(cpu_first, 3), "cpu_last_s": round(cpu_last, 3),
            "cpu_growth": round(cpu_last / cpu_first, 2), "per_run_s": [round(x, 3) for x in times],
            "per_run_cpu_s": [round(x, 3) for x in cpu]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--compact", action="store_true", help="also run the model with ducklake_compact")
    ap.add_argument("--only-compact", action="store_true", help="only the model with ducklake_compact")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    results = [] if args.only_compact else [run(args.runs, False)]
    if args.compact or args.only_compact:
        results.append(run(args.runs, True))
    for r in results:
        print(json.dumps({k: v for k, v in r.items() if k != "per_run_s"}), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    os._exit(0)


if __name__ == "__main__":
    main()
