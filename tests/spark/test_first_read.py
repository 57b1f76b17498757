"""The first reader of a many-file table reads through the catalog's file list (spark/read/first_read.py), while the
manifest is built in the background; after it the manifest is read. Both give DuckDB's rows at every snapshot on a
DuckDB-written table with deletes (rewritten), an update, a column added with a default, a widened column, inlined
rows and an inlined delete of a file row."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal

import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.spark.read import first_read, manifest
from dbt.adapters.ducklake.spark.read.names import LakeNames
from dbt.adapters.ducklake.spark.read.scan import register_at, table_sql
from dbt.adapters.ducklake.spark.types import spark_schema
from tests.support import reference

FILES = 24
# a TIMESTAMPTZ compared as microseconds since the epoch (each engine gives its own zone's wall time)
COLUMNS = "id, k, amount, qty, note, d, ts, {tz} AS tz, price, b"
SPARK = COLUMNS.format(tz="unix_micros(tz)")
DUCKDB = COLUMNS.format(tz="epoch_us(tz)")


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, DuckLake, dict[str, int]]]:
    root = tmp_path_factory.mktemp("first_read")
    catalog, data = f"duckdb:///{root}/l.ducklake", f"{root}/data/"
    marks = {}
    with reference.attached(catalog, data_path=data) as con:
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        con.execute("CREATE TABLE lake.e (id BIGINT, k VARCHAR, amount DOUBLE, qty INTEGER, d DATE, ts TIMESTAMP, "
                    "tz TIMESTAMPTZ, price DECIMAL(12, 3), b BOOLEAN)")
        for i in range(FILES):
            if i == FILES // 2:
                con.execute("ALTER TABLE lake.e ADD COLUMN note VARCHAR DEFAULT 'old'")
            if i == FILES * 3 // 4:
                con.execute("ALTER TABLE lake.e ALTER COLUMN qty TYPE BIGINT")
            note = ", 'n' || (range % 3)" if i >= FILES // 2 else ""
            cols = "id, k, amount, qty, d, ts, tz, price, b" + (", note" if note else "")
            con.execute(f"INSERT INTO lake.e ({cols}) SELECT {i * 10} + range, 'k' || (range % 4), range * 1.5, "
                        f"CASE WHEN range % 5 = 0 THEN NULL ELSE {i} * 1000 + range END, DATE '2024-01-01' + range::INT, "
                        f"TIMESTAMP '2024-01-01 10:00:00' + INTERVAL (range) MINUTE, "
                        f"TIMESTAMPTZ '2024-01-01 10:00:00+00' + INTERVAL (range) HOUR, range / 8, range % 2 = 0"
                        f"{note} FROM range(10)")
        marks["before_deletes"] = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        con.execute("DELETE FROM lake.e WHERE id % 7 = 3")
        con.execute("DELETE FROM lake.e WHERE id % 11 = 1")  # rewritten delete files
        con.execute("UPDATE lake.e SET amount = -amount WHERE id % 13 = 5")
        con.execute("CALL lake.set_option('data_inlining_row_limit', 5)")
        con.execute("INSERT INTO lake.e (id, k, qty, note) VALUES (9000, 'late', 5000000000, 'x'), (9001, NULL, NULL, NULL)")
        con.execute("DELETE FROM lake.e WHERE id = 42")  # an inlined delete of a file row
        marks["latest"] = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
    lake = DuckLake.open(catalog)
    try:
        yield catalog, data, lake, marks
    finally:
        lake.close()


def _duckdb(catalog: str, snapshot: int) -> list[tuple]:
    with reference.attached(catalog) as con:
        rows = con.execute(f"SELECT {DUCKDB} FROM lake.e AT (VERSION => {snapshot})").fetchall()
    return sorted(rows, key=repr)


def _normal(rows: list) -> list[tuple]:
    return sorted((tuple(r) for r in rows), key=repr)


@pytest.fixture
def many_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(first_read, "MIN_FILES", 10)


def test_first_read_then_manifest_equal_duckdb(spark: SparkSession, lake: tuple, many_enough: None) -> None:
    catalog, data, dl, marks = lake
    expected = _normal(_duckdb(catalog, marks["latest"]))
    names = LakeNames(spark, dl)
    state = names.refresh([("main", "e")])
    table = state.tables[("main", "e")]
    # no manifest yet: the view registered for the first read reads through the file list (the manifest's build
    # may already have finished in the background: this small table takes a moment)
    assert first_read.MARK in names._registered[("main", "e")]
    # the data source table was created with the table's columns (Spark did not ask the data source for them)
    source_table = re.search(rf"`{first_read.DATABASE}`\.{first_read.MARK}\w+", names._registered[("main", "e")])[0]
    assert [(f.name, f.dataType) for f in spark.table(source_table).schema] == [
        (f.name, f.dataType) for f in spark_schema(table.columns)]
    got = spark.sql(f"SELECT {SPARK} FROM main.e").collect()
    assert _normal([tuple(r) for r in got]) == expected
    assert any(isinstance(r["price"], Decimal) for r in got) and len(got) == len(expected)
    first_read.wait_for_builds()
    after = table_sql(spark, state, table)
    assert first_read.MARK not in after  # the background build made the manifest: later statements read it
    assert os.path.isdir(manifest.table_root(data, table.table_id))
    names.refresh([("main", "e")])  # re-registers the view (its SQL changed)
    assert _normal([tuple(r) for r in spark.sql(f"SELECT {SPARK} FROM main.e").collect()]) == expected
    assert spark.sql("SELECT count(*) FROM main.e WHERE note = 'old'").collect()[0][0] == sum(
        1 for r in expected if r[4] == "old")


def test_time_travel_first_read_equals_duckdb(spark: SparkSession, lake: tuple, many_enough: None) -> None:
    catalog, _data, dl, marks = lake
    state = dl.snapshot(marks["before_deletes"])
    name = register_at(spark, state, state.tables[("main", "e")])
    got = spark.sql(f"SELECT {SPARK} FROM {name}").collect()
    assert _normal([tuple(r) for r in got]) == _normal(_duckdb(catalog, marks["before_deletes"]))


def test_registered_class_does_not_carry_the_files(lake: tuple) -> None:
    """The class registered in the JVM (pickled, shipped to every planning worker) stays small at any file count:
    the files are in a side file that planning reads."""
    from pyspark import cloudpickle

    table = lake[2].snapshot().tables[("main", "e")]
    files = [(f"/lake/data/f{i}.parquet", (f"/lake/data/f{i}-delete.parquet", 7, ()), None, 1000 + i)
             for i in range(10_000)]
    listed = first_read._FileList.write("test_side_file", files)
    source = first_read._source_class("test_side_file", spark_schema(table.columns), list(table.columns), listed, 7,
                                      "lake table main.e at snapshot 7")
    assert len(cloudpickle.dumps(source)) < 20_000  # 10k files in the class itself pickled to 2.2 MB
    assert listed.read() == files
    reader = source({}).reader(spark_schema(table.columns))
    parts = reader.partitions()
    assert sorted(f for p in parts for f in p.files) == sorted(files) and len(parts) == -(-10_000 // first_read.PARTITION_FILES)


def test_not_used_for_few_files_or_other_types(spark: SparkSession, lake: tuple) -> None:
    _catalog, _data, dl, _marks = lake
    state = dl.snapshot()
    table = state.tables[("main", "e")]
    from dbt.adapters.ducklake.lake.read.scan import plan_scan

    tasks = plan_scan(state, table, positions=False).files
    assert not first_read.applies(spark, table, tasks)  # 24 files < MIN_FILES
    nested = [c for c in table.columns if c.name == "id"][0]
    assert first_read._plain(nested)


WRITER = """
import sys, duckdb
attach, *extensions = sys.argv[1:]
con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False,
                             "allow_unsigned_extensions": True})  # see tests/support/reference.CONFIG
