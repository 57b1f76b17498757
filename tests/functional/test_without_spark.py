"""dbt commands whose nodes need no Spark start none: the embedded session is lazy (spark/env/session.LazySession), and
`seed` and `test` do not prestart it.

- `dbt test` whose data tests the catalog's statistics or the driver answer: the answers' rows of literals are computed
  on the driver (spark/answer/literal_row.py); pass/fail counts are DuckDB's. A test that needs Spark in the same kind of
  run starts it then, from one of dbt's threads, and gets DuckDB's count too.
- `dbt seed` of dbt's inferred types: values converted on the driver (seeds.seed_arrow). DuckDB reads the same rows
  and types as from the same CSV loaded through Spark's casts (a column_types override that Spark casts), which
  starts Spark then.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dbt.adapters.ducklake.lake import DuckLake
from tests.support import reference
from tests.support.coverage import full_only
from tests.support.spark_cluster import REPO_ROOT

SCHEMA_YML = """
version: 2
models:
  - name: orders
    columns:
      - name: id
        data_tests: [not_null, unique]
      - name: grp
        data_tests: [unique]
      - name: name
        data_tests:
          - not_null
          - not_null:
              name: not_null_orders_name_warn_over_5
              config: {warn_if: ">5", error_if: ">= 100"}
          - not_null:
              name: not_null_orders_name_warn_over_1
              config: {warn_if: "> 1", error_if: "!= 2"}
      - name: kind
        data_tests:
          - accepted_values:
              arguments:
                values: ['even']
