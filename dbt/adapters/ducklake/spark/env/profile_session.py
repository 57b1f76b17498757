"""Starting or joining the Spark a profile names: its settings, the warm local server, and the session.

The Spark layer's half of what the adapter does when a dbt command first needs Spark (the adapter's runtime.py keeps
the dbt half: which command starts what, the lake, its errors and logs). A `SessionSpec` is what that takes from a
profile; the adapter's credentials make one (`DuckLakeCredentials.session_spec`), so nothing here knows dbt.

Three ways to a session: an embedded driver JVM of this process (`local[*]`, `spark://...`, `yarn`, ...), a Spark
Connect server (`sc://...`), or the warm local server (`master: local-server[...]`, a shared driver this process
joins through Py4J and leaves at exit). The S3 secret key and session token never go into SparkConf: they are set on
the running context (`set_hadoop_conf`), so Spark's UI, logs and event files do not show them.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pyspark.sql import SparkSession

from ...lake.storage import ObjectStoreConfig
from . import local_server, s3a
from .local_server import LocalServer
from .session import (
    LazySession,
    build_session,
    cancel_all,
    connect_session,
    gateway_session,
    leave_gateway,
    prepare_environment,
    set_hadoop_conf,
)


@dataclass(frozen=True)
class SessionSpec:
    """What starting or joining Spark takes from a profile."""

    master: str
    spark_config: Mapping[str, str]  # the profile's own settings (they win over the defaults)
    object_store: ObjectStoreConfig | None  # the data path's S3 settings, if it is on S3
    server_master: str | None = None  # the warm local server's master (`master: local-server[...]`), else None
    server_scope: str = ""  # what one warm server serves (one per lake): the key of its directory
    server_label: str = ""  # how the server names what it serves in its log
    server_idle_timeout: float = 1800.0

    @property
    def embedded(self) -> bool:
        """A driver JVM of this process (not Spark Connect, not the warm local server's shared driver)."""
        return not self.master.startswith("sc://") and self.server_master is None

    def warm_master(self) -> str:
        """The warm local server's master; a profile without one is refused."""
        if self.server_master is None:
            raise ValueError(f"master {self.master!r} starts no local server")
        return self.server_master


def prepare(spec: SessionSpec) -> None:
    """Set, on the calling thread, the environment a session of this profile needs when it starts later, maybe on
    another thread (session.prepare_environment)."""
    if not spec.master.startswith("sc://"):  # spark_conf's Python: the profile's, else this interpreter
        prepare_environment(str(spec.spark_config.get("spark.pyspark.python", sys.executable)))


def spark_conf(spec: SessionSpec) -> dict[str, str]:
    """The Spark settings of a profile: the adapter's defaults, the S3 connector's (for a data path on S3: its jars,
    endpoint, URL style and key id; the secret key is set apart, `s3_secrets`), then the profile's `spark_config`."""
    # ANSI off as dbt-spark sets it: its macros (and users' Spark SQL) expect Spark's classic casts
    conf = {"spark.pyspark.python": sys.executable, "spark.ui.enabled": "false", "spark.sql.ansi.enabled": "false",
            "spark.sql.shuffle.partitions": "8"}
    if spec.object_store is not None:
        conf.update(s3a.split_secrets(_s3a_settings(spec.object_store))[0])
        conf.update(s3a.connector_conf(dict(spec.spark_config), spec.master))
    return {**conf, **spec.spark_config}


def _s3a_settings(store: ObjectStoreConfig) -> dict[str, str]:
    return s3a.hadoop_conf(key_id=store.key_id, secret=store.secret, session_token=store.session_token,
                           region=store.region, endpoint=store.endpoint, url_style=store.url_style,
                           use_ssl=store.use_ssl)


def s3_secrets(spec: SessionSpec) -> dict[str, str]:
    """The S3 secret key and session token as Hadoop settings (set on the running context, never in SparkConf)."""
    return {} if spec.object_store is None else s3a.split_secrets(_s3a_settings(spec.object_store))[1]


def server_dir(spec: SessionSpec) -> str:
    """The directory of the profile's warm local server (`master: local-server`)."""
    return local_server.server_dir(spec.server_scope, spec.warm_master(), spark_conf(spec))


def attach_server(spec: SessionSpec) -> LocalServer:
    """The profile's warm local server, found running or started now (and leased by this process)."""
    return local_server.attach(spec.server_scope, spec.server_label, spec.warm_master(), spark_conf(spec),
                               idle_timeout=spec.server_idle_timeout)


def start_session(spec: SessionSpec, *, log_file: str, server: LocalServer | None = None,
                  attach: Callable[[], LocalServer] | None = None) -> tuple[SparkSession, LocalServer | None]:
    """The profile's session, and the warm server it joined (if any). With `master: local-server`, joined on `server`
    (the one the caller attached: not attached again) or on one `attach` gives (default: `attach_server`); a server
    that died since it was attached is replaced once. An embedded driver writes what it prints to `log_file`."""
    conf = spark_conf(spec)
    if spec.master.startswith("sc://"):
        spark = connect_session(spec.master, conf)
        set_hadoop_conf(spark, s3_secrets(spec))  # refused with a message when there are keys to hand over
        return spark, None
    if spec.server_master is not None:
        attach = attach or (lambda: attach_server(spec))
        server = server or attach()
        try:
            spark = gateway_session(server.port, server.token, conf)
        except ValueError:  # the profile's settings, not the server
            raise
        except Exception:  # noqa: BLE001 - it died since it was checked: replaced once, then errors are the user's
            local_server.stop(server.directory)
            server = attach()
            spark = gateway_session(server.port, server.token, conf)
        set_hadoop_conf(spark, s3_secrets(spec))
        atexit.register(_leave_server, spark, server.directory)
        return spark, server
    spark = build_session(spec.master, "dbt-ducklake", conf, log_file=log_file)
    set_hadoop_conf(spark, s3_secrets(spec))
    spark.sparkContext.setLogLevel("FATAL")  # the caller reports failed statements itself; Spark would log each twice
    return spark, None


def _leave_server(spark: SparkSession, directory: str) -> None:
    """At exit: free this process's session on the server (its jobs, its temp views, its settings), then the lease,
    from when the server's idle time counts."""
    with contextlib.suppress(Exception):  # a server already gone has nothing to free
        leave_gateway(spark)
    local_server.release(directory)


def cancel_on_interrupt(spark: LazySession | SparkSession) -> None:
    """As PySpark does when a session starts in the main thread: Ctrl-C cancels the running Spark jobs (a lazy
    session may start in another thread, where PySpark installs no handler)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def cancel(_signum: int, _frame: object) -> None:
        cancel_all(spark)  # type: ignore[arg-type]
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, cancel)
