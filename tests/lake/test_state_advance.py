"""A loaded state moves forward over other writers' commits (`DuckLake.advance`): DuckDB writes each kind of change,
and the tables it names (and only those) count as changed; an unchanged table's files carry over and equal a fresh
load; whatever cannot be accounted for (an expired snapshot in between, a dropped schema) counts as all changed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbt.adapters.ducklake.lake import Column, DuckLake
from dbt.adapters.ducklake.lake.catalog.changes_text import unparsed
from dbt.adapters.ducklake.lake.catalog.state import LakeState
from dbt.adapters.ducklake.lake.lake_cache import CHECK_COMMITTED_STATE_ENV
from tests.support import reference
from tests.support.catalog_opens import count_opens


@pytest.fixture()
def lake(tmp_path: Path) -> Iterator[tuple[str, DuckLake]]:
    catalog = f"duckdb:///{tmp_path}/l.ducklake"
    # inserts of more than 10 rows write files, smaller ones are inlined (set once: DuckDB 1.5 crashed on a later
    # set_option in this test's sequence)
    _duck(catalog, "CALL lake.set_option('data_inlining_row_limit', 10)",
          "CREATE TABLE lake.a AS SELECT range AS id FROM range(20)",
          "CREATE TABLE lake.b AS SELECT range AS id FROM range(20)",
          "INSERT INTO lake.a SELECT range FROM range(20, 40)", data_path=f"{tmp_path}/data/")
    lk = DuckLake.open(catalog)
    try:
        yield catalog, lk
    finally:
        lk.close()


def _duck(catalog: str, *sqls: str, data_path: str | None = None, lake: DuckLake | None = None) -> None:
    if lake is not None:
        lake.close()  # one DuckDB instance per file and process (the engine reopens on next use)
    kw = {"data_path": data_path} if data_path else {}
    with reference.attached(catalog, **kw) as con:
        for sql in sqls:
            con.execute(sql)


def _loaded(lk: DuckLake) -> LakeState:
    st, _ = lk.advance(None)
    for t in st.tables.values():
        st.files(t)
    return st


def _ids(st: LakeState, *names: str) -> set[int]:
    return {st.table("main", n).table_id for n in names}


def _step(catalog: str, lk: DuckLake, old: LakeState, *sqls: str) -> tuple[LakeState, frozenset[int] | None]:
    _duck(catalog, *sqls, lake=lk)
    new, changed = lk.advance(old)
    fresh = lk.snapshot(new.snapshot_id)  # a load of its own (the latest's state may be `new` itself)
    assert new.snapshot_id == fresh.snapshot_id > old.snapshot_id
    for t in new.tables.values():  # carried or reloaded, the files are the snapshot's
        assert new.files(t) == fresh.files(t), t.name
    return new, changed


def test_nothing_committed_keeps_the_same_state(lake: tuple[str, DuckLake]) -> None:
    _, lk = lake
    st = _loaded(lk)
    assert lk.advance(st) == (st, frozenset())


def test_only_the_tables_a_commit_names_count_as_changed(lake: tuple[str, DuckLake]) -> None:
    catalog, lk = lake
    st = _loaded(lk)
    a, b = _ids(st, "a"), _ids(st, "b")
    a_files = st._files[next(iter(a))]

    st2, changed = _step(catalog, lk, st, "INSERT INTO lake.b SELECT range FROM range(100, 120)")
    assert changed == b
    assert st2._files[next(iter(a))] is a_files  # carried, not reloaded

    st3, changed = _step(catalog, lk, st2, "CREATE TABLE lake.c (x INT)", "CREATE VIEW lake.v AS SELECT 1 AS one",
                         "CREATE SCHEMA lake.s2")
    assert changed == frozenset()
    st3b, changed = _step(catalog, lk, st3, "DELETE FROM lake.a WHERE id = 3")
    assert changed == a
    st4, changed = _step(catalog, lk, st3b, "ALTER TABLE lake.b ADD COLUMN y INT")
    assert changed == b
    st5, changed = _step(catalog, lk, st4, "INSERT INTO lake.a VALUES (500)", "DELETE FROM lake.a WHERE id = 500")
    assert changed == a
    st6, changed = _step(catalog, lk, st5, "UPDATE lake.b SET y = 1 WHERE id = 2", "DROP VIEW lake.v")
    assert changed == b
    st6b, changed = _step(catalog, lk, st6, "INSERT INTO lake.a VALUES (600)")
    assert changed == a
    st7, changed = _step(catalog, lk, st6b, "CALL ducklake_flush_inlined_data('lake')")
    assert changed is not None and a <= changed <= a | b
    # several snapshots at once: the union of what they changed
    _, changed = _step(catalog, lk, st, "INSERT INTO lake.c VALUES (1)")
    assert changed is not None and a | b | _ids(st7, "c") <= changed


def test_an_expired_snapshot_in_between_counts_as_all_changed(lake: tuple[str, DuckLake]) -> None:
    catalog, lk = lake
    st = _loaded(lk)
    _duck(catalog, "INSERT INTO lake.b VALUES (100)", "INSERT INTO lake.b VALUES (101)", lake=lk)
    mid, _ = lk.advance(st)
    _duck(catalog, "INSERT INTO lake.b VALUES (102)",
          "CALL ducklake_expire_snapshots('lake', older_than => now())", lake=lk)
    new, changed = lk.advance(mid)
    assert changed is None
    assert not new._files  # nothing carried
    assert sorted(r for f in new.files(new.table("main", "b")) for r in [f.record_count]) == sorted(
        f.record_count for f in lk.snapshot().files(lk.snapshot().table("main", "b")))


def test_a_dropped_schema_counts_as_all_changed(lake: tuple[str, DuckLake]) -> None:
    catalog, lk = lake
    _duck(catalog, "CREATE SCHEMA lake.s2", "CREATE TABLE lake.s2.t AS SELECT 1 AS x", lake=lk)
    st = _loaded(lk)
    _duck(catalog, "DROP SCHEMA lake.s2 CASCADE", lake=lk)
    new, changed = lk.advance(st)
    assert ("s2", "t") not in new.tables
    # DuckDB names the dropped table too; either way the schema's table is not carried
    assert changed is None or st.table("s2", "t").table_id in changed


def test_unparsed_text_is_reported() -> None:
    assert unparsed('inserted_into_table:3,created_table:"main"."x,y"') == ""
    assert unparsed("inserted_into_table:3,something odd") == "something odd"


def test_inlined_rows_of_an_unchanged_table_carry_over(lake: tuple[str, DuckLake],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A table's inlined rows are read once per state and carried to a newer state when no snapshot since names the
    table (a pruned read of it then reads nothing from the catalog); inlined inserts and deletes make it changed."""
    from dbt.adapters.ducklake.lake.catalog import database
    from dbt.adapters.ducklake.lake.read.inlined import read_inlined

    catalog, lk = lake
    _duck(catalog, "INSERT INTO lake.a VALUES (1000), (1001)", lake=lk)  # 2 rows: inlined

    def rows(st: LakeState) -> list[int]:
        return sorted(r["id"] for t in read_inlined(st, st.table("main", "a"), with_rowid=True) for r in t.to_pylist())

    st = _loaded(lk)
    assert rows(st) == [1000, 1001]
    st2, changed = _step(catalog, lk, st, "INSERT INTO lake.b SELECT range FROM range(100, 120)")
    assert changed == _ids(st, "b")
    opened: list[str] = []
    real_read = database.CatalogDB.read

    def counting_read(self: database.CatalogDB) -> object:
        opened.append("read")
        return real_read(self)

    monkeypatch.setattr(database.CatalogDB, "read", counting_read)
    assert rows(st2) == [1000, 1001] and opened == []  # carried: no catalog read
    monkeypatch.undo()
    st3, changed = _step(catalog, lk, st2, "INSERT INTO lake.a VALUES (1002)")
    assert changed == _ids(st, "a")
    assert rows(st3) == rows(lk.snapshot(st3.snapshot_id)) == [1000, 1001, 1002]
    st4, changed = _step(catalog, lk, st3, "DELETE FROM lake.a WHERE id = 1001")
    assert changed == _ids(st, "a")
    assert rows(st4) == rows(lk.snapshot(st4.snapshot_id)) == [1000, 1002]
    assert rows(st3) == [1000, 1001, 1002]  # an older state keeps its snapshot's rows


