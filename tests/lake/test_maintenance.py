"""Maintenance against the reference: each operation runs with our layer on one copy of a lake and with DuckDB's own
function on another; DuckDB then reads every surviving snapshot of both the same, and our reader agrees with it."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from psycopg import sql as pgsql
from sqlalchemy.engine import make_url

from dbt.adapters.ducklake.lake import Column, DuckLake, read_arrow, storage, write_data_files
from dbt.adapters.ducklake.lake.maintenance import cleanup as mt
from dbt.adapters.ducklake.lake.maintenance.checkpoint import checkpoint
from tests.conftest import _catalog_url
from tests.lake.compare import arrow_rows, plain_rows
from tests.support import reference, s3
from tests.support.coverage import FULL, pairs
from tests.support.invariants import violations
from tests.support.postgres import PostgresServer
from tests.support.reference_lakes import build, reference_state

FUTURE = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)


class Lake:
    """A lake in its own directory: catalog (a file there, or a PostgreSQL database) plus data/; copies get their
    data_path rewritten."""

    def __init__(self, root: Path, backend: str, request: pytest.FixtureRequest | None = None,
                 url: str | None = None) -> None:
        self.root = root
        self.backend = backend
        self.request = request
        (root / "data").mkdir(parents=True, exist_ok=True)
        if url is not None:
            self.url = url
        elif backend == "postgres":
            assert request is not None
            self.url = _catalog_url("postgres", request, root)
        else:
            name = "m.ducklake" if backend == "duckdb" else "m.sqlite"
            self.url = f"{'duckdb' if backend == 'duckdb' else 'sqlite'}:///{root}/{name}"
        self.data = str(root / "data") + "/"

    def copy(self, root: Path, request: pytest.FixtureRequest | None = None) -> Lake:
        """A copy at `root` (`request`: the test's, when this lake outlives the test that built it)."""
        request = request or self.request
        shutil.copytree(self.root, root)
        url = None
        if self.backend == "postgres":  # a second database cloned from this one (nobody may be connected to it)
            assert request is not None
            server: PostgresServer = request.getfixturevalue("pg_server")
            source = make_url(self.url).database
            name = f"{source[:40]}_{root.name[:10]}_{uuid.uuid4().hex[:8]}"  # templates are copied by many tests
            with server.connect() as con:
                con.execute(pgsql.SQL("CREATE DATABASE {} TEMPLATE {}").format(pgsql.Identifier(name),
                                                                              pgsql.Identifier(source)))
            server._created.append(name)
            url = server.database_url(name)
        other = Lake(root, self.backend, request, url)
        lake = DuckLake.open(other.url)
        with lake.db.write() as conn:
            lake.db.execute(conn, "UPDATE {p}ducklake_metadata SET value = :v WHERE key = 'data_path' AND scope IS NULL",
                            {"v": other.data})
        lake.close()
        return other

    def duck(self, *sql: str) -> list[Any]:
        with reference.attached(self.url) as con:
            out: list[Any] = []
            for s in sql:
                out = con.execute(s).fetchall()
            return out

    def rows(self, sql: str) -> list[Any]:
        lake = DuckLake.open(self.url)
        try:
            with lake.db.read() as conn:
                return [tuple(r) for r in lake.db.query(conn, sql)]
        finally:
            lake.close()

    def files(self) -> set[str]:
        return {os.path.relpath(os.path.join(d, n), self.data) for d, _, ns in os.walk(self.data) for n in ns}


def _view(state: dict[str, Any]) -> dict[str, Any]:
    """What must agree between two lakes: snapshots (without times), rows and counts per snapshot, change feeds."""
    snaps = [(s[0], s[2], s[3]) for s in state["snapshots"]]
    tables = {k: (v["rows"], v["count"]) for k, v in state["tables"].items()}
    return {"snapshots": snaps, "tables": tables, "changes": state["changes"]}


def _ours_match_duckdb(lk: Lake, theirs: dict[str, Any] | None = None) -> None:
    """Our reader returns DuckDB's rows at every surviving snapshot (`theirs`: DuckDB's state of the lake as it is,
    when already at hand)."""
    theirs = theirs or reference_state(lk.url)
    lake = DuckLake.open(lk.url)
    try:
        with lake.db.reading():  # one catalog connection for every snapshot's reads
            for (sid, schema, name), info in theirs["tables"].items():
                st = lake.snapshot(sid)
                got = arrow_rows(read_arrow(st, st.table(schema, name)))
                assert got == plain_rows(info["rows"]), (sid, schema, name)
    finally:
        lake.close()


def _counts(lk: Lake) -> tuple[int, int, int]:
    return (lk.rows("SELECT count(*) FROM {p}ducklake_data_file")[0][0],
            lk.rows("SELECT count(*) FROM {p}ducklake_delete_file")[0][0],
            lk.rows("SELECT count(*) FROM {p}ducklake_files_scheduled_for_deletion")[0][0])


PG = pytest.mark.postgres
BACKENDS = [pytest.param("duckdb", id="duckdb"), pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=PG)]
SCENARIOS = ["repeated_deletes", "updates", "schema_evolution", "partitioning", "inlined", "drops", "compaction",
             "deletion_vectors"]
# PostgreSQL runs the scenarios that exercise its own catalog code paths (typed inlined values, dropped tables,
# partition values, compaction); the others differ from SQLite only in SQL both share
# (typed inlined values and partition values by default)
PG_SCENARIOS = ["inlined", "drops", "partitioning", "compaction"] if FULL else ["inlined", "partitioning"]


def _by_backend(scenarios: list[str], pg: list[str]) -> list[Any]:
    out = [pytest.param(b, s, id=f"{b}-{s}") for s, b in pairs(scenarios, ["duckdb", "sqlite"])]
    return out + [pytest.param("postgres", s, id=f"postgres-{s}", marks=PG) for s in pg]


