"""The first read of a many-file table at a snapshot: a Spark Python data source given the catalog's file list, while
the table's manifest (spark/read/manifest.py) is built in the background for the statements after it.

Why: a manifest costs its first reader a symlink per file and Spark's listing of them (seconds at 10k files: see
docs/benchmarks.md "first reader"); a Python data source plans from the file list alone (0.1-0.8 s at 10k) and its
readers apply each file's deletes as they read it. It is not the read path for every statement because Spark 4.0
gives Python data sources no column pruning and no filter pushdown: a manifest read by Spark's Parquet reader reads
only the needed columns and row groups. So the first reader of a snapshot reads through the data source, and once
the manifest exists (built here in a thread, or by another process) later statements read the manifest.

Only where the data source gives exactly the manifest's answer: classic sessions (the data source is registered in
this process's session), local files matched by field id (no name mapping), plain column types (Arrow and Spark
agree on them: no nested, encoded or unsigned types), whole-table reads without row locators (DML targets and the
change feed keep the manifest path). Files are read by `lake.read.scan.read_data_file`, the lake's Arrow reader
(field ids, defaults for columns added later, promoted types, deletes, partial files).

Spark 4.0 hands a catalog table over a Python data source no options, so each table and snapshot gets a data source
class of its own, registered under its own name. Its file list is in a side file of this process (`_FileList`), not in
the class: a registered class is pickled into the JVM (a broadcast above 1 MB) and shipped to every planning worker
(10k files pickle to 2.2 MB: 0.04 s to register; 100k files 22 MB: 0.3 s). Planning reads the side file on the
driver's machine and hands each partition its files.

The first registration in a JVM costs about 0.6 s whatever the class: Spark looks for installed Python data sources
(a Python worker lists every module on its path for top-level modules named `pyspark_*`). Where that worker would be
this interpreter, its path holds no such module, and the answer is therefore "none", the layer tells Spark so instead
(`_settle_lookup`); otherwise Spark looks as before.
"""

from __future__ import annotations

import atexit
import hashlib
import inspect
import logging
import os
import pickle
import shutil
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ...lake.read.file_checks import table_context
from ...lake.read.scan import DeleteSources, FileScanTask, delete_sources
from ...lake.records import Column, TableInfo
from ..env.session import catalog_key, is_classic
from ..sql_literals import ident
from ..types import spark_schema

MIN_FILES = 500  # below this a manifest's first build is cheap (1k files: ~1-2 s), and Spark's reader is better
MAX_AVERAGE_BYTES = 32 * 2**20  # a reader holds a whole file in memory: only tables of small files
PARTITION_FILES = 256  # files per Spark task (at least 2 tasks per core otherwise)
DATABASE = "_ducklake_manifests"
MARK = "__ducklake_first_read_"  # in the name of every data source table (a view reading one is provisional)

# plain lake types: Arrow (lake.read.arrow_types.plain_type) and Spark (spark/types.py) agree on their values
_PLAIN = {"boolean", "int8", "int16", "int32", "int64", "float32", "float64", "varchar", "blob", "date", "timestamp",
          "timestamptz"}

_log = logging.getLogger(__name__)
_lock = threading.Lock()
_registered: set[tuple[str, str]] = set()  # (catalog_key, data source table) made by this process
_building: dict[str, threading.Thread] = {}  # (table, snapshot, files) -> its manifest's running background build
_side_dir: list[str] = []  # this process's folder of file lists (made on first use, removed at exit)
_settled: set[str] = set()  # applications whose JVM's Python data source lookup was settled here


def applies(spark: SparkSession, table: TableInfo, tasks: Sequence[FileScanTask]) -> bool:
    """Whether the table's files can be read through the data source (see the module)."""
    if not is_classic(spark) or len(tasks) < MIN_FILES:
        return False
    if any(not _plain(c) for c in table.columns):
        return False
    if sum(t.data_file.file_size_bytes for t in tasks) > MAX_AVERAGE_BYTES * len(tasks):
        return False
    return all(t.mapping is None and "://" not in t.data_file.path.replace("file://", "", 1) for t in tasks)


def _plain(c: Column) -> bool:
    return not c.is_nested and (c.type in _PLAIN or c.type.startswith("decimal("))


