"""Where a dbt node's time goes on this adapter.

Runs the project of `bench.dbt_loop` (small by default: 10 seeds, 40 models = 10 of each of table, view, incremental,
ephemeral, 90 data tests) in this process through dbt's `dbtRunner`, one SparkSession (`--master`, default
local[2]), a DuckDB-file catalog: `dbt seed`, `dbt run`, `dbt test`, then `dbt run` again (the incremental models'
merge path, the tables' replace path). Between invocations the adapter's runtime is dropped (not the JVM), so each
invocation starts with empty name and state caches, as a new dbt process on a warm Spark would.

While dbt runs, functions of the adapter, PySpark and dbt are wrapped (module attributes replaced; the library is
not changed) to time and count, per node (`BaseRunner.safe_run`, whose span is the node's `execution_time`):

- time, exclusive (a nested call's time goes to its own category, never to two):
  `catalog` (a catalog connection held: `CatalogDB._transaction`, state loads, file-list loads), `commit`
  (`LakeWork.commit` outside its catalog time), `views` (`LakeNames.refresh`, `table_sql`, `create_view`, with the
  Spark analysis of the CREATE VIEW), `spark_jobs` (DataFrame actions and writes: collect, toArrow, count,
  DataFrameWriter.save/parquet, ...), `spark_sql` (other `SparkSession.sql`: a statement's parse and analysis, DDL),
  `route` (`router.route`: sqlglot), `cursor` (the rest of `DuckLakeCursor.execute`), `writes` (`write_files` outside
  its Spark job: footers, moves), `adapter` (adapter methods dbt calls directly: columns, relations, load_seed),
  and `dbt` = the node's time minus all of these (Jinja, macros, dbt's result handling, connection handling);
- counts: statements by routed kind, catalog connections opened and queries, state loads (`load_state`: full) and
  `DuckLake.advance` calls by outcome (unchanged / new snapshot), file-list loads, `LakeNames.refresh` calls, Spark
  view registrations (`create_view`), view SQL plans (`table_sql`), `spark.sql` calls, Spark actions, Spark jobs
  (the DAG scheduler's job ids before and after the node) and their summed duration (Spark's status store).

Prints one JSON report (per node type: median and p90 of node time, medians of the split and counts; one example
node per type with its statements) and a markdown table.

    .venv/bin/python -m bench.node_profile                             # 10 seeds, 40 models, 90 tests
    .venv/bin/python -m bench.node_profile --seeds 3 --models 8 --tests 6 --json /tmp/profile.json
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.dbt_loop import KINDS, profile_output, test_kind, write_project
from bench.suite_project import MODELS, test_class, write_suite_project

PHASES = ["seed", "run", "test", "run"]
# the exclusive time categories, in the order of the table
CATEGORIES = ["catalog", "commit", "views", "spark_jobs", "spark_sql", "route", "cursor", "writes", "adapter"]
ADAPTER = "dbt.adapters.ducklake"


class Recorder:
    """Exclusive time per category and counts, per node; a thread-local stack of open timed calls."""

    def __init__(self) -> None:
        self.node = "(outside nodes)"
        self.times: dict[str, Counter[str]] = defaultdict(Counter)
        self.counts: dict[str, Counter[str]] = defaultdict(Counter)
        self.statements: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._local = threading.local()
        self.last_kind = "?"  # the routed kind of the statement being executed
        self.job_windows: dict[str, tuple[int, int]] = {}  # node -> Spark job ids [first, next) while it ran

    def stack(self) -> list[list[Any]]:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack

    def count(self, key: str, n: int = 1) -> None:
        self.counts[self.node][key] += n

    def in_category(self, category: str) -> bool:
        return any(frame[0] == category for frame in self.stack())

    @contextlib.contextmanager
    def frame(self, category: str) -> Iterator[None]:
        """Time the block as `category`, minus the blocks nested in it (which count as their own)."""
        stack = self.stack()
        frame = [category, time.perf_counter(), 0.0]  # category, start, time of nested frames
        stack.append(frame)
        try:
            yield
        finally:
            stack.pop()
            elapsed = time.perf_counter() - frame[1]
            self.times[self.node][category] += elapsed - frame[2]
            if stack:
                stack[-1][2] += elapsed


def wrap(rec: Recorder, fn: Callable[..., Any], category: str | Callable[..., str], counter: str | None = None
         ) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed(*a: Any, **kw: Any) -> Any:
        if counter:
            rec.count(counter)
        with rec.frame(category if isinstance(category, str) else category(*a, **kw)):
            return fn(*a, **kw)

    return timed


def wrap_cm(rec: Recorder, fn: Callable[..., Any], category: str) -> Callable[..., Any]:
    """A context-manager function timed from enter to exit: the block inside counts as `category` too."""
    @functools.wraps(fn)
    @contextlib.contextmanager
    def timed(*a: Any, **kw: Any) -> Iterator[Any]:
        with rec.frame(category), fn(*a, **kw) as value:
            yield value

    return timed


class Patches:
    """Replaced attributes, restored on exit. A function is replaced wherever the adapter's modules imported it."""

    def __init__(self) -> None:
        self.saved: list[tuple[Any, str, Any]] = []

    def attr(self, owner: Any, name: str, new: Callable[[Any], Any]) -> None:
        old = getattr(owner, name)
        self.saved.append((owner, name, old))
        setattr(owner, name, new(old))

    def function(self, fn: Any, new: Callable[[Any], Any]) -> None:
        replacement = new(fn)
        for mod in list(sys.modules.values()):
            if mod is None or not getattr(mod, "__name__", "").startswith(ADAPTER):
                continue
            for name, value in list(vars(mod).items()):
                if value is fn:
                    self.saved.append((mod, name, fn))
                    setattr(mod, name, replacement)

    def restore(self) -> None:
        for owner, name, old in reversed(self.saved):
            setattr(owner, name, old)
        self.saved = []


