"""SparkSession settings the layer relies on, and a builder for local or standalone sessions."""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from types import SimpleNamespace

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from . import class_archive

# What the layer needs from any session (local, standalone or Connect): field ids on write and read, UTC session
# time (DuckLake timestamps are UTC instants), and views over parquet.`path` sources.
REQUIRED_CONF: dict[str, str] = {
    "spark.sql.parquet.fieldId.write.enabled": "true",
    "spark.sql.parquet.fieldId.read.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.legacy.parquet.nanosAsLong": "false",
    # DuckDB shreds VARIANT columns (typed_value next to value); Spark 4.0 reads them only with this on
    "spark.sql.variant.allowReadingShredded": "true",
}

DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # the in-memory session catalog: databases and persistent views without Hive (about 3 s faster to start)
    "spark.sql.catalogImplementation": "in-memory",
    "spark.sql.shuffle.partitions": "8",
    # PySpark 4 sends the Python call site of every DataFrame function call to the driver JVM (for errors of
    # DataFrame code): about six JVM round trips per call. The layer builds its plans with such calls (a 4-column
    # write's casts and field ids took 23 ms with it, 11 without). On again in spark_config for a Python model's
    # DataFrame errors.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}


JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# settings spark-submit applies when it launches the driver JVM (its class path, packages resolved then)
LAUNCH_KEYS = ("spark.driver.extraClassPath", "spark.jars", "spark.jars.packages", "spark.jars.repositories",
               "spark.jars.ivy", "spark.jars.excludes")
LOG4J_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2-ducklake.properties")


def build_session(master: str = "local[*]", app_name: str = "dbt-ducklake",
                  conf: Mapping[str, str] | None = None, *, log_file: str | None = None) -> SparkSession:
    """A SparkSession for the layer: given master (local[*], spark://host:port), defaults, user conf, required conf.

    With log_file, a driver JVM started here writes everything it prints (start-up notices, Spark's logs from WARN
    up, stack traces) to that file instead of the terminal.

    Raises:
        ValueError: user conf contradicts a setting the layer needs.
    """
    # Python workers (mapInArrow: remote readable copies, spark/read/remote_readable.py) run PYSPARK_PYTHON, which PySpark
    # reads from the environment only (the spark.pyspark.python setting does not reach them): this interpreter has
    # pyarrow; an explicit PYSPARK_PYTHON wins
    python = (conf or {}).get("spark.pyspark.python", sys.executable)
    prepare_environment(python)
    conf = dict(conf or {})
    _check_required(conf)
    if SparkContext._gateway is None:  # a driver JVM starts here: let it map the class archive (class_archive.py)
        archive = class_archive.java_options(conf)
        if archive:
            conf[JAVA_OPTIONS] = _joined(conf.get(JAVA_OPTIONS), archive)
    if log_file is not None:
        _start_quiet_driver(log_file, conf)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {**DEFAULT_CONF, "spark.pyspark.python": python, "spark.pyspark.driver.python": sys.executable}
    for key, value in conf.items():
        settings[key] = str(value)
    settings.update(REQUIRED_CONF)
    if "spark.sql.warehouse.dir" not in settings:
        settings["spark.sql.warehouse.dir"] = _private_warehouse()
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _private_warehouse() -> str:
    """A warehouse directory of this process's own, removed when it exits: Spark's CREATE DATABASE (a lake schema's
    name in the session catalog) makes an empty folder per database there, and its default is ./spark-warehouse in
    the dbt project. Lake data never goes there."""
    path = tempfile.mkdtemp(prefix="dbt-ducklake-warehouse-")
    atexit.register(shutil.rmtree, path, True)
    return path


