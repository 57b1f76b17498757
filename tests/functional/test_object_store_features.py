"""Every feature on S3 (moto's server on loopback) with the oracle of the local tests: one dbt project, few dbt
invocations (each starts a Spark driver, and its first s3a write costs seconds).

DuckDB 1.5.5 (httpfs + ducklake) writes the sources on S3: orders, a table of every column type the local
column-type test covers, GEOMETRY / VARIANT. Then:

1. `dbt build`: incremental delete+insert, insert_overwrite and microbatch models, a change-feed model, a time-travel
   model, a Python model, column-type copies and appends, snapshots with both strategies (and hard deletes), tests.
2. DuckDB updates, deletes and inserts source rows; `dbt build` again, as one write-audit-publish snapshot.
3. One run-operation: DELETE, UPDATE and MERGE through dbt, compaction, the footer check, expiry of the first build's
   snapshots, cleanup, and deletion of an orphaned file put in a table's folder.
4. `dbt clone` of two tables (server-side copies); DuckDB drops the sources, expires every snapshot and cleans up:
   the clones still read the same rows.

After each step DuckDB reads every table at every snapshot the lake holds: each is a state the adapter committed,
computed by DuckDB from the same sources; DuckDB's own orphan and cleanup dry runs find nothing; the catalog
invariants hold at the end. The whole project runs on every catalog under DUCKLAKE_TEST_FULL; by default, a cheap
check on PostgreSQL (SQLite and DuckDB-file catalogs on S3 are in test_object_store_faults.py and test_object_store.py).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dbt.adapters.ducklake.apply import CLONE_KINDS
from dbt.adapters.ducklake.lake.storage import ObjectStoreConfig, S3FileIO
from dbt.adapters.ducklake.spark.env import s3a
from tests.functional.test_column_types import GEO_COPY, SOURCES, _utc
from tests.support import s3
from tests.support.coverage import FULL
from tests.support.invariants import violations

pytestmark = [pytest.mark.slow, pytest.mark.spark,
              pytest.mark.skipif(s3a.cached_jars() is None, reason="the s3a connector is not cached: run setup.sh")]

ORDERS = "lake.src.orders AT (VERSION => {v})"
# the microbatch window (--event-time-start/-end): days 1 and 2 in the first build (order 5, day 3, is outside it),
# day 2 only in the second: in a write-audit-publish build a microbatch model's second batch would delete from the
# table its first batch changed in the same unit of work, which the unit refuses (it would not see its own changes)
WINDOW = ("2026-01-01", "2026-01-03")
DAY2 = "2026-01-02"

SOURCES_YML = """version: 2
sources:
  - name: src
    schema: src
    tables:
      - {name: orders, config: {event_time: ts}}
      - {name: types}
models:
  - name: o_feed
    columns: [{name: id, data_tests: [unique, not_null]}]
"""
MODELS = {
    "o_delins": """{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='id') }}
select id, shop, amount from {{ source('src', 'orders') }}""",
    # the second build overwrites shop a's partition only
    "o_overwrite": """{{ config(materialized='incremental', incremental_strategy='insert_overwrite',
          partition_by=['shop']) }}
select id, shop, amount from {{ source('src', 'orders') }}{% if var('batch') == 2 %} where shop = 'a'{% endif %}""",
    "o_micro": """{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='ts',
          batch_size='day', begin=modules.datetime.datetime(2026, 1, 1)) }}
select id, shop, amount, ts from {{ source('src', 'orders') }}""",
    "o_feed": """{{ config(materialized='incremental', unique_key='id') }}
select * from {{ ducklake_changes(source('src', 'orders')) }}""",
    "o_tt": "{{ config(materialized='table') }}\n"
            "select * from {{ ducklake_at(source('src', 'orders'), version=var('v0')) }}",
    "o_dml": "{{ config(materialized='table') }}\nselect id, shop, amount from {{ source('src', 'orders') }}",
    "types_copy": """{{{{ config(materialized='table', ducklake_types={types}) }}}}
