"""A dbt build on four threads while another process keeps committing to its source: every model reads one snapshot.

A DuckDB process commits to `raw.src` every 0.1-0.5 s (inserts, deletes, updates; on a DuckDB-file catalog it takes
turns on the file) while `dbt build` runs, several times, a project with every incremental strategy (two merge models
with the same SQL among them), a view and a model over it, a Python model, a dbt snapshot and a change-feed model.
Afterwards, for every commit of every model, DuckDB recomputes what the model must hold from the source at the snapshot
the commit says it read (`read_snapshot` in its extra info), and the table at that commit equals it exactly; no unique
key is duplicated. The source at a snapshot is what the writer recorded right after its commits (busy_writer's
history), not DuckDB's time travel: see there why.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.functional.test_writers import _dbt, _kill_group
from tests.support import busy_writer, reference
from tests.support.coverage import FULL
from tests.support.invariants import violations
from tests.support.spark_cluster import REPO_ROOT

pytestmark = pytest.mark.slow

AGG = "select g, count(*) as n, sum(amt) as s from {{ source('raw', 'src') }} group by g"
MODELS = {
    "agg_table.sql": "{{ config(materialized='table') }}\n" + AGG,
    "agg_merge.sql": "{{ config(materialized='incremental', unique_key='g') }}\n" + AGG,
    "agg_merge_twin.sql": "{{ config(materialized='incremental', unique_key='g') }}\n" + AGG,
    "agg_delete_insert.sql": "{{ config(materialized='incremental', incremental_strategy='delete+insert', "
                             "unique_key='g') }}\n" + AGG,
    "agg_overwrite.sql": "{{ config(materialized='incremental', incremental_strategy='insert_overwrite', "
                         "partition_by=['p']) }}\nselect g % 4 as p, g, count(*) as n, sum(amt) as s "
                         "from {{ source('raw', 'src') }} group by g",
    "rows_append.sql": "{{ config(materialized='incremental', incremental_strategy='append') }}\n"
                       "select id, g, amt from {{ source('raw', 'src') }}\n"
                       "{% if is_incremental() %} where id > (select coalesce(max(id), -1) from {{ this }}) {% endif %}",
    "rows_microbatch.sql": "{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='ts', "
                           "batch_size='day', lookback=0, begin=modules.datetime.datetime.utcnow().strftime('%Y-%m-%d')) }}\n"
                           "select id, g, amt, ts from {{ source('raw', 'src') }}",
    "low_view.sql": "{{ config(materialized='view') }}\nselect id, g, amt from {{ source('raw', 'src') }} where g < 20",
    "agg_of_view.sql": "{{ config(materialized='table') }}\nselect g, count(*) as n, sum(amt) as s "
                       "from {{ ref('low_view') }} group by g",
    "feed.sql": "{{ config(materialized='incremental', unique_key='id') }}\n"
                "select id, g, amt, _ducklake_change_type from {{ ducklake_changes(source('raw', 'src')) }}",
    "agg_python.py": "def model(dbt, session):\n    dbt.config(materialized='table')\n"
                     "    return dbt.source('raw', 'src').groupBy('g').agg({'*': 'count', 'amt': 'sum'})"
                     ".withColumnRenamed('count(1)', 'n').withColumnRenamed('sum(amt)', 's')\n",
    "schema.yml": "version: 2\nsources:\n  - name: raw\n    schema: raw\n    tables:\n"
                  "      - {name: src, config: {event_time: ts}}\n"
                  "models:\n  - name: agg_merge\n    columns: [{name: g, data_tests: [not_null, unique]}]\n",
}
SNAPSHOT = """{% snapshot src_history %}
{{ config(target_schema='main', unique_key='id', strategy='check', check_cols=['g', 'amt'],
          hard_deletes='invalidate') }}