def _failure_line(log_file: str, start: int) -> str:
    """The line of the failed launch's output that says why: the first naming an error (spark-class's ".../bin/java:
    No such file or directory" for a JAVA_HOME that points nowhere, a JVM's "Error: ..."), else its last line."""
    try:
        with open(log_file, "rb") as fh:
            fh.seek(start)
            lines = [ln.strip() for ln in fh.read().decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        lines = []
    if not lines:
        return "it printed nothing"
    causes = [ln for ln in lines if re.search(r"No such file|not found|[Ee]rror|Exception|denied", ln)]
    return (causes or lines)[0 if causes else -1][:300]


def _joined(extra: str | None, options: str) -> str:
    """The driver's Java options: the user's, then the layer's."""
    return f"{extra} {options}" if extra else options


def _check_required(conf: Mapping[str, str]) -> None:
    for key, value in conf.items():
        if key in REQUIRED_CONF and str(value).lower() != REQUIRED_CONF[key].lower():
            raise ValueError(f"Spark setting {key}={value!r} conflicts with what DuckLake needs ({REQUIRED_CONF[key]!r})")


def _start_quiet_driver(log_file: str, conf: Mapping[str, str]) -> None:
    """Launch the driver JVM (if none runs yet) with its stdout/stderr and log4j output going to log_file."""
    if SparkContext._gateway is not None:  # a JVM of this process already runs: it keeps its logging
        return
    os.makedirs(os.path.dirname(os.path.abspath(log_file)) or ".", exist_ok=True)
    options = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG} -Dducklake.spark.log={log_file}"
    spark_conf = SparkConf(loadDefaults=True).set(JAVA_OPTIONS, _joined(conf.get(JAVA_OPTIONS), options))
    for key in LAUNCH_KEYS:  # what only spark-submit acts on: set later, they would not reach the driver's class path
        if conf.get(key):
            spark_conf.set(key, str(conf[key]))
    proc, port, secret = _launch_driver(spark_conf, log_file)
    gateway = _join_gateway(port, secret, spark_conf)
    gateway.proc = proc  # type: ignore[attr-defined]  # its stdin pipe: the driver exits when this process ends (EOF)
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm  # type: ignore[attr-defined]


def prepare_environment(python: str = sys.executable) -> None:
    """The environment variables a driver started later in this process needs, set now. Call it on the thread that
    runs the program (before a session starts on another thread): a variable added to os.environ while another thread
    iterates it breaks that iteration (dbt scrubs secrets from its errors by iterating the environment).

    PYSPARK_PYTHON: Python workers (mapInArrow: remote readable copies, spark/read/remote_readable.py) run it, and
    PySpark reads it from the environment only (the spark.pyspark.python setting does not reach them); an explicit
    one wins. SPARK_LOCAL_IP: without it Spark prints notices about the host name and the loopback address; the local
    driver binds to loopback anyway. SPARK_AUTH_SOCKET_TIMEOUT and SPARK_BUFFER_SIZE: PySpark's SparkContext sets them
    as it starts (Spark's defaults given here); present beforehand, that changes a value, not the set of keys."""
    os.environ.setdefault("PYSPARK_PYTHON", python)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("SPARK_AUTH_SOCKET_TIMEOUT", "15")
    os.environ.setdefault("SPARK_BUFFER_SIZE", "65536")


_LAUNCH_ENV_LOCK = threading.Lock()


def _join_gateway(port: int, secret: str, spark_conf: SparkConf) -> object:
    """PySpark's Py4J gateway connected to a running driver JVM. PySpark's launch_gateway finds such a JVM through two
    environment variables: it gets them in a copy of the environment, given to its module for the call. Setting them
    in os.environ, even for the call, breaks any other thread iterating it then (seen: a dbt command failing with
    KeyError 'PYSPARK_GATEWAY_PORT' while its session started in the background)."""
    from pyspark import java_gateway

    environ = {**os.environ, "PYSPARK_GATEWAY_PORT": str(port), "PYSPARK_GATEWAY_SECRET": secret}
    with _LAUNCH_ENV_LOCK:  # one launch at a time sees the module's stand-in for `os`
        real_os = java_gateway.os
        java_gateway.os = SimpleNamespace(**{**vars(os), "environ": environ})  # type: ignore[assignment]
        try:
            return java_gateway.launch_gateway(spark_conf)
        finally:
            java_gateway.os = real_os