def test_an_unchanged_catalog_file_is_not_opened_and_every_commit_is_seen(
        lake: tuple[str, DuckLake], monkeypatch: pytest.MonkeyPatch) -> None:
    """While a DuckDB catalog file (and its WAL) is as it was when the latest snapshot was read, a statement learns
    that nothing was committed without opening it; a DuckDB commit in between, even right after a read, is seen."""
    catalog, lk = lake
    _settle()
    st, _ = lk.advance(None)
    opens = count_opens(monkeypatch, lk)
    for _ in range(3):
        assert lk.advance(st) == (st, frozenset())
        assert lk.snapshot() is st
    assert opens == []
    _duck(catalog, "INSERT INTO lake.b SELECT range FROM range(40, 60)", lake=lk)  # right after the read
    new, changed = lk.advance(st)
    assert new.snapshot_id == st.snapshot_id + 1 and changed == _ids(new, "b") and len(opens) == 1
    _settle()
    assert lk.advance(new)[0] is new
    looks = len(opens)  # 1, or 2 when the first look came within a clock tick of DuckDB's write (not trusted yet)
    assert looks in (1, 2) and lk.advance(new)[0] is new and len(opens) == looks  # remembered with its token
    _duck(catalog, "DELETE FROM lake.a WHERE id = 3", lake=lk)
    _settle()  # the commit's stamp is old enough to trust, and differs from the one seen
    newer, changed = lk.advance(new)
    assert newer.snapshot_id == new.snapshot_id + 1 and changed == _ids(newer, "a") and len(opens) == looks + 1


