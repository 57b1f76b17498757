"""Spark I/O throughput of DuckLake tables against plain Parquet, on the same data in the same process.

Two ratios, each baseline_time / lake_time on medians (1.0 = no overhead; the target is >= 0.9):

- scan: a query over the table's Spark view (`register_table`) vs the same query over `spark.read.parquet` of the
  very same data files (both resolve their files and schema on every run, as a user's query would);
- write: `create_table_as` (or `append`), i.e. Spark write + driver footer reads + file moves + catalog commit, vs a
  plain `df.write.parquet` of the same DataFrame into a fresh directory.

Every run records wall time and CPU time (the Spark JVM's, read from /proc, plus this Python process's, which
holds the driver-side work and the in-process DuckDB catalog): on a shared machine, CPU time is the steadier measure.

The lake writes are instrumented (module functions of `spark.write.write` are wrapped while the benchmark runs, nothing is
changed in the library) so the report breaks a lake write into phases: begin (transaction, staged table), conform,
Spark's write job, listing, footer reads, moves, the rest of `write_files`, and the catalog commit.

Run: .venv/bin/python -m bench.spark_io [--rows N] [--repeat R] [--workdir DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.readwriter import DataFrameWriter

from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.lake.write.transaction import Transaction
from dbt.adapters.ducklake.spark.env.session import build_session
from dbt.adapters.ducklake.spark.read.scan import file_uri, register_table
from dbt.adapters.ducklake.spark.write import one_shot
from dbt.adapters.ducklake.spark.write import write as lake_write

SCHEMA = "main"
SCAN_TABLE = "scan_src"
BASELINE_VIEW = "bench_parquet_src"
# {rel} is the relation; {lo}/{hi} bound a 1 % slice of `a` (row-group pruning through the view's projection)
QUERIES: dict[str, str] = {
    "scan_full": "SELECT count(*), sum(a), sum(b), sum(c), sum(length(s)), max(d), max(ts) FROM {rel}",
    "scan_filtered": "SELECT count(*), sum(c), max(s) FROM {rel} WHERE a BETWEEN {lo} AND {hi}",
}
# what the lake write's wrappers time, by the name of the wrapped function of spark/write/write.py
WRAPPED = {"write_files": "write_files", "conform": "conform", "_written_files": "list",
           "_describe": "footers", "_move": "move"}


# ------------------------------------------------------------------------------------------------------- data

def source_df(spark: SparkSession, rows: int, files: int) -> DataFrame:
    """rows deterministic rows in `files` partitions: bigint, int, double, string, date, timestamp."""
    ident = F.col("id")
    return spark.range(0, rows, 1, files).select(
        ident.alias("a"),
        ((ident * 7919) % 100_000).cast("int").alias("b"),
        ((ident % 1_000_003) / F.lit(7.0)).alias("c"),
        F.concat(F.lit("customer#"), F.lpad((ident % 1_000_003).cast("string"), 9, "0"),
                 F.when(ident % 3 == 0, F.lit("-x")).otherwise(F.lit(""))).alias("s"),
        F.date_add(F.lit(dt.date(2000, 1, 1)), (ident % 9_000).cast("int")).alias("d"),
        F.timestamp_micros(F.lit(946_684_800_000_000) + ident * 1_000_003).alias("ts"),
    )


# ---------------------------------------------------------------------------------------------------- timing

@dataclass
class Phases:
    """Seconds spent in wrapped functions since the last reset (nested calls are counted by each wrapper)."""

    seconds: dict[str, float] = field(default_factory=dict)

    def reset(self) -> None:
        self.seconds = {}

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

        return timed


@contextlib.contextmanager
def instrumented(phases: Phases) -> Iterator[None]:
    """Wrap spark/write/write.py's phase functions and DataFrameWriter.parquet (Spark's write job) with timers."""
    saved = {name: getattr(lake_write, name) for name in WRAPPED}
    saved_parquet = DataFrameWriter.parquet
    saved_commit = Transaction.commit
    try:
        for name, label in WRAPPED.items():
            setattr(lake_write, name, phases.wrap(label, saved[name]))
        DataFrameWriter.parquet = phases.wrap("spark_write", saved_parquet)  # type: ignore[method-assign]
        Transaction.commit = phases.wrap("commit", saved_commit)  # type: ignore[method-assign]
        yield
    finally:
        for name, fn in saved.items():
            setattr(lake_write, name, fn)
        DataFrameWriter.parquet = saved_parquet  # type: ignore[method-assign]
        Transaction.commit = saved_commit  # type: ignore[method-assign]


def lake_write_phases(total: float, seconds: dict[str, float]) -> dict[str, float]:
    """One lake write's phases; begin and write_files_other are what the wrappers leave unaccounted."""
    get = seconds.get
    inner = sum(get(k, 0.0) for k in ("conform", "spark_write", "list", "footers", "move"))
    return {
        "begin": total - get("write_files", 0.0) - get("commit", 0.0),
        "conform": get("conform", 0.0),
        "spark_write": get("spark_write", 0.0),
        "list": get("list", 0.0),
        "footers": get("footers", 0.0),
        "move": get("move", 0.0),
        "write_files_other": get("write_files", 0.0) - inner,
        "commit": get("commit", 0.0),
    }


