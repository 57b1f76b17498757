"""Peers: the same workloads on dbt-ducklake, dbt-spark on Delta Lake and dbt-spark on Iceberg, in one run.

Three systems, one machine, one pyspark (the venv's), threads 1:

- `ducklake`: this adapter (`type: ducklake`, `master: local[2]`, catalog and data under the work directory);
- `delta`: dbt-spark `method: session` (the in-process SparkSession, configured by `server_side_parameters`),
  `file_format: delta`, deletion vectors on (`spark.databricks.delta.properties.defaults.enableDeletionVectors`);
- `iceberg`: dbt-spark `method: session`, `SparkSessionCatalog` with a Hadoop (path) catalog as `spark_catalog`,
  `file_format: iceberg`, merge-on-read deletes, updates and merges (table properties). A second Iceberg catalog
  on the same warehouse (`peers_ice`) lists the tables for dbt (see ICEBERG_LISTING).

The peers' Hive metastore is an embedded Derby database under each system's work directory. Jars come from Maven
Central into `~/.cache/dbt-ducklake-peers/jars` (`--setup` fetches them with `mvn dependency:copy`; a run fetches
missing ones first).

Workloads (`--workloads`, comma-separated; default all):

- `loop`: bench/dbt_loop.py's generated project (`--loop-size`: full = 50 seeds, 52 models, 104 tests), `dbt seed`,
  `dbt run`, `dbt test` as fresh processes; the peers get `file_format` in dbt_project.yml, incremental models use
  `merge` + `unique_key`. Afterwards count/sums of a seed and a model of each kind are compared across the systems.
- `merge`: a table of `--merge-rows` rows (CTAS), then four MERGE INTO statements (the statement dbt's `merge`
  strategy issues: `update set *` / `insert *` on `id`), each an update of existing keys: 1 % of the rows with
  clustered keys (the newest ids), 1 % uniform (every 100th id), a fixed 100,000 rows clustered, then uniform.
- `appends`, `timetravel`, `compaction` share one table (`main.events`) and one process per system: a CTAS of 100
  rows and `--appends` - 1 INSERTs of 100 rows, each its own commit and file; then, if selected, `timetravel`: the
  table as of 100 commits back (Delta `VERSION AS OF` the version from `DESCRIBE HISTORY`, Iceberg `VERSION AS OF`
  the snapshot id from `.snapshots`, ours `ducklake_at(..., changes_back=100)`), count and sum, the version lookup
  included; `compaction`: the three queries on the many-file table, the compaction (Delta `OPTIMIZE`, Iceberg
  `CALL system.rewrite_data_files`, ours `dbt run-operation ducklake_merge_adjacent_files`), the queries again;
  `appends`: 1 % of the rows deleted (`delete ... where id % 100 = 7`), the queries again. (With `compaction`
  selected the delete runs on the compacted table: our merge_adjacent_files, as DuckDB's, leaves files with deletes
  alone, so compacting after the delete would compare a no-op with two rewrites.) The queries: `count(*)`, a
  selective filter (`id between ...`, 0.1 % of the rows), a full aggregate (group by), best of `--repeat`.
- `snapshot`: a source of `--snapshot-rows` rows, `dbt snapshot` (check strategy on two columns) to build the
  snapshot table, then 10 times: 1 % of the source's rows updated (untimed), `dbt snapshot`.
- `rebuild`: a `table` model of `--rebuild-rows` rows (five columns), `dbt run` twice: the build, then the full
  rebuild (create or replace); rows per second of the rebuild.

Every workload but `loop` runs through dbt's Python API (`dbtRunner`: run-operations, `dbt snapshot`, `dbt run`) in
ONE process per system, so the engine starts once, for every system alike; a step's time is its invocation's (dbt's
parse of the project included), a query's is the statement's own (timed in the macro). Wall time; CPU time is user+sys
of the process and its descendants (the JVM): of a whole process as reaped (this process is made a child subreaper,
so an orphaned JVM is reaped here), of a step as read from /proc before and after it. A query's CPU is its
invocation's CPU less an empty invocation's, over `--repeat`. Ratio = the system's time over the best of the three.
Each workload ends with a check whose answers must be equal on all three systems (a mismatch fails the run, after
the table is printed).

    .venv/bin/python -m bench.peers --setup                  # jars only
    .venv/bin/python -m bench.peers --json peers.json        # everything at full size (hours on 2 cores)
    .venv/bin/python -m bench.peers --merge-rows 1000000 --appends 300 --snapshot-rows 100000 \\
        --rebuild-rows 10000000 --json peers.json            # the sizes of docs/benchmarks.md (about 25 minutes)
    .venv/bin/python -m bench.peers --workloads merge --merge-rows 100000000   # merge into 100M rows
    .venv/bin/python -m bench.peers --only delta --workloads appends,compaction --appends 10
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.dbt_loop import KINDS, write_project

SYSTEMS = ["ducklake", "delta", "iceberg"]
WORKLOADS = ["loop", "merge", "appends", "timetravel", "compaction", "snapshot", "rebuild"]
TABLE_WORKLOADS = ["appends", "timetravel", "compaction"]  # one table, one process per system
LOOP_SIZES = {"full": (50, 52, 104), "small": (10, 12, 20)}
TIME_TRAVEL_BACK = 100
SNAPSHOT_RUNS = 10
FIXED_MERGE_ROWS = 100_000
JAR_DIR = Path.home() / ".cache" / "dbt-ducklake-peers" / "jars"
JARS = {
    "delta": ["io.delta:delta-spark_2.13:4.0.0", "io.delta:delta-storage:4.0.0"],
    "iceberg": ["org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.0"],
}
# Iceberg's HiveCatalog on the embedded Derby metastore hangs (Spark's Hive client and Iceberg's both open the Derby
# database), so `spark_catalog` is a SparkSessionCatalog over a Hadoop (path) catalog. Its tables are not in the
# session catalog's listing (SHOW TABLE EXTENDED), so dbt-spark would not see them between invocations (an
# incremental model or a snapshot rebuilt each time): ICEBERG_LISTING adds them, listed by a second Iceberg catalog
# on the same warehouse.
ICEBERG_CATALOG_TYPE = "hadoop"
ICEBERG_LISTING_CATALOG = "peers_ice"
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
        # no IcebergSparkSessionExtensions: Spark 4.0 runs MERGE/DELETE/UPDATE and CALL on Iceberg tables itself,
        # and the extensions' view rewrite sends dbt's `create or replace view` to the Hadoop catalog (no views)
        for cat, cls in (("spark_catalog", "SparkSessionCatalog"), (ICEBERG_LISTING_CATALOG, "SparkCatalog")):
            params |= {f"spark.sql.catalog.{cat}": f"org.apache.iceberg.spark.{cls}",
                       f"spark.sql.catalog.{cat}.type": ICEBERG_CATALOG_TYPE,
                       f"spark.sql.catalog.{cat}.warehouse": f"{root}/iceberg"}
    lines = "".join(f'  {k}: "{v}"\n' for k, v in params.items())
    return f"type: spark\nmethod: session\nhost: localhost\nschema: main\nthreads: 1\nserver_side_parameters:\n{lines}"


def table_properties(system: str) -> dict[str, str]:
    if system == "delta":
        return {"delta.enableDeletionVectors": "true"}
    return MOR if system == "iceberg" else {}


def using_clause(system: str) -> str:
    """`using <format> tblproperties (...)` of a peer's CREATE TABLE (nothing for ours)."""
    if system == "ducklake":
        return ""
    props = ", ".join(f"'{k}' = '{v}'" for k, v in table_properties(system).items())
    return f"using {system} tblproperties ({props}) "


