"""Concurrent writers: lost races are retried under the reference's conflict rules, or fail with a clear conflict.

Three parts:
1. Two Python processes (this layer) and one DuckDB process append to one table of a SQLite or PostgreSQL lake at the
   same time; nothing is lost or duplicated, snapshots stay consecutive and the catalog keeps its invariants.
   (Not on the DuckDB-file backend: DuckDB locks its database file, so concurrent *processes* cannot share it.)
2. Two transactions of this layer staged on the same base snapshot (two DuckLake handles, like two writers), on every
   backend: which pairs commit both (the second rebased on the first) and which raise CommitConflictError, as the
   reference's TS::CheckForConflicts decides (lake/write/conflicts.py).
3. A transaction of ours staged, then DuckDB commits, then ours commits.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dbt.adapters.ducklake.lake.errors import CommitConflictError
from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.lake.read.scan import read_arrow
from dbt.adapters.ducklake.lake.records import Column
from dbt.adapters.ducklake.lake.write.transaction import Transaction
from dbt.adapters.ducklake.lake.write.writer import write_data_files
from tests.lake.concurrency_worker import duckdb_ids, lake_ids
from tests.support import reference
from tests.support.invariants import violations

REPO_ROOT = Path(__file__).resolve().parents[2]
COLUMNS = [Column(0, "id", "int64"), Column(0, "src", "varchar")]

# part 1: each writer commits N snapshots
N = 15
ROWS_PER_FILE = 4
LAKE_PAUSE_SECONDS = 0.06  # random pause (up to) between our commits, so all three writers overlap throughout
WORKER_TIMEOUT_SECONDS = 90
WRITERS = [  # (name, role, first id)
    ("py1", "lake", 0),
    ("py2", "lake", 100_000),
    ("duck", "duckdb", 200_000),
]


# helpers ----------------------------------------------------------------------------------------------------------


def new_lake(catalog_url: str, data_path: str, tables: tuple[str, ...] = ("t",)) -> DuckLake:
    lake = DuckLake.create(catalog_url, data_path)
    with lake.transaction(author="setup", commit_message="setup") as tx:
        tx.create_schema("s")
        for t in tables:
            tx.create_table("s", t, COLUMNS)
    return lake


def write_rows(tx: Transaction, table: str, ids: range | list[int], src: str = "x") -> list[str]:
    """Write a data file of these ids for the table as `tx` sees it and stage it; returns the written paths."""
    info = tx.table("s", table)
    specs = write_data_files(info, tx.base.table_path(info), rows_of(ids, src))
    tx.add_data_files("s", table, specs)
    return [s.path for s in specs]


def rows_of(ids: range | list[int], src: str = "x") -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "src": [src] * len(ids)})


def append(lake: DuckLake, table: str, ids: range | list[int]) -> int:
    with lake.transaction(author="setup") as tx:
        write_rows(tx, table, ids)
    assert tx.committed is not None
    return tx.committed.snapshot_id


def ids_of(lake: DuckLake, table: str) -> list[int]:
    state = lake.snapshot()
    return sorted(read_arrow(state, state.table("s", table)).column("id").to_pylist())


def files_of(lake: DuckLake, table: str) -> list[Any]:
    state = lake.snapshot()
    return sorted(state.files(state.table("s", table)), key=lambda f: f.data_file_id)


def catalog_dump(lake: DuckLake) -> dict[str, list[str]]:
    """Every row of every catalog table (ducklake_*), for comparing the whole catalog before and after."""
    db = lake.db
    with db.read() as conn:
        if db.location.backend == "sqlite":
            names = [r[0] for r in db.query(conn, "SELECT name FROM sqlite_master WHERE type = 'table'")]
        else:
            names = [r[0] for r in db.query(
                conn, "SELECT table_name FROM information_schema.tables WHERE table_schema = :s",
                {"s": db.dialect.default_schema})]
        return {n: sorted(repr(tuple(r)) for r in db.query(conn, f"SELECT * FROM {n}"))
                for n in sorted(names) if n.startswith("ducklake_")}


def disk_files(data_path: str) -> set[str]:
    return {os.path.join(d, f) for d, _, fs in os.walk(data_path) for f in fs}


def referenced_paths(lake: DuckLake) -> set[str]:
    """The resolved paths of the live files, plus the file name of every path the catalog stores (live or not)."""
    state = lake.snapshot()
    with lake.db.read() as conn:
        stored = {r[0] for r in lake.db.query(conn, "SELECT path FROM {p}ducklake_data_file UNION "
                                                    "SELECT path FROM {p}ducklake_delete_file")}
    out = set()
    for info in state.tables.values():
        for f in state.files(info):
            out.add(f.path)
    return out | {os.path.basename(p) for p in stored}


# part 1: two Python processes and a DuckDB process ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "catalog_url",
    [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)],
    indirect=True,
)
def test_two_python_processes_and_duckdb_lose_nothing(
    catalog_url: str, data_path: str, tmp_path: Path, duck: Any
) -> None:
    # the DuckDB-file backend is left out on purpose: DuckDB locks its database file, so concurrent processes
    # cannot share a DuckDB catalog (our connections wait for the lock; writers take turns instead of racing)
    lake = new_lake(catalog_url, data_path)
    table_id = lake.snapshot().table("s", "t").table_id
    lake.close()
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    procs, outs = {}, {}
    for name, role, start in WRITERS:
        outs[name] = tmp_path / f"{name}.json"
        cfg = {"role": role, "name": name, "catalog": catalog_url, "schema": "s", "table": "t", "start": start,
               "n": N, "rows": ROWS_PER_FILE, "pause": LAKE_PAUSE_SECONDS, "barrier": str(barrier), "out": str(outs[name])}
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "tests.lake.concurrency_worker", json.dumps(cfg)],
            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
    try:
        deadline = time.monotonic() + WORKER_TIMEOUT_SECONDS
        while not all((barrier / f"ready-{n}").exists() for n in procs):
            dead = {n: p.returncode for n, p in procs.items() if p.poll() is not None}
            assert not dead, f"a worker exited before the start: {dead} " + "".join(
                procs[n].communicate()[1] for n in dead)
            assert time.monotonic() < deadline, "workers did not get ready"
            time.sleep(0.01)
        t0 = time.monotonic()
        (barrier / "go").touch()
        for name, p in procs.items():
            _, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            assert p.returncode == 0, f"worker {name} failed:\n{err}"
        wall = time.monotonic() - t0
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.communicate()
    results = {n: json.loads(outs[n].read_text()) for n in procs}
    print(f"\n[{catalog_url.split(':')[0]}] {3 * N} commits by 3 processes in {wall:.2f}s: " + "; ".join(
        f"{n}: {r['elapsed']:.2f}s, retries {r['retries']}"
        + (f", rebased {r['rebased']}/{N}, max commit {r['max_commit_seconds']:.2f}s" if "rebased" in r
           else f", errors {r['errors']}")
        for n, r in results.items()))

    expected: list[int] = []
    for _, role, start in WRITERS:
        for i in range(N):
            expected += duckdb_ids(start, i) if role == "duckdb" else lake_ids(start, i, ROWS_PER_FILE)
    expected.sort()
    assert len(set(expected)) == len(expected)

    lake = DuckLake.open(catalog_url)
    snaps = lake.snapshots()
    # one snapshot per commit, consecutive ids, no gaps
    assert [s.snapshot_id for s in snaps] == list(range(2 + 3 * N))
    with lake.db.read() as conn:
        per_snapshot = dict(lake.db.query(
            conn, "SELECT snapshot_id, count(*) FROM {p}ducklake_snapshot_changes GROUP BY snapshot_id"))
    assert per_snapshot == {s.snapshot_id: 1 for s in snaps}, "every snapshot has exactly one changes row"
    for s in snaps[2:]:
        assert s.changes_made in (f"inserted_into_table:{table_id}", f"inlined_insert:{table_id}"), s
    # each commit our workers reported is the snapshot that carries their author
    for name, role, _ in WRITERS:
        if role == "lake":
            assert results[name]["snapshots"] == [s.snapshot_id for s in snaps if s.author == name]
            assert sorted(s.commit_message for s in snaps if s.author == name) == sorted(
                f"{name} #{i}" for i in range(N))
    assert sum(1 for s in snaps[2:] if s.author is None) == N  # DuckDB's

    state = lake.snapshot()
    info = state.table("s", "t")
    ours = read_arrow(state, info)
    our_ids = ours.column("id").to_pylist()
    assert collections.Counter(our_ids) == collections.Counter(expected), "rows lost or duplicated (our reader)"
    owner = {start // 100_000: name for name, _, start in WRITERS}
    assert all(owner[i // 100_000] == src for i, src in zip(our_ids, ours.column("src").to_pylist(), strict=True))
    rowids = ours.column("rowid").to_pylist()
    assert len(set(rowids)) == len(rowids), "duplicate rowids"
    assert sorted(rowids) == list(range(len(expected))), "row ids have gaps or overlaps"
    stats = state.table_stats(info)
    assert stats is not None and stats.record_count == len(expected) and stats.next_row_id == len(expected)
    assert violations(catalog_url) == []

    with attached(duck, catalog_url, read_only=True) as con:
        theirs = con.execute("SELECT rowid, id, src FROM lake.s.t").fetchall()
        assert con.execute("SELECT count(*) FROM lake.snapshots()").fetchone() == (2 + 3 * N,)
    assert collections.Counter(r[1] for r in theirs) == collections.Counter(expected), "rows lost or duplicated (DuckDB)"
    assert {r[0]: (r[1], r[2]) for r in theirs} == {
        r: (i, s) for r, i, s in zip(rowids, our_ids, ours.column("src").to_pylist(), strict=True)
    }, "DuckDB and our reader disagree on rowid -> row"
    lake.close()


# part 2: two transactions of this layer on the same base snapshot --------------------------------------------------


@contextmanager
def two_writers(catalog_url: str) -> Iterator[tuple[DuckLake, DuckLake]]:
    """Two independent handles on one lake, as two writers (processes) would hold."""
    w1, w2 = DuckLake.open(catalog_url), DuckLake.open(catalog_url)
    try:
        yield w1, w2
    finally:
        w1.close()
        w2.close()


def staged_pair(w1: DuckLake, w2: DuckLake) -> tuple[Transaction, Transaction]:
    tx1, tx2 = w1.transaction(author="w1"), w2.transaction(author="w2")
    assert tx1.base.snapshot_id == tx2.base.snapshot_id
    return tx1, tx2


@contextmanager
def unchanged(lake: DuckLake, data_path: str) -> Iterator[None]:
    """Asserts that the block (a commit that fails) leaves the catalog and the data directory exactly as they were."""
    dump, disk, snaps = catalog_dump(lake), disk_files(data_path), lake.snapshots()
    yield
    assert lake.snapshots() == snaps
    assert catalog_dump(lake) == dump
    assert disk_files(data_path) == disk


@pytest.fixture(scope="module")
def duck() -> Iterator[Any]:
    """One reference DuckDB for the module (loading its extensions costs ~0.3 s per instance)."""
    con = reference.connect()
    yield con
    con.close()


@contextmanager
def attached(duck: Any, catalog_url: str, read_only: bool = False) -> Iterator[Any]:
    """The lake attached as `lake` to the module's DuckDB; detached after (so a DuckDB catalog file is unlocked)."""
    duck.execute(reference.attach_sql(catalog_url, read_only=read_only))
    try:
        yield duck
    finally:
        duck.execute("DETACH lake")


