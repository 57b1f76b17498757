"""The install paths the README gives a user, with real processes.

The venv the README's set-up builds (scripts/setup.sh, which CI runs first) lists the adapter in `dbt --version` and
offers it in `dbt init`, whose profile template writes a working ducklake profile. A wheel built from the project
installs into a fresh virtualenv at the tested versions (constraints.txt) and dbt lists the plugin there. DuckDB
opens a lake offline exactly as the README's snippet says: the extension loaded by path from its wheel, automatic
installs and loads off, no network and no extension cache."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from dbt.adapters.ducklake.lake import Column, DuckLake, write_data_files

ROOT = Path(__file__).resolve().parents[2]
DBT = os.path.join(os.path.dirname(sys.executable), "dbt")
DBT_ENV = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}


def test_dbt_version_lists_ducklake(tmp_path: Path) -> None:
    out = subprocess.run([DBT, "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=DBT_ENV)
    assert "- ducklake: 0.1.0" in out.stdout.replace("  ", " ") or "ducklake: 0.1.0" in out.stdout, out.stdout


def test_dbt_init_offers_ducklake_and_writes_its_profile(tmp_path: Path) -> None:
    # the adapters are offered sorted by name: ducklake comes before spark; then the template's defaults
    answers = "1\n" + "\n" * 10
    out = subprocess.run([DBT, "init", "shop"], cwd=tmp_path, input=answers, capture_output=True, text=True,
                         timeout=120, env={**DBT_ENV, "HOME": str(tmp_path)})
    assert "[1] ducklake" in out.stdout, out.stdout + out.stderr
    profile = yaml.safe_load((tmp_path / ".dbt" / "profiles.yml").read_text())["shop"]["outputs"]["dev"]
    assert profile == {"type": "ducklake", "catalog": "metadata.ducklake", "data_path": "data/", "schema": "main",
                       "master": "auto", "threads": 4}
    assert (tmp_path / "shop" / "dbt_project.yml").exists()


@pytest.mark.slow
def test_a_wheel_installs_into_a_fresh_venv_and_dbt_lists_the_plugin(tmp_path: Path) -> None:
    # build from a copy of what the wheel holds, so the build's own folders never land in the checkout
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "dbt", src / "dbt", ignore=shutil.ignore_patterns("__pycache__"))
    started = time.monotonic()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(src)], check=True,
                   timeout=300, capture_output=True)
    wheels = list((tmp_path / "dist").glob("dbt_ducklake-*-py3-none-any.whl"))
    assert len(wheels) == 1, wheels
    # a fresh venv; this interpreter's pip installs into it (no pip of its own to set up, no byte-compiling)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([*pip, "--python", str(python), "install", "-q", "--no-compile", "-c", str(ROOT / "constraints.txt"),
                    str(wheels[0])], check=True, timeout=600, capture_output=True)
    out = subprocess.run([str(venv / "bin" / "dbt"), "--version"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, env=DBT_ENV)
    assert re.search(r"- ducklake: +0\.1\.0", out.stdout), out.stdout + out.stderr
    # the package came from the wheel, not from this checkout
    where = subprocess.run([str(python), "-c", "import dbt.adapters.ducklake as m; print(m.__file__)"],
                           capture_output=True, text=True, check=True, timeout=120).stdout
    assert where.startswith(str(venv)), where
    print(f"wheel build + fresh venv install + dbt --version: {time.monotonic() - started:.1f} s")


def readme_block(marker: str) -> str:
    """The fenced code block right after `<!-- marker -->` in the README."""
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"<!-- {re.escape(marker)} -->\n```\w*\n(.*?)\n```", text, re.S)
    assert m, f"no fenced block after <!-- {marker} --> in README.md"
    return m.group(1)


def test_duckdb_opens_a_lake_offline_as_the_readme_says(tmp_path: Path) -> None:
    # a lake as the README's first project leaves it: main.orders in metadata.ducklake, files in data/
    lake = DuckLake.create(str(tmp_path / "metadata.ducklake"), str(tmp_path / "data") + "/")
    with lake.transaction(author="readme", commit_message="orders") as tx:
        tx.create_table("main", "orders", [Column(0, "id", "int64"), Column(0, "amount", "int64")])
    table = lake.snapshot().table("main", "orders")
    rows = pa.table({"id": pa.array(range(5), pa.int64()), "amount": pa.array(range(0, 50, 10), pa.int64())})
    with lake.transaction(author="readme", commit_message="orders rows") as tx:
        tx.add_data_files("main", "orders", write_data_files(table, lake.snapshot().table_path(table), rows))
    lake.close()
    script = tmp_path / "open_lake.py"
    script.write_text(readme_block("readme-duckdb-offline") + "\n")
    home = tmp_path / "home"  # no ~/.duckdb/extensions to fall back on
    home.mkdir()
    dead = "http://127.0.0.1:9"  # any download would fail at once
    env = {**os.environ, "HOME": str(home), "http_proxy": dead, "https_proxy": dead, "HTTP_PROXY": dead,
           "HTTPS_PROXY": dead, "no_proxy": "", "NO_PROXY": ""}
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"│\s+4 │\s+40 │", out.stdout), out.stdout
    assert "orders rows" in out.stdout
    assert not (home / ".duckdb").exists()