def project_config(system: str, name: str) -> str:
    """dbt_project.yml `models:`/`seeds:`/`snapshots:` configs for a peer (file_format, table properties)."""
    if system == "ducklake":
        return ""
    props = "".join(f'\n      {k}: "{v}"' for k, v in table_properties(system).items())
    return "".join(f"{kind}:\n  {name}:\n    +file_format: {system}\n    +tblproperties:{props}\n"
                   for kind in ("models", "seeds", "snapshots"))


def write_profile(root: Path, name: str, system: str, master: str) -> None:
    body = "".join("      " + line + "\n" for line in output_yaml(system, root, master).splitlines())
    (root / "profiles.yml").write_text(f"{name}:\n  target: dev\n  outputs:\n    dev:\n{body}")


# dbt-spark lists a schema with SHOW TABLE EXTENDED; the Hadoop catalog's tables come from the listing catalog (a
# table there is a table: views live in the session catalog)
ICEBERG_LISTING = """{% macro spark__list_relations_without_caching(relation) %}
{% set rows = [] %}
{% for r in run_query("show table extended in " ~ relation.schema ~ " like '*'") %}
{% do rows.append([r[0], r[1], r[2], r[3]]) %}
{% endfor %}
{% if relation.schema in run_query("show namespaces in CAT").columns[0].values() %}
{% for r in run_query("show tables in CAT." ~ relation.schema) %}
{% do rows.append([relation.schema, r[1], false, "Type: MANAGED\\nProvider: iceberg\\n"]) %}
{% endfor %}
{% endif %}
{{ return(rows) }}
{% endmacro %}
""".replace("CAT", ICEBERG_LISTING_CATALOG)