def duckdb_ids_of(duck: Any, catalog_url: str, *tables: str) -> list[int] | dict[str, list[int]]:
    """The ids DuckDB reads from each table (a list for one table, else a dict), from a fresh ATTACH."""
    with attached(duck, catalog_url, read_only=True) as con:
        out = {t: [r[0] for r in con.execute(f"SELECT id FROM lake.s.{t} ORDER BY id").fetchall()] for t in tables}
    return out[tables[0]] if len(tables) == 1 else out


def test_concurrent_appends_to_one_table_both_commit(catalog_url: str, data_path: str, duck: Any) -> None:
    lake = new_lake(catalog_url, data_path)
    base = append(lake, "t", range(10))
    with two_writers(catalog_url) as (w1, w2):
        tx1, tx2 = staged_pair(w1, w2)
        write_rows(tx1, "t", range(100, 110), "w1")
        write_rows(tx2, "t", range(200, 210), "w2")
        s1 = tx1.commit()
        s2 = tx2.commit()  # lost the race: re-reads, passes the conflict rules, commits on top of tx1's snapshot
    assert s1 is not None and s2 is not None
    assert (s1.snapshot_id, s2.snapshot_id) == (base + 1, base + 2)
    expected = [*range(10), *range(100, 110), *range(200, 210)]
    assert ids_of(lake, "t") == expected
    state = lake.snapshot()
    rowids = read_arrow(state, state.table("s", "t")).column("rowid").to_pylist()
    assert sorted(rowids) == list(range(30))
    assert [f.row_id_start for f in files_of(lake, "t")] == [0, 10, 20]
    assert violations(catalog_url) == []
    assert duckdb_ids_of(duck, catalog_url, "t") == expected


