"""Data tests answered on the driver (counted from small tables, or proven by statistics) on 4 threads, while other
threads commit models and another process keeps committing to the same DuckDB-file lake: every test's failure count
is DuckDB's count on the lake it tested, in `dbt build` (tests run beside other models' commits) and in `dbt test`."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference
from tests.support.coverage import FULL

# four models (19 tests, every kind: more than the 4 threads take at once) by default; eight in the full suite
N = 8 if FULL else 4


def _model(i: int) -> str:
    # known failures per model: ids repeat (unique fails), some names are NULL (not_null fails), one kind is not
    # accepted, and parent_id points at ids of the model before it (relationships fails for the ones it lacks)
    return textwrap.dedent(f"""
        {{{{ config(materialized='table') }}}}
        select cast(id % {20 + i} as int) as id,
               case when id % {3 + i} = 0 then null else concat('n', id) end as name,
               case when id % 11 = {i} then 'other' when id % 2 = 0 then 'even' else 'odd' end as kind,
               cast(id % {30 + i} as int) as parent_id
        from range(0, {40 + 5 * i})
        """)


def _schema() -> str:
    lines = ["version: 2", "models:"]
    for i in range(N):
        lines += [f"  - name: m{i}", "    columns:", "      - name: id", "        data_tests: [unique, not_null]",
                  "      - name: name", "        data_tests: [not_null]", "      - name: kind", "        data_tests:",
                  "          - accepted_values:", "              arguments: {values: ['even', 'odd']}"]
        if i:
            lines += ["      - name: parent_id", "        data_tests:", "          - relationships:",
                      f"              arguments: {{to: ref('m{i - 1}'), field: id}}"]
    return "\n".join(lines) + "\n"


WRITER = """
import sys, time, duckdb
ext, catalog, data, schema, stop = sys.argv[1:6]
con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False,
                             "allow_unsigned_extensions": True})  # see tests/support/reference.CONFIG
con.execute(f"LOAD '{ext}'")
n = 0
while True:
    try:
        con.execute(f"ATTACH 'ducklake:{catalog}' AS lake (DATA_PATH '{data}', DATA_INLINING_ROW_LIMIT 0)")
    except duckdb.IOException:  # the adapter holds the catalog file now
        time.sleep(0.02)
        continue
    try:
        con.execute(f"CREATE TABLE IF NOT EXISTS lake.{schema}.noise (n INTEGER)")
        con.execute(f"INSERT INTO lake.{schema}.noise VALUES ({n})")
        n += 1
    finally:
        con.execute("DETACH lake")
    print(n, flush=True)
    try:
        open(stop).close()
        break
    except FileNotFoundError:
        time.sleep(0.05)
"""


def _expected(con: object, schema: str) -> dict[str, tuple[str, int]]:
    """Each test's (status, failures) as DuckDB counts them on the lake."""
    q = con.execute  # type: ignore[attr-defined]
    out: dict[str, tuple[str, int]] = {}
    for i in range(N):
        t = f"lake.{schema}.m{i}"
        counts = {
            f"unique_m{i}_id": q(f"SELECT count(*) FROM (SELECT id FROM {t} WHERE id IS NOT NULL GROUP BY id "
                                 "HAVING count(*) > 1)").fetchone()[0],
            f"not_null_m{i}_id": q(f"SELECT count(*) FROM {t} WHERE id IS NULL").fetchone()[0],
            f"not_null_m{i}_name": q(f"SELECT count(*) FROM {t} WHERE name IS NULL").fetchone()[0],
            f"accepted_values_m{i}_kind__even__odd": q(
                f"SELECT count(DISTINCT kind) FROM {t} WHERE kind NOT IN ('even', 'odd')").fetchone()[0],
        }
        if i:
            counts[f"relationships_m{i}_parent_id__id__ref_m{i - 1}_"] = q(
                f"SELECT count(*) FROM {t} c LEFT JOIN lake.{schema}.m{i - 1} p ON c.parent_id = p.id "
                "WHERE c.parent_id IS NOT NULL AND p.id IS NULL").fetchone()[0]
        out.update({k: ("fail" if v else "pass", v) for k, v in counts.items()})
    return out


class TestDataTestsOnFourThreadsBesideAWriter:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, ducklake_root: str, unique_schema: str) -> dict[str, object]:
        return {"type": "ducklake", "catalog": f"{ducklake_root}/{unique_schema}.ducklake",
                "data_path": f"{ducklake_root}/{unique_schema}_data/", "master": "local[2]", "threads": 4,
                "spark_config": {"spark.sql.shuffle.partitions": "2"}}

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {**{f"m{i}.sql": _model(i) for i in range(N)}, "schema.yml": _schema()}

    def test_counts_equal_duckdbs(self, project: object, tmp_path: object) -> None:
        creds = project.adapter.config.credentials  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        stop = f"{tmp_path}/stop"
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, reference.extension_path("ducklake"), creds.catalog, creds.data_path,
             schema, stop], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert writer.stdout is not None
            writer.stdout.readline()  # the writer made its table: it commits from now on
            built = run_dbt(["build"], expect_pass=False)
            tested = run_dbt(["test"], expect_pass=False)
        finally:
            open(stop, "w").close()
            out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        with reference.attached(creds.catalog, read_only=True) as con:
            expected = _expected(con, schema)
            writes = con.execute(f"SELECT count(*) FROM lake.{schema}.noise").fetchone()[0]
        assert writes >= 3, out  # the writer committed while dbt ran
        assert sum(1 for v in expected.values() if v[0] == "fail") >= 3 * N  # the models' known failures
        assert {r.node.name: str(r.status) for r in built if r.node.resource_type == "model"} == {
            f"m{i}": "success" for i in range(N)}
        for results in (built, tested):
            got = {r.node.name: (str(r.status), r.failures or 0) for r in results if r.node.resource_type == "test"}
            assert got == expected