def write_macros(root: Path, system: str, *texts: str) -> None:
    (root / "macros").mkdir(parents=True, exist_ok=True)
    body = "\n".join(texts) + (ICEBERG_LISTING if system == "iceberg" else "")
    (root / "macros" / "peers.sql").write_text(body)


# --- measuring a process tree ---------------------------------------------------------------------------------

def become_subreaper() -> None:
    """Orphaned descendants (the JVM a dbt process leaves behind) are re-parented here, so their rusage is ours."""
    PR_SET_CHILD_SUBREAPER = 36
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def run_measured(cmd: list[str], cwd: Path, timeout: float = 7200) -> dict[str, Any]:
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


def tree_cpu() -> float:
    """User+sys seconds of this process and its live descendants (the JVM) so far, from /proc (waited-for
    children's time included, as each process's cutime/cstime)."""
    tick = os.sysconf("SC_CLK_TCK")
    parent, cpu = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        f = st[st.rindex(")") + 2:].split()  # after "pid (comm) ": state ppid ... utime stime cutime cstime
        parent[int(d)] = int(f[1])
        cpu[int(d)] = sum(int(x) for x in f[11:15]) / tick
    mine, todo = set(), [os.getpid()]
    while todo:
        p = todo.pop()
        mine.add(p)
        todo += [c for c, pp in parent.items() if pp == p and c not in mine]
    return sum(cpu.get(p, 0.0) for p in mine)


def dbt_cmd(root: Path, *args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "dbt"), *args, "--project-dir", str(root), "--profiles-dir", str(root)]


# --- workload: the dbt loop (fresh processes) -----------------------------------------------------------------

CHECK_MACRO = """{% macro peers_check(names) %}
{% set out = {} %}
{% for n in names %}
{% set r = run_query("select count(*), sum(id), cast(sum(amount) as double) from main." ~ n) %}
{% do out.update({n: [r.rows[0][0] | int, r.rows[0][1] | int, r.rows[0][2] | float]}) %}
{% endfor %}
{{ print("PEERS_CHECK " ~ tojson(out)) }}
{% endmacro %}
"""


def loop_size(text: str) -> tuple[int, int, int]:
    """--loop-size: full (50 seeds, 52 models, 104 tests), small (10, 12, 20) or SEEDS,MODELS,TESTS."""
    if text in LOOP_SIZES:
        return LOOP_SIZES[text]
    try:
        seeds, models, tests = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give full, small or SEEDS,MODELS,TESTS") from None
    return seeds, models, tests


def check_names(models: int) -> list[str]:
    """A seed and the first model of each materialized kind (table, view, incremental)."""
    names = ["seed_0"]
    for kind in ("table", "view", "incremental"):
        ms = [m for m in range(models) if KINDS[m % len(KINDS)] == kind]
        names += [f"model_{ms[0]}"] if ms else []
    return names