def test_deletes_from_the_same_data_file_conflict(catalog_url: str, data_path: str, duck: Any) -> None:
    lake = new_lake(catalog_url, data_path)
    append(lake, "t", range(20))
    (f,) = files_of(lake, "t")
    with two_writers(catalog_url) as (w1, w2):
        tx1, tx2 = staged_pair(w1, w2)
        tx1.delete_rows("s", "t", f.data_file_id, [0, 1])
        tx2.delete_rows("s", "t", f.data_file_id, [5, 6])
        tx1.commit()
        with unchanged(lake, data_path), pytest.raises(CommitConflictError, match=rf"delete from file {f.data_file_id}"):
            tx2.commit()
    assert ids_of(lake, "t") == list(range(2, 20))
    assert violations(catalog_url) == []
    assert duckdb_ids_of(duck, catalog_url, "t") == list(range(2, 20))


def test_deletes_from_different_files_and_inserts_into_other_tables_both_commit(
    catalog_url: str, data_path: str, duck: Any
) -> None:
    # the reference only conflicts two deletes of one table when they touch the same data file
    lake = new_lake(catalog_url, data_path, tables=("t", "u"))
    append(lake, "t", range(10))
    append(lake, "t", range(10, 20))
    f1, f2 = files_of(lake, "t")
    with two_writers(catalog_url) as (w1, w2):
        tx1, tx2 = staged_pair(w1, w2)
        tx1.delete_rows("s", "t", f1.data_file_id, [0, 1])
        tx2.delete_rows("s", "t", f2.data_file_id, [0, 9])
        s1, s2 = tx1.commit(), tx2.commit()
        assert s1 is not None and s2 is not None and s2.snapshot_id == s1.snapshot_id + 1
        # a delete and an insert into *another* table do not conflict either
        tx1, tx2 = staged_pair(w1, w2)
        tx1.delete_rows("s", "t", f1.data_file_id, [2])
        write_rows(tx2, "u", range(50, 55))
        tx2.commit()
        tx1.commit()
    assert ids_of(lake, "t") == [*range(3, 10), *range(11, 19)]
    assert ids_of(lake, "u") == list(range(50, 55))
    assert violations(catalog_url) == []
    assert duckdb_ids_of(duck, catalog_url, "t") == [*range(3, 10), *range(11, 19)]


