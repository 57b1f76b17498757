"""What the connections of one dbt process share: the SparkSession, the lake, and the lake's names in Spark.

A SparkSession is a process-wide singleton in PySpark (one SparkContext per JVM), so dbt's threads share one; so do
the lake handle (connections to the catalog open per operation) and the registry of Spark views. Keyed by the
profile's catalog, data path and Spark settings; created on the first connection and kept for the process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from .change_feed import Cursors
from .credentials import DuckLakeCredentials
from .lake.lake import DuckLake
from .lake.paths import to_local
from .spark.names import LakeNames
from .spark.session import build_session, connect_session


@dataclass
class Runtime:
    spark: SparkSession
    lake: DuckLake
    names: LakeNames
    cursors: Cursors = field(default_factory=Cursors)  # change-feed cursors waiting for their model's commit


_LOCK = threading.Lock()
_RUNTIMES: dict[tuple, Runtime] = {}


class SetupError(RuntimeError):
    """One part of the profile does not work: says which (Spark, the catalog, the data path) and why."""


@contextlib.contextmanager
def _component(what: str, creds: DuckLakeCredentials) -> Iterator[None]:
    try:
        yield
    except Exception as e:  # noqa: BLE001 - any failure here is reported as this part's
        raise SetupError(creds.redact(f"{what} does not work: {e}")) from None  # the cause may hold secrets


def _quiet_spark_logs() -> None:
    # PySpark 4 logs a full stack trace for every failed query; dbt reports the error itself
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    logging.getLogger("py4j").setLevel(logging.ERROR)


def runtime_for(creds: DuckLakeCredentials) -> Runtime:
    key = (creds.catalog, os.path.abspath(creds.data_path) if "://" not in creds.data_path else creds.data_path,
           creds.master, tuple(sorted(creds.spark_config.items())))
    with _LOCK:
        rt = _RUNTIMES.get(key)
        if rt is None:
            _quiet_spark_logs()
            with _component(f"the data path {creds.data_path!r}", creds):
                _make_local_dirs(creds)
            with _component(f"the catalog {creds.catalog_display!r}", creds):
                lake = DuckLake.open_or_create(creds.catalog_location(), creds.data_path)
            with _component(f"Spark (master {creds.master!r})", creds):
                spark = _spark(creds)
            rt = Runtime(spark, lake, LakeNames(spark, lake))
            _RUNTIMES[key] = rt
        return rt


def _make_local_dirs(creds: DuckLakeCredentials) -> None:
    """The embedded default writes a catalog file and a data folder: create their directories, as DuckDB's ATTACH
    creates its file (a server catalog or a remote data path is left alone)."""
    loc = creds.catalog_location()
    if loc.file_path and loc.file_path != ":memory:":
        os.makedirs(os.path.dirname(os.path.abspath(loc.file_path)), exist_ok=True)
    if "://" not in creds.data_path or creds.data_path.startswith("file://"):
        os.makedirs(to_local(creds.data_path), exist_ok=True)


def _spark(creds: DuckLakeCredentials) -> SparkSession:
    # ANSI off as dbt-spark sets it: its macros (and users' Spark SQL) expect Spark's classic casts
    conf = {"spark.pyspark.python": sys.executable, "spark.ui.enabled": "false", "spark.sql.ansi.enabled": "false",
            "spark.sql.shuffle.partitions": "8", **creds.spark_config}
    if creds.master.startswith("sc://"):
        return connect_session(creds.master, conf)
    spark = build_session(creds.master, "dbt-ducklake", conf)
    spark.sparkContext.setLogLevel("FATAL")  # dbt reports failed statements itself; Spark would log each one twice
    return spark