def run_loop(system: str, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    seeds, models, tests = args.loop_size
    write_project(root, system if system == "ducklake" else "spark", seeds, models, tests,
                  args.master, output=output_yaml(system, root, args.master),
                  project_extra=project_config(system, "loop"))
    write_macros(root, system, CHECK_MACRO)
    steps = {}
    for phase in ("seed", "run", "test"):
        r = run_measured(dbt_cmd(root, phase, "--quiet"), root)
        steps[f"dbt {phase}"] = {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"]}
    steps["seed+run+test"] = {m: round(sum(p[m] for p in steps.values()), 2) for m in ("wall_s", "cpu_s")}
    res = run_measured(dbt_cmd(root, "run-operation", "peers_check", "--args",
                               json.dumps({"names": check_names(models)})), root)
    line = next(x for x in res["output"].splitlines() if x.startswith("PEERS_CHECK "))
    return {"steps": steps, "check": json.loads(line[len("PEERS_CHECK "):])}


# --- in-process workloads: dbt's Python API in one child process per system -----------------------------------

OPS_MACROS = """{% macro peers_noop() %}{% endmacro %}
{% macro peers_sql(sql) %}{% do run_query(sql) %}{% endmacro %}
{% macro peers_rows(sql) %}
{{ print("PEERS_OUT " ~ tojson(run_query(sql).rows | map("map", "string") | map("list") | list)) }}
{% endmacro %}
{% macro peers_column(sql, column) %}
{{ print("PEERS_OUT " ~ tojson(run_query(sql).columns[column].values() | map("string") | list)) }}
{% endmacro %}
{% macro peers_each(statements) %}
{% set times = [] %}
{% for q in statements %}
{% set t0 = modules.datetime.datetime.now() %}
{% do run_query(q) %}
{% do times.append((modules.datetime.datetime.now() - t0).total_seconds()) %}
{% endfor %}
{{ print("PEERS_OUT " ~ tojson(times)) }}
{% endmacro %}
{#- `sql` run `repeat` times; with `lookup`, its row `pick` (column 0) replaces {v} in `sql` first, each time; with
    `table`, {rel} is that table `back` changes back (ours: ducklake_at), resolved each time -#}
{% macro peers_timed(sql, repeat, lookup=none, pick=0, table=none, back=none) %}
{% set ns = namespace(rows=none) %}
{% set times = [] %}
{% for i in range(repeat) %}
{% set t0 = modules.datetime.datetime.now() %}
{% set q = sql %}
{% if lookup %}
{% set q = sql.replace('{v}', run_query(lookup).rows[pick][0] | string) %}
{% elif table %}
{% set q = sql.replace('{rel}', ducklake_at(api.Relation.create(schema='main', identifier=table),
                                           changes_back=back)) %}
{% endif %}
{% set r = run_query(q) %}
{% do times.append((modules.datetime.datetime.now() - t0).total_seconds()) %}
{% set ns.rows = r.rows | map("map", "string") | map("list") | list %}
{% endfor %}
{{ print("PEERS_OUT " ~ tojson({"times": times, "rows": ns.rows})) }}
{% endmacro %}
"""


class Ops:
    """dbt invocations in this process (one engine for all), each measured: wall, CPU of this process tree."""

    def __init__(self, root: Path) -> None:
        from dbt.cli.main import dbtRunner

        self.runner = dbtRunner()
        self.base = ["--project-dir", str(root), "--profiles-dir", str(root), "--quiet"]
        self.steps: dict[str, dict[str, float]] = {}
        self.noop_cpu: float | None = None

    def invoke(self, args: list[str], step: str | None = None) -> str:
        """Run a dbt command; its output. With `step`, its wall and CPU are recorded under that name."""
        buf = io.StringIO()
        t, c = time.perf_counter(), tree_cpu()
        with contextlib.redirect_stdout(buf):
            res = self.runner.invoke([*args, *self.base])
        wall, cpu = time.perf_counter() - t, tree_cpu() - c
        if not res.success:
            raise SystemExit(f"dbt {' '.join(args)} failed: {res.exception}\n{buf.getvalue()[-3000:]}")
        if step:
            self.steps[step] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 2)}
        self.last_cpu = cpu
        return buf.getvalue()

    def operation(self, macro: str, args: dict[str, Any] | None = None, step: str | None = None) -> Any:
        """`dbt run-operation macro`; what it printed after PEERS_OUT (JSON), if anything."""
        out = self.invoke(["run-operation", macro, "--args", json.dumps(args or {})], step)
        line = next((x for x in out.splitlines() if x.startswith("PEERS_OUT ")), None)
        return json.loads(line[len("PEERS_OUT "):]) if line else None

    def sql(self, sql: str, step: str | None = None) -> None:
        self.operation("peers_sql", {"sql": sql}, step)

    def rows(self, sql: str) -> list[list[str]]:
        return self.operation("peers_rows", {"sql": sql})

    def timed(self, step: str, sql: str, repeat: int, **kw: Any) -> list[list[str]]:
        """A query `repeat` times: wall = the best run (the statement's own time); CPU = the invocation's less an
        empty invocation's, over `repeat`. Its rows."""
        if self.noop_cpu is None:
            self.operation("peers_noop")
            self.operation("peers_noop")
            self.noop_cpu = self.last_cpu
        out = self.operation("peers_timed", {"sql": sql, "repeat": repeat, **kw})
        self.steps[step] = {"wall_s": round(min(out["times"]), 4),
                            "cpu_s": round(max(self.last_cpu - self.noop_cpu, 0.0) / repeat, 3)}
        return out["rows"]


