"""Where our side of the peers bench's merges goes: the four MERGEs of bench/peers.py at the Spark layer, each
step's Spark jobs from the event log (start, duration, tasks, call site).

One process, one SparkSession (`local[2]`, 2 shuffle partitions): a target of `--rows` rows (CTAS), copied per round,
then the four merges into the copy (1 % clustered, 1 % uniform, 100,000 rows clustered, uniform), `dbt`'s statement
(`UPDATE SET *`, `INSERT *` on `id`). With `--baseline-dml PATH` (another version of `spark/write/dml.py`), each round
runs the merges with that module's `stage_merge` and then with this one's, on copies of the same target, so the two
are compared paired under the same load. Each round ends with a check
(count and sums of the target), equal for every variant.

    git show main:dbt/adapters/ducklake/spark/write/dml.py > /tmp/base_dml.py
    .venv/bin/python -m bench.peers_profile --rows 1000000 --rounds 2 --baseline-dml /tmp/base_dml.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.peers import FIXED_MERGE_ROWS, merge_source
from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.spark.env.session import build_session
from dbt.adapters.ducklake.spark.read.scan import register_table
from dbt.adapters.ducklake.spark.write import dml, one_shot


def baseline_stage_merge(path: str) -> Callable[..., Any]:
    """stage_merge of another copy of spark/write/dml.py, loaded beside this one (its imports resolve to this package)."""
    name = "dbt.adapters.ducklake.spark._baseline_dml"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.stage_merge  # type: ignore[no-any-return]


def jobs_of(events: Path) -> dict[int, dict[str, Any]]:
    """Spark jobs of the event log: submission and completion (s), tasks, the last stage's name (its call site)."""
    jobs: dict[int, dict[str, Any]] = {}
    for f in events.rglob("*"):
        if not f.is_file() or f.name.startswith(".") or f.name.startswith("appstatus"):
            continue
        for line in f.read_text().splitlines():
            e = json.loads(line)
            if e["Event"] == "SparkListenerJobStart":
                stages = e["Stage Infos"]
                jobs[e["Job ID"]] = {"start": e["Submission Time"] / 1000, "end": None,
                                     "tasks": sum(s["Number of Tasks"] for s in stages),
                                     "site": stages[-1]["Stage Name"] if stages else ""}
            elif e["Event"] == "SparkListenerJobEnd":
                jobs[e["Job ID"]]["end"] = e["Completion Time"] / 1000
    return jobs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=2, help="the first round warms the JVM")
    ap.add_argument("--baseline-dml", help="spark/write/dml.py of another checkout, run paired with this one")
    ap.add_argument("--workdir", help="kept afterwards (default: a temporary directory, removed)")
    a = ap.parse_args()
    work = Path(a.workdir or tempfile.mkdtemp(prefix="peers-profile-"))
    shutil.rmtree(work, ignore_errors=True)
    (work / "events").mkdir(parents=True)
    spark = build_session("local[2]", conf={
        "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": f"file://{work}/events", "spark.eventLog.compress": "false"})
    variants: dict[str, Callable[..., Any]] = {"current": dml.stage_merge}
    if a.baseline_dml:
        variants = {"baseline": baseline_stage_merge(a.baseline_dml), **variants}
    n = a.rows
    base = work / "base"
    base.mkdir()
    lake = DuckLake.create(f"{base}/catalog.ducklake", f"{base}/data/")
    one_shot.create_table_as(spark, lake, "main", "target", spark.sql(
        f"select id, id % 7 as kind, cast(id * 3 % 1000 as bigint) as amount from range({n})"))
    lake.close()
    marks: list[tuple[str, float, float]] = []
    checks: dict[str, list[Any]] = {}
    for r in range(a.rounds):
        for variant, stage_merge in variants.items():
            dml.stage_merge = stage_merge  # LakeWork.merge calls it through the module
            copy = work / f"r{r}-{variant}"
            shutil.copytree(base, copy, symlinks=True)
            lk = DuckLake.open(f"{copy}/catalog.ducklake", data_path=f"{copy}/data/")
            bump = 0
            for k in (n // 100, min(FIXED_MERGE_ROWS, n)):
                for dist in ("clustered", "uniform"):
                    bump += 1
                    label = f"round {r} {variant}: merge {k:,} rows, {dist}"
                    t0 = time.time()
                    one_shot.merge_into(spark, lk, "main", "target", spark.sql(merge_source(n, k, dist, bump)),
                                        "t.id = s.id", matched="update", not_matched_insert=True)
                    marks.append((label, t0, time.time()))
                    print(f"{label}: {time.time() - t0:.2f} s", flush=True)
            st = lk.snapshot()
            view = register_table(spark, st, st.table("main", "target"), view=f"check_{r}_{variant}")
            checks[f"{r} {variant}"] = list(spark.sql(
                f"select count(*), sum(amount), sum(amount * (id % 13)) from {view}").collect()[0])
            lk.close()
    dml.stage_merge = variants["current"]
    spark.stop()
    jobs = jobs_of(work / "events")
    for label, t0, t1 in marks:
        mine = [j for _, j in sorted(jobs.items()) if t0 <= j["start"] <= t1]
        busy = sum((j["end"] or j["start"]) - j["start"] for j in mine)
        print(f"== {label}: {t1 - t0:.2f} s, {len(mine)} Spark jobs, {busy:.2f} s in jobs")
        for j in mine:
            print(f"   +{j['start'] - t0:6.2f} s  {(j['end'] or j['start']) - j['start']:6.2f} s  "
                  f"{j['tasks']:3d} tasks  {j['site'][:90]}")
    print("checks:", checks)
    if len({repr(v) for v in checks.values()}) != 1:
        raise SystemExit("the variants' results differ")
    if not a.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