@pytest.mark.parametrize("first", ["delete", "insert"])
def test_insert_and_delete_on_one_table_conflict(catalog_url: str, data_path: str, first: str) -> None:
    # the reference: an insert conflicts with a concurrent delete from the table, and a delete with a concurrent insert
    lake = new_lake(catalog_url, data_path)
    append(lake, "t", range(10))
    (f,) = files_of(lake, "t")
    with two_writers(catalog_url) as (w1, w2):
        tx_ins, tx_del = staged_pair(w1, w2)
        write_rows(tx_ins, "t", range(100, 105))
        tx_del.delete_rows("s", "t", f.data_file_id, [0])
        winner, loser = (tx_del, tx_ins) if first == "delete" else (tx_ins, tx_del)
        winner.commit()
        why = "insert into table .* deleted from it" if first == "delete" else "delete from table .* inserted into it"
        with unchanged(lake, data_path), pytest.raises(CommitConflictError, match=why):
            loser.commit()
    expected = list(range(1, 10)) if first == "delete" else [*range(10), *range(100, 105)]
    assert ids_of(lake, "t") == expected
    assert violations(catalog_url) == []


def test_append_conflicts_with_a_concurrent_drop_table(catalog_url: str, data_path: str) -> None:
    lake = new_lake(catalog_url, data_path)
    append(lake, "t", range(10))
    table_id = lake.snapshot().table("s", "t").table_id
    with two_writers(catalog_url) as (w1, w2):
        tx1, tx2 = staged_pair(w1, w2)
        written = write_rows(tx1, "t", range(100, 110))
        tx2.drop_table("s", "t")
        tx2.commit()
        with unchanged(lake, data_path), pytest.raises(
            CommitConflictError, match=rf"insert into table {table_id} - but another transaction has dropped it"
        ):
            tx1.commit()
    assert lake.snapshot().find_relation("s", "t") is None
    # the Parquet files our writer wrote stay on disk as orphans, but no catalog row references them
    known = referenced_paths(lake)
    for path in written:
        assert os.path.exists(path)
        assert path not in known and os.path.basename(path) not in known
    assert violations(catalog_url) == []


