"""Peers: the same workloads on dbt-ducklake, dbt-spark on Delta Lake and dbt-spark on Iceberg, in one run.

Three systems, one machine, one pyspark (the venv's), each dbt command a fresh process:

- `ducklake`: this adapter (`type: ducklake`, `master: local[2]`, catalog and data under the work directory);
- `delta`: dbt-spark `method: session` (the in-process SparkSession, configured by `server_side_parameters`),
  `file_format: delta`, deletion vectors on (`spark.databricks.delta.properties.defaults.enableDeletionVectors`);
- `iceberg`: dbt-spark `method: session`, `SparkSessionCatalog` with a Hadoop (path) catalog as `spark_catalog`,
  `file_format: iceberg`, merge-on-read deletes, updates and merges (table properties).

The peers' Hive metastore is an embedded Derby database under each system's work directory. Jars come from Maven
Central into `~/.cache/dbt-ducklake-peers/jars` (`--setup` fetches them with `mvn dependency:copy`; a run fetches
missing ones first).

Workloads:

1. `loop`: bench/dbt_loop.py's generated project (`--seeds/--models/--tests`), `dbt seed`, `dbt run`, `dbt test` as
   fresh processes; the peers get `file_format` in dbt_project.yml, incremental models use `merge` + `unique_key`.
   Afterwards row counts and sums of some models are compared across the systems (a mismatch fails the run).
2. `appends`: one incremental model (append; 100 rows a run) run `--appends` times through dbt's Python API in
   ONE process per system (so the engine stays up between runs, for every system alike), then 1 % of the rows
   deleted by a `DELETE` statement (`dbt run-operation`), then three queries timed inside that process (the best of
   `--repeat`): `count(*)`, a selective filter (`id between ...`, 0.1 % of the rows), a full aggregate (group by).

Wall time is the child process's; CPU time is user+sys of it and all its descendants (the JVM too: this process is
made a child subreaper, so an orphaned JVM is reaped here and its rusage counted). Ratio = the system's time over the
best of the three.

    .venv/bin/python -m bench.peers --setup                  # jars only
    .venv/bin/python -m bench.peers                          # 10 seeds, 12 models, 20 tests; 100 appends
    .venv/bin/python -m bench.peers --seeds 50 --models 52 --tests 104 --appends 1000 --json peers.json
    .venv/bin/python -m bench.peers --only delta --workload appends --appends 10
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.dbt_loop import KINDS, write_project

SYSTEMS = ["ducklake", "delta", "iceberg"]
WORKLOADS = ["loop", "appends"]
JAR_DIR = Path.home() / ".cache" / "dbt-ducklake-peers" / "jars"
JARS = {
    "delta": ["io.delta:delta-spark_2.13:4.0.0", "io.delta:delta-storage:4.0.0"],
    "iceberg": ["org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.0"],
}
# A Hadoop (path) catalog under SparkSessionCatalog keeps its tables out of the session catalog's listing, so
# dbt-spark does not see them between invocations: an incremental model is rebuilt on every `dbt run`
# (is_incremental() is false). The loop runs each model once, so its results are right; the append workload uses
# INSERT statements, not incremental runs. ("hive", Iceberg's HiveCatalog on the embedded Derby metastore, hangs:
# Spark's Hive client and Iceberg's both open the Derby database.)
ICEBERG_CATALOG_TYPE = "hadoop"
MOR = {"write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read",
       "write.merge.mode": "merge-on-read"}


def jar_path(coord: str) -> Path:
    _, artifact, version = coord.split(":")
    return JAR_DIR / f"{artifact}-{version}.jar"


def setup_jars() -> None:
    """Fetch the peers' jars (without their dependencies: pyspark has Spark's) into JAR_DIR, if missing."""
    JAR_DIR.mkdir(parents=True, exist_ok=True)
    for coord in [c for cs in JARS.values() for c in cs]:
        if not jar_path(coord).exists():
            subprocess.run(["mvn", "-q", "dependency:copy", f"-Dartifact={coord}", f"-DoutputDirectory={JAR_DIR}",
                            "-Dtransitive=false"], check=True)


def output_yaml(system: str, root: Path, master: str) -> str:
    """The profile target (YAML) for `system`, with everything it writes under `root`."""
    if system == "ducklake":
        return (f'type: ducklake\ncatalog: "{root}/lake/catalog.ducklake"\ndata_path: "{root}/lake/data/"\n'
                f'schema: main\nmaster: "{master}"\nthreads: 1\n'
                'spark_config:\n  spark.sql.shuffle.partitions: "2"\n')
    params = {
        "spark.master": master,
        "spark.jars": ",".join(str(jar_path(c)) for c in JARS[system]),
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.sql.warehouse.dir": f"{root}/warehouse",
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root}/metastore_db;create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={root}",
    }
    if system == "delta":
        params |= {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                   "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
                   "spark.databricks.delta.properties.defaults.enableDeletionVectors": "true"}
    else:
        # no IcebergSparkSessionExtensions: Spark 4.0 runs MERGE/DELETE/UPDATE on Iceberg tables itself, and the
        # extensions' view rewrite sends dbt's `create or replace view` to the Hadoop catalog, which has no views
        params |= {"spark.sql.catalog.spark_catalog": "org.apache.iceberg.spark.SparkSessionCatalog",
                   "spark.sql.catalog.spark_catalog.type": ICEBERG_CATALOG_TYPE,
                   "spark.sql.catalog.spark_catalog.warehouse": f"{root}/iceberg"}
    lines = "".join(f'  {k}: "{v}"\n' for k, v in params.items())
    return f"type: spark\nmethod: session\nhost: localhost\nschema: main\nthreads: 1\nserver_side_parameters:\n{lines}"


def project_config(system: str) -> str:
    """dbt_project.yml `models:`/`seeds:` configs for a peer (file_format, table properties)."""
    if system == "ducklake":
        return ""
    props = "".join(f'\n      {k}: "{v}"' for k, v in MOR.items()) if system == "iceberg" else ""
    tbl = f"\n    +tblproperties:{props}" if props else ""
    if system == "delta":
        tbl = '\n    +tblproperties:\n      delta.enableDeletionVectors: "true"'
    return (f"models:\n  {{name}}:\n    +file_format: {system}{tbl}\n"
            f"seeds:\n  {{name}}:\n    +file_format: {system}{tbl}\n")


def write_profile(root: Path, name: str, system: str, master: str) -> None:
    body = "".join("      " + line + "\n" for line in output_yaml(system, root, master).splitlines())
    (root / "profiles.yml").write_text(f"{name}:\n  target: dev\n  outputs:\n    dev:\n{body}")


# --- measuring a process tree ---------------------------------------------------------------------------------

def become_subreaper() -> None:
    """Orphaned descendants (the JVM a dbt process leaves behind) are re-parented here, so their rusage is ours."""
    PR_SET_CHILD_SUBREAPER = 36
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def run_measured(cmd: list[str], cwd: Path, timeout: float = 1800) -> dict[str, Any]:
    """Run `cmd`; wall time, CPU (user+sys of it and every descendant, reaped here), output tail. Raises on failure."""
    out_path = cwd / f".out-{time.monotonic_ns()}.log"
    t0 = time.perf_counter()
    with open(out_path, "w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    cpu, status, wall = 0.0, None, None
    deadline = time.monotonic() + timeout
    while True:  # reap the child and then whatever it orphaned (its JVM exits once its parent is gone)
        try:
            pid, st, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"timed out: {cmd}")
            time.sleep(0.02)
            continue
        cpu += ru.ru_utime + ru.ru_stime
        if pid == proc.pid:
            status, wall = st, time.perf_counter() - t0
            proc.returncode = os.waitstatus_to_exitcode(st)
    text = out_path.read_text()
    out_path.unlink()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({status}):\n{text[-4000:]}")
    return {"wall_s": round(wall or 0.0, 2), "cpu_s": round(cpu, 2), "output": text}


def dbt_cmd(root: Path, *args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "dbt"), *args, "--project-dir", str(root), "--profiles-dir", str(root)]


# --- workload 1: the dbt loop ---------------------------------------------------------------------------------

CHECK_MACRO = """{% macro peers_check(names) %}
{% set out = {} %}
{% for n in names %}
{% set r = run_query("select count(*), sum(id), cast(sum(amount) as double) from main." ~ n) %}
{% do out.update({n: [r.rows[0][0] | int, r.rows[0][1] | int, r.rows[0][2] | float]}) %}
{% endfor %}
{{ print("PEERS_CHECK " ~ tojson(out)) }}
{% endmacro %}
"""


def check_names(args: argparse.Namespace) -> list[str]:
    """A seed and the first model of each materialized kind (table, view, incremental)."""
    names = ["seed_0"]
    for kind in ("table", "view", "incremental"):
        ms = [m for m in range(args.models) if KINDS[m % len(KINDS)] == kind]
        names += [f"model_{ms[0]}"] if ms else []
    return names


def run_check(root: Path, names: list[str]) -> dict[str, Any]:
    res = run_measured(dbt_cmd(root, "run-operation", "peers_check", "--args", json.dumps({"names": names})), root)
    line = next(x for x in res["output"].splitlines() if x.startswith("PEERS_CHECK "))
    return json.loads(line[len("PEERS_CHECK "):])


def run_loop(system: str, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    write_project(root, system if system == "ducklake" else "spark", args.seeds, args.models, args.tests,
                  args.master, output=output_yaml(system, root, args.master),
                  project_extra=project_config(system).replace("{name}", "loop"))
    (root / "macros").mkdir(exist_ok=True)
    (root / "macros" / "peers_check.sql").write_text(CHECK_MACRO)
    phases = {}
    for phase in ("seed", "run", "test"):
        r = run_measured(dbt_cmd(root, phase, "--quiet"), root)
        phases[phase] = {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"]}
    check = run_check(root, check_names(args))
    return {"phases": phases, "wall_s": round(sum(p["wall_s"] for p in phases.values()), 2),
            "cpu_s": round(sum(p["cpu_s"] for p in phases.values()), 2), "check": check}


# --- workload 2: appends, a delete, queries -------------------------------------------------------------------

SELECT_RANGE = "select id, id % 7 as kind, cast(id * 1.5 as double) as amount from range({lo}, {hi})"


def append_statements(system: str, runs: int) -> list[str]:
    """CREATE TABLE AS the first 100 rows, then `runs - 1` INSERTs of 100 rows each (ids in order)."""
    if system == "ducklake":
        using = ""
    elif system == "delta":
        using = "using delta tblproperties ('delta.enableDeletionVectors' = 'true') "
    else:
        using = "using iceberg tblproperties (" + ", ".join(f"'{k}' = '{v}'" for k, v in MOR.items()) + ") "
    pre = [] if system == "ducklake" else ["create schema if not exists main"]
    return pre + [f"create table main.events {using}as " + SELECT_RANGE.format(lo=0, hi=100)] + [
        "insert into main.events " + SELECT_RANGE.format(lo=i * 100, hi=i * 100 + 100) for i in range(1, runs)]


QUERY_MACRO = """{% macro peers_sql(sql) %}{% do run_query(sql) %}{% endmacro %}
{% macro peers_each(statements) %}
{% set times = [] %}
{% for q in statements %}
{% set t0 = modules.datetime.datetime.now() %}
{% do run_query(q) %}
{% do times.append((modules.datetime.datetime.now() - t0).total_seconds()) %}
{% endfor %}
{{ print("PEERS_EACH " ~ tojson(times)) }}
{% endmacro %}
{% macro peers_timed(queries, repeat) %}
{% set out = {} %}
{% for name, q in queries.items() %}
{% set times = [] %}
{% for i in range(repeat) %}
{% set t0 = modules.datetime.datetime.now() %}
{% set r = run_query(q) %}
{% do times.append((modules.datetime.datetime.now() - t0).total_seconds()) %}
{% do out.update({name: {"times": times, "rows": r.rows | length, "first": r.rows[0] | map("string") | list}}) %}
{% endfor %}
{% endfor %}
{{ print("PEERS_TIMED " ~ tojson(out)) }}
{% endmacro %}
"""


def appends_child(root: Path, system: str, runs: int, repeat: int) -> None:
    """In the child process: the table grown by `runs` appends (INSERT statements, each timed), the delete, the timed
    queries, each a `dbt run-operation` through dbt's Python API (one engine for all); JSON to stdout."""
    import contextlib
    import io

    from dbt.cli.main import dbtRunner

    base = ["--project-dir", str(root), "--profiles-dir", str(root), "--quiet"]
    runner = dbtRunner()

    def operation(macro: str, args: dict[str, Any], tag: str | None = None) -> Any:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            res = runner.invoke(["run-operation", macro, *base, "--args", json.dumps(args)])
        if not res.success:
            raise SystemExit(f"{macro} failed: {res.exception}\n{buf.getvalue()[-3000:]}")
        if tag:
            line = next(x for x in buf.getvalue().splitlines() if x.startswith(tag + " "))
            return json.loads(line[len(tag) + 1:])

    t = time.perf_counter()
    times = operation("peers_each", {"statements": append_statements(system, runs)}, "PEERS_EACH")
    appends_s = time.perf_counter() - t
    times = times[-runs:]
    rows = runs * 100
    t = time.perf_counter()
    operation("peers_sql", {"sql": "delete from main.events where id % 100 = 7"})
    delete_s = time.perf_counter() - t
    lo = rows // 2
    queries = {"count": "select count(*) from main.events",
               "filter": f"select count(*), sum(amount) from main.events where id between {lo} and {lo + rows // 1000}",
               "aggregate": "select kind, count(*), sum(amount), min(id), max(id) from main.events group by kind "
                            "order by kind"}
    timed = operation("peers_timed", {"queries": queries, "repeat": repeat}, "PEERS_TIMED")
    print("PEERS_APPENDS " + json.dumps({
        "appends_s": round(appends_s, 2), "create_s": round(times[0], 3),
        "median_insert_s": round(sorted(times[1:])[len(times[1:]) // 2], 3) if runs > 1 else None,
        "last10_insert_s": round(sorted(times[-10:])[len(times[-10:]) // 2], 3),
        "delete_s": round(delete_s, 3),
        "queries": {k: {"best_s": round(min(v["times"]), 4), "first": v["first"]} for k, v in timed.items()}}),
        flush=True)
    os._exit(0)


def run_appends(system: str, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    (root / "macros").mkdir(parents=True)
    (root / "dbt_project.yml").write_text(
        'name: appends\nversion: "1.0"\nconfig-version: 2\nprofile: appends\nmacro-paths: ["macros"]\n')
    write_profile(root, "appends", system, args.master)
    (root / "macros" / "peers.sql").write_text(QUERY_MACRO)
    r = run_measured([sys.executable, "-m", "bench.peers", "--child-appends", str(root), "--child-system", system,
                      "--appends",
                      str(args.appends), "--repeat", str(args.repeat)], root)
    line = next(x for x in r["output"].splitlines() if x.startswith("PEERS_APPENDS "))
    return {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"], **json.loads(line[len("PEERS_APPENDS "):])}


# --- report -----------------------------------------------------------------------------------------------------

def table_rows(report: dict[str, Any]) -> list[tuple[str, str, dict[str, float]]]:
    """(workload, measure, {system: seconds}) rows of the report."""
    rows = []
    loop = report.get("loop", {})
    for phase in ("seed", "run", "test"):
        for m in ("wall_s", "cpu_s"):
            vals = {s: v["phases"][phase][m] for s, v in loop.items()}
            if vals:
                rows.append((f"loop: dbt {phase}", m[:-2], vals))
    for m in ("wall_s", "cpu_s"):
        if loop:
            rows.append(("loop: seed+run+test", m[:-2], {s: v[m] for s, v in loop.items()}))
    ap = report.get("appends", {})
    if ap:
        n = report["params"]["appends"]
        rows.append((f"appends: CTAS + {n - 1} INSERTs", "wall", {s: v["appends_s"] for s, v in ap.items()}))
        rows.append(("appends: median INSERT", "wall", {s: v["median_insert_s"] for s, v in ap.items()}))
        rows.append(("appends: delete 1 %", "wall", {s: v["delete_s"] for s, v in ap.items()}))
        for q in ("count", "filter", "aggregate"):
            rows.append((f"appends: query {q} (best of {report['params']['repeat']})", "wall",
                         {s: v["queries"][q]["best_s"] for s, v in ap.items()}))
        for m in ("wall_s", "cpu_s"):
            rows.append(("appends: whole process", m[:-2], {s: v[m] for s, v in ap.items()}))
    return rows


def markdown(report: dict[str, Any]) -> str:
    systems = [s for s in SYSTEMS if s in report["systems"]]
    out = ["| workload | measure | " + " | ".join(systems) + " |", "| --- | --- |" + " --- |" * len(systems)]
    for workload, measure, vals in table_rows(report):
        best = min(v for v in vals.values() if v is not None) or 1e-9
        cells = [f"{vals[s]:.3g} s ({vals[s] / best:.2f}x)" if s in vals else "-" for s in systems]
        out.append(f"| {workload} | {measure} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def compare(results: dict[str, dict[str, Any]], key: str) -> None:
    """Fail loudly unless every system gave the same answers."""
    vals = {s: r[key] for s, r in results.items()}
    first = next(iter(vals.values()), None)
    if any(v != first for v in vals.values()):
        raise SystemExit(f"RESULTS DIFFER ({key}): {json.dumps(vals, indent=1)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setup", action="store_true", help="fetch the peers' jars and exit")
    ap.add_argument("--only", action="append", choices=SYSTEMS, help="a system (repeatable; default all)")
    ap.add_argument("--workload", action="append", choices=WORKLOADS, help="a workload (repeatable; default all)")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--models", type=int, default=12)
    ap.add_argument("--tests", type=int, default=20)
    ap.add_argument("--appends", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each timed query (the best is reported)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child-appends", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-system", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_appends:
        appends_child(Path(args.child_appends), args.child_system, args.appends, args.repeat)
        return
    setup_jars()
    if args.setup:
        return
    become_subreaper()
    systems = [s for s in SYSTEMS if not args.only or s in args.only]
    workloads = [w for w in WORKLOADS if not args.workload or w in args.workload]
    work = Path(tempfile.mkdtemp(prefix="peers-", dir=args.workdir))
    report: dict[str, Any] = {"params": {k: v for k, v in vars(args).items() if not k.startswith("child_")},
                              "systems": systems, "load_start": os.getloadavg(), "versions": versions()}
    try:
        for workload in workloads:
            report[workload] = {}
            for system in systems:
                fn = run_loop if workload == "loop" else run_appends
                report[workload][system] = fn(system, work / workload / system, args)
                print(f"# {workload} {system}: {json.dumps(report[workload][system])}", file=sys.stderr, flush=True)
        if "loop" in report:
            compare(report["loop"], "check")
        if "appends" in report:
            compare({s: {"q": {k: v["first"] for k, v in r["queries"].items()}}
                     for s, r in report["appends"].items()}, "q")
    finally:
        report["load_end"] = os.getloadavg()
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2))
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(markdown(report))


def versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {p: version(p) for p in ("dbt-core", "dbt-spark", "pyspark", "duckdb")}
    out |= {c.split(":")[1]: c.split(":")[2] for cs in JARS.values() for c in cs}
    return out


if __name__ == "__main__":
    main()
