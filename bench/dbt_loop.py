"""The dbt loop: seed + run + test of a generated project, our adapter beside dbt-duckdb.

The project has `--seeds` seeds, `--models` models cycling through table, view, incremental (merge) and ephemeral,
and `--tests` data tests (not_null / unique / accepted_values spread over the models). Each variant runs
`dbt seed`, `dbt run`, `dbt test` as separate processes, in the same run, so load on the shared machine hits all
alike:

- `ducklake` ("cold"): `--master` (default local[2]), a new JVM per invocation;
- `ducklake-warm`: `master: local-server[N]` (N from `--master`), the warm local server of the adapter: one untimed
  `dbt debug` starts it first (its time is reported as `server_start_s`), then the three phases reuse it; stopped at
  the end (its directory is under the work directory, not ~/.cache);
- `duckdb`: dbt-duckdb (installed by hand: `.venv/bin/pip install -c constraints.txt dbt-duckdb==1.11.1`).

Per node times come from each phase's run_results.json.

    .venv/bin/python -m bench.dbt_loop                        # 50 seeds, 52 models, 104 tests; all three variants
    .venv/bin/python -m bench.dbt_loop --seeds 3 --models 8 --tests 8   # a quick smoke run
    .venv/bin/python -m bench.dbt_loop --only ducklake-warm
    .venv/bin/python -m bench.dbt_loop --only ducklake --master sc://localhost:15002   # a Connect server already up
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
from typing import Any

from bench.suite_project import MODELS, test_class, write_suite_project

KINDS = ["table", "view", "incremental", "ephemeral"]
PHASES = ["seed", "run", "test"]
VARIANTS = ["ducklake", "ducklake-warm", "duckdb"]


def write_project(root: Path, adapter: str, seeds: int, models: int, tests: int, master: str,
                  output: str | None = None, project_extra: str = "") -> None:
    """A project of `seeds` 20-row seeds, `models` models over them and `tests` data tests, for `adapter`.

    `output` (YAML) replaces the profile's target for another adapter (bench/peers.py: dbt-spark), and
    `project_extra` is appended to dbt_project.yml (e.g. `models:`/`seeds:` configs such as `file_format`)."""
    (root / "seeds").mkdir(parents=True)
    (root / "models").mkdir()
    (root / "dbt_project.yml").write_text(
        'name: loop\nversion: "1.0"\nconfig-version: 2\nprofile: loop\n'
        'seed-paths: ["seeds"]\nmodel-paths: ["models"]\n' + project_extra)
    if output is not None:
        out = output
    elif adapter == "ducklake":
        out = (f'type: ducklake\ncatalog: "{root}/lake/catalog.ducklake"\ndata_path: "{root}/lake/data/"\n'
               f'schema: main\nmaster: "{master}"\nthreads: 1\n'
               'spark_config:\n  spark.sql.shuffle.partitions: "2"\n')
    else:
        out = f'type: duckdb\npath: "{root}/loop.duckdb"\nschema: main\nthreads: 1\n'
    body = "".join("      " + line + "\n" for line in out.splitlines())
    (root / "profiles.yml").write_text(f"loop:\n  target: dev\n  outputs:\n    dev:\n{body}")
    for s in range(seeds):
        rows = "\n".join(f"{i},name_{i % 7},{i * 1.5},{['a', 'b', 'c'][i % 3]}" for i in range(20))
        (root / "seeds" / f"seed_{s}.csv").write_text("id,name,amount,kind\n" + rows + "\n")
    tested: list[str] = []
    for m in range(models):
        kind = KINDS[m % len(KINDS)]
        seed = f"seed_{m % max(seeds, 1)}"
        if kind == "incremental":
            cfg = "{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id') }}"
            sql = f"{cfg}\nselect id, name, amount, kind from {{{{ ref('{seed}') }}}}\n"
        elif kind == "ephemeral":
            sql = f"{{{{ config(materialized='ephemeral') }}}}\nselect id, amount * 2 as amount2 from {{{{ ref('{seed}') }}}}\n"
        else:
            src = f"ref('{seed}')" if m < 4 or kind == "table" else f"ref('model_{m - 4}')"
            if m >= 4 and KINDS[(m - 4) % len(KINDS)] == "ephemeral":
                src = f"ref('{seed}')"
            sql = f"{{{{ config(materialized='{kind}') }}}}\nselect id, name, amount, kind from {{{{ {src} }}}}\n"
        (root / "models" / f"model_{m}.sql").write_text(sql)
        if kind != "ephemeral":
            tested.append(f"model_{m}")
    checks = [("id", "not_null"), ("id", "unique"), ("name", "not_null"),
              ("kind", "accepted_values:\n              arguments:\n                values: ['a', 'b', 'c']")]
    cols: dict[str, dict[str, list[str]]] = {}
    for t in range(tests):
        model = tested[t % len(tested)]
        col, test = checks[(t // len(tested)) % len(checks)]
        cols.setdefault(model, {}).setdefault(col, []).append(test)
    lines = ["version: 2", "models:"]
    for model, by_col in cols.items():
        lines += [f"  - name: {model}", "    columns:"]
        for col, ts in by_col.items():
            lines += [f"      - name: {col}", "        data_tests:"] + [f"          - {t}" for t in ts]
    (root / "models" / "schema.yml").write_text("\n".join(lines) + "\n")


def run_phase(root: Path, phase: str, env: dict[str, str] | None = None, python: str | None = None
              ) -> dict[str, Any]:
    """One dbt invocation in a fresh process (of `python`'s dbt, default this interpreter's); wall time and per-node
    times from run_results.json."""
    cmd = ([python, "-c", "from dbt.cli.main import cli; cli()"] if python
           else [str(Path(sys.executable).parent / "dbt")])
    t0 = time.perf_counter()
    proc = subprocess.run([*cmd, phase, "--project-dir", str(root), "--profiles-dir", str(root), "--quiet"],
                          capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"dbt {phase} failed in {root}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    if phase == "debug":
        return {"wall_s": wall, "nodes": {}}
    results = json.loads((root / "target" / "run_results.json").read_text())["results"]
    nodes = {r["unique_id"]: r["execution_time"] for r in results}
    return {"wall_s": wall, "nodes": nodes}


def test_kind(uid: str) -> str | None:
    """A data test's generic test (not_null, unique, accepted_values, relationships, other), from its unique id."""
    if not uid.startswith("test."):
        return None
    name = uid.split(".")[2]
    return next((k for k in ("not_null", "unique", "accepted_values", "relationships") if name.startswith(k)), "other")