def table_sql(spark: SparkSession, table: TableInfo, tasks: Sequence[FileScanTask], snapshot_id: int) -> str:
    """The SELECT of these files' live rows at the snapshot through a data source table (registered once)."""
    schema = spark_schema(table.columns)
    files = tuple((t.data_file.path, delete_sources(t.data_file, snapshot_id), t.max_snapshot,
                   t.data_file.file_size_bytes) for t in tasks)
    columns = [(c.column_id, c.name, c.type, c.initial_default) for c in table.columns]  # renames, widenings too
    key = hashlib.sha1(repr((table.table_id, snapshot_id, columns, files)).encode())
    name = f"{MARK}{key.hexdigest()[:24]}"
    done = (catalog_key(spark), name)  # registered in this session's catalog (a later session starts empty)
    with _lock:
        if done not in _registered:
            _settle_lookup(spark)
            source = _source_class(name, schema, list(table.columns), _FileList.write(name, files), snapshot_id,
                                   table_context(table.schema_name, table.name, snapshot_id))
            spark.dataSource.register(source)
            spark.sql(f"CREATE DATABASE IF NOT EXISTS {ident(DATABASE)}")
            # the columns given: Spark then takes them as the table's schema instead of starting a Python worker to
            # ask the data source (0.8 s of the first reader's 2.3 s plan at 10k files); the query starts one anyway
            ddl = spark._jvm.org.apache.spark.sql.types.DataType.fromJson(schema.json()).toDDL()  # type: ignore[union-attr]
            spark.sql(f"CREATE TABLE IF NOT EXISTS {ident(DATABASE)}.{name} ({ddl}) USING {name}")
            _registered.add(done)
    cols = ", ".join(ident(c.name) for c in table.columns)
    return f"SELECT {cols} FROM {ident(DATABASE)}.{name}"


def _settle_lookup(spark: SparkSession) -> None:
    """Spare the JVM its search for installed Python data sources when its answer is known here (see the module): the
    planning worker is this interpreter (Spark's PythonUtils.defaultPythonExec) and nothing named
    `pyspark_*` is on its path (this interpreter's sys.path, the JVM's PYTHONPATH and Spark's own Python path). The
    answer, no static data sources, is set where Spark keeps it (DataSourceManager.dataSourceBuilders, internal: if
    that fails, Spark searches as before)."""
    app = spark.sparkContext.applicationId
    if app in _settled:
        return
    _settled.add(app)
    try:
        jvm = spark._jvm  # type: ignore[attr-defined]
        utils = getattr(getattr(jvm, "org.apache.spark.api.python.PythonUtils$"), "MODULE$")
        python = utils.defaultPythonExec()  # the interpreter Spark starts for the lookup
        if os.path.abspath(shutil.which(python) or python) != os.path.abspath(sys.executable):
            return
        manager = getattr(getattr(jvm, "org.apache.spark.sql.execution.datasources.DataSourceManager$"), "MODULE$")
        if manager.dataSourceBuilders().isDefined():  # searched already
            return
        env_path = jvm.java.lang.System.getenv("PYTHONPATH") or ""  # type: ignore[union-attr]
        paths = [*sys.path, *env_path.split(os.pathsep), *utils.sparkPythonPath().split(os.pathsep)]
        if not no_python_data_sources(paths):
            return
        empty = getattr(getattr(jvm, "scala.collection.immutable.Map$"), "MODULE$").empty()
        getattr(manager, "dataSourceBuilders_$eq")(jvm.scala.Some(empty))  # type: ignore[union-attr]  # Scala's setter of the var
    except Exception:  # noqa: BLE001 - Spark searches itself, as without this
        _log.debug("Python data source lookup left to Spark", exc_info=True)


def no_python_data_sources(paths: Sequence[str]) -> bool:
    """Whether no top-level module or package named `pyspark_*` can be found on these import paths (directories
    and zip files; an entry that cannot be listed counts as one that might hold one)."""
    for entry in dict.fromkeys(p or os.getcwd() for p in paths):
        try:
            if os.path.isdir(entry):
                names = os.listdir(entry)
            elif zipfile.is_zipfile(entry):
                with zipfile.ZipFile(entry) as z:
                    names = [n.split("/", 1)[0] for n in z.namelist()]
            else:
                continue  # not there: nothing to import from it
        except OSError:
            return False
        if any(n.startswith("pyspark_") for n in names):
            return False
    return True