def _launch_driver(spark_conf: SparkConf, log_file: str) -> tuple[subprocess.Popen, int, str]:
    """Start the driver JVM as PySpark's launch_gateway does, but without a Python `preexec_fn`: the session may
    start in one of dbt's threads while others run DuckDB or Arrow, and Python code run in the child between fork
    and exec of such a process can crash it (seen: the child killed by SIGSEGV). A new session keeps the terminal's
    Ctrl-C from the JVM instead (PySpark ignores SIGINT in the child); dbt cancels the jobs itself."""
    from pyspark.find_spark_home import _find_spark_home
    from pyspark.serializers import UTF8Deserializer, read_int

    command = [os.path.join(_find_spark_home(), "bin", "spark-submit")]
    for key, value in spark_conf.getAll():
        command += ["--conf", f"{key}={value}"]
    command += shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell"))
    conn_dir = tempfile.mkdtemp(prefix="ducklake-driver-")
    try:
        conn_file = os.path.join(conn_dir, "conn")
        env = {**os.environ, "SPARK_CONNECT_MODE": "0", "_PYSPARK_DRIVER_CONN_INFO_PATH": conn_file}
        with open(log_file, "ab") as out:
            start = out.tell()
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out, stderr=out, env=env,
                                    start_new_session=True)
        while proc.poll() is None and not os.path.isfile(conn_file):
            time.sleep(0.02)
        if not os.path.isfile(conn_file):
            raise RuntimeError(f"the Spark driver JVM exited (status {proc.returncode}) before it was ready: "
                               f"{_failure_line(log_file, start)} (its whole output: {log_file})")
        with open(conn_file, "rb") as info:
            port = read_int(info)
            secret = UTF8Deserializer().loads(info)
        return proc, port, secret
    finally:
        shutil.rmtree(conn_dir, ignore_errors=True)


def gateway_session(port: int, secret: str, conf: Mapping[str, str] | None = None) -> SparkSession:
    """A session of its own on a running driver JVM that other processes share (the warm local server's Py4J
    gateway, `local_server`): this process joins it as PySpark's own driver process would, so statements cost what
    they cost an embedded driver. The JVM's SparkContext and root session are made by the first process that joins
    (the JVM's settings are the server's); each process gets a new session of that root (its own temporary views and
    runtime settings; the session catalog is the JVM's, as on a Connect server).

    Raises:
        ValueError: user conf contradicts a setting the layer needs.
    """
    _check_required(conf or {})
    prepare_environment()  # Python workers run what this process names
    gateway = _join_gateway(port, secret, SparkConf(loadDefaults=False))
    jvm = gateway.jvm  # type: ignore[attr-defined]
    session_class = getattr(jvm, "org.apache.spark.sql.classic.SparkSession")
    root = session_class.builder().getOrCreate()  # synchronized in the JVM: one root for all processes
    jsc = jvm.org.apache.spark.api.java.JavaSparkContext(root.sparkContext())
    handler = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    sc = SparkContext(gateway=gateway, jsc=jsc)
    if handler is not None:  # PySpark's handler cancels every job of the JVM, other processes' too: not ours
        signal.signal(signal.SIGINT, handler)
    spark = SparkSession(sc, jsparkSession=root.newSession())
    session_class.setDefaultSession(root)  # the JVM's default stays the root, whoever joined last
    _SHARED_DRIVERS.add(spark)
    _apply_runtime_conf(spark, conf or {})
    return spark


def leave_gateway(spark: SparkSession) -> None:
    """At exit of a process that joined a shared driver: cancel its jobs still running, close its accumulator
    server and its Py4J connections. The JVM's SparkContext is not stopped: other processes use it."""
    cancel_all(spark)
    sc = spark.sparkContext
    server = getattr(sc, "_accumulatorServer", None)
    if server is not None:
        server.shutdown()
        sc._accumulatorServer = None  # type: ignore[assignment]
    sc._jsc = None  # a later stop() of this process must not stop the shared context
    gateway = SparkContext._gateway
    if gateway is not None:
        with contextlib.suppress(Exception):  # the JVM may be gone already
            gateway.detach(spark._jsparkSession)  # the JVM may free this process's session (its temporary views)
        gateway.close()