def median_of(nodes: dict[str, float], prefix: str, names: set[str] | None = None) -> float | None:
    xs = [t for uid, t in nodes.items() if uid.startswith(prefix) and (names is None or uid.split(".")[-1] in names)]
    return statistics.median(xs) if xs else None


def warm_master(master: str) -> str:
    """local-server[N] with the cores of a local[N] master (local[*] -> local-server)."""
    if master.startswith("local[") and master.endswith("]"):
        return f"local-server{master[len('local'):]}"
    raise SystemExit(f"--master {master!r}: the warm variant runs a local server; give local[N] or local[*]")


def profile_output(variant: str, root: Path, master: str) -> str:
    """The profile's target (YAML) of a variant."""
    if variant == "duckdb":
        return f'type: duckdb\npath: "{root}/loop.duckdb"\nschema: main\nthreads: 1\n'
    if variant == "ducklake-warm":
        master = warm_master(master)
    return (f'type: ducklake\ncatalog: "{root}/lake/catalog.ducklake"\ndata_path: "{root}/lake/data/"\n'
            f'schema: main\nmaster: "{master}"\nthreads: 1\nserver_idle_timeout: 900\n'
            'spark_config:\n  spark.sql.shuffle.partitions: "2"\n')


def summary(variant: str, phases: dict[str, dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Per-phase wall and node times of one round, and the medians of nodes by kind."""
    out: dict[str, Any] = {
        "phases_s": {p: round(v["wall_s"], 2) for p, v in phases.items()},
        # the nodes' own time (dbt's execution_time summed): the rest of a phase is the process, dbt's parse, and
        # the adapter's start (JVM or server connection, first catalog load)
        "nodes_s": {p: round(sum(v["nodes"].values()), 2) for p, v in phases.items()},
        "total_s": round(sum(v["wall_s"] for v in phases.values()), 2),
        "median_seed_s": median_of(phases["seed"]["nodes"], "seed."),
    }
    tests = phases["test"]["nodes"]
    if args.project == "suite":
        runs = phases["run"]["nodes"]
        out["median_model_s"] = {kind: median_of({u: t for u, t in runs.items() if suite_kind(u) == kind}, "model.")
                                 for kind in ("view", "table", "incremental")}
        for cls in ("stats", "sql", "unit"):
            xs = [t for u, t in tests.items() if test_class(u) == cls]
            out[f"tests_{cls}"] = {"n": len(xs), "sum_s": round(sum(xs), 2),
                                   "median_s": round(statistics.median(xs), 4) if xs else None}
        return out
    tables = {f"model_{m}" for m in range(args.models) if KINDS[m % 4] == "table"}
    out["median_test_node_s"] = median_of(tests, "test.")
    # per generic test: a not_null test the statistics answer needs no Spark job
    out["median_test_node_s_by_test"] = {k: median_of({u: t for u, t in tests.items() if test_kind(u) == k}, "test.")
                                         for k in ("not_null", "unique", "accepted_values")}
    out["median_table_model_s"] = median_of(phases["run"]["nodes"], "model.", tables)
    return out


def suite_kind(uid: str) -> str:
    """A suite model's materialization, from its name."""
    base = uid.split(".")[-1].rsplit("_", 1)[0]
    return MODELS[base][0] if base in MODELS else "?"


def run_round(work: Path, variants: list[str], args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """One round: a new project per variant, then each phase run by every variant in turn (interleaved, so that a
    change of the machine's load falls on all alike); the warm variant's server is started first (untimed) and
    stopped at the end."""
    envs: dict[str, dict[str, str] | None] = {}
    pythons: dict[str, str | None] = {}
    out: dict[str, dict[str, Any]] = {}
    for variant in variants:
        root = work / variant
        adapter = "duckdb" if variant == "duckdb" else "ducklake"
        if args.project == "suite":
            write_suite_project(root, profile_output(variant, root, args.master), args.copies)
        else:
            master = warm_master(args.master) if variant == "ducklake-warm" else args.master
            write_project(root, adapter, args.seeds, args.models, args.tests, master)
        env = {**os.environ}
        if variant == "duckdb":
            env.pop("PYTHONPATH", None)  # dbt-duckdb's own interpreter and packages
            pythons[variant] = args.duckdb_python
        else:
            pythons[variant] = None
        if variant == "ducklake-warm":
            env["DBT_DUCKLAKE_SERVER_DIR"] = str(work / "servers")
        envs[variant] = env
        out[variant] = {}
    phases: dict[str, dict[str, dict[str, Any]]] = {v: {} for v in variants}
    try:
        if "ducklake-warm" in variants:
            out["ducklake-warm"]["server_start_s"] = round(
                run_phase(work / "ducklake-warm", "debug", envs["ducklake-warm"])["wall_s"], 2)
        for phase in PHASES:
            for variant in variants:
                phases[variant][phase] = run_phase(work / variant, phase, envs[variant], pythons[variant])
    finally:
        if "ducklake-warm" in variants:
            from dbt.adapters.ducklake.spark.env.local_server import stop_all

            stop_all(str(work / "servers"))
    for variant in variants:
        out[variant].update(summary(variant, phases[variant], args))
        out[variant]["_nodes"] = {p: v["nodes"] for p, v in phases[variant].items()}
    return out


def table(rounds: list[dict[str, dict[str, Any]]], variants: list[str]) -> str:
    """A markdown table: per variant, the medians over rounds of the phases, total and test medians; ratios are
    medians of each round's ratio to dbt-duckdb's figure of the same round."""
    def med(xs: list[float]) -> float:
        return statistics.median(xs)

    def cell(v: str, get: Any) -> str:
        xs = [get(r[v]) for r in rounds]
        s = f"{med(xs):.2f} s"
        if v != "duckdb" and "duckdb" in rounds[0]:
            s += f" ({med([get(r[v]) / get(r['duckdb']) for r in rounds]):.2f}x)"
        return s

    rows = [("seed", lambda a: a["phases_s"]["seed"]), ("run", lambda a: a["phases_s"]["run"]),
            ("test", lambda a: a["phases_s"]["test"]), ("total", lambda a: a["total_s"])]
    lines = ["| | " + " | ".join(variants) + " |", "| --- " + "| ---: " * len(variants) + "|"]
    for name, get in rows:
        lines.append(f"| {name} | " + " | ".join(cell(v, get) for v in variants) + " |")
    if "tests_sql" in rounds[0][variants[0]]:
        for cls in ("sql", "stats", "unit"):
            lines.append(f"| median {cls} test (n={rounds[0][variants[0]][f'tests_{cls}']['n']}) | " + " | ".join(
                f"{med([r[v][f'tests_{cls}']['median_s'] for r in rounds]):.3f} s" for v in variants) + " |")
    lines.append("| median seed | " + " | ".join(
        f"{med([r[v]['median_seed_s'] for r in rounds]):.3f} s" for v in variants) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--project", choices=["loop", "suite"], default="loop",
                    help="loop: the generated project of --seeds/--models/--tests; suite: bench/suite_project.py")
    ap.add_argument("--copies", type=int, default=5, help="suite: copies of its shop (5 seeds, 8 models, 22 tests)")
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--models", type=int, default=52)
    ap.add_argument("--tests", type=int, default=104)
    ap.add_argument("--only", action="append", choices=VARIANTS, help="a variant to run (repeatable; default all)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--duckdb-python", default=None,
                    help="an interpreter with dbt-duckdb installed (default: this one's dbt)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds, each on new projects")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dbt_loop-", dir=args.workdir))
    variants = [v for v in VARIANTS if not args.only or v in args.only]
    report: dict[str, Any] = {"load_start": os.getloadavg(), "params": vars(args), "rounds": []}
    for r in range(args.repeat):
        report["rounds"].append(run_round(work / f"round{r}", variants, args))
    last = report["rounds"][-1]
    for variant in ("ducklake", "ducklake-warm"):
        if variant in last and "duckdb" in last:
            report[f"ratio_total_{variant}"] = [round(rd[variant]["total_s"] / rd["duckdb"]["total_s"], 2)
                                                for rd in report["rounds"]]
    report["load_end"] = os.getloadavg()
    nodes = [{v: a.pop("_nodes") for v, a in rd.items()} for rd in report["rounds"]]
    print(json.dumps(report, indent=2))
    print(table(report["rounds"], variants))
    print(f"load average: start {report['load_start'][0]:.1f}, end {report['load_end'][0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({**report, "nodes": nodes}, indent=2))


if __name__ == "__main__":
    main()