def select_range(lo: int, hi: int) -> str:
    return f"select id, id % 7 as kind, cast(id * 1.5 as double) as amount from range({lo}, {hi})"


def append_statements(system: str, runs: int) -> list[str]:
    """CREATE TABLE AS the first 100 rows, then `runs - 1` INSERTs of 100 rows each (ids in order)."""
    pre = [] if system == "ducklake" else ["create schema if not exists main"]
    return pre + [f"create table main.events {using_clause(system)}as " + select_range(0, 100)] + [
        "insert into main.events " + select_range(i * 100, i * 100 + 100) for i in range(1, runs)]


def table_queries(rows: int) -> dict[str, str]:
    lo = rows // 2
    return {"count": "select count(*) from main.events",
            "filter": f"select count(*), sum(amount) from main.events where id between {lo} and {lo + rows // 1000}",
            "aggregate": "select kind, count(*), sum(amount), min(id), max(id) from main.events group by kind "
                         "order by kind"}


def time_travel_read(ops: Ops, system: str, repeat: int) -> list[list[str]]:
    """count and sum of main.events as of TIME_TRAVEL_BACK commits back, the version lookup included."""
    sql = "select count(*), sum(amount) from main.events"
    if system == "ducklake":
        return ops.timed("time travel read", sql.replace("main.events", "{rel}"), repeat, table="events",
                         back=TIME_TRAVEL_BACK)
    lookup = ("describe history main.events" if system == "delta" else
              "select snapshot_id from main.events.snapshots order by committed_at desc")
    return ops.timed("time travel read", sql + " version as of {v}", repeat, lookup=lookup, pick=TIME_TRAVEL_BACK)


def compact(ops: Ops, system: str) -> list[list[str]]:
    """The table's compaction; its live data files afterwards (ours: counted by the parent from the catalog)."""
    if system == "ducklake":
        ops.operation("ducklake_merge_adjacent_files", {"schema": "main", "table": "events"}, "compaction")
        return []
    if system == "delta":
        ops.sql("optimize main.events", "compaction")
        return [[str(ops.operation("peers_column", {"sql": "describe detail main.events", "column": "numFiles"})[0])]]
    ops.sql("call spark_catalog.system.rewrite_data_files(table => 'main.events')", "compaction")
    return ops.rows("select count(*) from main.events.files")