@pytest.mark.parametrize("names", [("x", "x"), ("x", "y")], ids=["same-name", "other-name"])
def test_concurrent_create_table(catalog_url: str, data_path: str, names: tuple[str, str]) -> None:
    lake = new_lake(catalog_url, data_path)
    with two_writers(catalog_url) as (w1, w2):
        tx1, tx2 = staged_pair(w1, w2)
        tx1.create_table("s", names[0], COLUMNS)
        tx2.create_table("s", names[1], [Column(0, "other", "varchar")])
        tx1.commit()
        if names[0] == names[1]:
            with unchanged(lake, data_path), pytest.raises(
                CommitConflictError, match=r'create s\.x - but another transaction has created an entry with this name'
            ):
                tx2.commit()
        else:
            tx2.commit()
    state = lake.snapshot()
    assert [c.name for c in state.table("s", names[0]).columns] == ["id", "src"]
    if names[0] != names[1]:
        assert [c.name for c in state.table("s", names[1]).columns] == ["other"]
    assert violations(catalog_url) == []


def test_alter_conflicts_with_a_concurrent_alter(catalog_url: str, data_path: str) -> None:
    lake = new_lake(catalog_url, data_path, tables=("t", "u"))
    table_id = lake.snapshot().table("s", "t").table_id
    with two_writers(catalog_url) as (w1, w2):
        tx1, tx2 = staged_pair(w1, w2)
        tx1.add_column("s", "t", Column(0, "c1", "int32"))
        tx2.add_column("s", "t", Column(0, "c2", "int32"))
        tx1.commit()
        with unchanged(lake, data_path), pytest.raises(
            CommitConflictError, match=rf"alter table {table_id} - but another transaction has altered it"
        ):
            tx2.commit()
        # ALTERs of different tables do not conflict
        tx1, tx2 = staged_pair(w1, w2)
        tx1.rename_column("s", "t", "c1", "c1b")
        tx2.add_column("s", "u", Column(0, "c2", "int32"))
        tx1.commit()
        tx2.commit()
    state = lake.snapshot()
    assert [c.name for c in state.table("s", "t").columns] == ["id", "src", "c1b"]
    assert [c.name for c in state.table("s", "u").columns] == ["id", "src", "c2"]
    assert violations(catalog_url) == []


