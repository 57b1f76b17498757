"""dbt-ducklake: dbt models run by Spark, stored as DuckLake tables.

The dbt plugin is loaded lazily (`Plugin`), so the format layer (`lake/`) and the Spark layer (`spark/`) import
without dbt.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "Plugin":
        from dbt.adapters.base import AdapterPlugin

        from dbt.include import ducklake

        from .credentials import DuckLakeCredentials
        from .gc_freeze import freeze_imports
        from .impl import DuckLakeAdapter

        plugin = AdapterPlugin(adapter=DuckLakeAdapter, credentials=DuckLakeCredentials,  # type: ignore[arg-type]
                               include_path=ducklake.PACKAGE_PATH, dependencies=["spark"])
        globals()["Plugin"] = plugin
        freeze_imports()  # full collections skip the modules from now on (gc_freeze)
        return plugin
    raise AttributeError(name)