select * from {{{{ source('src', 'types') }}}}""",
    "types_append": """{{{{ config(materialized='incremental', ducklake_types={types}) }}}}
select id + {{{{ var('batch') }}}} * 100 as id, {cols} from {{{{ source('src', 'types') }}}}""",
    "geo_copy": GEO_COPY,
}
PY_MODEL = """
def model(dbt, session):
    dbt.config(materialized="table")
    return dbt.source("src", "orders").where("amount > 15").selectExpr("id", "amount * 2 as amount2")
"""
SNAPSHOTS = """{% snapshot snap_ts %}
{{ config(target_schema='main', unique_key='id', strategy='timestamp', updated_at='ts', hard_deletes='invalidate') }}
select id, shop, amount, ts from {{ source('src', 'orders') }}
{% endsnapshot %}
{% snapshot snap_check %}
{{ config(target_schema='main', unique_key='id', strategy='check', check_cols=['amount'],
          hard_deletes='new_record') }}
select id, shop, amount, ts from {{ source('src', 'orders') }}
{% endsnapshot %}
"""
# DML through dbt, then maintenance, in one dbt process; DuckDB applies the same DML to a copy (DML_DUCKDB)
DML = ["delete from {t} where id = 1",
       "update {t} set amount = amount * 10 where shop = 'b'",
       "merge into {t} x using (select id, 'm' as shop, id * 7 as amount from {s} where id > 3) y on x.id = y.id "
       "when matched then update set amount = y.amount "
       "when not matched then insert (id, shop, amount) values (y.id, y.shop, y.amount)"]
OPS = """{% macro s3_ops() %}
  {% for sql in var('dml') %}{% do run_query(sql) %}{% endfor %}
  {% do ducklake_merge_adjacent_files() %}
  {% do ducklake_check_files(footers=true) %}
  {% do ducklake_expire_snapshots(versions=var('expire')) %}
  {% do ducklake_cleanup_old_files(cleanup_all=true) %}
  {% do ducklake_delete_orphaned_files(cleanup_all=true) %}
{% endmacro %}
"""
CLONED = ["o_dml", "types_copy"]


def _types_columns() -> tuple[str, str, str]:
    """(DDL columns, ducklake_types of the models, their column list) of the table of every column type."""
    ddl = ", ".join(f"c_{t[2:]} {typ}" for t, (typ, _, _) in SOURCES.items())
    types = "{" + ", ".join(f"'c_{t[2:]}': '{lake}'" for t, (_, lake, _) in SOURCES.items()) + "}"
    return ddl, types, ", ".join(f"c_{t[2:]}" for t in SOURCES)


def _project(root: Path, server: s3.S3Server, catalog: str, data_path: str) -> Path:
    for d in ("models", "snapshots", "macros"):
        (root / d).mkdir(parents=True)
    (root / "dbt_project.yml").write_text("name: s3features\nversion: '1.0'\nprofile: s3features\n"
                                          "config-version: 2\nvars:\n  batch: 1\n")
    _, types, cols = _types_columns()
    for name, sql in MODELS.items():
        (root / "models" / f"{name}.sql").write_text(sql.format(types=types, cols=cols) if "{{{{" in sql else sql)
    (root / "models" / "o_py.py").write_text(PY_MODEL)
    (root / "models" / "sources.yml").write_text(SOURCES_YML)
    (root / "snapshots" / "snaps.sql").write_text(SNAPSHOTS)
    (root / "macros" / "ops.sql").write_text(OPS)
    (root / "profiles.yml").write_text(s3.profile_yaml(
        "s3features", server, catalog, data_path, targets={"clone": "clones"},
        extra="      write_audit_publish: \"{{ var('wap', false) | as_bool }}\"\n"))
    return root


def _sources(con: Any) -> int:
    """DuckDB writes the sources (as files on S3); the snapshot that holds them."""
    ddl, _, _ = _types_columns()
    con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
    con.execute("CREATE SCHEMA lake.src")
    con.execute("CREATE TABLE lake.src.orders (id INTEGER, shop VARCHAR, amount INTEGER, ts TIMESTAMP)")
    con.execute("""INSERT INTO lake.src.orders VALUES (1, 'a', 10, '2026-01-01 01:00'), (2, 'a', 20, '2026-01-01 02:00'),
                   (3, 'b', 30, '2026-01-02 03:00'), (4, 'b', 40, '2026-01-02 04:00'),
                   (5, 'c', 50, '2026-01-03 05:00')""")
    con.execute(f"CREATE TABLE lake.src.types (id INTEGER, s VARCHAR, {ddl})")
    first = ", ".join(v[2][0] for v in SOURCES.values())
    second = ", ".join(v[2][1] for v in SOURCES.values())
    nulls = ", ".join("NULL" for _ in SOURCES)
    con.execute(f"INSERT INTO lake.src.types VALUES (1, 'a', {first}), (2, 'b', {second}), (3, NULL, {nulls})")
    con.execute("CREATE TABLE lake.src.gv (id INTEGER, s VARCHAR, u UUID, g GEOMETRY, gl GEOMETRY[], v VARIANT)")
    con.execute("""INSERT INTO lake.src.gv VALUES
        (1, 'a', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'POINT(1 2)', ['LINESTRING(0 0, 1 1)', NULL],
         {'k': [1, 2], 'z': 'q'}::VARIANT),
        (2, 'b', NULL, 'POLYGON((0 0, 1 0, 1 1, 0 0))', [], 42::VARIANT),
        (3, NULL, 'ffffffff-ffff-ffff-ffff-ffffffffffff', NULL, NULL, NULL)""")
    return s3.latest_snapshot(con)


def _change_sources(con: Any) -> int:
    """An update, a delete (delete files on S3) and an insert, in separate DuckDB snapshots; the last one."""
    con.execute("UPDATE lake.src.orders SET amount = amount + 100, ts = ts + INTERVAL 1 HOUR WHERE id = 2")
    con.execute("DELETE FROM lake.src.orders WHERE id = 3")
    con.execute("INSERT INTO lake.src.orders VALUES (6, 'a', 60, '2026-01-02 06:00')")
    return s3.latest_snapshot(con)


# what DuckDB reads of each table (normalised as the local column-type test does), and what it must hold ------------
TYPED = ", ".join("CAST(c_ns AS TIMESTAMP)" if t == "t_ns" else f"c_{t[2:]}" for t in SOURCES)
COLUMNS = {"o_delins": "id, shop, amount", "o_overwrite": "id, shop, amount", "o_micro": "id, shop, amount, ts",
           "o_feed": "id, shop, amount, ts", "o_tt": "id, shop, amount, ts", "o_dml": "id, shop, amount",
           "o_py": "id, amount2", "types_copy": f"id, s, {TYPED}", "types_append": f"id, {TYPED}",
           "geo_copy": "id, g, gl, v",
           "snap_ts": "id, shop, amount, ts, dbt_valid_from, dbt_valid_to IS NULL",
           "snap_check": "id, shop, amount, ts, dbt_valid_to IS NULL, dbt_is_deleted"}


def _norm(rows: list[tuple]) -> list[tuple]:
    return sorted((tuple(_utc(v) for v in r) for r in rows), key=repr)


def _read(con: Any, table: str, snapshot: int | None = None, schema: str = "main") -> list[tuple] | None:
    at = "" if snapshot is None else f" AT (VERSION => {snapshot})"
    try:
        rows = con.execute(f"SELECT {COLUMNS[table]} FROM lake.{schema}.{table}{at}").fetchall()
    except Exception as e:  # noqa: BLE001 - DuckDB's catalog error for a table that did not exist (yet)
        if "does not exist" in str(e) or "not found" in str(e).lower():
            return None
        raise
    return _norm(rows)


def _expected_build(con: Any, batch: int, v0: int, v1: int) -> dict[str, list[list[tuple]]]:
    """Each model's states after build `batch` (1: sources at v0; 2: at v1), with the intermediate ones a build
    commits (the microbatch model's first batch), as DuckDB computes them from the sources."""
    o0, o1 = ORDERS.format(v=v0), ORDERS.format(v=v1)
    now = o0 if batch == 1 else o1
    q = lambda sql: _norm(con.execute(sql).fetchall())  # noqa: E731
    sel = "SELECT id, shop, amount FROM "
    micro = f"SELECT id, shop, amount, ts FROM {o0} WHERE ts >= '{WINDOW[0]}' AND ts < '{WINDOW[1]}'"
    if batch == 2:  # the second build reruns day 2 only: day 1 as the first build left it
        micro = (f"SELECT id, shop, amount, ts FROM {o0} WHERE ts >= '{WINDOW[0]}' AND ts < '{DAY2}' UNION ALL "
                 f"SELECT id, shop, amount, ts FROM {o1} WHERE ts >= '{DAY2}' AND ts < '{WINDOW[1]}'")
    types = f"SELECT id, {TYPED} FROM lake.src.types"
    out = {
        "o_delins": [q(sel + o0)] if batch == 1 else [q(f"{sel}{o1} UNION ALL {sel}{o0} WHERE id NOT IN "
                                                        f"(SELECT id FROM {o1})")],
        "o_overwrite": [q(sel + o0)] if batch == 1 else [q(f"{sel}{o1} WHERE shop = 'a' UNION ALL "
                                                           f"{sel}{o0} WHERE shop <> 'a'")],
        "o_micro": [q(micro)] if batch == 2 else [q(micro + f" AND ts < '{DAY2}'"), q(micro)],
        "o_feed": [q(f"SELECT id, shop, amount, ts FROM {now}")],
        "o_tt": [q(f"SELECT id, shop, amount, ts FROM {o0}")],
        "o_dml": [q(sel + now)],
        "o_py": [q(f"SELECT id, amount * 2 FROM {now} WHERE amount > 15")],
        "types_copy": [q(f"SELECT id, s, {TYPED} FROM lake.src.types")],
        "types_append": [q(" UNION ALL ".join(types.replace("SELECT id,", f"SELECT id + {b * 100},")
                                              for b in range(1, batch + 1)))],
        "geo_copy": [q("SELECT id, g, gl, CASE WHEN v IS NOT NULL THEN v::JSON END FROM lake.src.gv")],
    }
    # snapshots: each version of a row, valid from its ts (timestamp strategy); hard deletes close the row
    # (invalidate) or add a deleted record (new_record)
    rows0 = con.execute(f"SELECT id, shop, amount, ts FROM {o0}").fetchall()
    rows = rows0 if batch == 1 else con.execute(f"SELECT id, shop, amount, ts FROM {o1}").fetchall()
    versions = sorted(set(rows0) | set(rows))
    live_ids = {r[0] for r in rows}
    out["snap_ts"] = [_norm([(*r, r[3], r in rows) for r in versions])]
    deleted = [(*r, True, "True") for r in rows0 if r[0] not in live_ids]
    out["snap_check"] = [_norm([(*r, r in rows, "False") for r in versions] + deleted)]
    return out


def _dml_states(con: Any) -> list[list[tuple]]:
    """o_dml after build 2 and after each DML statement, as DuckDB applies them to a copy."""
    con.execute("CREATE OR REPLACE TEMP TABLE dml_copy AS SELECT id, shop, amount FROM lake.main.o_dml")
    states = [_norm(con.execute("SELECT * FROM dml_copy").fetchall())]
    for sql in DML:
        con.execute(sql.format(t="dml_copy", s="lake.src.orders"))
        states.append(_norm(con.execute("SELECT * FROM dml_copy").fetchall()))
    return states


def _check_every_snapshot(con: Any, allowed: dict[str, list[list[tuple]]]) -> None:
    """Every table at every snapshot the lake holds is one of its allowed states (or absent); the latest is the
    last allowed state."""
    snaps = [r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]
    for snap in snaps:
        for table, states in allowed.items():
            got = _read(con, table, snap)
            assert got is None or got in states, (table, snap, got, states)
    for table, states in allowed.items():
        assert _read(con, table) == states[-1], table


def _types_match(con: Any) -> None:
    """The copies keep DuckDB's column types (ducklake_types)."""
    def types(schema: str, table: str) -> list[tuple]:
        return con.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog = "
                           f"'lake' AND table_schema = '{schema}' AND table_name = '{table}' AND "
                           "column_name LIKE 'c\\_%' ESCAPE '\\' ORDER BY 1").fetchall()
    want = types("src", "types")
    assert want and types("main", "types_copy") == want and types("main", "types_append") == want