"""
NEEDS_SPARK = """
select o.id from {{ ref('orders') }} o join {{ ref('orders') }} p on o.id = p.id + 1 where o.name like 'o1%'
"""


def _project(root: Path, catalog: str, data: Path) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "dbt_project.yml").write_text("name: lazy\nversion: '1.0'\nprofile: lazy\nconfig-version: 2\n")
    (root / "models" / "orders.sql").write_text("{{ config(materialized='table') }}\nselect 1 as id")
    (root / "models" / "schema.yml").write_text(SCHEMA_YML)
    (root / "tests" / "joined_orders.sql").write_text(NEEDS_SPARK)
    (root / "profiles.yml").write_text(
        "lazy:\n  target: dev\n  outputs:\n    dev:\n      type: ducklake\n"
        f"      catalog: '{catalog}'\n      data_path: '{data}/'\n      schema: main\n      master: 'local[1]'\n"
        "      threads: 4\n      spark_config: {spark.sql.shuffle.partitions: '2'}\n")
    return root


def _dbt(project: Path, command: str, *select: str, tz: str | None = None) -> dict[str, tuple[str, int]]:
    env = {**os.environ, "DBT_PROFILES_DIR": str(project), "PYSPARK_PYTHON": sys.executable}
    if tz is not None:  # the dbt process's local zone (the driver's naive datetimes must not depend on it)
        env["TZ"] = tz
    proc = subprocess.run([sys.executable, "-c", "from dbt.cli.main import cli; cli()", command, "--project-dir",
                           str(project), "--log-path", str(project / "logs"), *select], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((project / "target" / "run_results.json").read_text())["results"]
    return {r["unique_id"].split(".")[2]: (r["status"], r["failures"]) for r in results}


@pytest.mark.slow
def test_answered_tests_start_no_spark(tmp_path: Path) -> None:
    catalog, data = f"duckdb:///{tmp_path}/l.ducklake", tmp_path / "data"
    DuckLake.create(catalog, str(data) + "/").close()
    with reference.attached(catalog, options={"DATA_INLINING_ROW_LIMIT": 0}) as con:
        con.execute("CREATE TABLE lake.main.orders AS SELECT range AS id, range % 5 AS grp, 'o' || range AS name, "
                    "CASE WHEN range % 2 = 0 THEN 'even' ELSE 'odd' END AS kind FROM range(30)")
        con.execute("INSERT INTO lake.main.orders VALUES (30, 0, NULL, 'even'), (31, 1, NULL, 'odd')")
        t = "lake.main.orders"
        q = con.execute
        expected = {
            "not_null_orders_id": q(f"SELECT count(*) FROM {t} WHERE id IS NULL").fetchone()[0],
            "unique_orders_id": q(f"SELECT count(*) FROM (SELECT id FROM {t} GROUP BY id HAVING count(*) > 1)"
                                  ).fetchone()[0],
            "unique_orders_grp": q(f"SELECT count(*) FROM (SELECT grp FROM {t} GROUP BY grp HAVING count(*) > 1)"
                                   ).fetchone()[0],
            "not_null_orders_name": q(f"SELECT count(*) FROM {t} WHERE name IS NULL").fetchone()[0],
            "not_null_orders_name_warn_over_5": q(f"SELECT count(*) FROM {t} WHERE name IS NULL").fetchone()[0],
            "not_null_orders_name_warn_over_1": q(f"SELECT count(*) FROM {t} WHERE name IS NULL").fetchone()[0],
            "accepted_values_orders_kind__even": q(f"SELECT count(DISTINCT kind) FROM {t} WHERE kind <> 'even'"
                                                   ).fetchone()[0],
        }
        joined = q(f"SELECT count(*) FROM {t} o JOIN {t} p ON o.id = p.id + 1 WHERE o.name LIKE 'o1%'").fetchone()[0]
    assert expected == {"not_null_orders_id": 0, "unique_orders_id": 0, "unique_orders_grp": 5,
                        "not_null_orders_name": 2, "not_null_orders_name_warn_over_5": 2, "not_null_orders_name_warn_over_1": 2,
                        "accepted_values_orders_kind__even": 1} and joined == 11
    project = _project(tmp_path / "p", catalog, data)
    spark_log = project / "logs" / "spark.log"

    # dbt's statuses from the counts and each test's thresholds (a pass reports 0 failures)
    want = {name: ("pass", 0) if n == 0 else ("fail", n) for name, n in expected.items()}
    want["not_null_orders_name_warn_over_5"] = ("pass", 0)
    want["not_null_orders_name_warn_over_1"] = ("warn", 2)
    got = _dbt(project, "test", "--select", "test_type:generic")
    assert got == want
    assert not spark_log.exists()  # no driver JVM was started for them

    got = _dbt(project, "test")  # with a test Spark must run: started by it, in one of dbt's threads
    assert got.pop("joined_orders") == ("fail", joined)
    assert got == want
    assert spark_log.exists()


SEED_CSV = """id,amount,flag,day,at,at_space,at_zone,label
1,1.5,true,2024-01-01,2024-01-01T10:00:00,2024-01-01 10:00:00,2024-01-01T10:00:00+02:00,héllo
-2,0.1,false,1999-12-31,2024-02-29T23:59:59.123456,1970-01-01 00:00:00,2024-01-01T00:00:00Z,"with ""quote"", comma"
9223372036854775807,12345678901234.5,,2000-02-29,,,2024-06-01T12:30:00-05:00,
-9223372036854775808,0.00001,true,,1970-01-01T00:00:00,2000-01-01 00:00:01,,plain
"""


@pytest.mark.slow
def test_seeds_of_inferred_types_start_no_spark(tmp_path: Path) -> None:
    """Also the zone-less and offset date-time seeds of the next test, split the same way between the two processes
    (one with Spark, one without), in the Berlin zone."""
    catalog, data = f"duckdb:///{tmp_path}/l.ducklake", tmp_path / "data"
    project = _project(tmp_path / "p", catalog, data)
    (project / "seeds").mkdir()
    (project / "seeds" / "driver_seed.csv").write_text(SEED_CSV)
    (project / "seeds" / "spark_seed.csv").write_text(SEED_CSV)
    for name, csv in DATE_TIME_SEEDS.items():
        (project / "seeds" / f"{name}.csv").write_text(csv)
    spark_log = project / "logs" / "spark.log"

    driver_seeds, spark_seeds = ["driver_seed", "wall_driver", "instants"], ["spark_seed", *SPARK_CAST]
    assert _dbt(project, "seed", "--select", *driver_seeds, tz="Europe/Berlin") == {
        n: ("success", None) for n in driver_seeds}
    assert not spark_log.exists()  # no driver JVM was started for them
    # the same CSV through Spark's casts: `long` is Spark's bigint, a type the driver leaves to Spark
    (project / "dbt_project.yml").write_text(
        "name: lazy\nversion: '1.0'\nprofile: lazy\nconfig-version: 2\n"
        "seeds:\n  lazy:\n    spark_seed:\n      +column_types: {id: long}\n" + SPARK_CAST_YML)
    assert _dbt(project, "seed", "--select", *spark_seeds, tz="Europe/Berlin") == {
        n: ("success", None) for n in spark_seeds}
    assert spark_log.exists()
    with reference.attached(catalog, read_only=True) as con:
        def table(name: str) -> tuple[list[tuple], list[tuple]]:
            types = con.execute(f"SELECT column_name, column_type FROM (DESCRIBE lake.main.{name})").fetchall()
            rows = con.execute(f"SELECT * FROM lake.main.{name} ORDER BY id").fetchall()
            return types, rows

        driver, spark = table("driver_seed"), table("spark_seed")
        snapshots = con.execute("SELECT count(*) FROM lake.snapshots()").fetchone()[0]
    assert driver == spark
    types, rows = driver
    # zone-less date-times are TIMESTAMP (as DuckDB's CSV reader makes them), offsets an instant
    assert dict(types) == {"id": "BIGINT", "amount": "DOUBLE", "flag": "BOOLEAN", "day": "DATE", "at": "TIMESTAMP",
                           "at_space": "TIMESTAMP", "at_zone": "TIMESTAMP WITH TIME ZONE", "label": "VARCHAR"}
    assert [r[0] for r in rows] == [-9223372036854775808, -2, 1, 9223372036854775807]
    assert rows[2][7] == "héllo" and rows[1][7] == 'with "quote", comma' and rows[3][7] is None
    assert snapshots == 1 + len(driver_seeds) + len(spark_seeds)  # the lake's creation, then one snapshot per seed
    _check_date_times(catalog)


WALL_TIMES_CSV = """id,at
1,2026-03-01 09:30:00
2,2026-07-01 23:59:59
3,
4,1970-01-01 00:00:00
"""
INSTANTS_CSV = """id,at
1,2026-03-01T09:30:00+01:00
2,2026-07-01T23:59:59Z
"""


DATE_TIME_SEEDS = {"wall_driver": WALL_TIMES_CSV, "wall_spark": WALL_TIMES_CSV, "wall_as_instants": WALL_TIMES_CSV,
                   "instants": INSTANTS_CSV}
SPARK_CAST = ["wall_spark", "wall_as_instants"]
SPARK_CAST_YML = ("    wall_spark:\n      +column_types: {id: long}\n"  # Spark casts this seed, `at` still inferred
                  "    wall_as_instants:\n      +column_types: {at: timestamp}\n")


@pytest.mark.slow
@full_only("test_seeds_of_inferred_types_start_no_spark seeds the same CSVs, in a process without Spark and one with it;"
           " here one command seeds all four")
def test_seed_date_times_without_a_zone_read_the_same_in_every_time_zone(tmp_path: Path) -> None:
    """A zone-less seed column is DuckDB's TIMESTAMP: its text and hour() are the CSV's under any TimeZone, whether
    the driver or Spark (a column_types override elsewhere in the seed) wrote it, and whatever the dbt process's
    zone. A column with offsets is TIMESTAMP WITH TIME ZONE (instants); a column_types override of `timestamp` makes
    the wall times instants too."""
    catalog, data = f"duckdb:///{tmp_path}/l.ducklake", tmp_path / "data"
    project = _project(tmp_path / "p", catalog, data)
    (project / "seeds").mkdir()
    for name, csv in DATE_TIME_SEEDS.items():
        (project / "seeds" / f"{name}.csv").write_text(csv)
    (project / "dbt_project.yml").write_text(
        "name: lazy\nversion: '1.0'\nprofile: lazy\nconfig-version: 2\nseeds:\n  lazy:\n" + SPARK_CAST_YML)
    got = _dbt(project, "seed", tz="Europe/Berlin")
    assert got == {n: ("success", None) for n in DATE_TIME_SEEDS}
    _check_date_times(catalog)


def _check_date_times(catalog: str) -> None:
    """The date-time seeds as DuckDB reads them in two zones."""
    csv_text = [None if not line.split(",")[1] else line.split(",")[1] for line in WALL_TIMES_CSV.splitlines()[1:]]

    with reference.attached(catalog, read_only=True) as con:
        def at_type(name: str) -> str:
            return con.execute(f"SELECT column_type FROM (DESCRIBE lake.main.{name}) WHERE column_name = 'at'"
                               ).fetchone()[0]

        assert at_type("wall_driver") == at_type("wall_spark") == "TIMESTAMP"
        assert at_type("wall_as_instants") == at_type("instants") == "TIMESTAMP WITH TIME ZONE"
        read: dict[str, dict[str, list[tuple]]] = {}
        for zone in ("Europe/Berlin", "UTC"):
            con.execute(f"SET TimeZone = '{zone}'")
            read[zone] = {name: con.execute(f'SELECT id, hour("at"), CAST("at" AS VARCHAR), "at" FROM lake.main.{name} '
                                            'ORDER BY id').fetchall()
                          for name in ("wall_driver", "wall_spark", "wall_as_instants", "instants")}
    for zone, tables in read.items():
        assert tables["wall_driver"] == tables["wall_spark"], zone
        assert [r[2] for r in tables["wall_driver"]] == csv_text, zone
        assert [r[1] for r in tables["wall_driver"]] == [9, 23, None, 0], zone
    assert read["Europe/Berlin"]["wall_driver"] == read["UTC"]["wall_driver"]
    # instants: the same moments, shown in the reader's zone
    assert [r[1] for r in read["UTC"]["instants"]] == [8, 23]
    assert [r[1] for r in read["Europe/Berlin"]["instants"]] == [9, 1]
    assert [r[3] for r in read["UTC"]["instants"]] == [r[3] for r in read["Europe/Berlin"]["instants"]]
    # the override's instants are the CSV's wall times in UTC (the Spark session's zone)
    assert [r[2] for r in read["UTC"]["wall_as_instants"]][:2] == ["2026-03-01 09:30:00+00", "2026-07-01 23:59:59+00"]


FREEZE_PROBE = """
import gc, json, sys
from dbt.cli.main import dbtRunner