def table_child(ops: Ops, system: str, a: dict[str, Any]) -> dict[str, Any]:
    n, repeat, selected = a["appends"], a["repeat"], a["selected"]
    times = ops.operation("peers_each", {"statements": append_statements(system, n)}, f"CTAS + {n - 1} INSERTs")
    times = times[-n:]
    out: dict[str, Any] = {"median_insert_s": round(sorted(times[1:])[len(times[1:]) // 2], 3) if n > 1 else None,
                           "check": {}}
    queries = table_queries(n * 100)

    def read(label: str) -> None:
        for q, sql in queries.items():
            out["check"][f"{q} ({label})"] = ops.timed(f"{q} ({label})", sql, repeat)

    if "timetravel" in selected:
        out["check"]["time travel"] = time_travel_read(ops, system, repeat)
    if "compaction" in selected:
        read(f"{n} files")
        out["files_after_compaction"] = compact(ops, system)
        read("compacted")
    if "appends" in selected:
        ops.sql("delete from main.events where id % 100 = 7", "delete 1 %")
        read("1 % deleted")
    return out


def merge_source(n: int, k: int, dist: str, bump: int) -> str:
    """k existing keys of a table of ids 0..n-1, their amount changed: the newest k ids, or every (n // k)-th id."""
    ids = f"range({n - k}, {n})" if dist == "clustered" else f"range(0, {n}, {n // k})"
    return f"select id, id % 7 as kind, cast(id * 3 % 1000 + {bump} as bigint) as amount from {ids}"


def merge_child(ops: Ops, system: str, a: dict[str, Any]) -> dict[str, Any]:
    n = a["merge_rows"]
    # untimed, for every system: the process's first statement (Spark's first planning and catalog use) is not the
    # CTAS's own cost; the lake's main schema exists already, so for ducklake it only warms up
    ops.sql("create schema if not exists main")
    ops.sql(f"create table main.target {using_clause(system)}as "
            f"select id, id % 7 as kind, cast(id * 3 % 1000 as bigint) as amount from range({n})", f"CTAS {n:,} rows")
    bump = 0
    for label, k in ((f"1 % ({n // 100:,} rows)", n // 100), (f"{min(FIXED_MERGE_ROWS, n):,} rows",
                                                            min(FIXED_MERGE_ROWS, n))):
        for dist in ("clustered", "uniform"):
            bump += 1
            ops.sql(f"merge into main.target as t using ({merge_source(n, k, dist, bump)}) as s on t.id = s.id "
                    "when matched then update set * when not matched then insert *", f"merge {label}, {dist}")
    return {"check": {"count, sum(amount), sum(amount * (id % 13))": ops.rows(
        "select count(*), sum(amount), sum(amount * (id % 13)) from main.target")}}


SNAPSHOT_SQL = """{% snapshot snap %}
{{ config(target_schema='main', unique_key='id', strategy='check', check_cols=['amount', 'kind']) }}
select * from {{ source('raw', 'src') }}
{% endsnapshot %}
"""


def snapshot_child(ops: Ops, system: str, a: dict[str, Any]) -> dict[str, Any]:
    n = a["snapshot_rows"]
    if system != "ducklake":
        ops.sql("create schema if not exists main")
    ops.sql(f"create table main.src {using_clause(system)}as "
            f"select id, id % 7 as kind, cast(id * 3 % 1000 as bigint) as amount from range({n})")
    ops.invoke(["snapshot"], "first dbt snapshot")
    walls, cpus = [], []
    for r in range(SNAPSHOT_RUNS):
        ops.sql(f"update main.src set amount = amount + 1 where id % 100 = {r}")
        ops.invoke(["snapshot"], "dbt snapshot")
        walls.append(ops.steps["dbt snapshot"]["wall_s"])
        cpus.append(ops.steps["dbt snapshot"]["cpu_s"])
    ops.steps[f"{SNAPSHOT_RUNS} dbt snapshots, 1 % changed each"] = {"wall_s": round(sum(walls), 2),
                                                                     "cpu_s": round(sum(cpus), 2)}
    ops.steps["dbt snapshot"] = {"wall_s": sorted(walls)[len(walls) // 2], "cpu_s": sorted(cpus)[len(cpus) // 2]}
    ops.steps["median dbt snapshot"] = ops.steps.pop("dbt snapshot")
    return {"check": {"rows, closed rows, sum(current amount)": ops.rows(
        "select count(*), count(dbt_valid_to), sum(case when dbt_valid_to is null then amount end) from main.snap")}}


REBUILD_SQL = """{{ config(materialized='table') }}
select id, id % 7 as kind, cast(id * 3 % 1000 as bigint) as amount, cast(id as double) * 0.5 as price,
       concat('customer_', cast(id % 100000 as string)) as name
from range({{ var('rows') }})
"""


def rebuild_child(ops: Ops, system: str, a: dict[str, Any]) -> dict[str, Any]:
    n, root = a["rebuild_rows"], Path(a["root"])
    rows = ["--vars", json.dumps({"rows": n})]
    ops.invoke(["run", *rows], f"dbt run: build {n:,} rows")
    data = {"ducklake": root / "lake" / "data", "delta": root / "warehouse", "iceberg": root / "iceberg"}[system]
    size = sum(f.stat().st_size for f in data.rglob("*") if f.is_file() and not f.name.startswith("."))
    ops.invoke(["run", *rows], "dbt run: full rebuild")
    wall = ops.steps["dbt run: full rebuild"]["wall_s"]
    return {"bytes": size, "rows_per_s": round(n / wall), "mb_per_s": round(size / wall / 1e6, 1),
            "check": {"count, sum(amount), sum(kind)": ops.rows("select count(*), sum(amount), sum(kind) from main.big")}}


CHILDREN: dict[str, Callable[[Ops, str, dict[str, Any]], dict[str, Any]]] = {
    "table": table_child, "merge": merge_child, "snapshot": snapshot_child, "rebuild": rebuild_child}


def child_main(spec_path: str) -> None:
    """In the child process: one workload through dbt's Python API; JSON to stdout."""
    spec = json.loads(Path(spec_path).read_text())
    ops = Ops(Path(spec["root"]))
    out = CHILDREN[spec["kind"]](ops, spec["system"], spec)
    print("PEERS_RESULT " + json.dumps({"steps": ops.steps, **out}), flush=True)
    os._exit(0)  # the JVM goes with us (the parent reaps it)


def run_child(kind: str, system: str, root: Path, args: argparse.Namespace, selected: list[str]) -> dict[str, Any]:
    """Write the project of workload `kind` under `root` and run it in a child process, measured as a whole."""
    (root / "models").mkdir(parents=True)
    (root / "snapshots").mkdir()
    (root / "dbt_project.yml").write_text(
        'name: peers\nversion: "1.0"\nconfig-version: 2\nprofile: peers\nmacro-paths: ["macros"]\n'
        'model-paths: ["models"]\nsnapshot-paths: ["snapshots"]\n' + project_config(system, "peers"))
    write_profile(root, "peers", system, args.master)
    write_macros(root, system, OPS_MACROS)
    if kind == "snapshot":
        (root / "snapshots" / "snap.sql").write_text(SNAPSHOT_SQL)
        (root / "models" / "sources.yml").write_text(
            "version: 2\nsources:\n  - name: raw\n    schema: main\n    tables:\n      - name: src\n")
    if kind == "rebuild":
        (root / "models" / "big.sql").write_text(REBUILD_SQL)
    spec = {**{k: v for k, v in vars(args).items() if isinstance(v, (int, str, float, list, type(None)))},
            "kind": kind, "system": system, "root": str(root), "selected": selected}
    (root / "spec.json").write_text(json.dumps(spec))
    r = run_measured([sys.executable, "-m", "bench.peers", "--child", str(root / "spec.json")], root)
    line = next(x for x in r["output"].splitlines() if x.startswith("PEERS_RESULT "))
    res = json.loads(line[len("PEERS_RESULT "):])
    res["steps"]["whole process"] = {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"]}
    if kind == "table" and system == "ducklake" and "compaction" in selected:
        res["files_after_compaction"] = ducklake_live_files(root, "events")
    return res


def ducklake_live_files(root: Path, table: str) -> list[list[str]]:
    """The table's live data files, read from our catalog by DuckDB."""
    import duckdb

    con = duckdb.connect(str(root / "lake" / "catalog.ducklake"), read_only=True)
    try:
        n = con.execute("select count(*) from ducklake_data_file f join ducklake_table t using (table_id) "
                        "where t.table_name = ? and t.end_snapshot is null and f.end_snapshot is null",
                        [table]).fetchone()[0]
    finally:
        con.close()
    return [[str(n)]]


# --- report -----------------------------------------------------------------------------------------------------

def markdown(report: dict[str, Any]) -> str:
    """One row per workload step: each system's wall and CPU time and their ratios to the best of the systems."""
    systems = [s for s in SYSTEMS if s in report["systems"]]
    out = ["| workload | step | " + " | ".join(systems) + " |", "| --- | --- |" + " --- |" * len(systems)]
    for workload in [w for w in ["loop", "merge", "table", "snapshot", "rebuild"] if w in report["results"]]:
        res = report["results"][workload]
        steps = list(dict.fromkeys(step for r in res.values() for step in r["steps"]))
        for step in steps:
            vals = {s: r["steps"].get(step) for s, r in res.items()}
            cells = []
            best = {m: min((v[m] for v in vals.values() if v), default=0) or 1e-9 for m in ("wall_s", "cpu_s")}
            for s in systems:
                v = vals.get(s)
                if not v:
                    cells.append("failed" if "error" in res.get(s, {}) else "-")
                    continue
                cells.append(f"{v['wall_s']:.3g} s ({v['wall_s'] / best['wall_s']:.2f}x), "
                             f"cpu {v['cpu_s']:.3g} s ({v['cpu_s'] / best['cpu_s']:.2f}x)")
            out.append(f"| {workload} | {step} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def mismatches(results: dict[str, dict[str, Any]]) -> list[str]:
    """The checks whose answers differ between the systems."""
    checks = {s: r["check"] for s, r in results.items()}
    first = next(iter(checks.values()), {})
    return [f"{k}: " + json.dumps({s: c.get(k) for s, c in checks.items()})
            for k in first if any(c.get(k) != first[k] for c in checks.values())]


def versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {p: version(p) for p in ("dbt-core", "dbt-spark", "pyspark", "duckdb")}
    out |= {c.split(":")[1]: c.split(":")[2] for cs in JARS.values() for c in cs}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setup", action="store_true", help="fetch the peers' jars and exit")
    ap.add_argument("--only", action="append", choices=SYSTEMS, help="a system (repeatable; default all)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated, of: " + ", ".join(WORKLOADS))
    ap.add_argument("--loop-size", type=loop_size, default=LOOP_SIZES["full"],
                    help="full (50 seeds, 52 models, 104 tests; default), small (10, 12, 20) or SEEDS,MODELS,TESTS")
    ap.add_argument("--merge-rows", type=int, default=10_000_000, help="rows of the merge target")
    ap.add_argument("--appends", type=int, default=1000, help="commits (files) of the appended table")
    ap.add_argument("--snapshot-rows", type=int, default=1_000_000, help="rows of the snapshot's source")
    ap.add_argument("--rebuild-rows", type=int, default=100_000_000, help="rows of the rebuilt table")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each timed query (the best is reported)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_main(args.child)
        return
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = sorted(set(workloads) - set(WORKLOADS))
    if unknown:
        ap.error(f"--workloads: unknown {', '.join(unknown)} (known: {', '.join(WORKLOADS)})")
    if "timetravel" in workloads and args.appends <= TIME_TRAVEL_BACK:
        ap.error(f"--appends must be above {TIME_TRAVEL_BACK} for timetravel ({TIME_TRAVEL_BACK} commits back)")
    if "merge" in workloads and args.merge_rows < 100:
        ap.error("--merge-rows must be at least 100 (1 % of it is merged)")
    setup_jars()
    if args.setup:
        return
    become_subreaper()
    systems = [s for s in SYSTEMS if not args.only or s in args.only]
    table_selected = [w for w in TABLE_WORKLOADS if w in workloads]
    kinds = [k for k in ["loop", "merge", "table", "snapshot", "rebuild"]
             if k in workloads or (k == "table" and table_selected)]
    work = Path(tempfile.mkdtemp(prefix="peers-", dir=args.workdir))
    report: dict[str, Any] = {"params": {k: v for k, v in vars(args).items() if k != "child"}, "systems": systems,
                              "load_start": os.getloadavg(), "versions": versions(), "results": {}}
    bad: list[str] = []
    try:
        for kind in kinds:
            report["results"][kind] = {}
            for system in systems:
                root = work / kind / system
                try:
                    res = (run_loop(system, root, args) if kind == "loop" else
                           run_child(kind, system, root, args, table_selected))
                except (RuntimeError, StopIteration) as e:  # reported, and the other systems still run
                    res = {"error": str(e)[-3000:], "steps": {}, "check": {}}
                    bad.append(f"{kind} {system} failed: {str(e)[-3000:]}")
                report["results"][kind][system] = res
                if args.json:  # kept as it grows: a long run stopped midway still leaves its figures
                    Path(args.json).write_text(json.dumps(report, indent=2))
                print(f"# {kind} {system}: {json.dumps(res)}", file=sys.stderr, flush=True)
            bad += [f"{kind}: {m}" for m in mismatches({s: r for s, r in report["results"][kind].items()
                                                        if "error" not in r})]
    finally:
        report["load_end"] = os.getloadavg()
        report["mismatches"] = bad
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2))
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(markdown(report))
    if bad:
        raise SystemExit("RESULTS DIFFER OR FAILED:\n" + "\n".join(bad))


if __name__ == "__main__":
    main()
