"""dbt-ducklake: dbt models run by Spark, stored as DuckLake tables.

The dbt plugin is loaded lazily (`Plugin`), so the format layer (`lake/`) and the Spark layer (`spark/`) import
without dbt.
"""

from __future__ import annotations

import gc
from typing import Any


def __getattr__(name: str) -> Any:
    if name == "Plugin":
        from .compat import refusal

        # before the imports below, which fail on an unsupported pyspark with an ImportError that hides the cause
        why = refusal()
        if why is not None:
            from dbt_common.exceptions import DbtRuntimeError

            raise DbtRuntimeError(why)
        # the imports make ~150k objects that live as long as the process: no collection looks for garbage among
        # them (0.26 s of collections per dbt command), and full collections skip them from then on (gc_freeze).
        # dbt loads its plugins in its main thread before any other thread of ours runs.
        collecting = gc.isenabled()
        gc.disable()
        try:
            from dbt.adapters.base import AdapterPlugin

            from dbt.include import ducklake

            from .credentials import DuckLakeCredentials
            from .gc_freeze import freeze_imports
            from .impl import DuckLakeAdapter

            plugin = AdapterPlugin(adapter=DuckLakeAdapter, credentials=DuckLakeCredentials,  # type: ignore[arg-type]
                                   include_path=ducklake.PACKAGE_PATH, dependencies=["spark"])
            freeze_imports()
        finally:
            if collecting:
                gc.enable()
        globals()["Plugin"] = plugin
        return plugin
    raise AttributeError(name)