for ext in extensions:
    con.execute(f"LOAD '{ext}'")
con.execute(attach)
for i in range(6):
    con.execute(f"INSERT INTO lake.t SELECT {1000 + i * 10} + range, 'w', 1.0 FROM range(10)")
    con.execute(f"DELETE FROM lake.t WHERE id % 17 = {i}")
    if i == 3:
        con.execute("UPDATE lake.t SET amount = amount + 100 WHERE id % 5 = 0")
con.execute("DETACH lake")
"""


def test_threads_reading_while_duckdb_commits(spark: SparkSession, tmp_path, many_enough: None) -> None:
    """Several threads of one process (as dbt's threads share LakeNames) read a many-file table through the first
    reader while DuckDB commits inserts, deletes and an update to it, so background manifest builds race the
    commits and each other. Every answer is DuckDB's at a snapshot no older than the one the statement refreshed
    to, and once the builds are done the manifest path gives DuckDB's latest rows."""
    import threading

    catalog, data = f"sqlite:///{tmp_path}/l.sqlite", f"{tmp_path}/data/"
    with reference.attached(catalog, data_path=data) as con:
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        con.execute("CREATE TABLE lake.t (id BIGINT, k VARCHAR, amount DOUBLE)")
        for i in range(20):
            con.execute(f"INSERT INTO lake.t SELECT {i * 10} + range, 'k' || (range % 3), range * 0.5 FROM range(10)")
        con.execute("DELETE FROM lake.t WHERE id % 9 = 4")
    dl = DuckLake.open(catalog)
    names = LakeNames(spark, dl)
    seen: list[tuple[int, tuple]] = []
    provisional: list[bool] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        # DuckDB commits from another process: its bundled SQLite and Python's sqlite3 in one process do not see each
        # other's POSIX locks (closing a file in one drops the other's), which corrupts a shared catalog file
        try:
            proc = subprocess.run([sys.executable, "-c", WRITER, reference.attach_sql(catalog),
                                   reference.extension_path("ducklake"), reference.extension_path("sqlite_scanner")],
                                  capture_output=True, text=True, timeout=600)
            if proc.returncode:
                errors.append(RuntimeError(proc.stderr))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
        finally:
            stop.set()

    def reader() -> None:
        try:
            while True:
                done = stop.is_set()
                with names._lock:  # which path this statement's view takes (re-registered by other threads after)
                    st = names.refresh([("main", "t")])
                    provisional.append(first_read.MARK in names._registered[("main", "t")])
                row = spark.sql("SELECT count(*), sum(id), sum(amount), count(DISTINCT k) FROM main.t").collect()[0]
                seen.append((st.snapshot_id, tuple(row)))
                if done:
                    return
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(3)] + [threading.Thread(target=writer)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        assert not errors, errors
        first_read.wait_for_builds()
        with reference.attached(catalog) as con:
            first = min(s for s, _ in seen)
            snapshots = [s for (s,) in con.execute(
                f"SELECT snapshot_id FROM lake.snapshots() WHERE snapshot_id >= {first} ORDER BY 1").fetchall()]
            answers = {s: tuple(con.execute(
                f"SELECT count(*), sum(id), sum(amount), count(DISTINCT k) FROM lake.t AT (VERSION => {s})"
            ).fetchone()) for s in snapshots}
        assert len(seen) >= 6
        assert any(provisional) and not all(provisional), provisional  # both paths ran while DuckDB committed
        for refreshed, got in seen:
            assert any(answers[s] == got for s in snapshots if s >= refreshed), (refreshed, got)
        assert len({a for _s, a in seen}) > 1  # the readers saw the lake change under them
        st = names.refresh([("main", "t")])
        assert first_read.MARK not in names._registered[("main", "t")]  # built: later statements read the manifest
        assert tuple(spark.sql("SELECT count(*), sum(id), sum(amount), count(DISTINCT k) FROM main.t").collect()[0]
                     ) == answers[st.snapshot_id] == answers[snapshots[-1]]
    finally:
        stop.set()
        dl.close()


def test_spark_lookup_of_python_data_sources_is_settled_here(spark: SparkSession, lake: tuple,
                                                             many_enough: None) -> None:
    """After the first read through a data source, the JVM's lookup of installed Python data sources is settled (by
    this layer when nothing named pyspark_* is on the path, else by Spark), and user data sources still register and
    read."""
    from pyspark.sql.datasource import DataSource, DataSourceReader

    _catalog, _data, dl, _marks = lake
    state = dl.snapshot()
    first_read.table_sql(spark, state.tables[("main", "e")], _first_read_tasks(state), state.snapshot_id)
    manager = getattr(getattr(spark._jvm, "org.apache.spark.sql.execution.datasources.DataSourceManager$"), "MODULE$")
    assert manager.dataSourceBuilders().isDefined()
    assert spark.sparkContext.applicationId in first_read._settled
    # settled by the layer itself, not by Spark's search: with the answer unset again, _settle_lookup sets it
    getattr(manager, "dataSourceBuilders_$eq")(spark._jvm.scala.Option.empty())
    first_read._settled.discard(spark.sparkContext.applicationId)
    first_read._settle_lookup(spark)
    assert manager.dataSourceBuilders().isDefined() and manager.dataSourceBuilders().get().isEmpty()

    class _Rows(DataSourceReader):
        def read(self, partition: object) -> Iterator[tuple[int]]:
            yield (41,)
            yield (1,)

    class _Users(DataSource):
        @classmethod
        def name(cls) -> str:
            return "ducklake_test_user_source"

        def schema(self) -> str:
            return "n int"

        def reader(self, schema: object) -> DataSourceReader:
            return _Rows()

    spark.dataSource.register(_Users)
    assert spark.read.format("ducklake_test_user_source").load().agg({"n": "sum"}).collect()[0][0] == 42


def _first_read_tasks(state: object) -> list:
    from dbt.adapters.ducklake.lake.read.scan import plan_scan

    return list(plan_scan(state, state.tables[("main", "e")], positions=False).files)  # type: ignore[attr-defined]


def test_a_pyspark_module_on_the_path_leaves_the_lookup_to_spark(tmp_path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "pyspark").mkdir()
    (plain / "other_module.py").write_text("")
    assert first_read.no_python_data_sources([str(plain), str(tmp_path / "missing")])
    for kind in ("module", "package", "zip"):
        d = tmp_path / kind
        d.mkdir()
        if kind == "module":
            (d / "pyspark_mine.py").write_text("")
        elif kind == "package":
            (d / "pyspark_mine").mkdir()
            (d / "pyspark_mine" / "__init__.py").write_text("")
        else:
            import zipfile

            with zipfile.ZipFile(d / "deps.zip", "w") as z:
                z.writestr("pyspark_mine/__init__.py", "")
            d = d / "deps.zip"
        assert not first_read.no_python_data_sources([str(plain), str(d)]), kind