def _first_words(sql: str, n: int = 6) -> str:
    text = re.sub(r"/\*.*?\*/", " ", sql, flags=re.S)  # dbt's query comment
    return " ".join(text.split()[:n])[:90]


_PLUMBING = (os.sep + "contextlib.py", os.sep + "node_profile.py", os.path.join("lake", "catalog.py"))


def _opener() -> str:
    """The adapter function that opened a catalog connection (the first frame past the connection plumbing)."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename.endswith(_PLUMBING) or ADAPTER.replace(".", os.sep)
                             not in f.f_code.co_filename):
        f = f.f_back  # type: ignore[assignment]
    if f is None:
        return "?"
    mod = f.f_code.co_filename.rsplit(os.sep + "ducklake" + os.sep, 1)[-1].removesuffix(".py").replace(os.sep, ".")
    return f"{mod}.{f.f_code.co_name}"


def install(rec: Recorder, spark_jobs: Callable[[], int]) -> Patches:
    """Wrap what a node's time can go to (see the module docstring)."""
    from dbt.task.base import BaseRunner
    from pyspark.sql import SparkSession
    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame
    from pyspark.sql.readwriter import DataFrameWriter

    from dbt.adapters.ducklake import change_feed, cursor, impl, router
    from dbt.adapters.ducklake.lake import lake
    from dbt.adapters.ducklake.lake.catalog import database as catalog
    from dbt.adapters.ducklake.lake.catalog import state
    from dbt.adapters.ducklake.spark.read import names, scan
    from dbt.adapters.ducklake.spark.write import staged_reads, work, write

    _ = (change_feed, staged_reads)  # imported so that their names of table_sql are found and replaced
    p = Patches()

    # statements: counted by routed kind; their inclusive time kept per statement for the examples
    def routed_kind(r: Any) -> str:
        if isinstance(r, router.Passthrough):
            words = _first_words(r.sql, 1).lower()
            return "passthrough:" + (words or "?")
        if isinstance(r, router.Change):
            return "change:" + r.kind
        if isinstance(r, router.TransactionControl):
            return "tx:" + r.action
        return type(r).__name__.lower()

    def route_new(old: Any) -> Any:
        def route(sql: str) -> Any:
            with rec.frame("route"):
                r = old(sql)
            kind = routed_kind(r)
            rec.count("statements")
            rec.count("stmt " + kind)
            rec.last_kind = kind
            return r
        return route

    p.attr(cursor, "route", route_new)

    def execute_new(old: Any) -> Any:
        def execute(self: Any, sql: str, bindings: Any = None) -> Any:
            rec.count("cursor.execute")
            t0, jobs0 = time.perf_counter(), spark_jobs()
            try:
                with rec.frame("cursor"):
                    return old(self, sql, bindings)
            finally:
                rec.statements[rec.node].append({
                    "sql": _first_words(sql), "kind": rec.last_kind,
                    "s": round(time.perf_counter() - t0, 4), "jobs": spark_jobs() - jobs0})
        return execute

    p.attr(cursor.DuckLakeCursor, "execute", execute_new)

    # a fetch runs the statement's Spark job after execute returned: its time is added to the statement's record
    def fetch_new(old: Any) -> Any:
        def fetch(self: Any, upto: int | None = None) -> Any:
            t0, jobs0 = time.perf_counter(), spark_jobs()
            try:
                with rec.frame("cursor"):
                    return old(self, upto)
            finally:
                if rec.statements[rec.node]:
                    last = rec.statements[rec.node][-1]
                    last["fetch_s"] = round(last.get("fetch_s", 0.0) + time.perf_counter() - t0, 4)
                    last["jobs"] += spark_jobs() - jobs0
        return fetch

    p.attr(cursor.DuckLakeCursor, "_fetch", fetch_new)

    # catalog: a held connection, opens, queries, state loads
    p.attr(catalog.CatalogDB, "_transaction", lambda old: wrap_cm(rec, old, "catalog"))
    def connect_new(old: Any) -> Any:
        def connect(self: Any) -> Any:
            rec.count("open@" + _opener())
            return old(self)
        return wrap(rec, connect, "catalog", "catalog opens")

    p.attr(catalog.CatalogDB, "_raw_connect", connect_new)
    p.attr(catalog.CatalogDB, "query", lambda old: wrap(rec, old, "catalog", "catalog queries"))
    p.attr(catalog.CatalogDB, "execute", lambda old: wrap(rec, old, "catalog", "catalog queries"))
    p.function(state.load_state, lambda old: wrap(rec, old, "catalog", "state loads (full)"))
    p.function(state.load_files, lambda old: wrap(rec, old, "catalog", "file-list loads"))

    def advance_new(old: Any) -> Any:
        def advance(self: Any, st: Any) -> Any:
            with rec.frame("catalog"):
                new, changed = old(self, st)
            rec.count("advance: " + ("unchanged" if new is st else "first load" if st is None else "new snapshot"))
            return new, changed
        return advance

    p.attr(lake.DuckLake, "advance", advance_new)

    # views
    p.attr(names.LakeNames, "refresh", lambda old: wrap(rec, old, "views", "names.refresh"))
    p.attr(names.LakeNames, "forget", lambda old: wrap(rec, old, "views", "view drops"))
    p.function(scan.create_view, lambda old: wrap(rec, old, "views", "view registrations"))
    p.function(scan.table_sql, lambda old: wrap(rec, old, "views", "view SQL plans (table_sql)"))

    # Spark: statements' analysis and DDL, and actions (jobs)
    def sql_category(*_a: Any, **_kw: Any) -> str:
        return "views" if rec.in_category("views") else "spark_sql"

    p.attr(SparkSession, "sql", lambda old: wrap(rec, old, sql_category, "spark.sql"))

    def action(old: Any) -> Any:
        @functools.wraps(old)
        def run(*a: Any, **kw: Any) -> Any:
            outer = rec.in_category("spark_jobs")  # take() inside head() etc.: one action
            if not outer:
                rec.count("spark actions")
            with rec.frame("spark_jobs"):
                return old(*a, **kw)
        return run

    for name in ("collect", "toArrow", "count", "toPandas", "toLocalIterator", "isEmpty", "foreach",
                 "foreachPartition"):
        p.attr(ClassicDataFrame, name, action)
    for name in ("save", "parquet", "saveAsTable", "insertInto"):
        p.attr(DataFrameWriter, name, action)

    # the adapter's writes and commits
    p.function(write.write_files, lambda old: wrap(rec, old, "writes", "write_files"))
    p.attr(work.LakeWork, "commit", lambda old: wrap(rec, old, "commit", "lake commits"))
    for name in ("get_columns_in_relation", "list_relations_without_caching", "load_seed", "list_schemas",
                 "check_schema_exists", "query_columns"):
        p.attr(impl.DuckLakeAdapter, name, lambda old, n=name: wrap(rec, old, "adapter", "adapter." + n))

    # the node: everything between attributes to it; its Spark jobs are the scheduler's job ids in between
    def safe_run_new(old: Any) -> Any:
        def safe_run(self: Any, manifest: Any) -> Any:
            prev, rec.node = rec.node, self.node.unique_id
            jobs0, t0 = spark_jobs(), time.perf_counter()
            try:
                return old(self, manifest)
            finally:
                rec.counts[rec.node]["spark jobs"] += spark_jobs() - jobs0
                rec.job_windows[rec.node] = (jobs0, spark_jobs())
                rec.times[rec.node]["(wall)"] += time.perf_counter() - t0
                rec.node = prev
        return safe_run

    p.attr(BaseRunner, "safe_run", safe_run_new)
    return p