def settle(spark: SparkSession) -> None:
    """Equal starting conditions for every timed run: no cached data, dirty pages flushed, garbage collected."""
    spark.catalog.clearCache()
    spark.sparkContext._jvm.System.gc()  # type: ignore[union-attr]
    os.sync()


@dataclass(frozen=True)
class Sample:
    wall: float  # seconds
    cpu: float  # CPU seconds of the Spark JVM and this process (not inflated by waiting for a core)


class Meter:
    """Wall and CPU time of a call. In local mode every task runs in the driver JVM, whose CPU time /proc holds."""

    def __init__(self, spark: SparkSession) -> None:
        self.jvm_stat = f"/proc/{spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()}/stat"  # type: ignore[union-attr]
        self.tick = os.sysconf("SC_CLK_TCK")

    def cpu(self) -> float:
        with open(self.jvm_stat) as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self.tick + time.process_time()  # utime + stime

    def measure(self, fn: Callable[[], Any]) -> Sample:
        cpu, start = self.cpu(), time.perf_counter()
        fn()
        return Sample(time.perf_counter() - start, self.cpu() - cpu)


def alternate(n: int, warmup: int, baseline: Callable[[], Sample],
              lake: Callable[[], Sample]) -> tuple[list[Sample], list[Sample]]:
    """Warm up both sides, then run each n times, baseline first on even rounds and lake first on odd ones."""
    for _ in range(warmup):
        baseline()
        lake()
    base_times: list[Sample] = []
    lake_times: list[Sample] = []
    for i in range(n):
        if i % 2 == 0:
            base_times.append(baseline())
            lake_times.append(lake())
        else:
            lake_times.append(lake())
            base_times.append(baseline())
    return base_times, lake_times


# ------------------------------------------------------------------------------------------------------ results

@dataclass
class Result:
    op: str
    baseline: list[Sample]
    lake: list[Sample]
    lake_phases: list[dict[str, float]] = field(default_factory=list)

    @property
    def baseline_median(self) -> float:
        return statistics.median(s.wall for s in self.baseline)

    @property
    def lake_median(self) -> float:
        return statistics.median(s.wall for s in self.lake)

    @property
    def ratio(self) -> float:
        """baseline / lake of the median wall times: the headline figure."""
        return self.baseline_median / self.lake_median

    @property
    def paired_ratio(self) -> float:
        """Median of the rounds' baseline/lake wall-time ratios (a round's two runs are adjacent in time)."""
        return statistics.median(b.wall / x.wall for b, x in zip(self.baseline, self.lake, strict=True))

    @property
    def cpu_ratio(self) -> float:
        """baseline / lake of the median CPU times (steadier than wall time when other work shares the cores)."""
        return statistics.median(s.cpu for s in self.baseline) / statistics.median(s.cpu for s in self.lake)

    def phase_medians(self) -> dict[str, float]:
        if not self.lake_phases:
            return {}
        return {k: statistics.median(p[k] for p in self.lake_phases) for k in self.lake_phases[0]}

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "baseline_s": [s.wall for s in self.baseline], "lake_s": [s.wall for s in self.lake],
            "baseline_cpu_s": [s.cpu for s in self.baseline], "lake_cpu_s": [s.cpu for s in self.lake],
            "baseline_median_s": self.baseline_median, "lake_median_s": self.lake_median,
            "ratio": self.ratio, "paired_ratio": self.paired_ratio, "cpu_ratio": self.cpu_ratio,
            "lake_phases": self.lake_phases, "lake_phase_medians_s": self.phase_medians(),
        }


