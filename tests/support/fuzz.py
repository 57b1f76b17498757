"""Differential fuzzing against the reference: random operation sequences applied to three lakes that start alike.

* lake "ours": every operation by our layers, as the adapter runs them (the unit of work `LakeWork` over Spark for
  DML, the format layer's transaction for DDL, lake/compaction and lake/maintenance for maintenance);
* lake "duck": every operation by DuckDB 1.5 with its ducklake extension (inlining on: small inserts are inlined);
* lake "mixed": each operation by one of the two, drawn at random (each writer reads what the other wrote).

Now and then a step runs one change per table at once: on threads of this process sharing one SparkSession (and, on
the mixed lake of a SQLite catalog, DuckDB beside them), as dbt's threads and another writer do.

After each operation every snapshot of each lake is read by DuckDB (`AT (VERSION => n)`) and by our reader and
compared, and the three lakes' latest rows are compared with each other; at the end of a sequence the Spark reader
reads the latest tables too, and each table's change feed over a few snapshot ranges (ours, `read_changes`, against
DuckDB's `ducklake_table_changes`) is compared on every lake. A mismatch is reported with the seed, the operations
so far and both sides' rows.
"""

from __future__ import annotations

import datetime as dt
import glob
import os
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from dbt.adapters.ducklake.lake import Column, DuckLake
from dbt.adapters.ducklake.lake.maintenance.cleanup import expire_snapshots
from dbt.adapters.ducklake.lake.maintenance.compaction import flush_inlined_data, merge_adjacent_files
from dbt.adapters.ducklake.lake.read.changes import read_changes
from dbt.adapters.ducklake.lake.read.scan import read_arrow
from tests.support import reference

BASE_COLUMNS = [("id", "int64", "BIGINT"), ("v", "varchar", "VARCHAR"), ("n", "int32", "INTEGER")]
# drawn with these weights (inserts dominate, as in real lakes; maintenance now and then)
OPERATIONS = {"create": 1, "insert": 6, "delete": 3, "update": 3, "merge": 3, "add_column": 1, "rename_column": 1,
              "drop_column": 1, "widen": 1, "compact": 1, "flush": 1, "expire": 1, "concurrent": 2}
# a concurrent step: one of these on each table at once, by threads of this process (and DuckDB, on the mixed lake
# of a SQLite catalog); changes of different tables never conflict, so the lakes still end alike
CONCURRENT_KINDS = ("insert", "delete", "update", "merge")


# seconds a DuckDB step on a SQLite catalog another thread holds keeps trying (see _duckdb): a writer of ours that
# waits for a reader holds SQLite's PENDING lock, which fails DuckDB's reads at once; on a loaded machine (a CI run
# beside other Spark tests) one such wait lasted over a minute
_LOCKED_WAIT = 180.0


class Mismatch(AssertionError):
    """Our layers and the reference disagree (the message says where, with a reproduction)."""


@dataclass
class TableModel:
    name: str
    columns: list[tuple[str, str]] = field(default_factory=list)  # (name, DuckLake type), in order
    next_id: int = 0
    added: int = 0


@dataclass
class Operation:
    kind: str
    table: str
    args: dict[str, Any]

    def describe(self) -> str:
        if self.kind == "concurrent":
            return "at once: " + "; ".join(op.describe() for op in self.args["ops"])
        return f"{self.kind} {self.table} {self.args}"


@dataclass
class Lake:
    name: str
    catalog: str
    data: str

    def ours(self) -> DuckLake:
        return DuckLake.open(self.catalog)


def _sql_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


