"""A dbt incremental MERGE on a DuckLake table vs a full rebuild of the same model and vs DuckDB's own MERGE.

By default a 10M-row target, 1 % of its rows changed upstream. Three timings on the same lake:

- full rebuild: `dbt run --full-refresh` of the model (CREATE OR REPLACE TABLE ... AS its query);
- incremental: `dbt run` of the model (`materialized='incremental', incremental_strategy='merge', unique_key='id'`,
  new rows found with `updated_at > (select max(updated_at) from {{ this }})`);
- DuckDB: the same MERGE INTO run by DuckDB 1.5's ducklake extension on the same lake, as it was just before the
  incremental run (`SET threads` = the Spark cores).

Ratios: full_rebuild / incremental (the target is >= 10) and duckdb_merge / incremental (> 1: we are faster).

Sequence: the upstream is written (Spark layer, `--files` files), the model's first run builds the target, then per
distribution of changed ids the upstream is changed (below) and that state is saved. Each round then runs the three
steps on it, each from a restored copy of the saved state (catalog file copied, data files hard-linked: DuckLake never
rewrites a data file): the full rebuild (of the changed upstream: what one would run instead of the incremental),
the incremental run, DuckDB's MERGE; the order alternates between rounds (load on a shared machine drifts). The
first `--warmup` rounds are not counted; the last round's results are checked with DuckDB (target = upstream:
EXCEPT both ways, counts, unique ids).

dbt runs in this process through `dbtRunner`, so every invocation shares one SparkSession (the adapter keeps its
runtime per process): the first invocation pays for nothing the others do not. Node times are dbt's
`execution_time` from `target/run_results.json` (no dbt startup or parsing); the invocation's wall time and CPU time
(Spark JVM + this process, as bench/spark_io.py measures it) are reported too.

Changes (made by DuckDB, untimed): `--change-pct` of the target's row count, of which `--insert-share` are new rows
(ids after the last one) and the rest UPDATEs of existing rows (updated_at set later than any existing row, amount
and status changed). Updated ids are drawn at random from the whole id range ("uniform") or from the newest
`--cluster-pct` of it ("clustered"); file pruning by key range only helps the latter.

The incremental runs are profiled by wrapping library and PySpark calls (nothing in the library is changed): every
statement the dbt cursor runs, Spark actions (collect, count, Parquet writes, eager spark.sql) labelled by the
calling library function and line, footer reads, delete staging and the catalog commit.

With --by-source the model's MERGE (and DuckDB's) has a WHEN NOT MATCHED BY SOURCE ... THEN DELETE clause whose
condition matches no row: same results, the cost of the clause (every target file read, the target anti-joined).

Run: .venv/bin/python -m bench.incremental_merge [--rows N] [--repeat R] [--workdir DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import duckdb
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.spark_io import Meter, environment, run_benchmark, settle
from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.spark.write import one_shot
from dbt.adapters.ducklake.spark.write import write as lake_write

SCHEMA = "main"
UPSTREAM = "upstream"
MODEL = "target"
BASE_TS = dt.datetime(2020, 1, 1)
SPAN_US = 5 * 365 * 86_400 * 1_000_000  # updated_at of the generated rows spans 5 years, increasing with id
CHANGE_TS = "2030-01-01 00:00:00"  # updated_at of changed rows: later than any generated one
COLUMNS = ["id", "customer_id", "qty", "amount", "price", "status", "note", "order_date", "updated_at"]

PROFILES = """\
bench:
  target: dev
  outputs:
    dev:
      type: ducklake
      catalog: "{catalog}"
      data_path: "{data_path}"
      schema: {schema}
      master: "{master}"
      threads: 1
      spark_config:
        spark.driver.memory: "{driver_memory}"
        spark.sql.shuffle.partitions: "{shuffle}"
"""
PROJECT = """\
name: bench_incremental
version: "1.0"
config-version: 2
profile: bench
model-paths: ["models"]
"""
SOURCES = f"""\
version: 2
sources:
  - name: raw
    schema: {SCHEMA}
    tables:
      - name: {UPSTREAM}