# --------------------------------------------------------------------------------------------------------- scan

@dataclass
class ScanSetup:
    view: str
    uris: list[str]
    file_count: int
    total_bytes: int


def prepare_scan(spark: SparkSession, lake: DuckLake, df: DataFrame) -> ScanSetup:
    """Write the source table once (untimed) and register its view; the baseline reads the same data files."""
    one_shot.create_table_as(spark, lake, SCHEMA, SCAN_TABLE, df)
    state = lake.snapshot()
    table = state.table(SCHEMA, SCAN_TABLE)
    view = register_table(spark, state, table)
    files = state.files(table)
    return ScanSetup(view, [file_uri(f.path) for f in files], len(files), sum(f.file_size_bytes for f in files))


def run_query(spark: SparkSession, sql: str, plan_times: list[float] | None = None) -> float:
    """Seconds to analyse, plan and run the query; plan_times gets the analysis + planning part (file listing,
    schema inference, view expansion) when the session is a classic one."""
    start = time.perf_counter()
    df = spark.sql(sql)
    jdf = getattr(df, "_jdf", None)
    if jdf is not None:
        jdf.queryExecution().executedPlan()  # collect() reuses this QueryExecution: nothing is planned twice
    planned = time.perf_counter()
    df.collect()
    end = time.perf_counter()
    if plan_times is not None:
        plan_times.append(planned - start)
    return end - start


def read_baseline(spark: SparkSession, setup: ScanSetup, sql: str, plan_times: list[float]) -> None:
    """The baseline query: spark.read.parquet of the files (it lists them and infers the schema eagerly), then SQL."""
    start = time.perf_counter()
    spark.read.parquet(*setup.uris).createOrReplaceTempView(BASELINE_VIEW)
    read_s = time.perf_counter() - start
    run_query(spark, sql, plan_times)
    plan_times[-1] += read_s


def bench_scan(spark: SparkSession, meter: Meter, setup: ScanSetup, rows: int, repeat: int, warmup: int) -> list[Result]:
    lo, hi = rows // 2, rows // 2 + rows // 100
    results = []
    for op, template in QUERIES.items():
        plans: dict[str, list[float]] = {"baseline": [], "lake": []}
        base_sql = template.format(rel=BASELINE_VIEW, lo=lo, hi=hi)
        lake_sql = template.format(rel=setup.view, lo=lo, hi=hi)

        def baseline(sql: str = base_sql, plans: dict[str, list[float]] = plans) -> Sample:
            settle(spark)
            return meter.measure(lambda: read_baseline(spark, setup, sql, plans["baseline"]))

        def lake(sql: str = lake_sql, plans: dict[str, list[float]] = plans) -> Sample:
            settle(spark)
            return meter.measure(lambda: run_query(spark, sql, plans["lake"]))

        base_s, lake_s = alternate(repeat, warmup, baseline, lake)
        n = repeat  # plan times of the timed runs only (the warmups come first)
        result = Result(op, base_s, lake_s, [
            {"lake_plan": b, "baseline_plan": a} for a, b in zip(plans["baseline"][-n:], plans["lake"][-n:], strict=True)])
        results.append(result)
        print_result(result)
    return results