def _no_orphans(con: Any) -> None:
    """DuckDB's own dry runs: nothing scheduled, nothing unreferenced in the store (the Spark layer's readable copies
    aside: they are not lake files)."""
    assert con.execute("SELECT * FROM ducklake_cleanup_old_files('lake', cleanup_all => true, dry_run => true)"
                       ).fetchall() == []
    orphans = [r[0] for r in con.execute("SELECT * FROM ducklake_delete_orphaned_files('lake', cleanup_all => true, "
                                         "dry_run => true)").fetchall()]
    assert [p for p in orphans if "/_ducklake_spark/" not in p] == []


def _catalog(backend: str, request: pytest.FixtureRequest, root: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{root}/metadata.sqlite"
    if backend == "duckdb":
        return f"duckdb:///{root}/metadata.ducklake"
    server = request.getfixturevalue("pg_server")
    return str(server.create_database(f"s3_features_{uuid.uuid4().hex[:10]}"))


def _store(server: s3.S3Server) -> S3FileIO:
    return S3FileIO(ObjectStoreConfig(server.key_id, server.secret, None, server.region, server.endpoint, "path",
                                      False))


# the whole project runs in the full suite (several minutes per catalog); the default suite runs the cheap check below
BACKENDS = ["sqlite", "postgres", "duckdb"] if FULL else []


@pytest.mark.parametrize("backend", [pytest.param(b, marks=pytest.mark.postgres) if b == "postgres" else b
                                     for b in BACKENDS])
def test_every_feature_on_s3(backend: str, tmp_path: Path, s3_server: s3.S3Server,
                             request: pytest.FixtureRequest) -> None:
    bucket = s3_server.make_bucket()
    data_path = f"s3://{bucket}/lake/"
    catalog = _catalog(backend, request, tmp_path)
    project = _project(tmp_path / "p", s3_server, catalog, data_path)
    attached: Callable[..., Any] = lambda **kw: s3.attached(s3_server, catalog, **kw)  # noqa: E731

    with attached(data_path=data_path) as con:
        v0 = _sources(con)
    s3.run_dbt(project, "build", "--vars", f"{{batch: 1, v0: {v0}}}", "--event-time-start", WINDOW[0],
               "--event-time-end", WINDOW[1])
    with attached(read_only=True) as con:
        build1 = _expected_build(con, 1, v0, v0)
        _check_every_snapshot(con, build1)
        _types_match(con)
        after_build1 = s3.latest_snapshot(con)
    with attached() as con:
        v1 = _change_sources(con)

    s3.run_dbt(project, "build", "--vars", f"{{batch: 2, v0: {v0}, wap: true}}", "--event-time-start", DAY2,
               "--event-time-end", WINDOW[1])
    with attached(read_only=True) as con:
        build2 = _expected_build(con, 2, v0, v1)
        allowed = {t: build1[t] + build2[t] for t in build1}
        _check_every_snapshot(con, allowed)
        published = con.execute(f"SELECT count(*) FROM lake.snapshots() WHERE snapshot_id > {v1}").fetchone()[0]
        assert published == 1  # the whole second build as one snapshot
        # an orphaned file in a table's folder (as a crashed writer leaves), for the orphan deletion to find
        (one,) = con.execute("SELECT data_file FROM ducklake_list_files('lake', 'o_dml', schema => 'main') "
                             "LIMIT 1").fetchone()
        dml_states = _dml_states(con)
        files_before = con.execute("SELECT count(*) FROM ducklake_list_files('lake', 'types_append', "
                                   "schema => 'main')").fetchone()[0]
    orphan = one.rsplit("/", 1)[0] + f"/ducklake-{uuid.uuid4()}.parquet"
    store = _store(s3_server)
    store.copy(one, orphan)

    dml = [sql.format(t="main.o_dml", s="src.orders") for sql in DML]
    expire = list(range(after_build1 + 1))
    s3.run_dbt(project, "run-operation", "s3_ops", "--vars", f"{{v0: {v0}, dml: {dml!r}, expire: {expire}}}")
    assert not store.exists(orphan)
    with attached() as con:  # not read-only: DuckDB's orphan dry run needs a writable lake
        assert min(r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots()").fetchall()) > after_build1
        # snapshots after the first build's (DuckDB's source changes) still hold its states
        allowed = {t: build1[t] + (dml_states if t == "o_dml" else build2[t]) for t in build1}
        _check_every_snapshot(con, allowed)
        files_after = con.execute("SELECT count(*) FROM ducklake_list_files('lake', 'types_append', "
                                  "schema => 'main')").fetchone()[0]
        assert files_after < files_before  # compacted
        _no_orphans(con)
        sources = {t: [r[0] for r in con.execute(f"SELECT data_file FROM ducklake_list_files('lake', '{t}', "
                                                  "schema => 'main')").fetchall()] for t in CLONED}
        cloned = {t: _read(con, t) for t in CLONED}

    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(project / "target" / "manifest.json", state / "manifest.json")
    s3.run_dbt(project, "clone", "--state", str(state), "--target", "clone", "--select", *CLONED)
    assert CLONE_KINDS["file_copy"] in (project / "logs" / "dbt.log").read_text(errors="replace")
    with attached() as con:
        for t in CLONED:
            files = [r[0] for r in con.execute(f"SELECT data_file FROM ducklake_list_files('lake', '{t}', "
                                               "schema => 'clones')").fetchall()]
            assert files and not set(files) & set(sources[t])  # the clone's own files, not the source's
            assert _read(con, t, schema="clones") == cloned[t]
        # the sources dropped, every older snapshot expired and every file it scheduled deleted, by DuckDB
        for t in CLONED:
            con.execute(f"DROP TABLE lake.main.{t}")
        con.execute("CALL ducklake_expire_snapshots('lake', older_than => now() + INTERVAL 1 DAY)")
        con.execute("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
    assert not any(store.exists(p) for t in CLONED for p in sources[t])
    with attached() as con:
        for t in CLONED:
            assert _read(con, t, schema="clones") == cloned[t]
        _no_orphans(con)
    assert violations(catalog) == []



@pytest.mark.skipif(FULL, reason="the whole project runs on these catalogs under DUCKLAKE_TEST_FULL")
# a SQLite catalog on S3 is the fault test's (test_object_store_faults.py), a DuckDB-file catalog on S3 the dbt test of
# test_object_store.py (DuckDB's table with a delete file read, merges' delete files written, every snapshot checked):
# the default run takes PostgreSQL here
@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
def test_other_catalogs_on_s3(backend: str, tmp_path: Path, s3_server: s3.S3Server,
                              request: pytest.FixtureRequest) -> None:
    """The cheap check per catalog: one dbt process reads DuckDB's files and delete files on S3 (a change feed and a
    delete+insert model) and writes its own there; DuckDB reads every snapshot, the lake keeps its invariants."""
    bucket = s3_server.make_bucket()
    data_path = f"s3://{bucket}/lake/"
    catalog = _catalog(backend, request, tmp_path)
    project = _project(tmp_path / "p", s3_server, catalog, data_path)
    with s3.attached(s3_server, catalog, data_path=data_path) as con:
        _sources(con)
        v1 = _change_sources(con)
    s3.run_dbt(project, "run", "--select", "o_feed", "o_delins", "--vars", "{v0: 0}")
    with s3.attached(s3_server, catalog, read_only=True) as con:
        want = _expected_build(con, 1, v1, v1)
        _check_every_snapshot(con, {t: want[t] for t in ("o_feed", "o_delins")})
    assert violations(catalog) == []