_SHARED_DRIVERS: weakref.WeakSet[SparkSession] = weakref.WeakSet()  # sessions on a driver other processes share
_PROCESS_TAGS: set[str] = set()  # job tags this process gave its threads on such a driver (for cancel_all)


def connect_session(url: str, conf: Mapping[str, str] | None = None) -> SparkSession:
    """A Spark Connect session (sc://host:port) with the user's runtime settings and the ones the layer needs.

    Static settings (UI, driver, Python) belong to the Connect server; they are skipped here.

    Raises:
        ValueError: user conf contradicts a setting the layer needs.
    """
    spark = SparkSession.builder.remote(url).getOrCreate()
    _check_required(conf or {})
    _apply_runtime_conf(spark, conf or {})
    return spark


def set_hadoop_conf(spark: SparkSession, settings: Mapping[str, str]) -> None:
    """Hadoop settings (spark.hadoop.* keys) on a running classic session's context, where jobs read them but
    SparkConf (printed, and shipped to every job) never holds them; on Spark Connect, the session's runtime conf.

    Raises:
        ValueError: a Spark Connect session, which can only take them from the server's own configuration.
    """
    if not settings:
        return
    if not is_classic(spark):
        raise ValueError("secret Hadoop settings (S3 keys) cannot be handed to a Spark Connect server from the client: "
                         "configure them on the server, or use the AWS default credential chain there")
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    for key, value in settings.items():
        hadoop.set(key[len("spark.hadoop."):] if key.startswith("spark.hadoop.") else key, str(value))


def _apply_runtime_conf(spark: SparkSession, conf: Mapping[str, str]) -> None:
    """The user's settings a running session can take (static ones are its server's), then the layer's."""
    for key, value in conf.items():
        if spark.conf.isModifiable(key):
            spark.conf.set(key, str(value))
    apply_required_conf(spark)


class LazySession:
    """A SparkSession made on first use: statements that Spark need not run (answered from the catalog or on the
    driver) do not wait for a JVM to start, and a dbt command whose nodes never need Spark starts none.

    It stands for the session it makes: any attribute but its own is the session's (made then, once, by `make`;
    a failure is kept and raised again to every later use). Job tags asked for before the start are applied by
    each thread at its first use after it (`tag_jobs`), so the statement that starts Spark is tagged too."""

    def __init__(self, make: Callable[[], SparkSession], *, classic: bool) -> None:
        self._make = make
        self.classic = classic  # answered without starting it (`is_classic`)
        self._session: SparkSession | None = None
        self._failure: BaseException | None = None
        self._lock = threading.Lock()
        self._pending = threading.local()  # this thread's job tag, set before the start

    @property
    def started(self) -> bool:
        return self._session is not None

    def session(self) -> SparkSession:
        """The session, made now if it was not yet."""
        spark = self._session
        if spark is None:
            with self._lock:
                if self._failure is not None:
                    raise self._failure
                if self._session is None:
                    try:
                        self._session = self._make()
                    except Exception as e:  # a Ctrl-C meanwhile is not the start's failure: not kept
                        self._failure = e
                        raise
                spark = self._session
        tag = getattr(self._pending, "tag", None)
        if tag is not None:
            self._pending.tag = None
            tag_jobs(spark, tag)
        return spark

    def pend_tag(self, tag: str) -> None:
        self._pending.tag = tag

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") or name in ("_make", "_session", "_failure", "_lock", "_pending", "classic"):
            raise AttributeError(name)  # copy, pickle and half-made instances look these up: never start for them
        return getattr(self.session(), name)


def is_started(spark: SparkSession | LazySession) -> bool:
    """Whether the session exists (a lazy one not started yet has no views, no jobs, no settings made)."""
    return spark.started if isinstance(spark, LazySession) else True


def ensure_database(spark: SparkSession | LazySession, name: str) -> None:
    """CREATE DATABASE IF NOT EXISTS, after a catalog lookup: the statement is parsed, analysed and run as a command
    (10-20 ms each time, and the lake's views are registered per model), the lookup is one call."""
    from ..sql_literals import ident

    with contextlib.suppress(Exception):  # a name the lookup cannot parse: the statement decides
        if spark.catalog.databaseExists(name):  # type: ignore[attr-defined]
            return
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {ident(name)}")  # type: ignore[operator]