class Fuzzer:
    """One sequence: a seed, its lakes under a temporary directory, its operations."""

    def __init__(self, spark: Any, seed: int, root: Path, backend: str = "duckdb",
                 weights: dict[str, int] | None = None) -> None:
        self.spark = spark
        self.weights = weights or OPERATIONS
        self.seed = seed
        self.rng = random.Random(seed)
        self.root = root
        self.backend = backend
        self.tables: dict[str, TableModel] = {}
        self.done: list[Operation] = []
        self.lakes = [self._new_lake(n) for n in ("ours", "duck", "mixed")]
        self.operations = 0

    # lakes ------------------------------------------------------------------------------------------------------
    def _new_lake(self, name: str) -> Lake:
        data = self.root / f"{name}_data"
        data.mkdir(parents=True)
        catalog = (f"duckdb:///{self.root}/{name}.ducklake" if self.backend == "duckdb"
                   else f"sqlite:///{self.root}/{name}.sqlite")
        lake = DuckLake.create(catalog, str(data) + "/")
        lake.close()
        return Lake(name, catalog, str(data) + "/")

    # the sequence -----------------------------------------------------------------------------------------------
    def run(self, length: int) -> None:
        """Apply `length` random operations, checking after each; raises Mismatch."""
        for _ in range(length):
            op = self._draw()
            if op is None:
                continue
            for lake in self.lakes:
                if op.kind == "concurrent":
                    self._concurrently(lake, op.args["ops"])
                    continue
                by_duckdb = lake.name == "duck" or (lake.name == "mixed" and self.rng.random() < 0.5)
                self._apply(lake, op, by_duckdb)
            for one in op.args["ops"] if op.kind == "concurrent" else [op]:
                self._apply_model(one)
            self.done.append(op)
            self.operations += 1
            self.check()
        self.check_spark()
        self.check_changes()

    def _apply(self, lake: Lake, op: Operation, by_duckdb: bool) -> None:
        try:
            (self._duckdb if by_duckdb else self._ours)(lake, op)
        except Exception as e:
            raise Mismatch(self._report(f"{op.describe()} failed on lake {lake.name} "
                                        f"({'DuckDB' if by_duckdb else 'ours'}): {type(e).__name__}: {e}")) from e

    def _concurrently(self, lake: Lake, ops: list[Operation]) -> None:
        """The operations at once, each on its own thread: ours on the ours lake; on the mixed lake each by DuckDB or
        ours (DuckDB only with a SQLite catalog, which several processes' connections share); DuckDB's lake in turn."""
        if lake.name == "duck":
            for op in ops:
                self._apply(lake, op, True)
            return
        duck = [lake.name == "mixed" and self.backend == "sqlite" and self.rng.random() < 0.5 for _ in ops]
        errors: list[BaseException] = []

        def one(op: Operation, by_duckdb: bool) -> None:
            try:
                self._apply(lake, op, by_duckdb)
            except BaseException as e:  # noqa: BLE001 - reported by the caller, with the sequence
                errors.append(e)

        threads = [threading.Thread(target=one, args=(op, d)) for op, d in zip(ops, duck, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def _draw(self) -> Operation | None:
        kinds = list(self.weights)
        kind = self.rng.choices(kinds, weights=[self.weights[k] for k in kinds])[0] if self.tables else "create"
        if kind == "concurrent":
            if len(self.tables) < 2:
                kind = "insert"
            else:
                ops = [self._draw_on(self.tables[name], self.rng.choice(CONCURRENT_KINDS))
                       for name in sorted(self.tables)]
                return Operation("concurrent", "", {"ops": [o for o in ops if o is not None]})
        if kind == "create":
            if len(self.tables) >= 2:
                kind = "insert"
            else:
                return Operation("create", f"t{len(self.tables)}", {})
        return self._draw_on(self.tables[self.rng.choice(sorted(self.tables))], kind)

    def _draw_on(self, t: TableModel, kind: str) -> Operation | None:
        cols = [c for c, _ in t.columns]
        if kind == "insert":
            k = self.rng.choice([1, 2, 3, 5, 8, 12, 25])
            rows = [self._row(t) for _ in range(k)]
            return Operation("insert", t.name, {"rows": rows})
        if kind in ("delete", "update"):
            return Operation(kind, t.name, {"where": self._predicate()})
        if kind == "merge":
            ids = sorted({self.rng.randrange(0, t.next_id + 5) for _ in range(self.rng.randint(1, 6))})
            rows = [[i, f"m{self.rng.randint(0, 9)}", self.rng.choice([None, self.rng.randint(-5, 50)])] for i in ids]
            t.next_id = max(t.next_id, ids[-1] + 1)
            return Operation("merge", t.name, {"rows": rows})
        extra = [c for c in cols if c.startswith("c")]
        if kind == "add_column":
            t.added += 1
            return Operation(kind, t.name, {"column": f"c{t.added}"})
        if kind == "rename_column" and extra:
            t.added += 1
            return Operation(kind, t.name, {"column": self.rng.choice(extra), "to": f"c{t.added}"})
        if kind == "drop_column" and extra:
            return Operation(kind, t.name, {"column": self.rng.choice(extra)})
        if kind == "widen" and dict(t.columns).get("n") == "int32":
            return Operation(kind, t.name, {})
        if kind in ("compact", "flush", "expire"):
            return Operation(kind, "", {})
        return None

    def _row(self, t: TableModel) -> list[Any]:
        t.next_id += 1
        return [t.next_id - 1, self.rng.choice([None, f"v{self.rng.randint(0, 9)}"]),
                self.rng.choice([None, self.rng.randint(-5, 50)])]

    def _predicate(self) -> str:
        return self.rng.choice([f"id % {self.rng.randint(2, 5)} = {self.rng.randint(0, 1)}", f"n < {self.rng.randint(-3, 30)}",
                                f"v = 'v{self.rng.randint(0, 9)}'", f"id >= {self.rng.randint(0, 40)}", "n IS NULL"])

    def _apply_model(self, op: Operation) -> None:
        if op.kind == "create":
            self.tables[op.table] = TableModel(op.table, [(c, t) for c, t, _ in BASE_COLUMNS])
            return
        t = self.tables.get(op.table)
        if t is None:
            return
        if op.kind == "add_column":
            t.columns.append((op.args["column"], "int32"))
        elif op.kind == "rename_column":
            t.columns = [(op.args["to"] if c == op.args["column"] else c, ty) for c, ty in t.columns]
        elif op.kind == "drop_column":
            t.columns = [(c, ty) for c, ty in t.columns if c != op.args["column"]]
        elif op.kind == "widen":
            t.columns = [(c, "int64" if c == "n" else ty) for c, ty in t.columns]

    # the writers --------------------------------------------------------------------------------------------------
    def _duckdb(self, lake: Lake, op: Operation) -> None:
        q = f"lake.main.{op.table}"
        base = ", ".join(c for c, _, _ in BASE_COLUMNS)
        statements: list[str] = []
        if op.kind == "create":
            statements.append(f"CREATE TABLE {q} ({', '.join(f'{c} {sql}' for c, _, sql in BASE_COLUMNS)})")
        elif op.kind == "insert":
            values = ", ".join("(" + ", ".join(_sql_literal(v) for v in r) + ")" for r in op.args["rows"])
            statements.append(f"INSERT INTO {q} ({base}) VALUES {values}")
        elif op.kind == "delete":
            statements.append(f"DELETE FROM {q} WHERE {op.args['where']}")
        elif op.kind == "update":
            statements.append(f"UPDATE {q} SET n = n + 1 WHERE {op.args['where']}")
        elif op.kind == "merge":
            values = ", ".join("(" + ", ".join(_sql_literal(v) for v in r) + ")" for r in op.args["rows"])
            statements.append(
                f"MERGE INTO {q} AS t USING (VALUES {values}) AS s({base}) ON t.id = s.id "
                "WHEN MATCHED THEN UPDATE SET v = s.v, n = s.n "
                f"WHEN NOT MATCHED THEN INSERT ({base}) VALUES (s.id, s.v, s.n)")
        elif op.kind == "add_column":
            statements.append(f"ALTER TABLE {q} ADD COLUMN {op.args['column']} INTEGER")
        elif op.kind == "rename_column":
            statements.append(f"ALTER TABLE {q} RENAME COLUMN {op.args['column']} TO {op.args['to']}")
        elif op.kind == "drop_column":
            statements.append(f"ALTER TABLE {q} DROP COLUMN {op.args['column']}")
        elif op.kind == "widen":
            statements.append(f"ALTER TABLE {q} ALTER COLUMN n SET DATA TYPE BIGINT")
        elif op.kind == "compact":
            statements.append("CALL ducklake_merge_adjacent_files('lake')")
        elif op.kind == "flush":
            statements.append("CALL ducklake_flush_inlined_data('lake')")
        elif op.kind == "expire":
            statements.append("CALL ducklake_expire_snapshots('lake', older_than => now())")
        deadline = time.monotonic() + _LOCKED_WAIT
        attempt = 0
        while True:
            try:
                with reference.attached(lake.catalog) as con:
                    for s in statements:
                        con.execute(s).fetchall()
                return
            except Exception as e:  # noqa: BLE001 - DuckDB's errors come in many classes
                # a SQLite catalog written by another thread of ours at that moment: DuckDB's statement gave up
                # waiting for the file before it changed anything (each step is one statement; DuckDB's SQLite
                # access does not wait for a lock), so, as a user's loader would, it tries again for a while (a
                # loaded machine can hold our commit for seconds)
                if "database is locked" not in str(e):
                    raise
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{e} (still locked after {_LOCKED_WAIT:.0f} s; processes with the catalog "
                                       f"file open: {_holders(lake.catalog)})") from e
                attempt += 1
                time.sleep(min(0.25 * attempt, 2.0))

    def _ours(self, lake: Lake, op: Operation) -> None:
        from dbt.adapters.ducklake.spark.write.dml import When
        from dbt.adapters.ducklake.spark.write.work import LakeWork

        dl = lake.ours()
        try:
            if op.kind in ("compact", "flush", "expire"):
                {"compact": lambda: merge_adjacent_files(dl), "flush": lambda: flush_inlined_data(dl),
                 "expire": lambda: expire_snapshots(dl, older_than=dt.datetime.now(dt.timezone.utc))}[op.kind]()
                return
            work = LakeWork(self.spark, dl)
            tx, s, t = work.tx, "main", op.table
            if op.kind == "create":
                tx.create_table(s, t, [Column(0, c, ty) for c, ty, _ in BASE_COLUMNS])
            elif op.kind == "insert":
                work.insert(s, t, self._frame(dl, t, op.args["rows"]))
            elif op.kind == "delete":
                work.delete(s, t, op.args["where"])
            elif op.kind == "update":
                work.update(s, t, {"n": "n + 1"}, op.args["where"])
            elif op.kind == "merge":
                work.merge(s, t, self._frame(dl, t, op.args["rows"]), "t.id = s.id",
                           [When("matched", "update", None, {"v": "s.v", "n": "s.n"}), When("not_matched", "insert")])
            elif op.kind == "add_column":
                tx.add_column(s, t, Column(0, op.args["column"], "int32"))
            elif op.kind == "rename_column":
                tx.rename_column(s, t, op.args["column"], op.args["to"])
            elif op.kind == "drop_column":
                tx.drop_column(s, t, op.args["column"])
            elif op.kind == "widen":
                tx.alter_column_type(s, t, "n", "int64")
            work.commit(commit_message=f"fuzz {op.kind}")
        finally:
            dl.close()

    def _frame(self, dl: DuckLake, table: str, rows: list[list[Any]]) -> Any:
        info = dl.snapshot().table("main", table)
        from dbt.adapters.ducklake.spark.types import spark_schema

        names = [c.name for c in info.columns]
        full = [[r[0], r[1], r[2]] + [None] * (len(names) - 3) for r in rows]
        # the base columns first, as the table has them (added columns come after, NULL)
        order = [names.index(c) for c, _, _ in BASE_COLUMNS] + [i for i, c in enumerate(names)
                                                                if c not in {b for b, _, _ in BASE_COLUMNS}]
        aligned = []
        for r in full:
            out: list[Any] = [None] * len(names)
            for pos, idx in enumerate(order):
                out[idx] = r[pos]
            aligned.append(out)
        return self.spark.createDataFrame(aligned, spark_schema(list(info.columns)))

    # checks -----------------------------------------------------------------------------------------------------
    def _duck_rows(self, con: Any, table: str, version: int | None) -> tuple[list[str], list[tuple]]:
        at = f" AT (VERSION => {version})" if version is not None else ""
        cur = con.execute(f"SELECT * FROM lake.main.{table}{at}")
        names = [d[0] for d in cur.description]
        return names, sorted((tuple(r) for r in cur.fetchall()), key=repr)

    @staticmethod
    def _our_rows(dl: DuckLake, table: str, version: int | None) -> tuple[list[str], list[tuple]] | None:
        st = dl.snapshot(version)
        info = next((t for (s, n), t in st.tables.items() if s == "main" and n == table), None)
        if info is None:
            return None
        data: pa.Table = read_arrow(st, info, with_rowid=False)
        return data.column_names, sorted((tuple(r.values()) for r in data.to_pylist()), key=repr)

    def check(self) -> None:
        """Every snapshot of every lake: DuckDB's reading equals ours; the lakes' latest rows equal each other."""
        latest: dict[str, dict[str, Any]] = {}
        for lake in self.lakes:
            dl = lake.ours()
            try:
                versions = [s.snapshot_id for s in dl.snapshots()]
                ours = {(v, t): self._our_rows(dl, t, v) for v in versions for t in self.tables}
            finally:
                dl.close()
            with reference.attached(lake.catalog, read_only=True) as con:
                for (v, t), mine in ours.items():
                    if mine is None:
                        continue
                    theirs = self._duck_rows(con, t, v)
                    if theirs != mine:
                        raise Mismatch(self._report(f"lake {lake.name}, table {t} at snapshot {v}: DuckDB reads "
                                                    f"{theirs}, we read {mine}"))
                latest[lake.name] = {t: self._duck_rows(con, t, None) for t in self.tables}
        if not latest["ours"] == latest["duck"] == latest["mixed"]:
            raise Mismatch(self._report(f"the lakes differ: ours {latest['ours']}, DuckDB's {latest['duck']}, "
                                        f"mixed {latest['mixed']}"))

    def check_spark(self) -> None:
        """The Spark reader (the views dbt reads) gives the latest rows DuckDB gives, on every lake."""
        from dbt.adapters.ducklake.spark.read.scan import register_table

        for lake in self.lakes:
            dl = lake.ours()
            try:
                st = dl.snapshot()
                for (_s, n), info in st.tables.items():
                    view = f"fuzz_{lake.name}_{n}_{self.seed}"
                    register_table(self.spark, st, info, database="fuzz_check", view=view)
                    df = self.spark.table(f"fuzz_check.{view}")
                    got = sorted((tuple(r) for r in df.collect()), key=repr)
                    with reference.attached(lake.catalog, read_only=True) as con:
                        names, want = self._duck_rows(con, n, None)
                    self.spark.sql(f"DROP VIEW IF EXISTS fuzz_check.{view}")
                    if (df.columns, got) != (names, want):
                        raise Mismatch(self._report(f"lake {lake.name}, table {n}: Spark reads {df.columns} {got}, "
                                                    f"DuckDB reads {names} {want}"))
            finally:
                dl.close()

    @staticmethod
    def _ranges(versions: list[int]) -> list[tuple[int, int]]:
        """A few [start, end] ranges: the whole history, its halves, the last snapshot alone (compactions and the
        deletes after them fall on either side of some boundary)."""
        if not versions:
            return []
        first, mid, last = versions[0], versions[len(versions) // 2], versions[-1]
        return sorted({(first, last), (first, mid), (mid, last), (last, last)})

    def check_changes(self) -> None:
        """Every table's change feed over a few ranges: ours equals DuckDB's ducklake_table_changes, on every lake."""
        for lake in self.lakes:
            dl = lake.ours()
            try:
                ranges = self._ranges([s.snapshot_id for s in dl.snapshots()])
                ours: dict[tuple[str, int, int], list[tuple]] = {}
                for start, end in ranges:
                    tables = {n for (sch, n) in dl.snapshot(end).tables if sch == "main"}
                    for t in sorted(tables & set(self.tables)):
                        try:
                            got = read_changes(dl, "main", t, start, end)
                        except Exception as e:  # noqa: BLE001 - any failure is a finding, reported with the seed
                            raise Mismatch(self._report(f"lake {lake.name}: our change feed of {t} in [{start}, "
                                                        f"{end}] failed: {e!r}")) from e
                        ours[(t, start, end)] = sorted((tuple(r.values()) for r in got.to_pylist()), key=repr)
            finally:
                dl.close()
            with reference.attached(lake.catalog, read_only=True) as con:
                for (t, start, end), mine in ours.items():
                    try:
                        theirs = sorted((tuple(r) for r in con.execute(
                            "SELECT * FROM ducklake_table_changes('lake', 'main', ?, ?, ?)", [t, start, end]
                        ).fetchall()), key=repr)
                    except Exception as e:  # noqa: BLE001 - DuckDB refusing what we answered is a finding too
                        raise Mismatch(self._report(f"lake {lake.name}: DuckDB's change feed of {t} in [{start}, "
                                                    f"{end}] failed: {e}; ours is {mine}")) from e
                    if theirs != mine:
                        raise Mismatch(self._report(f"lake {lake.name}, change feed of {t} in [{start}, {end}]: "
                                                    f"DuckDB reports {theirs}, we report {mine}"))

    def _report(self, what: str) -> str:
        ops = "\n".join(f"  {i + 1}. {op.describe()}" for i, op in enumerate(self.done))
        return f"seed {self.seed} ({self.backend} catalogs): {what}\noperations before it:\n{ops}"


def run_sequences(spark: Any, seeds: list[int], length: int, backends: tuple[str, ...] = ("duckdb", "sqlite"),
                  on_mismatch: Callable[[int, Mismatch], None] | None = None,
                  weights: dict[str, int] | None = None) -> tuple[int, int, list[str]]:
    """Run one sequence per seed (backend alternating); returns (sequences, operations, mismatch reports)."""
    operations, mismatches = 0, []
    for i, seed in enumerate(seeds):
        root = Path(tempfile.mkdtemp(prefix=f"fuzz-{seed}-"))
        try:
            fuzzer = Fuzzer(spark, seed, root, backends[i % len(backends)], weights)
            try:
                fuzzer.run(length)
            except Mismatch as m:
                mismatches.append(str(m))
                if on_mismatch is not None:
                    on_mismatch(seed, m)
            operations += fuzzer.operations
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return len(seeds), operations, mismatches


def _holders(catalog: str) -> list[str]:
    """The processes that have a SQLite catalog's file open (pid and command), for a lock that never ends."""
    path = os.path.realpath(catalog.split(":", 1)[1] if catalog.startswith("sqlite:") else catalog)
    found = []
    for fd_dir in glob.glob("/proc/[0-9]*/fd"):
        try:
            if any(os.path.realpath(os.path.join(fd_dir, fd)).startswith(path) for fd in os.listdir(fd_dir)):
                pid = fd_dir.split("/")[2]
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    command = f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
                found.append(f"{pid} {command}")
        except OSError:
            continue
    return found