select id, g, amt from {{ source('raw', 'src') }}
{% endsnapshot %}
"""
SRC_AGG = "SELECT g, count(*) AS n, sum(amt) AS s FROM {src} {where} GROUP BY g"
# what each model must hold at a commit that read the source at snapshot r (append: see _check_added)
EXPECTED = {
    "agg_table": SRC_AGG, "agg_merge": SRC_AGG, "agg_merge_twin": SRC_AGG, "agg_delete_insert": SRC_AGG,
    "agg_python": SRC_AGG, "agg_of_view": SRC_AGG.replace("{where}", "WHERE g < 20"),
    "agg_overwrite": "SELECT g % 4 AS p, g, count(*) AS n, sum(amt) AS s FROM {src} "
                     "{where} GROUP BY g",
    "feed": "SELECT id, g, amt FROM {src} {where}",
    # every source row has an event time in today's first hour: today's batch replaces them all
    "rows_microbatch": "SELECT id, g, amt FROM {src} {where}",
}
COLUMNS = {"agg_overwrite": "p, g, n, s", "feed": "id, g, amt", "rows_microbatch": "id, g, amt"}
KEYS = {"agg_table": "g", "agg_merge": "g", "agg_merge_twin": "g", "agg_delete_insert": "g", "agg_python": "g",
        "agg_of_view": "g", "agg_overwrite": "g", "feed": "id", "rows_append": "id", "rows_microbatch": "id"}


# the plain table model in the full suite: the Python model and the model over the view are tables too
if not FULL:
    for _name in ("agg_table.sql",):
        del MODELS[_name]
    del EXPECTED["agg_table"]


def _project(root: Path, catalog: str, data: Path) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "snapshots").mkdir()
    (root / "dbt_project.yml").write_text("name: busy\nversion: '1.0'\nprofile: busy\nconfig-version: 2\n")
    for name, text in MODELS.items():
        (root / "models" / name).write_text(text)
    (root / "snapshots" / "src_history.sql").write_text(SNAPSHOT)
    (root / "profiles.yml").write_text(
        "busy:\n  target: dev\n  outputs:\n    dev:\n      type: ducklake\n"
        f"      catalog: '{catalog}'\n      data_path: '{data}/'\n      schema: main\n      master: 'local[2]'\n"
        "      threads: 4\n      spark_config: {spark.sql.shuffle.partitions: '2'}\n")
    return root


@contextlib.contextmanager
def _writer(catalog: str, data: Path, stop: Path, history: Path) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.busy_writer", catalog, f"{data}/", str(stop),
                             "--history", str(history)],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        yield proc
    finally:
        stop.touch()
        try:
            out, _ = proc.communicate(timeout=60)
        finally:
            _kill_group(proc)
    assert b"commits" in out and int(out.split()[-1]) > 0, out  # the writer did commit while dbt ran


def _commits(con: object, node: str) -> list[tuple[int, int]]:
    """(commit snapshot, read snapshot) of each commit of the node, oldest first."""
    rows = con.execute("SELECT snapshot_id, commit_extra_info FROM lake.snapshots() WHERE commit_message LIKE ? "  # type: ignore[attr-defined]
                       "ORDER BY snapshot_id", [f"{node}:%"]).fetchall()
    return [(c, json.loads(info)["read_snapshot"]) for c, info in rows]


def _rows(con: object, sql: str) -> list[tuple]:
    return sorted(con.execute(sql).fetchall())  # type: ignore[attr-defined]


def _src(r: int) -> str:
    """The source as it was at snapshot r: the writer's record of its last commit at or before r."""
    return f"(SELECT id, g, amt, ts FROM hist.src WHERE sid = (SELECT max(sid) FROM hist.src WHERE sid <= {r})) src"


def _src_duckdb(r: int) -> str:
    """The source as DuckDB's time travel reads it at snapshot r."""
    return f"(SELECT id, g, amt, ts FROM lake.raw.src AT (VERSION => {r})) src"


def _as_duckdb_reads(con: object, got: list[tuple], want: list[tuple], duckdb_sql: str, what: str) -> None:
    """A read that differs from the writer's record must be exactly DuckDB's own answer at that snapshot, which then
    differs from the record too: DuckDB 1.5.5 labels the rows of a delete file it rewrote with the snapshot id it
    expected, and when another writer took that id first, time travel to that snapshot shows deletes committed
    later (docs/design/snapshot-isolation.md). A model pinned to that snapshot reads the lake as the reference does."""
    duck = _rows(con, duckdb_sql)
    assert got == duck and duck != want, (f"{what}: {len(got)} rows, the writer's record says {len(want)}, "
                                          f"DuckDB's time travel {len(duck)}")


