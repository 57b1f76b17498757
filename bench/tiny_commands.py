"""What one dbt command costs on a tiny project: the embedded driver, the warm local server, dbt-duckdb.

A project of one seed (20 rows), three models (a view, a table, an incremental merge) and five tests (four generic,
one singular); each command (`debug`, `seed`, `run`, `test`, `show --inline`, `run` again) is a new dbt process,
timed from start to exit, `--repeat` times (median). The variants run each command in turn, so that a change of
the machine's load falls on all of them alike, and each ratio is the median of a variant's time over dbt-duckdb's
for the same command in the same round. Variants:

- `embedded`: `master: local[2]`, a Spark driver JVM per command (what CI-style runs use);
- `warm`: `master: local-server[2]`, the driver kept between commands (one warm-up command first);
- `duckdb`: dbt-duckdb on a DuckDB file, from the interpreter given with `--duckdb-python` (a virtualenv with
  `dbt-duckdb==1.11.1`; left out without it).

    .venv/bin/python -m bench.tiny_commands --duckdb-python /tmp/ddvenv/bin/python
    .venv/bin/python -m bench.tiny_commands --repeat 1 --variants embedded,warm
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = [["debug"], ["seed"], ["run"], ["test"], ["show", "--inline", "select count(*) as n from {{ ref('t') }}"],
            ["run"]]
MODELS = {
    "v.sql": "{{ config(materialized='view') }}\nselect id, name, amount from {{ ref('people') }} where amount > 1",
    "t.sql": "{{ config(materialized='table') }}\nselect name, sum(amount) as total from {{ ref('v') }} group by name",
    "inc.sql": "{{ config(materialized='incremental', unique_key='id') }}\nselect id, amount * 2 as doubled "
               "from {{ ref('people') }}",
    "schema.yml": "version: 2\nmodels:\n  - name: t\n    columns:\n      - name: name\n"
                  "        data_tests: [not_null, unique]\n  - name: inc\n    columns:\n      - name: id\n"
                  "        data_tests: [not_null, unique]\n",
}
SINGULAR = "select * from {{ ref('t') }} where total < 0"


def _project(root: Path, variant: str) -> Path:
    for sub in ("models", "seeds", "tests"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "dbt_project.yml").write_text("name: tiny\nversion: '1.0'\nprofile: tiny\nconfig-version: 2\n")
    (root / "seeds" / "people.csv").write_text(
        "id,name,amount\n" + "".join(f"{i},name{i % 5},{i}\n" for i in range(20)))
    for name, text in MODELS.items():
        (root / "models" / name).write_text(text)
    (root / "tests" / "no_negative.sql").write_text(SINGULAR)
    if variant == "duckdb":
        out = f"type: duckdb\n      path: '{root}/tiny.duckdb'\n      schema: main\n"
    else:
        master = "local[2]" if variant == "embedded" else "local-server[2]"
        out = (f"type: ducklake\n      catalog: '{root}/lake/metadata.ducklake'\n      data_path: '{root}/lake/data/'\n"
               f"      schema: main\n      master: '{master}'\n      server_idle_timeout: 300\n")
    (root / "profiles.yml").write_text(f"tiny:\n  target: dev\n  outputs:\n    dev:\n      {out}      threads: 1\n")
    return root


def _dbt(python: str, project: Path, args: list[str]) -> float:
    env = {**os.environ, "DBT_PROFILES_DIR": str(project), "PYSPARK_PYTHON": python}
    start = time.perf_counter()
    done = subprocess.run([python, "-c", "from dbt.cli.main import cli; cli()", *args, "--project-dir", str(project)],
                          cwd=project, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"dbt {' '.join(args)} failed:\n{done.stdout[-3000:]}")
    return took


def measure(variants: dict[str, str], repeat: int, workdir: Path) -> tuple[dict[str, dict[str, float]],
                                                                        dict[str, dict[str, float]]]:
    """Each command of each repetition run by every variant in turn (interleaved: a change of the machine's load
    falls on all variants alike), a new project per repetition. Returns the median seconds per variant and command,
    and per variant the median of its time divided by the time dbt-duckdb took for the same command just before or
    after it (when the duckdb variant runs)."""
    times: dict[str, dict[str, list[float]]] = {v: {} for v in variants}
    ratios: dict[str, dict[str, list[float]]] = {v: {} for v in variants if v != "duckdb"}
    for r in range(repeat):
        projects = {}
        for variant, python in variants.items():
            root = workdir / f"{variant}{r}"
            shutil.rmtree(root, ignore_errors=True)
            projects[variant] = _project(root, variant)
            if variant == "warm":
                _dbt(python, projects[variant], ["debug"])  # starts the server: later commands join it
        for i, args in enumerate(COMMANDS):
            row = f"{i + 1}. {' '.join(args[:1])}"
            took = {v: _dbt(python, projects[v], args) for v, python in variants.items()}
            for v, t in took.items():
                times[v].setdefault(row, []).append(t)
                if "duckdb" in took and v != "duckdb":
                    ratios[v].setdefault(row, []).append(t / took["duckdb"])
    medians = {v: {row: round(statistics.median(ts), 2) for row, ts in rows.items()} for v, rows in times.items()}
    for v in medians:
        medians[v]["total"] = round(sum(medians[v].values()), 2)
    paired = {v: {row: round(statistics.median(rs), 2) for row, rs in rows.items()} for v, rows in ratios.items()}
    for v in paired:
        if "duckdb" in times:
            totals = [sum(times[v][row][k] for row in times[v]) / sum(times["duckdb"][row][k] for row in times[v])
                      for k in range(repeat)]
            paired[v]["total"] = round(statistics.median(totals), 2)
    return medians, paired


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="embedded,warm,duckdb")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duckdb-python", default=None, help="an interpreter with dbt-duckdb installed")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    variants = {v: (args.duckdb_python if v == "duckdb" else sys.executable) for v in args.variants.split(",")
                if v != "duckdb" or args.duckdb_python}
    with tempfile.TemporaryDirectory(prefix="tiny-commands-") as tmp:
        report, paired = measure(variants, args.repeat, Path(tmp))
    rows = list(next(iter(report.values())))
    ours = [v for v in paired if paired[v]]
    print("| command | " + " | ".join(report) + "".join(f" | {v} / dbt-duckdb" for v in ours) + " |")
    print("| --- " * (len(report) + 1 + len(ours)) + "|")
    for row in rows:
        cells = [f"{report[v][row]:.2f} s" for v in report] + [f"{paired[v][row]:.2f}x" for v in ours]
        print(f"| {row} | " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({"median_s": report, "paired_ratio": paired}, indent=2))


if __name__ == "__main__":
    main()