def check_same_answer(spark: SparkSession, setup: ScanSetup) -> None:
    """Both relations must hold the same rows (else the comparison would be meaningless)."""
    sql = QUERIES["scan_full"]
    spark.read.parquet(*setup.uris).createOrReplaceTempView(BASELINE_VIEW)
    a = spark.sql(sql.format(rel=BASELINE_VIEW)).collect()
    b = spark.sql(sql.format(rel=setup.view)).collect()
    if a != b:
        raise AssertionError(f"the view and the Parquet files disagree: {b} vs {a}")


# -------------------------------------------------------------------------------------------------------- write

@dataclass
class WriteTarget:
    spark: SparkSession
    meter: Meter
    lake: DuckLake
    df: DataFrame
    out_dir: str
    op: str  # ctas | append
    phases: Phases = field(default_factory=Phases)
    runs: int = 0
    last_phases: dict[str, float] = field(default_factory=dict)

    def baseline(self) -> Sample:
        path = os.path.join(self.out_dir, f"plain-{self._next()}")
        settle(self.spark)
        sample = self.meter.measure(lambda: self.df.write.parquet(file_uri(path)))
        shutil.rmtree(path)
        return sample

    def lake_write(self) -> Sample:
        n = self._next()
        name = f"w_{n}" if self.op == "ctas" else "w_append"
        if self.op == "append":
            self._empty_append_table(name)
        settle(self.spark)
        self.phases.reset()
        if self.op == "ctas":
            sample = self.meter.measure(lambda: one_shot.create_table_as(self.spark, self.lake, SCHEMA, name, self.df))
        else:
            sample = self.meter.measure(lambda: one_shot.append(self.spark, self.lake, SCHEMA, name, self.df))
        self.last_phases = lake_write_phases(sample.wall, self.phases.seconds)
        self._drop(name)
        return sample

    def _next(self) -> int:
        self.runs += 1
        return self.runs

    def _empty_append_table(self, name: str) -> None:
        """A fresh empty table to append to (created untimed, like a dbt incremental model's first run)."""
        one_shot.create_table_as(self.spark, self.lake, SCHEMA, name, self.df.limit(0), replace=True)

    def _drop(self, name: str) -> None:
        """Drop the written table and remove its files (untimed), keeping the catalog and disk small."""
        state = self.lake.snapshot()
        table_dir = state.table_path(state.table(SCHEMA, name))
        with self.lake.transaction() as tx:
            tx.drop_table(SCHEMA, name)
        shutil.rmtree(table_dir, ignore_errors=True)


def bench_write(target: WriteTarget, repeat: int, warmup: int) -> Result:
    phases: list[dict[str, float]] = []

    def lake() -> Sample:
        sample = target.lake_write()
        phases.append(target.last_phases)
        return sample

    with instrumented(target.phases):
        base_s, lake_s = alternate(repeat, warmup, target.baseline, lake)
    result = Result(f"write_{target.op}", base_s, lake_s, phases[-repeat:])
    print_result(result)
    return result


# ------------------------------------------------------------------------------------------------------ reporting

def environment(spark: SparkSession) -> dict[str, Any]:
    jvm = spark.sparkContext._jvm  # type: ignore[union-attr]
    mem_kib = 0
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    return {
        "cores": os.cpu_count(),
        "ram_gib": round(mem_kib / 2**20, 1),
        "cpu": _cpu_model(),
        "spark": spark.version,
        "java": f"{jvm.System.getProperty('java.vm.name')} {jvm.System.getProperty('java.version')}",
        "python": platform.python_version(),
        "master": spark.sparkContext.master,
        "driver_memory": spark.conf.get("spark.driver.memory", "default"),
        "load_average_at_start": os.getloadavg(),
    }


def _cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def print_result(r: Result) -> None:
    print(f"  {r.op:<16} baseline {_fmt(r.baseline)}  lake {_fmt(r.lake)}  ratio {r.ratio:.3f}  cpu ratio "
          f"{r.cpu_ratio:.3f}", flush=True)


