"""A lake on S3 (moto's server on loopback, a DuckDB-file catalog; the fault tests take SQLite) that DuckDB created:
dbt seeds, builds a table and an incremental append model twice through Spark's s3a connector; DuckDB (httpfs +
ducklake) reads every table at every snapshot; the adapter reads a table DuckDB wrote there with a delete; the S3
secret shows nowhere; the catalog keeps its invariants."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dbt.adapters.ducklake.spark.env import s3a
from tests.support import s3
from tests.support.invariants import violations

pytestmark = [pytest.mark.slow, pytest.mark.spark]

SEED = "id,name\n1,ada\n2,bob\n3,cy\n"
TABLE = "{{ config(materialized='table') }}\nselect id, upper(name) as name from {{ ref('people') }}"
# each run appends the ids of its batch (var), once
APPEND = """{{ config(materialized='incremental', incremental_strategy='append') }}
select id * 10 + {{ var('batch') }} as id, name from {{ ref('people') }}"""
# a merge on a key: the second run updates rows the first wrote (delete files written and read through the seam)
MERGE = """{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id') }}
select id, concat(name, '{{ var('batch') }}') as name from {{ ref('people') }} where id >= {{ var('batch') }}"""
FROM_DUCK = "{{ config(materialized='table') }}\nselect k, v from {{ source('lake', 'from_duck') }}"
SOURCES = "version: 2\nsources:\n  - name: lake\n    schema: main\n    tables:\n      - name: from_duck\n"


def _project(root: Path, server: s3.S3Server, bucket: str) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "seeds").mkdir()
    (root / "dbt_project.yml").write_text("name: s3lake\nversion: '1.0'\nprofile: s3lake\nconfig-version: 2\n"
                                          "vars:\n  batch: 1\n")
    (root / "seeds" / "people.csv").write_text(SEED)
    (root / "models" / "people_table.sql").write_text(TABLE)
    (root / "models" / "people_append.sql").write_text(APPEND)
    (root / "models" / "people_merge.sql").write_text(MERGE)
    catalog = f"duckdb:///{root}/metadata.ducklake"
    (root / "profiles.yml").write_text(s3.profile_yaml("s3lake", server, catalog, f"s3://{bucket}/lake/"))
    return root


def _dbt(project: Path, *args: str, ok: bool = True, env_extra: dict[str, str] | None = None) -> str:
    return s3.run_dbt(project, *args, ok=ok, env_extra=env_extra)


def _latest(con: object) -> int:
    return s3.latest_snapshot(con)


def _rows_at(con: object, table: str, snapshot: int) -> list[tuple] | None:
    return s3.rows_at(con, f"lake.main.{table}", snapshot)


@pytest.mark.skipif(s3a.cached_jars() is None, reason="the s3a connector is not cached: run scripts/setup.sh")
def test_dbt_lake_on_s3(tmp_path: Path, s3_server: s3.S3Server) -> None:
    bucket = s3_server.make_bucket()
    project = _project(tmp_path / "p", s3_server, bucket)
    catalog = f"duckdb:///{project}/metadata.ducklake"
    people = [(1, "ada"), (2, "bob"), (3, "cy")]
    upper = [(i, n.upper()) for i, n in people]

    debug = _dbt(project, "debug")
    assert "s3_connector" in debug and "MISSING" not in debug
    # DuckDB creates the lake on S3 and writes a table there (files, not inlined rows), and deletes a row of it;
    # the first build seeds and builds every model over it (a seed and a run of their own in one dbt process)
    with s3.attached(s3_server, catalog, data_path=f"s3://{bucket}/lake/",
                     options={"DATA_INLINING_ROW_LIMIT": 0}) as con:
        con.execute("CREATE TABLE lake.main.from_duck AS SELECT range AS k, 'v' || range AS v FROM range(5)")
        con.execute("DELETE FROM lake.main.from_duck WHERE k = 2")
        paths = [r[0] for r in con.execute(
            "SELECT data_file FROM ducklake_list_files('lake', 'from_duck')").fetchall()]
        assert paths and all(p.startswith(f"s3://{bucket}/lake/") for p in paths), paths
        after_seed = _latest(con)
    (project / "models" / "from_duck_copy.sql").write_text(FROM_DUCK)
    (project / "models" / "sources.yml").write_text(SOURCES)
    _dbt(project, "build", "--vars", "batch: 1")
    _dbt(project, "run", "--vars", "batch: 2")

    batch1 = sorted((i * 10 + 1, n) for i, n in people)
    batch2 = sorted(batch1 + [(i * 10 + 2, n) for i, n in people])
    duck_rows = [(k, f"v{k}") for k in (0, 1, 3, 4)]
    merge1 = [(i, f"{n}1") for i, n in people]
    merge2 = [(1, "ada1"), (2, "bob2"), (3, "cy2")]
    with s3.attached(s3_server, catalog, read_only=True) as con:
        files = con.execute("SELECT path FROM __ducklake_metadata_lake.ducklake_data_file").fetchall()
        data_path = con.execute("SELECT value FROM __ducklake_metadata_lake.ducklake_metadata "
                                "WHERE key = 'data_path'").fetchone()[0]
        assert data_path == f"s3://{bucket}/lake/"
        assert files and not any(p.startswith(("s3a:", "/")) for (p,) in files), files  # relative, as DuckDB writes
        # every table at every snapshot: a state the adapter committed (intermediate snapshots of a command hold
        # the state before or after it); the final state exactly
        allowed = {"people": [sorted(people)], "people_table": [upper], "people_append": [batch1, batch2],
                   "people_merge": [merge1, merge2],
                   "from_duck": [duck_rows], "from_duck_copy": [duck_rows]}
        last = _latest(con)
        for snap in range(after_seed, last + 1):
            for table, states in allowed.items():
                got = _rows_at(con, table, snap)
                assert got is None or [tuple(r) for r in got] in states, (table, snap, got)
        final = {t: [tuple(r) for r in con.execute(f"SELECT * FROM lake.main.{t} ORDER BY ALL").fetchall()]
                 for t in allowed}
    assert final == {"people": sorted(people), "people_table": upper, "people_append": batch2, "people_merge": merge2,
                     "from_duck": duck_rows, "from_duck_copy": duck_rows}
    assert not any(p.name.startswith("s3") for p in project.iterdir()), "an S3 path was used as a local one"
    # the S3 secret shows nowhere: terminal output, logs (dbt's and Spark's), target/, the snapshots' commit info
    texts = {"dbt debug": debug}
    for sub in ("logs", "target"):
        for d, _dirs, names in os.walk(project / sub):
            for name in names:
                texts[os.path.join(d, name)] = Path(d, name).read_text(errors="replace")
    with s3.attached(s3_server, catalog, read_only=True) as con:
        texts["snapshots"] = repr(con.execute("SELECT * FROM lake.snapshots()").fetchall())
    for where, text in texts.items():
        assert s3_server.secret not in text, f"the S3 secret shows in {where}"
    assert violations(catalog) == []


def test_debug_says_what_to_add_without_the_connector(tmp_path: Path, s3_server: s3.S3Server) -> None:
    project = _project(tmp_path / "p", s3_server, s3_server.make_bucket())
    empty = tmp_path / "no-jars"
    empty.mkdir()
    out = _dbt(project, "debug", ok=False, env_extra={"DBT_DUCKLAKE_JARS": str(empty)})
    assert f"s3_connector: MISSING: no {s3a.S3A_CLASS}" in out
    assert "Spark cannot reach the data path" in out and "spark.jars.packages" in out and s3a.HADOOP_AWS in out
    assert s3_server.secret not in out