# the upkeep tests below on the DuckDB file and PostgreSQL by default (SQLite's catalog SQL is
# PostgreSQL's; the scenario tests above take SQLite), all three in the full suite
@pytest.fixture(params=BACKENDS if FULL else [b for b in BACKENDS if b.id != "sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# lakes DuckDB built, once per module: each test takes copies (building costs a DuckDB start and every statement)
_TEMPLATES: dict[tuple[str, str], Lake] = {}


def _template(backend: str, name: str, make: Callable[[Lake], None], request: pytest.FixtureRequest) -> Lake:
    """The module's lake `name` on `backend`, built by `make` on first use; tests only copy it."""
    key = (backend, name)
    if key not in _TEMPLATES:
        root = request.getfixturevalue("tmp_path_factory").mktemp(f"template-{backend}-{name}") / "lake"
        lk = Lake(root, backend, request)
        make(lk)
        _TEMPLATES[key] = lk
    return _TEMPLATES[key]


def _fresh(tmp_path: Path, backend: str, name: str, make: Callable[[Lake], None],
           request: pytest.FixtureRequest) -> Lake:
    """A copy of the module's lake `name` of its own: "ours" in `tmp_path`."""
    return _template(backend, name, make, request).copy(tmp_path / "ours", request)


def _pair(tmp_path: Path, backend: str, scenario: str, request: pytest.FixtureRequest) -> tuple[Lake, Lake]:
    ours = _fresh(tmp_path, backend, scenario, lambda lk: build(lk.url, lk.data, scenario), request)
    return ours, ours.copy(tmp_path / "theirs")


@pytest.mark.parametrize(("backend", "scenario"), _by_backend(SCENARIOS, PG_SCENARIOS))
def test_expire_and_cleanup_like_duckdb(tmp_path: Path, backend: str, scenario: str,
                                        request: pytest.FixtureRequest) -> None:
    ours, theirs = _pair(tmp_path, backend, scenario, request)
    ids = [r[0] for r in ours.rows("SELECT snapshot_id FROM {p}ducklake_snapshot ORDER BY 1")]
    expire = ids[1:-1:2]  # every other snapshot but the first and the latest
    lake = DuckLake.open(ours.url)
    assert [s.snapshot_id for s in mt.expire_snapshots(lake, versions=expire, dry_run=True)] == expire
    assert [s.snapshot_id for s in mt.expire_snapshots(lake, versions=expire)] == expire
    lake.close()
    theirs.duck(f"CALL ducklake_expire_snapshots('lake', versions => {expire})")
    assert _counts(ours) == _counts(theirs)
    assert ours.rows("SELECT path FROM {p}ducklake_files_scheduled_for_deletion ORDER BY 1") == theirs.rows(
        "SELECT path FROM {p}ducklake_files_scheduled_for_deletion ORDER BY 1")

    lake = DuckLake.open(ours.url)
    assert mt.cleanup_old_files(lake) == []  # scheduled just now: younger than the default 2 days
    planned = mt.cleanup_old_files(lake, all=True, dry_run=True)
    assert sorted(mt.cleanup_old_files(lake, all=True)) == sorted(planned)
    lake.close()
    theirs.duck("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
    assert ours.files() == {f for f in theirs.files()}
    assert _counts(ours) == _counts(theirs) and _counts(ours)[2] == 0
    # DuckDB's reads of both lakes once both have expired and cleaned up (cleanup changes no read; a file deleted
    # too early fails DuckDB's read here): the same, and our reader's equal to them
    ref_ours = reference_state(ours.url)
    assert _view(ref_ours) == _view(reference_state(theirs.url))
    _ours_match_duckdb(ours, ref_ours)
    assert violations(ours.url) == violations(theirs.url)  # DuckDB-written lakes can trip the float-stats check


def test_expire_older_than_and_noop(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    ours, theirs = _pair(tmp_path, backend, "repeated_deletes", request)
    lake = DuckLake.open(ours.url)
    assert mt.expire_snapshots(lake) == []  # no criteria and no expire_older_than option: nothing, like DuckDB
    got = mt.expire_snapshots(lake, older_than=FUTURE)
    lake.close()
    theirs.duck(f"CALL ducklake_expire_snapshots('lake', older_than => TIMESTAMPTZ '{FUTURE.isoformat()}')")
    assert len(ours.rows("SELECT * FROM {p}ducklake_snapshot")) == 1 and len(got) > 5  # only the latest is left
    assert _view(reference_state(ours.url)) == _view(reference_state(theirs.url))
    assert _counts(ours) == _counts(theirs)


def _catalog_rows(lk: Lake) -> tuple[Any, ...]:
    return (lk.rows("SELECT snapshot_id, schema_version FROM {p}ducklake_snapshot ORDER BY 1"), _counts(lk),
            lk.files())


# (our call, DuckDB's call): both must refuse, and leave the lake as it was
BAD_INPUT = [
    pytest.param(lambda lk: mt.expire_snapshots(lk, versions=[]), "expire_snapshots('lake', versions => [])",
                 "empty", id="expire-empty-list"),
    pytest.param(lambda lk: mt.expire_snapshots(lk, versions=[-1]), "expire_snapshots('lake', versions => [-1])",
                 "negative", id="expire-negative"),
    pytest.param(lambda lk: mt.expire_snapshots(lk, versions=[1], older_than=FUTURE),
                 f"expire_snapshots('lake', versions => [1], older_than => TIMESTAMPTZ '{FUTURE.isoformat()}')",
                 "not both", id="expire-both-criteria"),
    pytest.param(lambda lk: mt.cleanup_old_files(lk, all=True, older_than=FUTURE),
                 f"cleanup_old_files('lake', cleanup_all => true, older_than => TIMESTAMPTZ '{FUTURE.isoformat()}')",
                 "not both", id="cleanup-both-criteria"),
    pytest.param(lambda lk: mt.delete_orphaned_files(lk, all=True, older_than=FUTURE),
                 f"delete_orphaned_files('lake', cleanup_all => true, older_than => TIMESTAMPTZ "
                 f"'{FUTURE.isoformat()}')", "not both", id="orphans-both-criteria"),
    pytest.param(lambda lk: mt.merge_adjacent_files(lk, max_compacted_files=0),
                 "merge_adjacent_files('lake', max_compacted_files => 0)", "greater than zero", id="merge-max-files-0"),
    pytest.param(lambda lk: mt.merge_adjacent_files(lk, max_file_size=0),
                 "merge_adjacent_files('lake', max_file_size => 0)", "positive", id="merge-max-size-0"),
    pytest.param(lambda lk: mt.merge_adjacent_files(lk, min_file_size=500, max_file_size=500),
                 "merge_adjacent_files('lake', min_file_size => 500, max_file_size => 500)", "less than",
                 id="merge-min-not-below-max"),
    pytest.param(lambda lk: mt.merge_adjacent_files(lk, "main", "nope"), "merge_adjacent_files('lake', 'nope')",
                 "nope", id="merge-no-table"),
    pytest.param(lambda lk: mt.flush_inlined_data(lk, "nope"), "flush_inlined_data('lake', schema_name => 'nope')",
                 "nope", id="flush-no-schema"),
    pytest.param(lambda lk: mt.rewrite_data_files(lk, delete_threshold=1.5),
                 "rewrite_data_files('lake', delete_threshold => 1.5)", "between 0 and 1", id="rewrite-threshold-above-1"),
    pytest.param(lambda lk: mt.rewrite_data_files(lk, "main", "nope", delete_threshold=0),
                 "rewrite_data_files('lake', 'nope', delete_threshold => 0)", "nope", id="rewrite-no-table"),
]


def _small_lake(lk: Lake) -> None:
    with reference.attached(lk.url, data_path=lk.data) as con:  # small: a few snapshots, files, inlined rows
        for stmt in ("CALL lake.set_option('data_inlining_row_limit', 2)", "CREATE TABLE lake.t (i INTEGER)",
                     "INSERT INTO lake.t VALUES (1)", "INSERT INTO lake.t VALUES (2), (3), (4)",
                     "INSERT INTO lake.t VALUES (5), (6), (7)", "DELETE FROM lake.t WHERE i IN (2, 3, 4)"):
            con.execute(stmt)


@pytest.mark.parametrize(("ours_call", "duck_call", "message"), BAD_INPUT)
def test_bad_input_refused_like_duckdb(tmp_path: Path, ours_call: Any, duck_call: str, message: str,
                                       request: pytest.FixtureRequest) -> None:
    ours = _fresh(tmp_path, "duckdb", "small", _small_lake, request)
    theirs = ours.copy(tmp_path / "theirs")
    before = _catalog_rows(ours)
    lake = DuckLake.open(ours.url)
    with pytest.raises(Exception, match=message):
        ours_call(lake)
    lake.close()
    with pytest.raises(duckdb.Error):
        theirs.duck(f"CALL ducklake_{duck_call}")
    assert _catalog_rows(ours) == before == _catalog_rows(theirs)


def test_expire_skips_like_duckdb(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    """Ids that do not exist, the latest snapshot and already expired ids are skipped silently, by both."""
    ours, theirs = _pair(tmp_path, backend, "repeated_deletes", request)
    latest = ours.rows("SELECT max(snapshot_id) FROM {p}ducklake_snapshot")[0][0]
    cases = [
        ([999], False), ([latest], False), ([2, 999, latest], True), ([2, 999, latest], False), ([2], False),
    ]
    for versions, dry in cases:
        lake = DuckLake.open(ours.url)
        got = [s.snapshot_id for s in mt.expire_snapshots(lake, versions=versions, dry_run=dry)]
        lake.close()
        theirs_got = [r[0] for r in theirs.duck(
            f"CALL ducklake_expire_snapshots('lake', versions => {versions}, dry_run => {str(dry).lower()})")]
        assert got == theirs_got == ([2] if versions == [2, 999, latest] and (dry or got) else []), (versions, dry)
        assert _catalog_rows(ours)[:2] == _catalog_rows(theirs)[:2]
    past = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)
    lake = DuckLake.open(ours.url)
    assert mt.expire_snapshots(lake, older_than=past) == []
    assert [s.snapshot_id for s in mt.expire_snapshots(lake, older_than=FUTURE, dry_run=True)] == [
        r[0] for r in theirs.duck(f"CALL ducklake_expire_snapshots('lake', older_than => TIMESTAMPTZ "
                                  f"'{FUTURE.isoformat()}', dry_run => true)")]
    lake.close()
    assert theirs.duck(f"CALL ducklake_expire_snapshots('lake', older_than => TIMESTAMPTZ '{past.isoformat()}')") == []
    assert ours.rows("SELECT snapshot_id FROM {p}ducklake_snapshot ORDER BY 1") == theirs.rows(
        "SELECT snapshot_id FROM {p}ducklake_snapshot ORDER BY 1")
    assert _view(reference_state(ours.url)) == _view(reference_state(theirs.url))
    assert _counts(ours) == _counts(theirs)


def test_age_options_like_duckdb(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    """expire_older_than / delete_older_than in DuckDB's interval forms steer the calls made without criteria;
    DuckDB reads the options we store, and we read the ones it stores."""
    ours, theirs = _pair(tmp_path, backend, "updates", request)
    lake = DuckLake.open(ours.url)
    lake.set_option("expire_older_than", "1 week 2 days")
    assert mt.expire_snapshots(lake) == []  # every snapshot is younger
    lake.close()
    theirs.duck("CALL lake.set_option('expire_older_than', '1 week 2 days')")
    assert theirs.duck("CALL ducklake_expire_snapshots('lake')") == []
    time.sleep(1.1)
    lake = DuckLake.open(ours.url)
    lake.set_option("expire_older_than", "00:00:01")
    lake.set_option("delete_older_than", "1 month")
    got = [s.snapshot_id for s in mt.expire_snapshots(lake)]
    assert mt.cleanup_old_files(lake) == []  # scheduled just now
    lake.close()
    assert ours.duck("SELECT option_name, value FROM lake.options() WHERE option_name LIKE '%older_than' "
                     "ORDER BY 1") == [("delete_older_than", "1 month"), ("expire_older_than", "00:00:01")]
    theirs.duck("CALL lake.set_option('expire_older_than', '00:00:01')",
                "CALL lake.set_option('delete_older_than', '1 month')")
    assert [r[0] for r in theirs.duck("CALL ducklake_expire_snapshots('lake')")] == got and len(got) > 3
    assert theirs.duck("CALL ducklake_cleanup_old_files('lake')") == []
    time.sleep(1.1)
    theirs.duck("CALL lake.set_option('delete_older_than', '1 second')")
    lake = DuckLake.open(ours.url)
    assert lake.option("delete_older_than") == "1 month"
    lake.set_option("delete_older_than", "1 second")
    assert len(mt.cleanup_old_files(lake)) == _counts(theirs)[2] > 0
    lake.close()
    theirs.duck("CALL ducklake_cleanup_old_files('lake')")
    assert ours.files() == theirs.files()
    assert _counts(ours) == _counts(theirs) and _counts(ours)[2] == 0
    _ours_match_duckdb(ours)


def test_delete_orphaned_files(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    ours, theirs = _pair(tmp_path, backend, "updates", request)
    for lk in (ours, theirs):
        for rel in ("main/u/stray.parquet", "elsewhere/x.parquet", "main/u/notes.txt"):
            Path(lk.data, rel).parent.mkdir(parents=True, exist_ok=True)
            Path(lk.data, rel).write_bytes(b"PAR1")
    lake = DuckLake.open(ours.url)
    assert mt.delete_orphaned_files(lake) == []  # just written: younger than 2 days
    # a file outside every table directory looks like another lake's: refused (DuckDB would delete it) ...
    with pytest.raises(mt.ForeignFilesError, match="elsewhere/x.parquet"):
        mt.delete_orphaned_files(lake, all=True, dry_run=True)
    # ... unless forced: then the same files as DuckDB's
    found = mt.delete_orphaned_files(lake, all=True, dry_run=True, force=True)
    assert sorted(os.path.relpath(p, ours.data) for p in found) == ["elsewhere/x.parquet", "main/u/stray.parquet"]
    mt.delete_orphaned_files(lake, older_than=FUTURE, force=True)
    lake.close()
    theirs_found = theirs.duck("CALL ducklake_delete_orphaned_files('lake', cleanup_all => true)")
    assert sorted(os.path.relpath(r[0], theirs.data) for r in theirs_found) == [
        "elsewhere/x.parquet", "main/u/stray.parquet"]
    assert ours.files() == theirs.files()
    _ours_match_duckdb(ours)


def _compare_op(ours: Lake, theirs: Lake) -> None:
    """Both copies: same snapshots and change strings, same rows at every snapshot, same file counts; ours reads."""
    ref_ours, ref_theirs = reference_state(ours.url), reference_state(theirs.url)
    assert _view(ref_ours) == _view(ref_theirs)
    assert _counts(ours) == _counts(theirs)
    stats = "SELECT table_id, record_count, next_row_id FROM {p}ducklake_table_stats ORDER BY 1"  # sizes differ
    assert ours.rows(stats) == theirs.rows(stats)
    _ours_match_duckdb(ours, ref_ours)
    _ours_match_duckdb(theirs, ref_theirs)
    assert _unnumbered(violations(ours.url)) == _unnumbered(violations(theirs.url))


def _unnumbered(found: list[str]) -> list[str]:
    """Violations without file ids (the copies number their new files differently); DuckDB's own float stats on
    the schema_evolution lake trip one check, so both copies are compared rather than required clean."""
    return sorted(re.sub(r"data file \d+", "data file", v) for v in found)


@pytest.mark.parametrize(("backend", "scenario"), _by_backend(
    ["inlined", "updates", "repeated_deletes", "schema_evolution", "partitioning"], ["schema_evolution"]))
def test_flush_inlined_data_like_duckdb(tmp_path: Path, backend: str, scenario: str,
                                        request: pytest.FixtureRequest) -> None:
    ours, theirs = _pair(tmp_path, backend, scenario, request)
    lake = DuckLake.open(ours.url)
    mt.flush_inlined_data(lake)
    assert mt.flush_inlined_data(lake) == []  # nothing left
    lake.close()
    theirs.duck("CALL ducklake_flush_inlined_data('lake')")
    _compare_op(ours, theirs)


def _small_files(con: Any, lake: str) -> None:
    con.execute(f"USE {lake}")
    for sql in (
        f"CALL {lake}.set_option('data_inlining_row_limit', 0)",
        "CREATE TABLE m (id INTEGER, v VARCHAR)",
        *[f"INSERT INTO m SELECT i, 'v' || i FROM range({k * 10}, {k * 10 + 5}) r(i)" for k in range(4)],
        "DELETE FROM m WHERE id = 21",  # that file is skipped: merged groups around it have non-adjacent row ids
        *[f"INSERT INTO m SELECT i, 'w' || i FROM range({k * 10}, {k * 10 + 3}) r(i)" for k in range(5, 8)],
        "UPDATE m SET v = 'upd' WHERE id IN (50, 60)",  # post-images with explicit row ids
        "ALTER TABLE m ADD COLUMN n INTEGER DEFAULT 7",
        *[f"INSERT INTO m SELECT i, 'x', i FROM range({k * 10}, {k * 10 + 2}) r(i)" for k in range(8, 11)],
        "CREATE TABLE pm (id INTEGER, cat VARCHAR)",
        "ALTER TABLE pm SET PARTITIONED BY (cat)",
        *[f"INSERT INTO pm SELECT i, chr((97 + i % 2)::INTEGER) FROM range({k * 4}, {k * 4 + 4}) r(i)" for k in range(3)],
    ):
        con.execute(sql)


def test_merge_adjacent_files_like_duckdb(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    ours = Lake(tmp_path / "ours", backend, request)
    with reference.attached(ours.url, data_path=ours.data) as con:
        _small_files(con, "lake")
    theirs = ours.copy(tmp_path / "theirs")
    lake = DuckLake.open(ours.url)
    got = mt.merge_adjacent_files(lake)
    assert {(s, t) for s, t, _, _ in got} == {("main", "m"), ("main", "pm")}
    assert mt.merge_adjacent_files(lake) == []
    lake.close()
    theirs.duck("CALL ducklake_merge_adjacent_files('lake')")
    _compare_op(ours, theirs)
    for lk in (ours, theirs):
        assert lk.rows("SELECT changes_made FROM {p}ducklake_snapshot_changes ORDER BY snapshot_id DESC")[0][0] \
            .startswith("merge_adjacent:")


def test_merge_and_flush_on_our_lake_then_duckdb_maintains_it(tmp_path: Path, backend: str,
                                                              request: pytest.FixtureRequest) -> None:
    ours = Lake(tmp_path / "ours", backend, request)
    lake = DuckLake.create(ours.url, ours.data)
    with lake.transaction() as tx:
        t = tx.create_table("main", "t", [Column(0, "id", "int64"), Column(0, "v", "varchar")])
    for k in range(4):
        st = lake.snapshot()
        with lake.transaction() as tx:
            tx.add_data_files("main", "t", write_data_files(t, st.table_path(t), pa.table(
                {"id": range(k * 10, k * 10 + 6), "v": [f"r{i}" for i in range(6)]})))
    lake.close()
    ours.duck("INSERT INTO lake.t VALUES (100, 'inl'), (101, 'inl2')", "DELETE FROM lake.t WHERE id IN (100, 2)")
    theirs = ours.copy(tmp_path / "theirs")
    lake = DuckLake.open(ours.url)
    mt.flush_inlined_data(lake)
    mt.merge_adjacent_files(lake)
    lake.close()
    theirs.duck("CALL ducklake_flush_inlined_data('lake')", "CALL ducklake_merge_adjacent_files('lake')")
    _compare_op(ours, theirs)
    # then expire everything but the latest and clean up, on both: still the same
    lake = DuckLake.open(ours.url)
    mt.expire_snapshots(lake, older_than=FUTURE)
    mt.cleanup_old_files(lake, all=True)
    lake.close()
    theirs.duck(f"CALL ducklake_expire_snapshots('lake', older_than => TIMESTAMPTZ '{FUTURE.isoformat()}')",
                "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
    _compare_op(ours, theirs)


def _built_by(statements: Callable[..., None]) -> Callable[[Lake], None]:
    """A lake maker running `statements(con, "lake")` in DuckDB."""
    def make(lk: Lake) -> None:
        with reference.attached(lk.url, data_path=lk.data) as con:
            statements(con, "lake")
    return make


def _rows_at_every_snapshot(lk: Lake) -> dict[tuple[int, str], list[Any]]:
    """DuckDB's rows of t, u and p at every snapshot where they exist, plus the snapshots' change strings."""
    out: dict[tuple[int, str], list[Any]] = {}
    with reference.attached(lk.url, read_only=True) as con:
        snaps = con.execute("SELECT snapshot_id, changes FROM lake.snapshots() ORDER BY 1").fetchall()
        out[(-1, "snapshots")] = [tuple(r) for r in snaps]
        for sid, _ in snaps:
            for name in ("t", "u", "p"):
                try:
                    rows = con.execute(f"SELECT rowid, * FROM lake.main.{name} AT (VERSION => {sid}) ORDER BY rowid")
                except duckdb.CatalogException:
                    continue  # not created yet
                out[(sid, name)] = rows.fetchall()
    return out


def _sized_files(con: Any, lake: str) -> None:
    """t: 6 files of growing size (about 280 B .. 1.8 kB); u: 10 files of ~190 B with a table-scope target_file_size
    of 600 B (groups of 4, 4, 2); p: partitioned, 3 files per partition value of ~290 B."""
    con.execute(f"USE {lake}")
    for stmt in (
        f"CALL {lake}.set_option('data_inlining_row_limit', 0)",
        "CREATE TABLE t (i INTEGER, s VARCHAR)",
        *[f"INSERT INTO t SELECT i, repeat('x', {1 + k * 50}) FROM range({k * 10}, {k * 10 + 1 + k * 20}) r(i)"
          for k in range(6)],
        "CREATE TABLE u (i INTEGER)",
        *[f"INSERT INTO u VALUES ({k})" for k in range(10)],
        f"CALL {lake}.set_option('target_file_size', '600B', table_name => 'u')",
        "CREATE TABLE p (i INTEGER, c VARCHAR)",
        "ALTER TABLE p SET PARTITIONED BY (c)",
        *[f"INSERT INTO p SELECT i, chr((97 + i % 2)::INTEGER) FROM range({k * 4}, {k * 4 + 4}) r(i)" for k in range(3)],
    ):
        con.execute(stmt)


# (our keyword arguments, DuckDB's arguments after the catalog name)
MERGE_OPTIONS = [
    pytest.param({"min_file_size": 700}, "min_file_size => 700", id="min"),
    pytest.param({"max_file_size": 800}, "max_file_size => 800", id="max"),
    pytest.param({"min_file_size": 250, "max_file_size": 1000}, "min_file_size => 250, max_file_size => 1000",
                 id="min-max"),
    pytest.param({"table": "u", "max_compacted_files": 2}, "'u', max_compacted_files => 2", id="max-compacted"),
    pytest.param({"table": "t", "schema": "main", "max_compacted_files": 1}, "'t', schema => 'main', "
                 "max_compacted_files => 1", id="table-max-compacted"),
    pytest.param({"auto_compact": "p"}, "", id="auto-compact-off"),
    pytest.param({"target_file_size_option": "1500B"}, "", id="lake-target-option"),
]


@pytest.mark.parametrize(("kw", "args"), MERGE_OPTIONS)
def test_merge_adjacent_options_like_duckdb(tmp_path: Path, kw: dict[str, Any], args: str,
                                            request: pytest.FixtureRequest) -> None:
    """Each of DuckDB's merge options (and the lake options steering it) merges the same files in both copies."""
    ours = _fresh(tmp_path, "duckdb", "sized", _built_by(_sized_files), request)
    kw = dict(kw)
    if "auto_compact" in kw:  # set by DuckDB, read by us
        ours.duck(f"CALL lake.set_option('auto_compact', false, table_name => '{kw.pop('auto_compact')}')")
    target = kw.pop("target_file_size_option", None)
    if target:  # set by us, read by DuckDB
        lake = DuckLake.open(ours.url)
        lake.set_option("target_file_size", target)
        lake.close()
    theirs = ours.copy(tmp_path / "theirs")
    lake = DuckLake.open(ours.url)
    got = mt.merge_adjacent_files(lake, **kw)
    lake.close()
    duck = theirs.duck(f"CALL ducklake_merge_adjacent_files('lake'{', ' + args if args else ''})")
    want: dict[tuple[str, str], list[int]] = {}
    for s, t, n, _ in duck:
        want.setdefault((s, t), []).append(n)
    assert {(s, t): (n, m) for s, t, n, m in got} == {k: (sum(v), len(v)) for k, v in want.items()}
    assert got, "the case must merge something"
    # cheaper than _compare_op (these lakes have ~30 snapshots): DuckDB's rows at every snapshot, our latest rows
    assert _unordered_rows(ours) == _unordered_rows(theirs)
    assert _counts(ours) == _counts(theirs)
    for lk in (ours, theirs):
        lake = DuckLake.open(lk.url)
        st = lake.snapshot()
        for name in ("t", "u", "p"):
            assert arrow_rows(read_arrow(st, st.table("main", name))) == plain_rows(
                lk.duck(f"SELECT rowid, * FROM lake.main.{name} ORDER BY rowid")), (lk.root, name)
        lake.close()
    assert _unnumbered(violations(ours.url)) == _unnumbered(violations(theirs.url)) == []
    live = "SELECT table_id, count(*) FROM {p}ducklake_data_file WHERE end_snapshot IS NULL GROUP BY 1 ORDER BY 1"
    assert ours.rows(live) == theirs.rows(live)


def test_merge_adjacent_files_with_intervals(tmp_path: Path) -> None:
    """INTERVAL columns: DuckDB's files (Parquet INTERVAL) merge into a file of the text Spark writes (pyarrow cannot
    write a Parquet INTERVAL), and a merge reads that text back; DuckDB reads the same values at every snapshot."""
    catalog, data = f"sqlite:///{tmp_path}/c.sqlite", f"{tmp_path}/data/"
    values = ["INTERVAL '14 months 2 days 3.005 seconds'", "NULL", "INTERVAL '0 days'", "INTERVAL '1 month 7 ms'"]
    with reference.attached(catalog, data_path=data, options={"DATA_INLINING_ROW_LIMIT": 0}) as con:
        con.execute("CREATE TABLE lake.main.t (id INTEGER, v INTERVAL)")
        for i, v in enumerate(values[:3]):
            con.execute(f"INSERT INTO lake.main.t VALUES ({i}, {v})")
    lake = DuckLake.open(catalog)
    assert mt.merge_adjacent_files(lake) == [("main", "t", 3, 1)]
    with reference.attached(catalog, options={"DATA_INLINING_ROW_LIMIT": 0}) as con:
        con.execute(f"INSERT INTO lake.main.t VALUES (3, {values[3]})")
    lake = DuckLake.open(catalog)  # the lake as DuckDB left it
    assert mt.merge_adjacent_files(lake) == [("main", "t", 2, 1)]  # the text file read back, merged again
    with reference.attached(catalog, read_only=True) as con:
        want = con.execute(f"SELECT * FROM (VALUES {', '.join(f'({i}, {v})' for i, v in enumerate(values))}) "
                           "ORDER BY 1").fetchall()
        assert con.execute("SELECT * FROM lake.main.t ORDER BY id").fetchall() == want
        for (snap,) in con.execute("SELECT snapshot_id FROM lake.snapshots() WHERE snapshot_id > 0").fetchall():
            got = con.execute(f"SELECT * FROM lake.main.t AT (VERSION => {snap}) ORDER BY id").fetchall()
            assert got == [r for r in want if any(r[0] == g[0] for g in got)]
    assert violations(catalog) == []


# rewrite_data_files ------------------------------------------------------------------------------------------------
def _deleted_files(con: Any, lake: str, f_type: str = "DOUBLE") -> None:
    """t: two files with deletes (inlined file deletes on one, a delete file on the other), an untouched file, an
    inlined row, a float column (of f_type); p: partitioned, deletes in both partitions of two inserts, a second
    delete of one file (a partial delete file); u: a file with few deletes (below the default threshold) next to a
    heavy one."""
    con.execute(f"USE {lake}")
    for stmt in (
        f"CREATE TABLE t (i INTEGER, s VARCHAR, f {f_type})",
        "INSERT INTO t SELECT i, 'a' || i, i / 2 FROM range(0, 20) r(i)",
        "INSERT INTO t SELECT i, 'b' || i, i / 2 FROM range(20, 40) r(i)",
        "INSERT INTO t SELECT i, 'c' || i, NULL FROM range(40, 60) r(i)",
        "INSERT INTO t VALUES (100, 'inl', 1.5)",
        "DELETE FROM t WHERE i < 3",
        "DELETE FROM t WHERE i >= 25 AND i < 39",
        "CREATE TABLE p (i INTEGER, c VARCHAR)",
        "ALTER TABLE p SET PARTITIONED BY (c)",
        "INSERT INTO p SELECT i, chr((97 + i % 2)::INTEGER) FROM range(0, 40) r(i)",
        "INSERT INTO p SELECT i, chr((97 + i % 2)::INTEGER) FROM range(40, 80) r(i)",
        "DELETE FROM p WHERE i % 4 = 0 OR i < 30",
        "DELETE FROM p WHERE i IN (31, 33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57)",
        "CREATE TABLE u (i INTEGER)",
        "INSERT INTO u SELECT i FROM range(0, 100) r(i)",
        "INSERT INTO u SELECT i FROM range(100, 200) r(i)",
        "DELETE FROM u WHERE i < 30 OR i >= 104",
    ):
        con.execute(stmt)


def _unordered_rows(lk: Lake) -> dict[tuple[int, str], list[Any]]:
    """DuckDB's rows (rowid first) of t, p and u at every snapshot where they exist, read without an ORDER BY (see
    test_rewrite_data_files_like_duckdb) and sorted here."""
    with reference.attached(lk.url, read_only=True) as con:
        return _snapshot_rows(con)


def _snapshot_rows(con: Any) -> dict[tuple[int, str], list[Any]]:
    """`_unordered_rows` through a connection with the lake attached as `lake`."""
    out: dict[tuple[int, str], list[Any]] = {}
    for (sid,) in con.execute("SELECT snapshot_id FROM lake.snapshots()").fetchall():
        for name in "tpu":
            try:
                out[(sid, name)] = plain_rows(
                    con.execute(f"SELECT rowid, * FROM lake.main.{name} AT (VERSION => {sid})").fetchall())
            except duckdb.CatalogException:
                continue  # not created yet
    return out


def _ours_at_every_snapshot(lk: Lake, keys: Any) -> dict[tuple[int, str], list[Any]]:
    """Our reader's rows (rowid first) of the (snapshot, table) keys, in DuckDB's form."""
    lake = DuckLake.open(lk.url)
    try:
        with lake.db.reading():
            out = {}
            for sid, name in keys:
                st = lake.snapshot(sid)
                out[(sid, name)] = arrow_rows(read_arrow(st, st.table("main", name)))
            return out
    finally:
        lake.close()


def _rewrite_rows(lk: Lake, row_id_start: str = "row_id_start") -> dict[str, Any]:
    """The catalog rows a rewrite writes, without file ids, paths and sizes (the copies' files differ in those)."""
    return {
        "data_files": sorted(lk.rows(
            f"SELECT table_id, begin_snapshot, end_snapshot, record_count, {row_id_start}, partition_id, partial_max, "
            f"(SELECT {'group_concat' if lk.backend == 'sqlite' else 'string_agg'}(partition_value, '/') "
            "FROM {p}ducklake_file_partition_value v "
            "WHERE v.data_file_id = d.data_file_id) FROM {p}ducklake_data_file d"), key=repr),
        "delete_files": sorted(lk.rows("SELECT table_id, begin_snapshot, end_snapshot, delete_count, partial_max "
                                       "FROM {p}ducklake_delete_file"), key=repr),
        "changes": lk.rows("SELECT snapshot_id, changes_made FROM {p}ducklake_snapshot_changes ORDER BY 1"),
        "snapshots": lk.rows("SELECT snapshot_id, schema_version, next_catalog_id, next_file_id "
                             "FROM {p}ducklake_snapshot ORDER BY 1"),
        "table_stats": lk.rows("SELECT table_id, record_count, next_row_id FROM {p}ducklake_table_stats ORDER BY 1"),
        "column_stats": lk.rows("SELECT * FROM {p}ducklake_table_column_stats ORDER BY 1, 2"),
        "scheduled": lk.rows("SELECT count(*) FROM {p}ducklake_files_scheduled_for_deletion"),
    }


@pytest.mark.parametrize(("threshold", "args"), [pytest.param(0.0, ", delete_threshold => 0", id="argument-0"),
                                                  pytest.param(None, "", id="option-0.5")])
def test_rewrite_data_files_like_duckdb(tmp_path: Path, threshold: float | None, args: str,
                                       request: pytest.FixtureRequest) -> None:
    ours = _fresh(tmp_path, "duckdb", "deleted", _built_by(_deleted_files), request)
    if threshold is None:  # the option, set by us as DuckDB stores it, steers both (u's light file stays)
        lake = DuckLake.open(ours.url)
        lake.set_option("rewrite_delete_threshold", "0.5")
        lake.close()
        assert ours.duck("SELECT value FROM lake.options() WHERE option_name = 'rewrite_delete_threshold'") == [
            ("0.500000",)]
    theirs = ours.copy(tmp_path / "theirs")
    before = _unordered_rows(ours)
    lake = DuckLake.open(ours.url)
    got = mt.rewrite_data_files(lake, delete_threshold=threshold)
    assert mt.rewrite_data_files(lake, delete_threshold=threshold) == []  # nothing left to rewrite
    lake.close()
    duck = theirs.duck(f"CALL ducklake_rewrite_data_files('lake'{args})")
    want: dict[tuple[str, str], list[int]] = {}
    for s, t, n, m in duck:
        want.setdefault((s, t), [0, 0])
        want[(s, t)] = [want[(s, t)][0] + n, want[(s, t)][1] + m]
    assert {(s, t): [n, m] for s, t, n, m in got} == want and got
    assert _rewrite_rows(ours) == _rewrite_rows(theirs)
    if threshold is None:  # the full check below runs for the threshold that rewrites most
        lake = DuckLake.open(ours.url)
        st = lake.snapshot()
        for name in "tpu":
            assert arrow_rows(read_arrow(st, st.table("main", name))) == plain_rows(
                theirs.duck(f"SELECT rowid, * FROM lake.main.{name}"))
        lake.close()
        return
    after = _unordered_rows(ours)
    assert after == _unordered_rows(theirs)
    # every earlier snapshot reads as before, row ids included, and the rewrite's own as the one before it: by DuckDB
    # and by our reader
    latest = max(s for s, _ in after)
    want = {**before, **{(latest, n): before[(latest - 1, n)] for n in "tpu"}}
    assert after == want
    assert _ours_at_every_snapshot(ours, want) == want
    # DuckDB 1.5.5 sorts with the table's current bounds (its own rewrite narrows them alike): time travel with an
    # ORDER BY on the column then returns values below the new minimum wrapped around (0 as 256)
    with reference.attached(ours.url, read_only=True) as con:
        assert con.execute("SELECT rowid, i FROM lake.p AT (VERSION => 10) ORDER BY rowid LIMIT 1").fetchall() == [
            (0, 256)]
    assert _unnumbered(violations(ours.url)) == _unnumbered(violations(theirs.url)) == []
    # then both expire and clean up alike: the rewritten files go once no snapshot sees them
    lake = DuckLake.open(ours.url)
    mt.expire_snapshots(lake, older_than=FUTURE)
    scheduled = _counts(ours)[2]
    assert len(mt.cleanup_old_files(lake, all=True)) == scheduled > 0
    lake.close()
    theirs.duck(f"CALL ducklake_expire_snapshots('lake', older_than => TIMESTAMPTZ '{FUTURE.isoformat()}')",
                "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
    assert _counts(ours) == _counts(theirs)
    assert _unordered_rows(ours) == _unordered_rows(theirs)


def _after_flush(rows: dict[str, Any]) -> dict[str, Any]:
    """`_rewrite_rows` without what DuckDB 1.5.5's flush of inlined rows writes otherwise after a rewrite_data_files
    (on every catalog): its snapshot's changes also name `deleted_from_table` for t and p, it advances next_file_id
    by 4 more, and it sets t.f's min and max to the flushed row's 1.5 where the rewrite had left them unknown (other
    files of t hold up to 12.0); ours leaves them unknown. No read differs (the rows are compared)."""
    return {k: v for k, v in rows.items() if k not in ("changes", "snapshots", "column_stats")}


@pytest.mark.parametrize("backend", [pytest.param("sqlite", id="sqlite"),
                                     pytest.param("postgres", id="postgres", marks=PG)])
def test_rewrite_then_checkpoint_like_duckdb_on_catalog_databases(tmp_path: Path, backend: str,
                                                                  request: pytest.FixtureRequest) -> None:
    """rewrite_data_files, then checkpoint (expiring and deleting all it may), on a SQLite and a PostgreSQL catalog,
    ours on one copy and DuckDB's functions on the other: after each, the same catalog rows (but `_after_flush`)
    and, at every snapshot left, the same rows read by DuckDB; our reader agrees. t's float column is a DECIMAL:
    DuckDB 1.5.5's rewrite fails on a SQLite catalog whose table has a DOUBLE column and an inlined-data table
    (`isnan(VARCHAR)`)."""
    ours = Lake(tmp_path / "ours", backend, request)
    with reference.attached(ours.url, data_path=ours.data) as con:
        _deleted_files(con, "lake", "DECIMAL(9, 1)")
        for opt in ("expire_older_than", "delete_older_than"):
            con.execute(f"CALL lake.set_option('{opt}', '00:00:00')")
    theirs = ours.copy(tmp_path / "theirs")
    lake = DuckLake.open(ours.url)
    try:
        rewritten = mt.rewrite_data_files(lake, delete_threshold=0)
    finally:
        lake.close()
    theirs.duck("CALL ducklake_rewrite_data_files('lake', delete_threshold => 0)")
    assert {t for _, t, _, _ in rewritten} == {"t", "p", "u"}
    assert _rewrite_rows(ours) == _rewrite_rows(theirs)
    after = _unordered_rows(ours)
    assert after == _unordered_rows(theirs)
    assert _ours_at_every_snapshot(ours, after) == after

    lake = DuckLake.open(ours.url)
    try:
        assert [s.step for s in checkpoint(lake)][-1] == "delete_orphaned_files"
    finally:
        lake.close()
    theirs.duck("CHECKPOINT lake")
    assert _after_flush(_rewrite_rows(ours, "0")) == _after_flush(_rewrite_rows(theirs, "0"))
    assert len(ours.files()) == len(theirs.files())
    final = _unordered_rows(ours)
    assert final == _unordered_rows(theirs)
    assert _ours_at_every_snapshot(ours, final) == final
    assert violations(ours.url) == []


def test_rewrite_then_checkpoint_like_duckdb_on_s3(tmp_path: Path, s3_server: s3.S3Server) -> None:
    """The same on S3 (moto on loopback; SQLite catalogs): two lakes DuckDB built alike, one upkept by us, the other
    by DuckDB. Equal catalog rows (but `_after_flush` after the checkpoint), equal rows at every snapshot, the same
    number of objects left."""
    storage.configure_object_store(storage.ObjectStoreConfig(
        key_id=s3_server.key_id, secret=s3_server.secret, region=s3_server.region, endpoint=s3_server.endpoint,
        url_style="path", use_ssl=False))
    try:
        bucket = s3_server.make_bucket()
        lakes = {name: Lake(tmp_path / name, "sqlite") for name in ("ours", "theirs")}
        for name, lk in lakes.items():
            lk.data = f"s3://{bucket}/{name}/"
            with s3.attached(s3_server, lk.url, data_path=lk.data) as con:
                _deleted_files(con, "lake", "DECIMAL(9, 1)")
                for opt in ("expire_older_than", "delete_older_than"):
                    con.execute(f"CALL lake.set_option('{opt}', '00:00:00')")

        def rows(lk: Lake) -> dict[tuple[int, str], list[Any]]:
            with s3.attached(s3_server, lk.url, read_only=True) as con:
                return _snapshot_rows(con)

        ours, theirs = lakes["ours"], lakes["theirs"]
        for step in ("rewrite", "checkpoint"):
            lake = DuckLake.open(ours.url)
            try:
                if step == "rewrite":
                    assert mt.rewrite_data_files(lake, delete_threshold=0)
                else:
                    checkpoint(lake)
            finally:
                lake.close()
            with s3.attached(s3_server, theirs.url) as con:
                con.execute("CALL ducklake_rewrite_data_files('lake', delete_threshold => 0)" if step == "rewrite"
                            else "CHECKPOINT lake")
            if step == "rewrite":
                assert _rewrite_rows(ours) == _rewrite_rows(theirs)
            else:
                assert _after_flush(_rewrite_rows(ours, "0")) == _after_flush(_rewrite_rows(theirs, "0"))
            assert rows(ours) == rows(theirs), step
        keys = s3_server.keys(bucket)
        assert len([k for k in keys if k.startswith("ours/")]) == len([k for k in keys if k.startswith("theirs/")])
        assert violations(ours.url) == []
    finally:
        storage.configure_object_store(storage.ObjectStoreConfig())


def test_checkpoint_like_duckdb(tmp_path: Path) -> None:
    """Our checkpoint and DuckDB's CHECKPOINT on copies of one lake (inlined rows, small files, heavy deletes; the
    options expire and delete everything they may): the same catalog rows, files and reads after."""
    ours = Lake(tmp_path / "ours", "duckdb")
    with reference.attached(ours.url, data_path=ours.data) as con:
        _deleted_files(con, "lake")
        con.execute("INSERT INTO lake.main.u VALUES (1000), (1001)")  # a second inlined table to flush
        for opt in ("expire_older_than", "delete_older_than"):
            con.execute(f"CALL lake.set_option('{opt}', '00:00:00')")
    theirs = ours.copy(tmp_path / "theirs")
    before = {n: plain_rows(ours.duck(f"SELECT rowid, * FROM lake.main.{n}")) for n in "tpu"}
    lake = DuckLake.open(ours.url)
    done = checkpoint(lake)
    lake.close()
    assert [s.step for s in done] == ["flush_inlined_data", "expire_snapshots", "merge_adjacent_files",
                                      "rewrite_data_files", "cleanup_old_files", "delete_orphaned_files"]
    theirs.duck("CHECKPOINT lake")
    expired = [s.snapshot_id for s in done[1].result]
    assert [s.summary() for s in done] == [
        "3 inlined rows flushed in main.t, main.u", f"{len(expired)} snapshots expired ({expired[0]} to {expired[-1]})",
        done[2].summary(), done[3].summary(), done[4].summary(), done[5].summary()] and len(expired) > 10
    assert done[3].summary() == "2 files rewritten into 1 in main.p, main.u"  # p's file had no row left
    # our merge keeps a flushed file's explicit row ids in the merged file (row_id_start NULL) where DuckDB relies
    # on row_id_start: the same row ids either way (checked below)
    assert _rewrite_rows(ours, "0") == _rewrite_rows(theirs, "0")
    assert len(ours.files()) == len(theirs.files())
    for lk in (ours, theirs):
        assert {n: plain_rows(lk.duck(f"SELECT rowid, * FROM lake.main.{n}")) for n in "tpu"} == before
    _ours_match_duckdb(ours)
    assert violations(ours.url) == []