def job_counter() -> tuple[Callable[[], int], Callable[[int, int], float]]:
    """The next Spark job id (jobs started so far), and the summed duration of the jobs with ids in [a, b)."""
    from pyspark import SparkContext

    def sc() -> Any:
        return SparkContext._active_spark_context

    def next_id() -> int:
        ctx = sc()
        if ctx is None:
            return 0
        return int(ctx._jsc.sc().dagScheduler().nextJobId())  # py4j returns the AtomicInteger as a number

    def duration(a: int, b: int) -> float:
        ctx = sc()
        total = 0.0
        if ctx is None:
            return 0.0
        store = ctx._jsc.sc().statusStore()
        for i in range(a, b):
            try:
                job = store.job(i)
                sub, done = job.submissionTime(), job.completionTime()
                if sub.isDefined() and done.isDefined():
                    total += (done.get().getTime() - sub.get().getTime()) / 1000.0
            except Exception:  # noqa: BLE001 - a job the store no longer keeps
                continue
        return total

    return next_id, duration


def node_kind(uid: str, materialized: dict[str, str], phase_index: int) -> str:
    if uid.startswith("seed."):
        return "seed"
    if uid.startswith("test.suite."):
        return f"data test ({test_class(uid)})"
    if uid.startswith("test."):
        return "data test"
    if uid.startswith("model."):
        kind = f"{materialized.get(uid, '?')} model"
        return kind + (" (rerun)" if phase_index == 3 else "")
    return uid.split(".")[0]


