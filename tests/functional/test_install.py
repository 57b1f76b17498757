"""The venv the README's set-up builds (scripts/setup.sh, which CI runs first) lists the adapter in `dbt --version`
and offers it in `dbt init`, whose profile template writes a working ducklake profile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

DBT = os.path.join(os.path.dirname(sys.executable), "dbt")


def test_dbt_version_lists_ducklake(tmp_path: Path) -> None:
    out = subprocess.run([DBT, "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"})
    assert "- ducklake: 0.1.0" in out.stdout.replace("  ", " ") or "ducklake: 0.1.0" in out.stdout, out.stdout


def test_dbt_init_offers_ducklake_and_writes_its_profile(tmp_path: Path) -> None:
    # the adapters are offered sorted by name: ducklake comes before spark; then the template's defaults
    answers = "1\n" + "\n" * 10
    out = subprocess.run([DBT, "init", "shop"], cwd=tmp_path, input=answers, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "HOME": str(tmp_path), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"})
    assert "[1] ducklake" in out.stdout, out.stdout + out.stderr
    profile = yaml.safe_load((tmp_path / ".dbt" / "profiles.yml").read_text())["shop"]["outputs"]["dev"]
    assert profile == {"type": "ducklake", "catalog": "metadata.ducklake", "data_path": "data/", "schema": "main",
                       "master": "local[*]", "threads": 4}
    assert (tmp_path / "shop" / "dbt_project.yml").exists()