def test_new_table_ids_of_a_transaction_do_not_conflict_with_other_writers_tables(
    catalog_url: str, data_path: str, duck: Any
) -> None:
    # A CREATE TABLE + INSERT (a CTAS, as dbt writes a model) staged while another writer creates and drops a table
    # (as dbt does with its __dbt_tmp relations): the staged table's id is provisional, and the other table got that
    # same id. The reference keeps ids of tables created in a transaction transaction-local, so its conflict check
    # never matches them (checked with two DuckDB 1.5.5 sessions: CTAS || CREATE TABLE y; DROP TABLE y -> both
    # commit). The insert into the new table must not be reported as "insert into a table another writer dropped".
    lake = new_lake(catalog_url, data_path, tables=())
    with two_writers(catalog_url) as (w1, w2):
        tx1 = w1.transaction(author="ctas")
        staged = tx1.create_table("s", "model", COLUMNS)
        write_rows(tx1, "model", range(5))
        with w2.transaction() as tx2:
            other = tx2.create_table("s", "model__dbt_tmp", COLUMNS)
        assert other.table_id == staged.table_id  # the provisional id is taken by now
        with w2.transaction() as tx3:
            tx3.drop_table("s", "model__dbt_tmp")
        snap = tx1.commit()
    assert snap is not None
    assert ids_of(lake, "model") == list(range(5))
    assert lake.snapshot().table("s", "model").table_id != other.table_id
    assert violations(catalog_url) == []
    assert duckdb_ids_of(duck, catalog_url, "model") == list(range(5))



@pytest.mark.parametrize("cascade", [False, True], ids=["restrict", "cascade"])
def test_drop_schema_conflicts_with_a_concurrent_create_in_it(catalog_url: str, data_path: str, cascade: bool) -> None:
    # the reference: "attempting to drop schema with name "z" - but another transaction has created an entry in this
    # schema". Replaying the DROP on the latest state instead fails with "schema not empty" (not a conflict error),
    # or, with CASCADE, silently drops the table the other writer just created.
    lake = new_lake(catalog_url, data_path, tables=())
    with lake.transaction() as tx:
        tx.create_schema("z")
    with two_writers(catalog_url) as (w1, w2):
        tx1, tx2 = staged_pair(w1, w2)
        tx1.drop_schema("z", cascade=cascade)
        tx2.create_table("z", "x", COLUMNS)
        tx2.commit()
        with unchanged(lake, data_path), pytest.raises(CommitConflictError, match="drop schema"):
            tx1.commit()
    assert list(lake.snapshot().tables) == [("z", "x")]
    assert violations(catalog_url) == []


def test_create_table_does_not_conflict_with_dropping_another_schema(catalog_url: str, data_path: str) -> None:
    # the reference conflicts a CREATE only with a concurrent drop of the schema it creates in
    lake = new_lake(catalog_url, data_path, tables=())
    with lake.transaction() as tx:
        tx.create_schema("z")
    with two_writers(catalog_url) as (w1, w2):
        tx1, tx2 = staged_pair(w1, w2)
        tx1.create_table("s", "x", COLUMNS)
        tx2.drop_schema("z")
        tx2.commit()
        tx1.commit()
    state = lake.snapshot()
    assert sorted(state.schemas) == ["main", "s"] and list(state.tables) == [("s", "x")]
    assert violations(catalog_url) == []


@pytest.mark.parametrize("recreate", [False, True], ids=["rename", "rename-and-recreate"])
def test_append_follows_a_concurrent_rename_of_its_table(catalog_url: str, data_path: str, recreate: bool) -> None:
    # A rename is no conflict for an insert in the reference (its change is only created_table:"s"."new"), and DuckDB
    # binds the insert to the table id: the rows land in the renamed table, even when a new table now has the old name
    # (checked with two DuckDB 1.5.5 sessions). Staged operations must not be re-resolved by name on retry.
    lake = new_lake(catalog_url, data_path)
    append(lake, "t", range(5))
    with two_writers(catalog_url) as (w1, w2):
        tx1, tx2 = staged_pair(w1, w2)
        write_rows(tx1, "t", range(10, 15))
        tx2.rename_table("s", "t", "t_old")
        if recreate:
            tx2.create_table("s", "t", COLUMNS)  # a new table takes the old name
        tx2.commit()
        tx1.commit()  # the reference commits into s.t_old
    assert ids_of(lake, "t_old") == [*range(5), *range(10, 15)]
    if recreate:
        assert ids_of(lake, "t") == []
    assert violations(catalog_url) == []