def _settle() -> None:
    """Wait until the catalog file's last stamps are old enough for its change token to be trusted."""
    import time

    from dbt.adapters.ducklake.lake.catalog import duckdb_files

    time.sleep(duckdb_files.STABLE_NS / 1e9 + 0.005)


def test_only_duckdb_catalog_files_have_a_change_token(tmp_path: Path) -> None:
    from dbt.adapters.ducklake.lake.catalog import duckdb_files

    # a commit waits this long (holding the file) for its token to be trusted: two ticks of Linux's file clock
    assert 1_000_000 < duckdb_files.STABLE_NS <= 20_000_000
    lk = DuckLake.create(f"sqlite:///{tmp_path}/s.sqlite", f"{tmp_path}/data/")
    try:
        assert lk.db.change_token() is None
    finally:
        lk.close()
    lk = DuckLake.create(f"duckdb:///{tmp_path}/d.ducklake", f"{tmp_path}/data2/")
    try:
        token = lk.db.change_token()  # our commits leave the file settled (its stamps older than a clock tick)
        assert token is not None and lk.db.change_token() == token  # reading the token changes nothing
        lk.latest_snapshot()
        assert lk.db.change_token() == token  # nor does a read of the catalog
        with lk.transaction() as tx:
            tx.create_schema("s")
        assert lk.db.change_token() not in (None, token)
        os.utime(f"{tmp_path}/d.ducklake")  # just written: its next write could carry the same time stamps
        assert lk.db.change_token() is None
    finally:
        lk.close()


