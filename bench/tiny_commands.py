"""What one dbt command costs on a tiny project: the embedded driver, the warm local server, dbt-duckdb.

A project of one seed (20 rows), three models (a view, a table, an incremental merge) and five tests (four generic,
one singular); each command (`debug`, `seed`, `run`, `test`, `show --inline`, `run` again) is a new dbt process,
timed from start to exit, `--repeat` times (median). Variants:

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


def measure(variant: str, python: str, repeat: int, workdir: Path) -> dict[str, float]:
    times: dict[str, list[float]] = {}
    for r in range(repeat):
        root = workdir / f"{variant}{r}"
        shutil.rmtree(root, ignore_errors=True)
        project = _project(root, variant)
        if variant == "warm":
            _dbt(python, project, ["debug"])  # starts the server: later commands join it
        for i, args in enumerate(COMMANDS):
            times.setdefault(f"{i + 1}. {' '.join(args[:1])}", []).append(_dbt(python, project, args))
    out = {k: round(statistics.median(v), 2) for k, v in times.items()}
    out["total"] = round(sum(out.values()), 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="embedded,warm,duckdb")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duckdb-python", default=None, help="an interpreter with dbt-duckdb installed")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    report: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="tiny-commands-") as tmp:
        for variant in args.variants.split(","):
            if variant == "duckdb" and not args.duckdb_python:
                continue
            python = args.duckdb_python if variant == "duckdb" else sys.executable
            report[variant] = measure(variant, python, args.repeat, Path(tmp))
    rows = list(next(iter(report.values())))
    print("| command | " + " | ".join(report) + (" | embedded / duckdb | warm / duckdb |" if "duckdb" in report else ""))
    print("| --- " * (len(report) + 1 + (2 if "duckdb" in report else 0)) + "|")
    for row in rows:
        cells = [f"{report[v][row]:.2f}" for v in report]
        if "duckdb" in report:
            for v in ("embedded", "warm"):
                cells.append(f"{report[v][row] / report['duckdb'][row]:.1f}x" if v in report else "")
        print(f"| {row} | " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