def build_in_background(key: str, build: Callable[[], Any]) -> None:
    """Run the manifest's build once per key in a daemon thread (a failure is logged: the next statement builds it
    the usual way)."""
    with _lock:
        for k in [k for k, t in _building.items() if not t.is_alive()]:  # finished builds: nothing to wait for
            del _building[k]
        if key in _building:
            return

        def run() -> None:
            try:
                build()
            except Exception:  # noqa: BLE001 - readers fall back to building it themselves
                _log.debug("background manifest build failed", exc_info=True)

        thread = threading.Thread(target=run, name="ducklake-manifest", daemon=True)
        _building[key] = thread
        thread.start()


def wait_for_builds(timeout: float = 600.0) -> None:
    """Wait for this process's background manifest builds (tests, benchmarks)."""
    with _lock:
        threads = list(_building.values())
    for thread in threads:
        thread.join(timeout)


class _FileList:
    """A data source's files, kept in a side file of this process (see the module)."""

    def __init__(self, path: str) -> None:
        self.path = path

    @staticmethod
    def write(name: str, files: Sequence[Any]) -> _FileList:
        if not _side_dir:
            _side_dir.append(tempfile.mkdtemp(prefix=f"ducklake-first-read-{os.getpid()}-"))
            atexit.register(shutil.rmtree, _side_dir[0], True)
        path = os.path.join(_side_dir[0], f"{name}.pickle")
        with open(f"{path}.tmp", "wb") as f:
            pickle.dump(list(files), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(f"{path}.tmp", path)
        return _FileList(path)

    def read(self) -> list[Any]:
        with open(self.path, "rb") as f:
            return pickle.load(f)


class _Partition(InputPartition):
    def __init__(self, files: list[tuple[str, DeleteSources, int | None, int]]) -> None:
        super().__init__(None)
        self.files = files


class _Reader(DataSourceReader):
    def __init__(self, columns: list[Column], files: _FileList, schema: T.StructType, snapshot_id: int,
                 context: str) -> None:
        self.columns, self.files, self.schema, self.snapshot_id = columns, files, schema, snapshot_id
        self.context = context  # how an error about a file names the read (file_checks.table_context)

    def partitions(self) -> list[_Partition]:  # runs on the driver's machine (Spark's planning worker)
        files = self.files.read()
        n = max(1, -(-len(files) // PARTITION_FILES))
        return [_Partition(files[i::n]) for i in range(n)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa

        from ...lake.read.file_checks import DELETE_FILE, ListedFile, reading_any
        from ...lake.read.scan import positions_of, read_data_file

        target = _arrow_schema(self.schema)
        assert isinstance(partition, _Partition)
        for path, sources, max_snapshot, size in partition.files:
            # a file damaged since the plan checked it fails the task naming it (pyarrow's errors may not)
            listed = [ListedFile(path, size)] + ([ListedFile(sources[0], None, DELETE_FILE)] if sources[0] else [])
            with reading_any(self.context, lambda listed=listed: listed):  # type: ignore[misc]
                deleted = positions_of(sources, self.snapshot_id)
                rows = read_data_file(path, self.columns, deleted_positions=deleted, max_snapshot=max_snapshot)
            if rows.num_rows:
                yield from pa.Table.from_arrays([rows.column(i).cast(f.type) for i, f in enumerate(target)],
                                                schema=target).to_batches()


def _arrow_schema(schema: T.StructType) -> Any:
    """The Arrow schema of the batches a reader yields: Spark's TIMESTAMP as UTC instants. pyspark 4.0 and 4.1 give
    that by default (`timestamp_utc=True`); 4.2 replaced the flag by a `timezone` argument that a TIMESTAMP column
    requires (without it the conversion fails its assertion)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timezone="UTC")  # type: ignore[call-arg]  # (4.2 and later)
    return to_arrow_schema(schema)


def _source_class(name: str, table_schema: T.StructType, columns: list[Column], files: _FileList,
                  snapshot_id: int, context: str) -> type[DataSource]:
    """A data source class of its own for one table at one snapshot (see the module)."""

    def _name(cls: type) -> str:
        return name

    def _schema(self: DataSource) -> T.StructType:
        return table_schema

    def _reader(self: DataSource, schema: T.StructType) -> DataSourceReader:  # noqa: ARG001 - called by keyword
        return _Reader(columns, files, table_schema, snapshot_id, context)

    return type(name, (DataSource,), {"name": classmethod(_name), "schema": _schema, "reader": _reader})