def _fmt(samples: list[Sample]) -> str:
    return (f"{statistics.median(s.wall for s in samples):7.2f} s [" + " ".join(f"{s.wall:.2f}" for s in samples)
            + "]")


def print_summary(results: list[Result]) -> None:
    print("\nop                 baseline s    lake s   ratio  paired  cpu ratio")
    for r in results:
        print(f"{r.op:<18} {r.baseline_median:10.2f} {r.lake_median:9.2f}   {r.ratio:.3f}   {r.paired_ratio:.3f}   "
              f"{r.cpu_ratio:.3f}")
    print("(ratio: baseline/lake of median wall times; paired: median of the rounds' wall-time ratios; cpu ratio: "
          "of median CPU times)")
    for r in results:
        medians = r.phase_medians()
        if medians:
            print(f"\n{r.op}: lake phases (median s): " + ", ".join(f"{k} {v:.3f}" for k, v in medians.items()))


# ----------------------------------------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.spark_io", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=30_000_000, help="rows of the generated table (default 30M)")
    p.add_argument("--files", type=int, default=8, help="partitions of the generated DataFrame = files written")
    p.add_argument("--repeat", type=int, default=3, help="timed runs of each operation per side (default 3)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs per side before the timed ones")
    p.add_argument("--workdir", default="/tmp/bench-work", help="a run directory is made (and removed) inside")
    p.add_argument("--json", dest="json_out", help="write the results as JSON here")
    p.add_argument("--write-op", choices=("ctas", "append"), default="ctas", help="lake write to time")
    p.add_argument("--only", choices=("scan", "write"), help="run one benchmark only")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--keep", action="store_true", help="keep the run directory (data files, catalog)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    run_benchmark(args, "dbt-ducklake-bench", {"spark.driver.memory": args.driver_memory,
                                               "spark.sql.shuffle.partitions": "4"}, run)


def run_benchmark(args: argparse.Namespace, app_name: str, conf: dict[str, str],
                  body: Callable[[SparkSession, argparse.Namespace, str], dict[str, Any]]) -> None:
    """A run directory under args.workdir (removed after unless args.keep) and a session for body; the report it
    returns goes to args.json_out."""
    run_dir = os.path.join(os.path.abspath(args.workdir), f"run-{os.getpid()}-{int(time.time())}")
    os.makedirs(run_dir)
    spark = build_session(args.master, app_name, conf)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        report = body(spark, args, run_dir)
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump(report, fh, indent=2)
        print(f"\nJSON: {args.json_out}")


def run(spark: SparkSession, args: argparse.Namespace, run_dir: str) -> dict[str, Any]:
    env = environment(spark)
    meter = Meter(spark)
    print("environment: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    lake = DuckLake.create(f"duckdb:///{run_dir}/catalog.ducklake", os.path.join(run_dir, "lake") + "/")
    df = source_df(spark, args.rows, args.files)
    results: list[Result] = []
    data: dict[str, Any] = {"rows": args.rows, "columns": df.schema.simpleString()}
    if args.only in (None, "scan"):
        start = time.perf_counter()
        setup = prepare_scan(spark, lake, df)
        check_same_answer(spark, setup)
        data.update(files=setup.file_count, bytes=setup.total_bytes, prepare_s=round(time.perf_counter() - start, 2))
        print(f"scan data: {args.rows:,} rows in {setup.file_count} files, {setup.total_bytes / 2**20:,.0f} MiB")
        results += bench_scan(spark, meter, setup, args.rows, args.repeat, args.warmup)
    if args.only in (None, "write"):
        print(f"write: {args.rows:,} rows from a generated DataFrame ({args.files} partitions), op {args.write_op}")
        target = WriteTarget(spark, meter, lake, df, os.path.join(run_dir, "plain"), args.write_op)
        results.append(bench_write(target, args.repeat, args.warmup))
    lake.close()
    env["load_average_at_end"] = os.getloadavg()
    print_summary(results)
    return {"environment": env, "args": vars(args), "data": data, "results": [r.to_json() for r in results]}


if __name__ == "__main__":
    main()