during = []
def probe(event):
    if event.info.name in ("NodeStart", "NodeFinished"):
        during.append(gc.get_freeze_count())

result = dbtRunner(callbacks=[probe]).invoke(sys.argv[1:])
print(json.dumps({"success": result.success, "during": during, "after": gc.get_freeze_count()}))
"""


@pytest.mark.slow
def test_a_graph_command_keeps_its_long_lived_objects_out_of_full_collections(tmp_path: Path) -> None:
    """gc_freeze: dbt's manifest and the modules are frozen while the nodes run, and thawed when the command ends
    (a process that runs many dbt commands frees each one's garbage); the seed is written as without the freeze."""
    catalog, data = f"duckdb:///{tmp_path}/l.ducklake", tmp_path / "data"
    project = _project(tmp_path / "p", catalog, data)
    (project / "seeds").mkdir()
    (project / "seeds" / "driver_seed.csv").write_text(SEED_CSV)
    env = {**os.environ, "DBT_PROFILES_DIR": str(project), "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run([sys.executable, "-c", FREEZE_PROBE, "seed", "--project-dir", str(project), "--log-path",
                           str(project / "logs")], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    probe = json.loads(proc.stdout.strip().splitlines()[-1])
    assert probe["success"] is True
    assert len(probe["during"]) == 2 and min(probe["during"]) > 100_000  # the manifest and modules: frozen
    assert probe["after"] == 0  # thawed at the command's end
    with reference.attached(catalog, read_only=True) as con:
        ids = [r[0] for r in con.execute("SELECT id FROM lake.main.driver_seed ORDER BY id").fetchall()]
    assert ids == [-9223372036854775808, -2, 1, 9223372036854775807]