# part 3: a transaction of ours staged, DuckDB commits, ours commits --------------------------------------------------


@pytest.mark.parametrize("duckdb_table", ["u", "t"], ids=["other-table", "same-table"])
def test_commit_after_a_duckdb_insert(catalog_url: str, data_path: str, duck: Any, duckdb_table: str) -> None:
    lake = new_lake(catalog_url, data_path, tables=("t", "u"))
    base = append(lake, "t", range(10))
    tx = lake.transaction(author="us")
    write_rows(tx, "t", range(100, 110))
    with attached(duck, catalog_url) as con:
        con.execute(f"INSERT INTO lake.s.{duckdb_table} SELECT range, 'duck' FROM range(1000, 1020)")
    snap = tx.commit()
    assert snap is not None and snap.snapshot_id == base + 2
    expected = {"t": list(range(10)) + list(range(100, 110)), "u": []}
    expected[duckdb_table] = sorted(expected[duckdb_table] + list(range(1000, 1020)))
    assert {t: ids_of(lake, t) for t in ("t", "u")} == expected
    assert duckdb_ids_of(duck, catalog_url, "t", "u") == expected
    state = lake.snapshot()
    rowids = read_arrow(state, state.table("s", "t")).column("rowid").to_pylist()
    assert len(set(rowids)) == len(rowids)
    assert violations(catalog_url) == []


def test_delete_conflicts_with_a_duckdb_delete_of_the_same_file(catalog_url: str, data_path: str, duck: Any) -> None:
    lake = new_lake(catalog_url, data_path)
    append(lake, "t", range(40))
    (f,) = files_of(lake, "t")
    tx = lake.transaction(author="us")
    tx.delete_rows("s", "t", f.data_file_id, [30, 31])
    with attached(duck, catalog_url) as con:
        con.execute("DELETE FROM lake.s.t WHERE id < 20")  # more rows than the inlining limit: a delete file
    assert lake.snapshots()[-1].changes_made == f"deleted_from_table:{f.table_id}"
    with unchanged(lake, data_path), pytest.raises(CommitConflictError, match=rf"delete from file {f.data_file_id}"):
        tx.commit()
    assert ids_of(lake, "t") == list(range(20, 40))
    assert duckdb_ids_of(duck, catalog_url, "t") == list(range(20, 40))
    assert violations(catalog_url) == []


def test_delete_after_a_duckdb_inlined_delete_of_the_same_file(catalog_url: str, data_path: str, duck: Any) -> None:
    # DuckDB stores a small delete (<= 10 rows) as inlined file deletes ("inlined_delete:<table>"); the reference does
    # not check those against a delete file of another transaction (checked with two DuckDB 1.5.5 sessions: both
    # commit), and both sets of deletes apply. Ours commits on top, and neither delete is lost.
    lake = new_lake(catalog_url, data_path)
    append(lake, "t", range(40))
    (f,) = files_of(lake, "t")
    tx = lake.transaction(author="us")
    tx.delete_rows("s", "t", f.data_file_id, [30, 31])
    with attached(duck, catalog_url) as con:
        con.execute("DELETE FROM lake.s.t WHERE id IN (3, 4)")
    assert lake.snapshots()[-1].changes_made == f"inlined_delete:{f.table_id}"
    snap = tx.commit()
    assert snap is not None
    expected = [i for i in range(40) if i not in (3, 4, 30, 31)]
    assert ids_of(lake, "t") == expected
    assert duckdb_ids_of(duck, catalog_url, "t") == expected
    assert violations(catalog_url) == []
