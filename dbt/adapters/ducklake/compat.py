"""What differs between the versions of pyspark and dbt this adapter runs on, kept in one place.

Versions are read from the installed distributions' metadata, not by importing them: the check has to run before the
modules that need Spark 4 are imported (on Spark 3.5 those imports fail with an ImportError that names a module, not
the cause).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import metadata

# The pyspark minors the test matrix runs (README's compatibility table); older ones are refused, newer ones are
# tried (a new minor has so far kept the APIs used here).
SPARK_MIN = (4, 0)
SPARK_TESTED_MAX = (4, 3)
# dbt-core minors the test matrix runs, each with the dbt-spark of the same minor
DBT_MIN = (1, 9)
DBT_TESTED_MAX = (1, 11)


def _minor(version: str) -> tuple[int, int]:
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


@cache
def installed(dist: str) -> str | None:
    """The installed version of a distribution (None when it is not installed)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def spark_minor() -> tuple[int, int]:
    return _minor(installed("pyspark") or "0.0")


def dbt_minor() -> tuple[int, int]:
    return _minor(installed("dbt-core") or "0.0")


def refusal() -> str | None:
    """One line saying why this environment cannot run the adapter (None when it can)."""
    spark = installed("pyspark")
    if spark is None:
        return "dbt-ducklake needs pyspark 4.0 to 4.3, and pyspark is not installed"
    if spark_minor() < SPARK_MIN:
        # Spark 3.5 has neither Python data sources (pyspark.sql.datasource: the lake's first reads) nor the classic
        # DataFrame module (pyspark.sql.classic: file pruning of Python models); both are in every read path.
        return (f"dbt-ducklake needs pyspark 4.0 to 4.3, and pyspark {spark} is installed: Spark 3.5 lacks the "
                "Python data source API the lake reads go through (pip install 'pyspark>=4.0,<4.4')")
    dbt = installed("dbt-core")
    if dbt is not None and dbt_minor() < DBT_MIN:
        return f"dbt-ducklake needs dbt-core 1.9 to 1.11, and dbt-core {dbt} is installed"
    return None