def _check_history(con: object) -> None:
    """Every commit that changed the source is in the writer's record (else the record cannot judge)."""
    missing = con.execute(  # type: ignore[attr-defined]
        "SELECT snapshot_id FROM lake.snapshots() WHERE commit_message IS NULL AND snapshot_id > "
        "(SELECT min(sid) FROM hist.src) AND snapshot_id NOT IN (SELECT DISTINCT sid FROM hist.src)").fetchall()
    assert missing == [], f"the writer's commits {missing} are not in its record"


def _check(con: object, name: str, kind: str = "model") -> int:
    commits = _commits(con, f"{kind}.busy.{name}")
    assert commits, f"{name} was never committed"
    previous = None
    for c, r in commits:
        if name in EXPECTED:
            got = _rows(con, f"SELECT {COLUMNS.get(name, 'g, n, s')} FROM lake.main.{name} AT (VERSION => {c})")
            want = _rows(con, EXPECTED[name].format(src=_src(r), where=""))
            if got != want:
                _as_duckdb_reads(con, got, want, EXPECTED[name].format(src=_src_duckdb(r), where=""),
                                 f"{name} at snapshot {c} (read {r})")
        elif name == "rows_append":
            _check_added(con, name, c, r, previous, "id > (SELECT coalesce(max(id), -1) FROM lake.main.rows_append "
                         f"AT (VERSION => {previous}))" if previous else "true")
        elif name == "src_history":
            got = _rows(con, f"SELECT id, g, amt FROM lake.main.{name} AT (VERSION => {c}) WHERE dbt_valid_to IS NULL")
            want = _rows(con, f"SELECT id, g, amt FROM {_src(r)}")
            if got != want:
                _as_duckdb_reads(con, got, want, f"SELECT id, g, amt FROM {_src_duckdb(r)}",
                                 f"snapshot {name} at {c} (read {r}), current rows")
        key = KEYS.get(name, "id")
        if name != "src_history":
            n, distinct = con.execute(f"SELECT count(*), count(DISTINCT {key}) FROM lake.main.{name} "  # type: ignore[attr-defined]
                                      f"AT (VERSION => {c})").fetchone()
            assert n == distinct, f"{name} at snapshot {c}: {n} rows for {distinct} keys"
        previous = c
    return len(commits)


def _check_added(con: object, name: str, c: int, r: int, previous: int | None, condition: str) -> None:
    """The rows an append run added are the source's at the snapshot it read, past what the model held before."""
    before = f"SELECT id, g, amt FROM lake.main.{name} AT (VERSION => {previous})" if previous else \
        "SELECT NULL::BIGINT, NULL::BIGINT, NULL::BIGINT WHERE false"
    got = _rows(con, f"SELECT id, g, amt FROM lake.main.{name} AT (VERSION => {c}) EXCEPT ALL {before}")
    want = _rows(con, f"SELECT id, g, amt FROM {_src(r)} WHERE {condition}")
    if got != want:
        _as_duckdb_reads(con, got, want, f"SELECT id, g, amt FROM {_src_duckdb(r)} WHERE {condition}",
                         f"{name} at snapshot {c} (read {r}), rows added")


# PostgreSQL (where another writer overtakes commits most often) by default; the DuckDB file (turns on one file, also
# taken by the two-writer tests) and SQLite in the full suite
@pytest.fixture(params=["postgres", "sqlite", "duckdb"] if FULL else ["postgres"])
def busy_catalog(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return request.getfixturevalue("pg_server").create_database(f"busy_{os.getpid()}_{id(tmp_path) % 10**6}")
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/catalog.sqlite"
    return f"{tmp_path}/metadata.ducklake"


def test_every_model_reads_one_snapshot_while_duckdb_commits(busy_catalog: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    busy_writer.create_source(busy_catalog, f"{data}/", 4000)
    project = _project(tmp_path / "p", busy_catalog, data)
    builds = 3 if FULL else 2  # each while the writer commits: the first creates every model, the next changes them
    with _writer(busy_catalog, data, tmp_path / "stop", tmp_path / "history.duckdb"):
        for _ in range(builds):
            code, log = _dbt(project, "build").wait()
            assert code == 0, log[-6000:]
    with reference.attached(busy_catalog, read_only=True) as con:
        con.execute(f"ATTACH '{tmp_path / 'history.duckdb'}' AS hist (READ_ONLY)")
        _check_history(con)
        for name in [*EXPECTED, "rows_append"]:
            assert _check(con, name) == builds
        assert _check(con, "src_history", kind="snapshot") == builds
    assert violations(busy_catalog) == []