def test_own_commits_need_no_catalog_open_and_other_writers_right_after_are_seen(
        lake: tuple[str, DuckLake], monkeypatch: pytest.MonkeyPatch) -> None:
    """After this lake's own commits (from several threads) a state of an earlier snapshot moves forward to the last
    one without a catalog open, the tables those commits changed counted as changed and the other tables' files
    carried; a DuckDB commit right after ours (no time between: a file system clock tick cannot hide it), or one left
    in the WAL by a DuckDB that did not checkpoint, is seen by the next statement."""
    import threading

    catalog, lk = lake
    st = _loaded(lk)
    a, b = (st.table("main", n) for n in ("a", "b"))
    with lk.transaction() as tx:
        tx.create_table("main", "c", (Column(0, "id", "int64"),))
    opens = count_opens(monkeypatch, lk)
    moved, changed = lk.advance(st)
    assert opens == [] and moved.snapshot_id == st.snapshot_id + 1 and changed == frozenset()
    assert moved.files_loaded(a) and moved.files(a) == st.files(a)
    assert lk.snapshot() is moved and opens == []

    def delete_from(name: str, position: int) -> None:
        info = lk.snapshot().table("main", name)
        with lk.transaction() as tx:
            tx.delete_rows("main", name, lk.snapshot().files(info)[0].data_file_id, [position])

    threads = [threading.Thread(target=delete_from, args=(n, i)) for i, n in enumerate(("a", "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    commits = len(opens)  # the two commits' own connections (and a file list each)
    newer, changed = lk.advance(moved)
    assert len(opens) == commits and newer.snapshot_id == moved.snapshot_id + 2
    assert changed == {a.table_id, b.table_id}
    fresh = lk.snapshot(newer.snapshot_id)
    for t in (a, b):
        assert newer.files(t) == fresh.files(t)
        assert newer.live_rows_in_files(t) == fresh.live_rows_in_files(t) == st.live_rows_in_files(t) - 1

    with lk.transaction() as tx:  # ours, then DuckDB's at once
        tx.drop_table("main", "c")
    _duck(catalog, "INSERT INTO lake.b SELECT range FROM range(100, 120)", lake=lk)
    seen, changed = lk.advance(newer)
    assert seen.snapshot_id == newer.snapshot_id + 2 and changed is not None and b.table_id in changed
    assert seen.find_relation("main", "c") is None

    con = reference.connect()  # a DuckDB writer whose commit stays in the WAL (no checkpoint at its close)
    try:
        con.execute("SET checkpoint_threshold = '1GB'")
        con.execute("PRAGMA disable_checkpoint_on_shutdown")
        con.execute(reference.attach_sql(catalog, "lake"))
        con.execute("INSERT INTO lake.a SELECT range FROM range(200, 230)")
    finally:
        con.close()
    wal = Path(catalog.removeprefix("duckdb://") + ".wal")
    assert wal.stat().st_size > 0  # the commit is in the WAL only
    _settle()  # its stamps are old enough: only what the token holds can tell
    walled, changed = lk.advance(seen)
    assert walled.snapshot_id == seen.snapshot_id + 1 and changed == _ids(walled, "a"), wal.exists()


@pytest.mark.parametrize("backend", ["duckdb", "sqlite"])
def test_own_commits_keep_their_state_and_the_next_read_loads_none(tmp_path: Path, backend: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """After each commit of every kind of change (schema, table, partitioning, columns, tags, views, rename, drop,
    files, deletes) the lake keeps the state the commit made: it equals a load of that snapshot (the check every test
    runs, DUCKLAKE_CHECK_COMMITTED_STATE) and the next snapshot() and advance() load no state; files of tables the
    commit did not change carry over. Another writer's commit after it is still seen."""
    import pyarrow as pa

    from dbt.adapters.ducklake.lake import Column
    from dbt.adapters.ducklake.lake.catalog import state as state_module
    from dbt.adapters.ducklake.lake.write.writer import write_data_files

    monkeypatch.setenv("DUCKLAKE_CHECK_COMMITTED_STATE", "1")
    ext = "ducklake" if backend == "duckdb" else "sqlite"
    catalog = f"{backend}:///{tmp_path}/c.{ext}"
    lk = DuckLake.create(catalog, f"{tmp_path}/data/")
    loads: list[int] = []
    real = state_module.load_state

    def counting(*args: object, **kwargs: object) -> LakeState:
        loads.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    cols = (Column(0, "id", "int64"), Column(0, "v", "varchar"))

    steps = [
        lambda tx: tx.create_schema("s"),
        lambda tx: tx.create_table("s", "a", cols),
        lambda tx: tx.create_table("s", "b", cols, partition_by=[("v", "identity")]),
        lambda tx: tx.add_column("s", "a", Column(0, "w", "int32")),
        lambda tx: tx.rename_column("s", "a", "w", "w2"),
        lambda tx: tx.set_comment("s", "a", "a table"),
        lambda tx: tx.set_comment("s", "a", "the id", column="id"),
        lambda tx: tx.set_tag("s", "a", "owner", "me"),
        lambda tx: tx.create_view("s", "v1", "SELECT 1 AS x"),
        lambda tx: tx.rename_table("s", "b", "b2"),
        lambda tx: tx.drop_column("s", "a", "w2"),
        lambda tx: tx.drop_view("s", "v1"),
    ]
    for step in steps:
        with lk.transaction() as tx:
            step(tx)
        monkeypatch.setattr("dbt.adapters.ducklake.lake.lake.load_state", counting)
        before = len(loads)
        kept = lk.snapshot()
        advanced, changed = lk.advance(kept)
        assert advanced is kept and changed == frozenset() and len(loads) == before
        monkeypatch.setattr("dbt.adapters.ducklake.lake.lake.load_state", real)
    # rows: a data file, then a delete; the untouched table's loaded files carry over
    st = lk.snapshot()
    info = st.table("s", "a")
    with lk.transaction() as tx:
        data = pa.table({"id": pa.array(range(5), pa.int64()), "v": pa.array(list("abcde"))})
        specs = write_data_files(tx.table("s", "a"), tx.table_path(tx.table("s", "a")), data)
        tx.add_data_files("s", "a", specs)
    st = lk.snapshot()
    b2 = st.table("s", "b2")
    assert st.files(b2) == []
    (f,) = st.files(st.table("s", "a"))
    with lk.transaction() as tx:
        tx.delete_rows("s", "a", f.data_file_id, [1, 3])
    after = lk.snapshot()
    assert after.snapshot_id == st.snapshot_id + 1 and after.files_loaded(b2)
    assert [d.record_count for d in after.files(after.table("s", "a"))] == [5]
    assert after.table("s", "a").table_id == info.table_id
    # another writer (DuckDB) commits: seen by the next read
    lk.close()
    with reference.attached(catalog) as con:
        con.execute("CREATE TABLE lake.s.c (x INTEGER)")
    seen = DuckLake.open(catalog)
    assert seen.snapshot().find_relation("s", "c") is not None
    seen.close()


def test_deferred_releases_let_the_caller_go_on_and_hide_no_commit(
        lake: tuple[str, DuckLake], monkeypatch: pytest.MonkeyPatch) -> None:
    """With the release of the file after a commit running in the background (as in a dbt build): while it runs the
    file is held (another process cannot open it) and the lake's own state needs no catalog open; a connection from
    another thread waits for it; once it is done the token is the settled one, so another process's commit right
    after is seen."""
    import subprocess
    import sys
    import threading
    import time

    from dbt.adapters.ducklake.lake.catalog import duckdb_files

    catalog, lk = lake
    path = catalog.removeprefix("duckdb:///")
    lk.db.defer_releases = True
    monkeypatch.delenv(CHECK_COMMITTED_STATE_ENV, raising=False)  # its load after each commit would wait too
    go_on = threading.Event()
    settled = duckdb_files._settled_token

    def slow_settle(key: str) -> object:  # the release waits for the test's go-ahead
        go_on.wait(30)
        return settled(key)

    monkeypatch.setattr(duckdb_files, "_settled_token", slow_settle)
    st = _loaded(lk)
    with lk.transaction() as tx:
        tx.create_table("main", "c", (Column(0, "id", "int64"),))
    token = lk.db.change_token()
    assert isinstance(token, duckdb_files.PendingRelease) and not token.done.is_set()
    opens = count_opens(monkeypatch, lk)
    moved, changed = lk.advance(st)  # the file is as our commit left it: no open
    assert opens == [] and moved.snapshot_id == st.snapshot_id + 1 and moved.find_relation("main", "c") is not None
    code = "import duckdb, sys; duckdb.connect(sys.argv[1])"
    held = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=60)
    assert held.returncode != 0 and "lock" in held.stderr.lower()  # still ours

    seen: list[int] = []
    reader = threading.Thread(target=lambda: seen.append(lk.latest_snapshot().snapshot_id))
    reader.start()
    time.sleep(0.2)
    assert seen == []  # its connection waits for the release
    go_on.set()
    reader.join(30)
    assert seen == [moved.snapshot_id]
    lk.db.settle()
    assert token.done.is_set() and token == lk.db.change_token()  # the settled token, equal to a fresh look

    monkeypatch.setattr(duckdb_files, "_settled_token", settled)
    with lk.transaction() as tx:  # ours, released in the background, then DuckDB's at once
        tx.drop_table("main", "c")
    _duck(catalog, "INSERT INTO lake.b SELECT range FROM range(100, 120)", lake=lk)  # closing the lake settles
    newer, changed = lk.advance(moved)
    assert newer.snapshot_id == moved.snapshot_id + 2 and newer.find_relation("main", "c") is None
    assert changed is not None and _ids(newer, "b") <= changed
    assert newer.live_rows_in_files(newer.table("main", "b")) == 40
