"""The version check: an unsupported pyspark or dbt-core is refused in one line, before any import fails on it."""

from __future__ import annotations

import pytest
from dbt_common.exceptions import DbtRuntimeError

import dbt.adapters.ducklake as package
from dbt.adapters.ducklake import compat


def _installed(versions: dict[str, str | None]):  # noqa: ANN202
    return lambda dist: versions.get(dist)


def test_the_installed_versions_pass() -> None:
    assert compat.refusal() is None
    assert compat.spark_minor() >= compat.SPARK_MIN
    assert compat.DBT_MIN <= compat.dbt_minor() <= compat.DBT_TESTED_MAX


@pytest.mark.parametrize("spark", ["4.0.1", "4.1.3", "4.2.1", "4.3.0"])
def test_spark_4_minors_pass(monkeypatch: pytest.MonkeyPatch, spark: str) -> None:
    monkeypatch.setattr(compat, "installed", _installed({"pyspark": spark, "dbt-core": "1.11.16"}))
    assert compat.refusal() is None


def test_spark_35_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat, "installed", _installed({"pyspark": "3.5.7", "dbt-core": "1.11.16"}))
    why = compat.refusal()
    assert why is not None and "\n" not in why
    assert "pyspark 3.5.7 is installed" in why and "pyspark>=4.0,<4.4" in why


def test_missing_pyspark_and_old_dbt_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat, "installed", _installed({"dbt-core": "1.11.16"}))
    assert "pyspark is not installed" in (compat.refusal() or "")
    monkeypatch.setattr(compat, "installed", _installed({"pyspark": "4.0.1", "dbt-core": "1.8.9"}))
    assert "dbt-core 1.8.9 is installed" in (compat.refusal() or "")


def test_loading_the_plugin_raises_the_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    # what `dbt debug` and every other command print: dbt loads the plugin before its first statement
    monkeypatch.setattr(compat, "installed", _installed({"pyspark": "3.5.7", "dbt-core": "1.11.16"}))
    with pytest.raises(DbtRuntimeError, match=r"pyspark 3\.5\.7 is installed"):
        package.__getattr__("Plugin")