def pct(xs: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, int(round(q * len(s) + 0.5)) - 1))]


def summarize(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for n in nodes:
        by_kind[n["kind"]].append(n)
        if test_kind(n["unique_id"]):  # and per generic test: their paths differ (not_null may need no read)
            by_kind[f"data test ({test_kind(n['unique_id'])})"].append(n)
    out = {}
    for kind, ns in by_kind.items():
        times = [n["execution_s"] for n in ns]
        split = {c: round(statistics.median([n["split_s"].get(c, 0.0) for n in ns]), 4)
                 for c in [*CATEGORIES, "dbt", "compile", "spark_job_time"]}
        keys = sorted({k for n in ns for k in n["counts"]})
        counts = {k: statistics.median([n["counts"].get(k, 0) for n in ns]) for k in keys}
        means = {k: round(statistics.fmean([n["counts"].get(k, 0) for n in ns]), 2) for k in keys}
        example = min(ns, key=lambda n: abs(n["execution_s"] - statistics.median(times)))
        out[kind] = {"n": len(ns), "median_s": round(statistics.median(times), 4), "p90_s": round(pct(times, 0.9), 4),
                     "median_split_s": split, "median_counts": counts, "mean_counts": means,
                     "example": {"unique_id": example["unique_id"], "execution_s": example["execution_s"],
                                 "statements": example["statements"]}}
    return out


ORDER = ["seed", "table model", "view model", "incremental model", "data test", "data test (stats)",
         "data test (sql)", "unit_test", "table model (rerun)",
         "view model (rerun)", "incremental model (rerun)"]


def markdown(summary: dict[str, Any]) -> str:
    kinds = [k for k in ORDER if k in summary] + [k for k in summary if k not in ORDER]
    cols = ["catalog", "views", "spark_jobs", "spark_sql", "route", "cursor", "writes", "adapter", "dbt"]
    lines = ["| node type | n | median s | p90 s | " + " | ".join(cols) + " |",
             "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in cols) + " |"]
    for k in kinds:
        s = summary[k]
        lines.append(f"| {k} | {s['n']} | {s['median_s']:.3f} | {s['p90_s']:.3f} | "
                     + " | ".join(f"{s['median_split_s'][c]:.3f}" for c in cols) + " |")
    count_cols = [("statements", "statements"), ("cursor.execute", "execute calls"),
                  ("catalog opens", "catalog opens"), ("catalog queries", "catalog queries"),
                  ("state loads (full)", "full state loads"), ("advance: unchanged", "advance unchanged"),
                  ("advance: new snapshot", "advance new snapshot"), ("file-list loads", "file-list loads"),
                  ("names.refresh", "names.refresh"), ("view registrations", "view registrations"),
                  ("spark.sql", "spark.sql"), ("spark actions", "Spark actions"), ("spark jobs", "Spark jobs")]
    lines += ["", "| node type | " + " | ".join(c[1] for c in count_cols) + " |",
              "| --- | " + " | ".join("---:" for _ in count_cols) + " |"]
    for k in kinds:
        mc = summary[k]["median_counts"]
        lines.append(f"| {k} | " + " | ".join(f"{mc.get(c[0], 0):g}" for c in count_cols) + " |")
    return "\n".join(lines)


def reset_runtime() -> None:
    """A new dbt process on a warm Spark: the adapter's runtime (lake handle, name and state caches) starts empty."""
    from dbt.adapters.ducklake import runtime

    with runtime._LOCK:
        runtime._RUNTIMES.clear()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--models", type=int, default=40)
    # 3 data tests per tested model (bench.dbt_loop's full-size project has 104 over 52 models): most tests find their model's
    # Spark view registered by an earlier test of the same invocation
    ap.add_argument("--tests", type=int, default=90)
    ap.add_argument("--project", choices=["loop", "suite"], default="loop",
                    help="suite: bench/suite_project.py's project (--copies of its shop) instead of the generated one")
    ap.add_argument("--copies", type=int, default=2)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--keep-runtime", action="store_true", help="keep the adapter's caches between invocations")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the generated project")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")

    from dbt.cli.main import dbtRunner

    import dbt.adapters.ducklake.impl  # noqa: F401 - the adapter's modules loaded, so their imports can be patched

    work = Path(tempfile.mkdtemp(prefix="node_profile-", dir=args.workdir))
    root = work / "project"
    if args.project == "suite":
        write_suite_project(root, profile_output("ducklake", root, args.master), args.copies)
    else:
        write_project(root, "ducklake", args.seeds, args.models, args.tests, args.master)
    # the Spark UI off, this interpreter for Python workers
    profiles = (root / "profiles.yml").read_text().replace(
        'spark.sql.shuffle.partitions: "2"\n',
        f'spark.sql.shuffle.partitions: "2"\n        spark.ui.enabled: "false"\n'
        f'        spark.pyspark.python: "{sys.executable}"\n')
    (root / "profiles.yml").write_text(profiles)
    materialized = {f"model.loop.model_{m}": KINDS[m % len(KINDS)] for m in range(args.models)}
    materialized.update({f"model.suite.{name}_{k}": kind for name, (kind, _) in MODELS.items()
                         for k in range(args.copies)})

    rec = Recorder()
    next_job, job_time = job_counter()
    patches = install(rec, next_job)
    runner = dbtRunner()
    report: dict[str, Any] = {"load_start": os.getloadavg(), "params": vars(args), "phases": []}
    nodes: list[dict[str, Any]] = []
    try:
        for i, phase in enumerate(PHASES):
            if not args.keep_runtime:
                reset_runtime()
            rec.times.clear()
            rec.counts.clear()
            rec.statements.clear()
            rec.job_windows.clear()
            rec.node = f"(outside nodes: {phase})"
            t0 = time.perf_counter()
            res = runner.invoke([phase, "--project-dir", str(root), "--profiles-dir", str(root), "--quiet"])
            wall = time.perf_counter() - t0
            if not res.success:
                raise RuntimeError(f"dbt {phase} failed: {res.exception or res.result}")
            results = json.loads((root / "target" / "run_results.json").read_text())["results"]
            outside = rec.node
            report["phases"].append({
                "phase": phase, "wall_s": round(wall, 2), "nodes": len(results),
                "outside_nodes": {"times_s": {k: round(v, 3) for k, v in rec.times[outside].items()},
                                  "counts": dict(rec.counts[outside])}})
            for r in results:
                uid = r["unique_id"]
                t = rec.times[uid]
                split = {c: t.get(c, 0.0) for c in CATEGORIES}
                split["dbt"] = r["execution_time"] - sum(split.values())
                split["compile"] = sum(
                    (_ts(x["completed_at"]) - _ts(x["started_at"])) for x in r.get("timing", []) if x["name"] == "compile")
                a, b = rec.job_windows.get(uid, (0, 0))
                split["spark_job_time"] = job_time(a, b)
                counts = dict(rec.counts[uid])
                nodes.append({"unique_id": uid, "phase": f"{i}:{phase}", "kind": node_kind(uid, materialized, i),
                              "status": r["status"], "execution_s": round(r["execution_time"], 4),
                              "split_s": {k: round(v, 4) for k, v in split.items()}, "counts": counts,
                              "statements": rec.statements[uid]})
    finally:
        patches.restore()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    report["load_end"] = os.getloadavg()
    report["summary"] = summarize(nodes)
    report["nodes"] = nodes
    report["markdown"] = markdown(report["summary"])
    text = json.dumps({k: v for k, v in report.items() if k != "nodes"}, indent=2)
    print(text)
    print(report["markdown"])
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


def _ts(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


if __name__ == "__main__":
    main()