def catalog_key(spark: SparkSession) -> str:
    """Which catalog a session's persistent tables live in, for facts kept about them across calls: a classic
    session's application (a session stopped and made again in the process starts an empty catalog), or a Connect
    session's id (conservative: sessions of one server share it, and each checks once)."""
    try:
        return f"app:{spark.sparkContext.applicationId}"
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return f"connect:{getattr(spark, 'session_id', id(spark))}"


def session_of(spark: SparkSession | LazySession) -> SparkSession:
    """The session itself (made now if lazy): for PySpark calls that need the real object."""
    return spark.session() if isinstance(spark, LazySession) else spark


def tag_jobs(spark: SparkSession, tag: str) -> None:
    """Tag the Spark jobs this thread starts from now on (classic: a thread-local job tag; Connect: an operation
    tag), so that `cancel_tagged` stops exactly them. A lazy session not started yet gets the tag at this thread's
    first use."""
    if isinstance(spark, LazySession):
        if not spark.started:
            spark.pend_tag(tag)
            return
        spark = spark.session()
    if is_classic(spark):
        if spark in _SHARED_DRIVERS:
            _PROCESS_TAGS.add(tag)
        spark.sparkContext.addJobTag(tag)
        spark.sparkContext.setInterruptOnCancel(True)  # a cancel interrupts running tasks, not only pending ones
    else:
        spark.addTag(tag)


def cancel_tagged(spark: SparkSession | LazySession, tag: str, running: Callable[[], bool],
                  limit_seconds: float = 60.0) -> None:
    """Cancel the jobs with this tag until `running()` turns false (a query under adaptive execution is several jobs
    that start one after another, so one cancel is not enough), at most limit_seconds; in a daemon thread. A lazy
    session may still be starting when the cancel comes (the statement waits for it, then runs its job): its jobs are
    cancelled once it exists."""

    def loop() -> None:
        deadline = None  # counted from the session's start: a start under load can take long
        while running():
            if is_started(spark):
                deadline = deadline or time.monotonic() + limit_seconds
                if time.monotonic() > deadline:
                    return
                session = session_of(spark)
                try:
                    if is_classic(session):
                        session.sparkContext.cancelJobsWithTag(tag)
                    else:
                        session.interruptTag(tag)
                except Exception:  # noqa: BLE001 - a session already stopped: nothing left to cancel
                    return
            time.sleep(0.25)

    threading.Thread(target=loop, name=f"cancel-{tag}", daemon=True).start()


def cancel_all(spark: SparkSession) -> None:
    """Cancel the running jobs of a session, classic or Connect (no SparkContext there); on a driver that other
    processes share, the jobs of this process only (by the tags its threads were given)."""
    if isinstance(spark, LazySession):
        if not spark.started:
            return
        spark = spark.session()
    if hasattr(spark, "interruptAll") and not hasattr(spark, "_jsparkSession"):
        spark.interruptAll()
    elif spark in _SHARED_DRIVERS:
        for tag in sorted(_PROCESS_TAGS):
            spark.sparkContext.cancelJobsWithTag(tag)
    else:
        spark.sparkContext.cancelAllJobs()


def apply_required_conf(spark: SparkSession) -> None:
    """Set the runtime settings the layer needs on an existing session (e.g. one the user made)."""
    for key, value in REQUIRED_CONF.items():
        spark.conf.set(key, value)


def runs_on_this_machine(spark: SparkSession) -> bool:
    """Whether Spark's driver and executors all run on this machine (a local master, in this process or in the warm
    local server): only then can Spark read what the layer keeps on this machine's disk (spark/read/listing.py's listings).
    On a cluster, executors on other hosts, and on Spark Connect the server's driver, cannot."""
    if not is_classic(spark):
        return False
    return str(spark.sparkContext.master).startswith("local")


def is_classic(spark: SparkSession) -> bool:
    """A session with a JVM in this process (not Spark Connect): its DataFrames are analyzed when made."""
    if isinstance(spark, LazySession):
        return spark.classic
    return hasattr(spark, "_jsparkSession")
