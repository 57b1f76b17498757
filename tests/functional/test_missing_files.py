"""dbt over a lake whose files went missing or were damaged (tests/support/damaged_lakes.py, written by DuckDB): each
model, test, snapshot, merge and change-feed read of a damaged table fails with one short message naming the table,
the snapshot and the lake file, and what to do; no stack trace; nothing is committed. `ducklake_check_files` lists
exactly the damaged files."""

from __future__ import annotations

import os
import re

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.support import damaged_lakes, reference

SOURCES = """
version: 2
sources:
  - name: raw
    schema: raw
    tables:
      - name: gone
        columns: [{name: id, data_tests: [unique]}]
      - {name: bad}
      - {name: del}
      - {name: five}
      - {name: rot}
      - {name: ok}
      - {name: chg}
"""
TABLE = "{{{{ config(materialized='table') }}}}\nselect * from {{{{ source('raw', '{t}') }}}}\n"
MERGED = """{{ config(materialized='incremental', unique_key='id') }}
select id, v from {{ source('raw', 'ok') }} {% if is_incremental() %} where id < 10 {% endif %}
"""
FEED = """{{ config(materialized='incremental', unique_key='id') }}
select id, v, _ducklake_change_type from {{ ducklake_changes(source('raw', 'chg')) }}
"""
PYTHON = """def model(dbt, session):
    dbt.config(materialized="table")
    return dbt.source("raw", "gone")
"""
SNAPSHOT = """{% snapshot snap %}
{{ config(target_schema=schema, unique_key='id', strategy='check', check_cols=['v']) }}
select * from {{ source('raw', 'five') }}
{% endsnapshot %}
"""
ADVICE = "restore it from a backup (to the same path), or rebuild the table from its source; `dbt run-operation " \
         "ducklake_check_files` lists every missing or damaged file of the lake"


class TestMissingFiles:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        tables = {f"m_{t}.sql": TABLE.format(t=t) for t in ("gone", "bad", "del", "rot")}
        return {"sources.yml": SOURCES, "merged.sql": MERGED, "feed.sql": FEED, "py_gone.py": PYTHON, **tables}

    @pytest.fixture(scope="class")
    def snapshots(self) -> dict[str, str]:
        return {"snap.sql": SNAPSHOT}

    def test_reads_fail_clearly_and_commit_nothing(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        d = damaged_lakes.build(catalog)
        with reference.attached(catalog) as con:
            con.execute(f"CREATE TABLE lake.raw.chg AS {damaged_lakes.ROWS.format(n=20)}")
        run_dbt(["run", "--select", "merged", "feed"])  # first runs: whole tables
        with reference.attached(catalog) as con:
            schema = project.test_schema  # type: ignore[attr-defined]
            merged = [r[0] for r in con.execute(
                f"SELECT data_file FROM ducklake_list_files('lake', 'merged', schema => '{schema}')").fetchall()]
            con.execute("INSERT INTO lake.raw.chg SELECT range + 100, range FROM range(5)")
            chg = con.execute("SELECT max(data_file) FROM ducklake_list_files('lake', 'chg', schema => 'raw')"
                              ).fetchone()[0]  # the new file (uuidv7 names sort by time)
        for path in [*merged, chg]:
            os.remove(path)
        before = damaged_lakes.latest_snapshot(catalog)

        results, out = run_dbt_and_capture(["run", "--select", "m_gone", "m_bad", "m_del", "m_rot", "merged", "feed",
                                            "py_gone"], expect_pass=False)
        messages = {r.node.name: r.message for r in results.results}
        assert all(r.status == "error" for r in results.results), messages
        expected = {
            "m_gone": f"lake table raw.gone at snapshot {before}: data file {d.paths['gone']} is missing (the catalog "
                      f"lists it with {d.sizes['gone']} bytes)",
            "m_bad": f"lake table raw.bad at snapshot {before}: data file {d.paths['bad']} is "
                     f"{d.sizes['bad'] // 2} bytes, but the catalog lists it with {d.sizes['bad']} bytes",
            "m_del": f"lake table raw.del at snapshot {before}: delete file {d.paths['del']} is missing",
            # the right size: found by Spark reading it, told as the lake file
            "m_rot": f"lake table raw.rot at snapshot {before}: data file {d.paths['rot']} is not a Parquet file",
            # a Python model's dbt.source()
            "py_gone": f"lake table raw.gone at snapshot {before}: data file {d.paths['gone']} is missing",
            # a MERGE reads the target's files that may hold its keys
            "merged": f"lake table {schema}.merged at snapshot {before}: data file {merged[0]} is missing",
        }
        # the change feed since the model's last run reads the new file
        assert re.search(rf"MissingDataFileError: lake table raw\.chg \(changes from snapshot \d+ to {before}\): "
                         rf"data file {re.escape(chg)} is missing", messages["feed"]), messages["feed"]
        assert ADVICE in messages["feed"]
        for name, text in expected.items():
            assert f"MissingDataFileError: {text}" in messages[name], messages[name]
            assert ADVICE in messages[name], messages[name]
        for noise in ("\tat ", "Traceback", "Py4JJavaError", "_ducklake_spark", "Caused by"):
            assert noise not in out, noise

        results = run_dbt(["test", "--select", "source:raw.gone"], expect_pass=False)  # counted on the driver
        assert f"data file {d.paths['gone']} is missing" in results.results[0].message
        results = run_dbt(["snapshot"], expect_pass=False)
        assert f"lake table raw.five at snapshot {before}: data file {d.paths['five']} is missing" in \
            results.results[0].message
        assert damaged_lakes.latest_snapshot(catalog) == before  # nothing committed

        _, out = run_dbt_and_capture(["run-operation", "ducklake_check_files"], expect_pass=False)
        listed = set(re.findall(r"(?:data|delete) file (\S+\.parquet) (?:is|has|holds)", out))
        assert listed == d.damaged | {*merged, chg}, out
        _, out = run_dbt_and_capture(["run-operation", "ducklake_check_files", "--args",
                                      "{schema: raw, table: rot, footers: true}"], expect_pass=False)
        assert set(re.findall(r"(?:data|delete) file (\S+\.parquet) (?:is|has|holds)", out)) == {d.paths["rot"]}
        _, out = run_dbt_and_capture(["run-operation", "ducklake_check_files", "--args", "{schema: raw, table: ok}"])
        assert "1 files (1 data, 0 delete files) of every snapshot the catalog holds: all present" in out
        assert damaged_lakes.latest_snapshot(catalog) == before
