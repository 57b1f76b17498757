"""A broken Java (JAVA_HOME pointing nowhere): the model's error says why the driver did not start, not only that it
did not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.spark_cluster import REPO_ROOT

pytestmark = pytest.mark.slow


def test_the_jvm_failure_line_is_in_the_error(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "dbt_project.yml").write_text("name: java\nversion: '1.0'\nprofile: java\nconfig-version: 2\n")
    (tmp_path / "models" / "m.sql").write_text("{{ config(materialized='table') }}\nselect 1 as a")
    (tmp_path / "profiles.yml").write_text(
        "java:\n  target: dev\n  outputs:\n    dev:\n      type: ducklake\n"
        f"      catalog: '{tmp_path}/lake.ducklake'\n      data_path: '{tmp_path}/data/'\n      schema: main\n")
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-such-jdk"), "DBT_PROFILES_DIR": str(tmp_path),
           "DBT_DUCKLAKE_CLASS_ARCHIVE": "off"}
    out = subprocess.run([sys.executable, "-c", "from dbt.cli.main import cli; cli()", "run", "--project-dir",
                          str(tmp_path)], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert "before it was ready" in out.stdout and "no-such-jdk/bin/java: No such file or directory" in out.stdout, \
        out.stdout[-3000:]