"""
# --by-source: a WHEN NOT MATCHED BY SOURCE clause that matches no row, so the result is the same and its cost shows:
# every target file is read (any row may lack a key) and the target is anti-joined with the source
BY_SOURCE_CONFIG = ", not_matched_by_source_action='delete', not_matched_by_source_condition='DBT_INTERNAL_DEST.id < 0'"
BY_SOURCE_DUCKDB = (f"MERGE INTO lake.{SCHEMA}.{MODEL} AS t USING ({{source}}) AS s ON t.id = s.id "
                    "WHEN NOT MATCHED BY SOURCE AND t.id < 0 THEN DELETE")
MODEL_SQL = f"""\
{{{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id'{{by_source}}) }}}}
select {", ".join(COLUMNS)}
from {{{{ source('raw', '{UPSTREAM}') }}}}
{{% if is_incremental() %}}
where updated_at > (select max(updated_at) from {{{{ this }}}})
{{% endif %}}
"""


# ------------------------------------------------------------------------------------------------------- data

def upstream_df(spark: SparkSession, rows: int, files: int, ts_type: str = "timestamp") -> DataFrame:
    """rows deterministic orders in `files` partitions; updated_at and order_date grow with id (recent = high id).
    ts_type: updated_at's DuckLake type, timestamp (Spark TIMESTAMP_NTZ) or timestamptz (Spark TIMESTAMP)."""
    i = F.col("id")
    step = SPAN_US // max(rows, 1)
    return spark.range(0, rows, 1, files).select(
        i.alias("id"),
        ((i * 7919) % 1_000_000).cast("int").alias("customer_id"),
        (i % 50 + 1).cast("int").alias("qty"),
        ((i % 100_003) / F.lit(7.0)).alias("amount"),
        ((i % 997) / F.lit(4.0) + 0.99).alias("price"),
        F.element_at(F.array(*[F.lit(s) for s in ("new", "paid", "shipped", "returned")]),
                     (i % 4 + 1).cast("int")).alias("status"),
        F.concat(F.lit("order#"), F.lpad(i.cast("string"), 10, "0")).alias("note"),
        F.date_add(F.lit(BASE_TS.date()), (i * step / F.lit(86_400_000_000)).cast("int")).alias("order_date"),
        F.timestamp_micros(F.lit(int(BASE_TS.replace(tzinfo=dt.timezone.utc).timestamp() * 1_000_000)) + i * step)
        .cast("timestamp_ntz" if ts_type == "timestamp" else "timestamp").alias("updated_at"),
    )


def duckdb_connect(threads: int) -> duckdb.DuckDBPyConnection:
    """DuckDB with the ducklake extension loaded by path, as the tests load it (no network)."""
    from tests.support.reference import connect

    con = connect()
    con.execute(f"SET threads = {threads}")
    con.execute("SET TimeZone = 'UTC'")  # timestamptz literals and casts as the lake stores them (UTC)
    return con


@contextlib.contextmanager
def attached(lake_dir: str, threads: int, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """DuckDB with the lake attached as `lake`; closed on exit (our layer must not share the catalog file with it)."""
    con = duckdb_connect(threads)
    try:
        ro = ", READ_ONLY" if read_only else ""
        con.execute(f"ATTACH 'ducklake:{lake_dir}/catalog.ducklake' AS lake (DATA_PATH '{lake_dir}/data/'{ro})")
        yield con
    finally:
        con.close()


@dataclass(frozen=True)
class ChangeSpec:
    rows: int
    pct: float  # changed rows, % of rows
    insert_share: float  # of the changed rows, the share that is new rows
    cluster_pct: float  # clustered: updated ids come from the newest cluster_pct % of ids

    @property
    def updates(self) -> int:
        return round(self.rows * self.pct / 100 * (1 - self.insert_share))

    @property
    def inserts(self) -> int:
        return round(self.rows * self.pct / 100 * self.insert_share)

    def id_range(self, distribution: str) -> tuple[int, int]:
        if distribution == "uniform":
            return 0, self.rows
        span = max(round(self.rows * self.cluster_pct / 100), self.updates)
        return self.rows - span, self.rows


def apply_changes(lake_dir: str, spec: ChangeSpec, distribution: str, threads: int) -> dict[str, Any]:
    """UPDATE spec.updates random rows of the id range, INSERT spec.inserts new ones: DuckDB writes them to the lake."""
    lo, hi = spec.id_range(distribution)
    step = SPAN_US // max(spec.rows, 1)
    with attached(lake_dir, threads) as con:
        con.execute(f"CREATE TEMP TABLE changed AS SELECT id FROM range({lo}, {hi}) t(id) "
                    f"USING SAMPLE reservoir({spec.updates} ROWS) REPEATABLE (42)")
        con.execute(f"UPDATE lake.{SCHEMA}.{UPSTREAM} SET updated_at = TIMESTAMPTZ '{CHANGE_TS}+00', "
                    "amount = amount + 1.5, status = 'changed' WHERE id IN (SELECT id FROM changed)")
        con.execute(f"""
            INSERT INTO lake.{SCHEMA}.{UPSTREAM}
            SELECT id, ((id * 7919) % 1000000)::INT, (id % 50 + 1)::INT, (id % 100003) / 7.0, (id % 997) / 4.0 + 0.99,
                   'new', 'order#' || lpad(id::VARCHAR, 10, '0'),
                   DATE '{BASE_TS.date()}' + (id * {step} // 86400000000)::INT, TIMESTAMPTZ '{CHANGE_TS}+00'
            FROM range({spec.rows}, {spec.rows + spec.inserts}) t(id)""")
        updated = con.execute(f"SELECT count(*), min(id), max(id) FROM lake.{SCHEMA}.{UPSTREAM} "
                              f"WHERE updated_at = TIMESTAMPTZ '{CHANGE_TS}+00' AND id < {spec.rows}").fetchone()
    assert updated is not None and updated[0] == spec.updates, updated
    return {"distribution": distribution, "updated": updated[0], "inserted": spec.inserts,
            "updated_id_range": [updated[1], updated[2]]}


def lake_files(lake_dir: str, table: str) -> dict[str, int]:
    """Live data and delete files of a table (read by DuckDB)."""
    with attached(lake_dir, 1, read_only=True) as con:
        data = con.execute(f"SELECT count(*), sum(data_file_size_bytes) FROM ducklake_list_files('lake', '{table}', "
                           f"schema => '{SCHEMA}')").fetchone()
        deletes = con.execute(f"SELECT count(delete_file) FROM ducklake_list_files('lake', '{table}', "
                              f"schema => '{SCHEMA}')").fetchone()
    assert data is not None and deletes is not None
    return {"data_files": data[0], "bytes": int(data[1] or 0), "delete_files": deletes[0]}


def check_equal(lake_dir: str, threads: int, what: str) -> dict[str, int]:
    """The target holds exactly the upstream's rows (DuckDB reads both: EXCEPT both ways, counts, unique ids)."""
    cols = ", ".join(COLUMNS)
    with attached(lake_dir, threads, read_only=True) as con:
        up, tg, ids = (con.execute(q).fetchone()[0] for q in (  # type: ignore[index]
            f"SELECT count(*) FROM lake.{SCHEMA}.{UPSTREAM}", f"SELECT count(*) FROM lake.{SCHEMA}.{MODEL}",
            f"SELECT count(DISTINCT id) FROM lake.{SCHEMA}.{MODEL}"))
        missing = con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM lake.{SCHEMA}.{UPSTREAM} EXCEPT "
                              f"SELECT {cols} FROM lake.{SCHEMA}.{MODEL})").fetchone()[0]  # type: ignore[index]
        extra = con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM lake.{SCHEMA}.{MODEL} EXCEPT "
                            f"SELECT {cols} FROM lake.{SCHEMA}.{UPSTREAM})").fetchone()[0]  # type: ignore[index]
    out = {"upstream_rows": up, "target_rows": tg, "target_ids": ids, "missing": missing, "extra": extra}
    if not (up == tg == ids and missing == 0 and extra == 0):
        raise AssertionError(f"{what}: the target differs from the upstream: {out}")
    return out


# ------------------------------------------------------------------------------------------------ lake copies

class Lakes:
    """The working lake (fixed path: the profile points at it) and saved copies of it to restore."""

    def __init__(self, run_dir: str) -> None:
        self.live = os.path.join(run_dir, "lake")
        self.saved = os.path.join(run_dir, "saved")
        os.makedirs(os.path.join(self.live, "data"))

    def save(self, name: str) -> None:
        _copy_lake(self.live, os.path.join(self.saved, name))

    def restore(self, name: str) -> None:
        shutil.rmtree(self.live)
        _copy_lake(os.path.join(self.saved, name), self.live)


def _copy_lake(src: str, dst: str) -> None:
    """Catalog files copied (DuckDB changes them in place), data files hard-linked (written once, never changed)."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(os.path.join(src, "data"), os.path.join(dst, "data"), copy_function=os.link)
    for name in os.listdir(src):
        if name.startswith("catalog.ducklake"):  # the file and a WAL, if DuckDB left one
            shutil.copy2(os.path.join(src, name), os.path.join(dst, name))


# ---------------------------------------------------------------------------------------------------- dbt runs

@dataclass(frozen=True)
class DbtRun:
    execution_s: float  # the node's execution_time in run_results.json
    wall_s: float  # the whole dbtRunner invocation


class Project:
    def __init__(self, run_dir: str, lakes: Lakes, args: argparse.Namespace) -> None:
        from dbt.cli.main import dbtRunner

        self.dir = os.path.join(run_dir, "project")
        os.makedirs(os.path.join(self.dir, "models"))
        files = {
            "dbt_project.yml": PROJECT,
            "profiles.yml": PROFILES.format(catalog=f"{lakes.live}/catalog.ducklake", data_path=f"{lakes.live}/data/",
                                            schema=SCHEMA, master=args.master, driver_memory=args.driver_memory,
                                            shuffle=args.shuffle_partitions),
            "models/sources.yml": SOURCES,
            f"models/{MODEL}.sql": MODEL_SQL.replace("{by_source}", BY_SOURCE_CONFIG if args.by_source else ""),
        }
        for name, text in files.items():
            with open(os.path.join(self.dir, name), "w") as fh:
                fh.write(text)
        self.runner = dbtRunner()

    def run(self, *extra: str) -> DbtRun:
        start = time.perf_counter()
        res = self.runner.invoke(["run", "--project-dir", self.dir, "--profiles-dir", self.dir, "--quiet",
                                  "--select", MODEL, *extra])
        wall = time.perf_counter() - start
        if not res.success:
            raise RuntimeError(f"dbt run {' '.join(extra)} failed: {res.exception or res.result}")
        with open(os.path.join(self.dir, "target", "run_results.json")) as fh:
            (node,) = json.load(fh)["results"]
        if node["status"] != "success":
            raise RuntimeError(f"dbt run {' '.join(extra)}: {node['status']}: {node.get('message')}")
        return DbtRun(node["execution_time"], wall)


# --------------------------------------------------------------------------------------------------- profiling

class Profile:
    """Wall and CPU seconds per label while installed; a label is an operation and the library code that called it.
    CPU time (Spark JVM + this process) is the steadier one when other work shares the cores."""

    def __init__(self, cpu: Callable[[], float]) -> None:
        self.cpu = cpu
        self.seconds: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}

    def reset(self) -> None:
        self.seconds, self.cpu_seconds = {}, {}

    def add(self, label: str, wall: float, cpu: float) -> None:
        self.seconds[label] = self.seconds.get(label, 0.0) + wall
        self.cpu_seconds[label] = self.cpu_seconds.get(label, 0.0) + cpu

    def wrap(self, fn: Callable[..., Any], label: Callable[..., str] | str) -> Callable[..., Any]:
        def timed(*a: Any, **kw: Any) -> Any:
            cpu, start = self.cpu(), time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.add(label if isinstance(label, str) else label(*a, **kw), time.perf_counter() - start,
                         self.cpu() - cpu)

        return timed


def _caller(op: str) -> Callable[..., str]:
    """A label naming the first library frame up the stack (module:function:line), so each Spark action is told
    apart by where it is called from."""
    lib = os.sep + os.path.join("dbt", "adapters", "ducklake") + os.sep

    def label(*_a: Any, **_kw: Any) -> str:
        f = sys._getframe(2)
        while f is not None and lib not in f.f_code.co_filename:
            f = f.f_back  # type: ignore[assignment]
        if f is None:
            return f"{op} (outside the adapter)"
        mod = os.path.splitext(f.f_code.co_filename.rsplit(lib, 1)[1])[0].replace(os.sep, ".")
        return f"{op} @ {mod}.{f.f_code.co_name}:{f.f_lineno}"

    return label


def _statement(_self: Any, sql: str) -> str:
    words = " ".join(re.sub(r"^\s*/\*.*?\*/", "", sql, flags=re.S).split()[:4]).lower()  # without dbt's comment
    return f"statement: {words[:60]}"


@contextlib.contextmanager
def profiled(profile: Profile) -> Iterator[None]:
    """Wrap what the incremental run's time could go to (restored on exit; the library is not changed)."""
    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame
    from pyspark.sql.readwriter import DataFrameWriter

    from dbt.adapters.ducklake import cursor
    from dbt.adapters.ducklake.lake.write import transaction
    from dbt.adapters.ducklake.spark.read import names
    from dbt.adapters.ducklake.spark.write import dml

    targets: list[tuple[Any, str, Callable[..., str] | str]] = [
        (cursor.DuckLakeCursor, "_execute_one", _statement),
        (names.LakeNames, "refresh", "names.refresh (catalog snapshot check, Spark views)"),
        (ClassicDataFrame, "collect", _caller("spark collect")),
        (ClassicDataFrame, "count", _caller("spark count")),
        (ClassicDataFrame, "toArrow", _caller("spark toArrow")),
        (DataFrameWriter, "parquet", _caller("spark write")),
        (SparkSession, "sql", _caller("spark.sql (analysis or DDL)")),
        (dml, "key_bounds", "merge: key_bounds (source keys' range/values)"),
        (dml, "_target_rows_sql", "merge: _target_rows_sql (plan_scan, pruning, footers)"),
        (dml, "_stage_deletes", "merge: _stage_deletes (delete files)"),
        (lake_write, "write_files", "write_files (Spark write + footers + moves)"),
        (lake_write, "_describe", "write_files: footers"),
        (transaction.Transaction, "commit", "catalog commit (Transaction.commit)"),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]
    try:
        for owner, name, label in targets:
            setattr(owner, name, profile.wrap(getattr(owner, name), label))
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


# ---------------------------------------------------------------------------------------------------- the bench

def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


@dataclass
class Step:
    """One timed step: the time it is judged by (dbt: the node's execution_time; DuckDB: the MERGE statement), the
    wall time of the whole call, CPU seconds (Spark JVM + this process, which holds DuckDB) and profile."""

    seconds: float
    wall_s: float
    cpu_s: float
    phases: dict[str, tuple[float, float]] = field(default_factory=dict)  # label -> (wall, cpu) seconds


class Bench:
    def __init__(self, spark: SparkSession, lakes: Lakes, project: Project, threads: int, by_source: bool) -> None:
        self.spark, self.lakes, self.project, self.threads = spark, lakes, project, threads
        self.by_source = by_source
        self.meter = Meter(spark)
        self.profile = Profile(self.meter.cpu)

    def full(self, state: str) -> Step:
        return self._dbt(state, "--full-refresh")

    def incremental(self, state: str) -> Step:
        return self._dbt(state, profile=True)

    def _dbt(self, state: str, *extra: str, profile: bool = False) -> Step:
        self.lakes.restore(state)
        settle(self.spark)
        self.profile.reset()
        cpu = self.meter.cpu()
        with profiled(self.profile) if profile else contextlib.nullcontext():
            run = self.project.run(*extra)
        phases = {k: (v, self.profile.cpu_seconds[k]) for k, v in self.profile.seconds.items()}
        return Step(run.execution_s, run.wall_s, self.meter.cpu() - cpu, phases)

    def duckdb(self, state: str) -> Step:
        """DuckDB's MERGE INTO with the model's incremental query as its source. Its time is the statement's (attach,
        extension load and the catalog read before it are not counted; they are in wall_s)."""
        self.lakes.restore(state)
        os.sync()
        sets = ", ".join(f"{c} = s.{c}" for c in COLUMNS)
        cols = ", ".join(COLUMNS)
        source = (f"SELECT {cols} FROM lake.{SCHEMA}.{UPSTREAM} "
                  f"WHERE updated_at > (SELECT max(updated_at) FROM lake.{SCHEMA}.{MODEL})")
        sql = (f"MERGE INTO lake.{SCHEMA}.{MODEL} AS t USING ({source}) AS s ON t.id = s.id "
               f"WHEN MATCHED THEN UPDATE SET {sets} "
               f"WHEN NOT MATCHED THEN INSERT ({cols}) VALUES ({', '.join('s.' + c for c in COLUMNS)})")
        # DuckLake's MERGE in DuckDB takes one UPDATE or DELETE action: the BY SOURCE one is a statement before it
        statements = [BY_SOURCE_DUCKDB.format(source=source), sql] if self.by_source else [sql]
        cpu, wall = self.meter.cpu(), time.perf_counter()
        with attached(self.lakes.live, self.threads) as con:
            con.execute(f"SELECT count(*) FROM lake.{SCHEMA}.{MODEL} WHERE false")  # catalog loaded before the clock
            start = time.perf_counter()
            con.execute("BEGIN")
            for statement in statements:
                con.execute(statement)
            con.execute("COMMIT")
            seconds = time.perf_counter() - start
        return Step(seconds, time.perf_counter() - wall, self.meter.cpu() - cpu)


@dataclass
class Case:
    distribution: str
    changes: dict[str, Any]
    full: list[Step] = field(default_factory=list)
    incremental: list[Step] = field(default_factory=list)
    duckdb: list[Step] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)

    def med(self, steps: list[Step], attr: str = "seconds") -> float:
        return median([getattr(x, attr) for x in steps])

    @property
    def full_over_incr(self) -> float:
        return self.med(self.full) / self.med(self.incremental)

    @property
    def duck_over_incr(self) -> float:
        return self.med(self.duckdb) / self.med(self.incremental)

    def paired(self, other: list[Step]) -> float:
        """Median of per-round ratios other / incremental (a round's steps ran close in time)."""
        return median([o.seconds / i.seconds for o, i in zip(other, self.incremental, strict=True)])

    def phase_medians(self) -> dict[str, tuple[float, float]]:
        """label -> median (wall, cpu) seconds over the incremental runs (0 for a run without the label)."""
        labels = dict.fromkeys(k for r in self.incremental for k in r.phases)
        return {k: (median([r.phases.get(k, (0.0, 0.0))[0] for r in self.incremental]),
                    median([r.phases.get(k, (0.0, 0.0))[1] for r in self.incremental])) for k in labels}

    def to_json(self) -> dict[str, Any]:
        def steps(xs: list[Step]) -> dict[str, Any]:
            return {"seconds": [x.seconds for x in xs], "wall_s": [x.wall_s for x in xs], "cpu_s": [x.cpu_s for x in xs],
                    "median_s": self.med(xs), "median_wall_s": self.med(xs, "wall_s"),
                    "median_cpu_s": self.med(xs, "cpu_s")}

        return {
            "distribution": self.distribution, "changes": self.changes, "checks": self.checks,
            "full_rebuild": steps(self.full), "incremental": steps(self.incremental), "duckdb_merge": steps(self.duckdb),
            "full_over_incremental": self.full_over_incr, "full_over_incremental_paired": self.paired(self.full),
            "full_over_incremental_cpu": self.med(self.full, "cpu_s") / self.med(self.incremental, "cpu_s"),
            "duckdb_over_incremental": self.duck_over_incr,
            "duckdb_over_incremental_paired": self.paired(self.duckdb),
            "incremental_phase_medians_s": self.phase_medians(),
        }


def run(spark: SparkSession, args: argparse.Namespace, run_dir: str) -> dict[str, Any]:
    env = environment(spark)
    print("environment: " + ", ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    threads = spark.sparkContext.defaultParallelism
    lakes = Lakes(run_dir)

    start = time.perf_counter()
    lake = DuckLake.create(f"{lakes.live}/catalog.ducklake", f"{lakes.live}/data/")
    one_shot.create_table_as(spark, lake, SCHEMA, UPSTREAM,
                               upstream_df(spark, args.rows, args.files, args.updated_at_type))
    lake.close()
    data: dict[str, Any] = {"rows": args.rows, "by_source": args.by_source, "upstream": lake_files(lakes.live, UPSTREAM),
                            "generate_s": round(time.perf_counter() - start, 1)}
    print(f"upstream: {args.rows:,} rows, {data['upstream']}", flush=True)
    project = Project(run_dir, lakes, args)
    bench = Bench(spark, lakes, project, threads, args.by_source)
    first = project.run()  # the model's first run builds the target; the state every change starts from
    data["first_build_s"] = first.execution_s
    data["target"] = lake_files(lakes.live, MODEL)
    check_equal(lakes.live, threads, "first build")
    lakes.save("built")

    spec = ChangeSpec(args.rows, args.change_pct, args.insert_share, args.cluster_pct)
    cases = []
    for distribution in args.distributions:
        lakes.restore("built")
        case = Case(distribution, apply_changes(lakes.live, spec, distribution, threads))
        case.changes["upstream_after"] = lake_files(lakes.live, UPSTREAM)
        state = f"changed-{distribution}"
        lakes.save(state)
        print(f"{distribution}: {case.changes}", flush=True)
        rounds = args.warmup + args.repeat
        for i in range(rounds):
            # alternate the order: load on the shared machine drifts, and a round's steps are compared
            order = ("full", "incremental", "duckdb") if i % 2 == 0 else ("duckdb", "incremental", "full")
            got: dict[str, Step] = {}
            for what in order:
                got[what] = getattr(bench, what)(state)
                if i == rounds - 1:  # the last round's results are checked (the checks are not timed)
                    case.checks[what] = check_equal(lakes.live, threads, f"{what} ({distribution})")
                    if what == "incremental":
                        case.checks["target_after_incremental"] = lake_files(lakes.live, MODEL)
            print(f"  round {i}{' (warm-up)' if i < args.warmup else ''}: " + ", ".join(
                f"{k} {v.seconds:.2f} s (wall {v.wall_s:.2f}, cpu {v.cpu_s:.2f})" for k, v in got.items())
                + f"; load {os.getloadavg()[0]:.1f}", flush=True)
            if i >= args.warmup:
                case.full.append(got["full"])
                case.incremental.append(got["incremental"])
                case.duckdb.append(got["duckdb"])
        cases.append(case)
    env["load_average_at_end"] = os.getloadavg()
    report = {"environment": env, "args": vars(args), "data": data, "cases": [c.to_json() for c in cases]}
    print_summary(cases)
    return report


def print_summary(cases: list[Case]) -> None:
    print("\ndistribution  full rebuild s  incremental s  DuckDB MERGE s  full/incr (paired, cpu)  duckdb/incr (paired)")
    for c in cases:
        cpu = c.med(c.full, "cpu_s") / c.med(c.incremental, "cpu_s")
        print(f"{c.distribution:<13} {c.med(c.full):14.2f} {c.med(c.incremental):14.2f} {c.med(c.duckdb):15.2f}  "
              f"{c.full_over_incr:9.2f} ({c.paired(c.full):.2f}, {cpu:.2f})  "
              f"{c.duck_over_incr:11.2f} ({c.paired(c.duckdb):.2f})")
    print("(medians; dbt steps: the node's execution_time; DuckDB: the MERGE statement; cpu: Spark JVM + this process)")
    for c in cases:
        print(f"\n{c.distribution}: incremental run, median wall / cpu s per label (statements contain the Spark "
              "actions and library calls they make):")
        for label, (wall, cpu) in c.phase_medians().items():
            if wall >= 0.005:
                print(f"  {wall:7.3f} {cpu:7.3f}  {label}")


# ----------------------------------------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.incremental_merge", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=10_000_000, help="rows of the upstream = the target (default 10M)")
    p.add_argument("--files", type=int, default=16, help="data files of the upstream (default 16)")
    p.add_argument("--change-pct", type=float, default=1.0, help="changed rows, %% of --rows (default 1)")
    p.add_argument("--insert-share", type=float, default=0.1,
                   help="of the changed rows, the share that are new rows; the rest are updates (default 0.1)")
    p.add_argument("--cluster-pct", type=float, default=3.0,
                   help="clustered: updated ids come from the newest this %% of ids (default 3)")
    p.add_argument("--distributions", nargs="+", choices=("uniform", "clustered"), default=["uniform", "clustered"])
    p.add_argument("--updated-at-type", choices=("timestamp", "timestamptz"), default="timestamp",
                   help="DuckLake type of updated_at (default timestamp: Spark cannot skip Parquet row groups by a "
                        "TIMESTAMP_NTZ filter; it can with timestamptz)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs of each step (default 3)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs of each step before the timed ones")
    p.add_argument("--workdir", default="/tmp/bench-incremental", help="a run directory is made (and removed) inside")
    p.add_argument("--json", dest="json_out", help="write the results as JSON here")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="6g")
    p.add_argument("--shuffle-partitions", type=int, default=4)
    p.add_argument("--by-source", action="store_true",
                   help="the model's MERGE has a NOT MATCHED BY SOURCE clause matching no row (its cost)")
    p.add_argument("--keep", action="store_true", help="keep the run directory (lakes, dbt project)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    # the session dbt's adapter will find (getOrCreate) has the profile's settings: one Spark for data and dbt
    run_benchmark(args, "dbt-ducklake", {
        "spark.driver.memory": args.driver_memory, "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
        "spark.ui.enabled": "false", "spark.sql.ansi.enabled": "false"}, run)


if __name__ == "__main__":
    main()
