"""DELETE with Spark gives the same table, snapshot and change feed as DuckDB running the same statement."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake, read_arrow
from dbt.adapters.ducklake.lake.read.changes import read_changes
from dbt.adapters.ducklake.spark.read import scan
from dbt.adapters.ducklake.spark.write.one_shot import delete_where
from tests.lake.compare import arrow_rows
from tests.support import reference
from tests.support.coverage import pairs
from tests.support.invariants import violations
from tests.support.reference_lakes import build

READERS = ["manifest", "footers"]


@pytest.fixture(params=READERS)
def deletes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Target files read through manifests (deletes anti-joined as data), or by the footer-based path (name-mapped
    files, remote storage, HUGEINT columns), there with deleted rows read from the delete files."""
    if request.param == "footers":
        monkeypatch.setattr(scan, "USE_MANIFESTS", False)
        monkeypatch.setattr(scan, "MAX_LITERAL_DELETES", 0)
    return str(request.param)


CASES = [
    # scenario, schema, table, conditions applied one after the other
    ("repeated_deletes", "main", "d", ["id % 3 = 0", "v LIKE 'r2%'", "id BETWEEN 20 AND 60"]),
    ("inlined", "s", "t", ["id > 9 AND id < 120", "score IS NULL OR flag = 42"]),
    ("inlined", "s", "t", ["id < 20", "id = 31"]),  # only inlined rows hit: no data file position to stage
    ("updates", "main", "u", ["v = 'all' AND id >= 1005", "n < 40"]),
    ("compaction", "main", "c", ["id % 2 = 1"]),
    ("nested", "main", "n", ["size(l) > 1 OR s.a IS NULL"]),
    # deletion vectors: read from DuckDB's, and ours written as vectors too (the lake's option is on)
    ("deletion_vectors", "main", "dv", ["id % 3 = 0", "id BETWEEN 2050 AND 2200 OR id = 5001 OR id = 5100"]),
]


# by default each case with one reader, the readers taken in turn (every case and both readers still run; each
# reader reads both deletes from files and inlined rows); every combination in the full suite
@pytest.mark.parametrize(("case", "deletes"), [
    pytest.param(c, r, id=f"{r}-{c[0]}") for c, r in pairs(CASES, READERS)], indirect=["deletes"])
def test_delete_like_duckdb(spark: SparkSession, tmp_path: object, case: tuple, deletes: str) -> None:
    scenario, schema, table, conditions = case
    ours, theirs = f"duckdb:///{tmp_path}/ours.ducklake", f"duckdb:///{tmp_path}/theirs.ducklake"
    build(ours, f"{tmp_path}/ours_data/", scenario)
    build(theirs, f"{tmp_path}/theirs_data/", scenario)
    lake = DuckLake.open(ours)
    first = lake.snapshot().snapshot_id
    if not any(t.name == table for t in lake.snapshot().tables.values()):
        pytest.fail(f"scenario {scenario} has no table {table}")
    for cond in conditions:
        snap = delete_where(spark, lake, schema, table, cond, author="tests", commit_message=f"delete {cond}")
        assert snap is not None and snap.commit_message == f"delete {cond}"
    assert delete_where(spark, lake, schema, table, "false") is None  # nothing matched: no snapshot
    assert lake.snapshot().snapshot_id == first + len(conditions)
    st = lake.snapshot()
    our_rows = arrow_rows(read_arrow(st, st.table(schema, table)))
    our_changes = arrow_rows(read_changes(lake, schema, table, first + 1, st.snapshot_id))
    lake.close()
    with reference.attached(theirs) as con:
        for cond in conditions:
            duck_cond = cond.replace("size(l)", "len(l)")
            con.execute(f"DELETE FROM lake.{schema}.{table} WHERE {duck_cond}")
        expected = con.execute(f"SELECT rowid, * FROM lake.{schema}.{table}").to_arrow_table()
        latest = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        expected_changes = con.execute(
            f"SELECT * FROM ducklake_table_changes('lake', '{schema}', '{table}', {first + 1}, {latest})"
        ).to_arrow_table()
    assert our_rows == arrow_rows(expected)
    assert our_changes == arrow_rows(expected_changes)
    with reference.attached(ours) as con:  # and DuckDB reads what we wrote the same way, change feed too
        assert arrow_rows(con.execute(f"SELECT rowid, * FROM lake.{schema}.{table}").to_arrow_table()) == our_rows
        assert arrow_rows(con.execute(f"SELECT * FROM ducklake_table_changes('lake', '{schema}', '{table}', "
                                      f"{first + 1}, {st.snapshot_id})").to_arrow_table()) == our_changes
    assert violations(ours) == []


UPDATE_CASES = [
    ("repeated_deletes", "main", "d", [({"v": "upper(v)"}, "id % 4 = 1"), ({"id": "id + 1000"}, "id < 30")]),
    ("inlined", "s", "t", [({"score": "score * 2", "name": "'x'"}, "id >= 20"), ({"flag": "7"}, None)]),
    ("updates", "main", "u", [({"n": "n + 1"}, "v = 'all'")]),
]


@pytest.mark.parametrize(("case", "deletes"), [
    pytest.param(c, r, id=f"{r}-{c[0]}") for c, r in pairs(UPDATE_CASES, READERS)], indirect=["deletes"])
def test_update_like_duckdb(spark: SparkSession, tmp_path: object, case: tuple, deletes: str) -> None:
    scenario, schema, table, updates = case
    from dbt.adapters.ducklake.spark.write.one_shot import update_where

    ours, theirs = f"duckdb:///{tmp_path}/ours.ducklake", f"duckdb:///{tmp_path}/theirs.ducklake"
    build(ours, f"{tmp_path}/ours_data/", scenario)
    build(theirs, f"{tmp_path}/theirs_data/", scenario)
    lake = DuckLake.open(ours)
    first = lake.snapshot().snapshot_id
    for sets, cond in updates:
        assert update_where(spark, lake, schema, table, sets, cond) is not None
    assert update_where(spark, lake, schema, table, {list(updates[0][0])[0]: "NULL"}, "false") is None
    st = lake.snapshot()
    our_rows = arrow_rows(read_arrow(st, st.table(schema, table)))
    our_changes = arrow_rows(read_changes(lake, schema, table, first + 1, st.snapshot_id))
    lake.close()
    with reference.attached(theirs) as con:
        for sets, cond in updates:
            assignment = ", ".join(f"{k} = {v}" for k, v in sets.items())
            con.execute(f"UPDATE lake.{schema}.{table} SET {assignment}" + (f" WHERE {cond}" if cond else ""))
        expected = con.execute(f"SELECT rowid, * FROM lake.{schema}.{table}").to_arrow_table()
        latest = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        expected_changes = con.execute(
            f"SELECT * FROM ducklake_table_changes('lake', '{schema}', '{table}', {first + 1}, {latest})"
        ).to_arrow_table()
    assert our_rows == arrow_rows(expected)
    assert our_changes == arrow_rows(expected_changes)
    kinds = {r[2] for r in our_changes}
    assert {"update_preimage", "update_postimage"} <= kinds
    with reference.attached(ours) as con:
        assert arrow_rows(con.execute(f"SELECT rowid, * FROM lake.{schema}.{table}").to_arrow_table()) == our_rows
    assert violations(ours) == []


def test_insert_overwrite_and_truncate_like_duckdb(spark: SparkSession, tmp_path: object) -> None:
    from dbt.adapters.ducklake.spark.write.one_shot import insert_overwrite, truncate

    ours, theirs = f"duckdb:///{tmp_path}/ours.ducklake", f"duckdb:///{tmp_path}/theirs.ducklake"
    for catalog, data in ((ours, "ours_data"), (theirs, "theirs_data")):
        build(catalog, f"{tmp_path}/{data}/", "inlined")  # s.t holds inlined rows and a file with deletes
    lake = DuckLake.open(ours)
    first = lake.snapshot().snapshot_id
    df = spark.sql("SELECT CAST(id AS INT) AS id, concat('o', id) AS name, CAST(id AS DOUBLE) AS score, "
                   "CAST(1 AS INT) AS flag FROM range(500, 520)")
    assert insert_overwrite(spark, lake, "s", "t", df, commit_message="overwrite") is not None
    assert truncate(spark, lake, "main", "other") is not None
    assert truncate(spark, lake, "main", "other") is None  # already empty: no snapshot
    st = lake.snapshot()
    assert st.snapshot_id == first + 2
    our_t = arrow_rows(read_arrow(st, st.table("s", "t")))
    our_changes = arrow_rows(read_changes(lake, "s", "t", first + 1, first + 1))
    lake.close()
    with reference.attached(theirs) as con:
        con.execute("BEGIN")
        con.execute("DELETE FROM lake.s.t")
        con.execute("INSERT INTO lake.s.t SELECT i, 'o' || i, i, 1 FROM range(500, 520) r(i)")
        con.execute("COMMIT")
        con.execute("DELETE FROM lake.main.other")
        assert con.execute("SELECT count(*) FROM lake.main.other").fetchone()[0] == 0
        expected = con.execute("SELECT rowid, * FROM lake.s.t").to_arrow_table()
        expected_changes = con.execute(
            f"SELECT * FROM ducklake_table_changes('lake', 's', 't', {first + 1}, {first + 1})").to_arrow_table()
    assert our_t == arrow_rows(expected)
    assert our_changes == arrow_rows(expected_changes)
    with reference.attached(ours) as con:
        assert con.execute("SELECT count(*) FROM lake.main.other").fetchone()[0] == 0
        assert arrow_rows(con.execute("SELECT rowid, * FROM lake.s.t").to_arrow_table()) == our_t
    assert violations(ours) == []


def test_dynamic_partition_overwrite(spark: SparkSession, catalog_url: str, data_path: str) -> None:
    from dbt.adapters.ducklake.spark.write.one_shot import create_table_as, insert_overwrite

    lake = DuckLake.create(catalog_url, data_path)
    df = spark.sql("SELECT id, CASE WHEN id % 3 = 0 THEN 'a' WHEN id % 3 = 1 THEN 'b' ELSE NULL END AS cat "
                   "FROM range(30)")
    create_table_as(spark, lake, "main", "p", df, partition_by=[("cat", "identity")])
    new = spark.sql("SELECT id + 100 AS id, CASE WHEN id = 0 THEN 'a' ELSE NULL END AS cat FROM range(3)")
    insert_overwrite(spark, lake, "main", "p", new, dynamic_partitions=True)
    with pytest.raises(ValueError, match="not partitioned"):
        create_table_as(spark, lake, "main", "q", df)
        insert_overwrite(spark, lake, "main", "q", new, dynamic_partitions=True)
    lake.close()
    with reference.attached(catalog_url) as con:
        got = con.execute("SELECT cat, list(id ORDER BY id) FROM lake.p GROUP BY cat ORDER BY cat NULLS LAST").fetchall()
    # partitions 'a' and NULL are replaced; 'b' keeps its rows
    assert got == [("a", [100]), ("b", list(range(1, 30, 3))), (None, [101, 102])]
    assert violations(catalog_url) == []


def _twin_lakes(spark: SparkSession, tmp_path: object, rows: object) -> dict[str, str]:
    """Two lakes ("ours", "theirs") each with table main.t of these rows, written alike: one for our DML, one for
    DuckDB's."""
    from dbt.adapters.ducklake.spark.write.one_shot import create_table_as

    lakes = {}
    for name in ("ours", "theirs"):
        lakes[name] = f"duckdb:///{tmp_path}/{name}.ducklake"
        lake = DuckLake.create(lakes[name], f"{tmp_path}/{name}_data/")
        create_table_as(spark, lake, "main", "t", rows)
        lake.close()
    return lakes


def _rows_without_rowid(rows: list[tuple]) -> list[tuple]:
    return sorted(r[1:] for r in rows)


# DuckDB 1.5 allows one UPDATE/DELETE action per MERGE on DuckLake, so each case has at most one. A small merge is
# one join (dml._stage_small_merge); "passes" forces the path of large merges on the same small tables.
MERGES = [
    ("update_insert", "one_join"), ("update_all_insert", "one_join"), ("delete_insert", "one_join"),
    ("update_insert", "passes"), ("update_all_insert", "passes"), ("delete_insert", "passes"),
    ("delete_by_source", "passes"),
]


# by default each merge with one reader, in turn (both readers still read a one-join and a passes merge)
@pytest.mark.parametrize(("merge", "deletes"), [
    pytest.param(m, r, id=f"{r}-{m[0]}-{m[1]}") for m, r in pairs(MERGES, READERS)], indirect=["deletes"])
def test_merge_like_duckdb(spark: SparkSession, tmp_path: object, merge: tuple, deletes: str,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    kind, path = merge
    from dbt.adapters.ducklake.spark.write import dml
    from dbt.adapters.ducklake.spark.write.one_shot import merge_into

    if path == "passes":  # a target of more files than a small merge reads whole
        monkeypatch.setattr(dml, "SMALL_MERGE_TARGET_FILES", 0)
    elif kind != "delete_by_source":
        def no_passes(*args: object, **kwargs: object) -> object:
            raise AssertionError("a small merge ran the passes")

        monkeypatch.setattr(dml, "_stage_merge_once", no_passes)

    ours, theirs = f"duckdb:///{tmp_path}/ours.ducklake", f"duckdb:///{tmp_path}/theirs.ducklake"
    build(ours, f"{tmp_path}/ours_data/", "repeated_deletes")
    build(theirs, f"{tmp_path}/theirs_data/", "repeated_deletes")
    source = spark.sql("SELECT CAST(id AS INT) AS id, concat('m', id) AS v FROM range(80, 260, 3)")
    lake = DuckLake.open(ours)
    first = lake.snapshot().snapshot_id
    if kind == "update_insert":
        snap = merge_into(spark, lake, "main", "d", source, "t.id = s.id", matched="update",
                          matched_set={"v": "concat(t.v, '/', s.v)"}, not_matched_insert=True)
        duck = ("MERGE INTO lake.d AS t USING src AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = t.v || '/' || s.v "
                "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)")
    elif kind == "update_all_insert":  # SET * (dbt's merge): the join carries the source's keys only (stage_merge)
        snap = merge_into(spark, lake, "main", "d", source, "t.id = s.id", matched="update", not_matched_insert=True)
        duck = ("MERGE INTO lake.d AS t USING src AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET id = s.id, v = s.v "
                "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)")
    elif kind == "delete_by_source":
        snap = merge_into(spark, lake, "main", "d", source, "t.id = s.id", not_matched_by_source_delete=True)
        duck = "MERGE INTO lake.d AS t USING src AS s ON t.id = s.id WHEN NOT MATCHED BY SOURCE THEN DELETE"
    else:
        snap = merge_into(spark, lake, "main", "d", source, "t.id = s.id", matched="delete", not_matched_insert=True)
        duck = ("MERGE INTO lake.d AS t USING src AS s ON t.id = s.id WHEN MATCHED THEN DELETE "
                "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)")
    assert snap is not None and snap.snapshot_id == first + 1
    st = lake.snapshot()
    ours_rows = arrow_rows(read_arrow(st, st.table("main", "d")))
    kinds = sorted(r[2] for r in arrow_rows(read_changes(lake, "main", "d", first + 1, first + 1)))
    lake.close()
    src = source.toArrow()  # noqa: F841 - the small test source, read by DuckDB's replacement scan
    with reference.attached(theirs) as con:
        con.execute(duck)
        expected = arrow_rows(con.execute("SELECT rowid, * FROM lake.d").to_arrow_table())
        latest = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        duck_kinds = sorted(r[2] for r in arrow_rows(con.execute(
            f"SELECT * FROM ducklake_table_changes('lake', 'main', 'd', {latest}, {latest})").to_arrow_table()))
    # inserted rows may get their row ids in another order than DuckDB's; everything else is equal
    assert _rows_without_rowid(ours_rows) == _rows_without_rowid(expected)
    assert kinds == duck_kinds
    assert violations(ours) == []


def test_merge_with_values_from_the_source_joins_its_keys_only_like_duckdb(spark: SparkSession, tmp_path: object,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Every column of a matched row set from the source (a composite key with a quoted name, expressions of `s`):
    the target join carries the source's keys and row numbers only, and the updated rows are made from the source by
    row number. The result is DuckDB's MERGE on an identical lake, updated rows keeping their row ids; a target row
    matched by two source rows is still refused."""
    from dbt.adapters.ducklake.spark.write import dml
    from dbt.adapters.ducklake.spark.write.dml import MergeCardinalityError
    from dbt.adapters.ducklake.spark.write.one_shot import merge_into

    rows = "SELECT id, concat('k', id % 3) AS `Key 2`, concat('v', id) AS v, id / 4.0D AS n FROM range(0, 3000)"
    lakes = _twin_lakes(spark, tmp_path, spark.sql(rows).repartition(3))
    source = spark.sql("SELECT id, concat('k', id % 3) AS `Key 2`, concat('m', id) AS v, id * 1.5D AS n "
                       "FROM range(2500, 3100, 7) UNION ALL SELECT 10, 'k0', 'other key', 0.0D")
    on = "t.id = s.id AND t.`Key 2` = s.`Key 2`"
    sets = {"v": "upper(s.v)", "n": "s.n * 2", "id": "s.id", "Key 2": "s.`Key 2`"}
    queries: list[str] = []
    real_sql = spark.sql

    def spy(query: str, *args: object, **kwargs: object) -> object:
        queries.append(query)
        return real_sql(query, *args, **kwargs)

    monkeypatch.setattr(spark, "sql", spy)
    monkeypatch.setattr(dml, "SMALL_MERGE_TARGET_ROWS", -1)  # the passes (a small merge is one join)
    lake = DuckLake.open(lakes["ours"])
    merge_into(spark, lake, "main", "t", source, on, matched="update", matched_set=sets, not_matched_insert=True)
    st = lake.snapshot()
    ours_rows = arrow_rows(read_arrow(st, st.table("main", "t")))
    (target_join,) = [q for q in queries if "BROADCAST(s)" in q]
    assert "JOIN (SELECT `Key 2`, `__src_row`, `id` FROM __ducklake_merge_source_" in target_join
    assert "upper(s.v)" not in target_join and any("upper(s.v)" in q and "BROADCAST(h)" in q for q in queries)
    # a target row matched by two source rows (overlapping ranges, no key equality to refuse them first)
    ranges = spark.sql("SELECT 1 AS id, 'k1' AS `Key 2`, 'r' AS v, 0.0D AS n, 0 AS lo, 10 AS hi UNION ALL "
                       "SELECT 2, 'k2', 'r', 0.0D, 5, 15")
    with pytest.raises(MergeCardinalityError):
        merge_into(spark, lake, "main", "t", ranges, "t.id >= s.lo AND t.id <= s.hi", matched="update",
                   matched_set={"v": "s.v", "n": "s.n", "id": "s.id", "Key 2": "s.`Key 2`"})
    assert lake.snapshot().snapshot_id == st.snapshot_id
    monkeypatch.setattr(spark, "sql", real_sql)
    lake.close()
    src = source.toArrow()  # noqa: F841 - read by DuckDB's replacement scan
    with reference.attached(lakes["theirs"]) as con:
        con.execute('MERGE INTO lake.t AS t USING src AS s ON t.id = s.id AND t."Key 2" = s."Key 2" WHEN MATCHED '
                    'THEN UPDATE SET v = upper(s.v), n = s.n * 2, id = s.id, "Key 2" = s."Key 2" '
                    'WHEN NOT MATCHED THEN INSERT (id, "Key 2", v, n) VALUES (s.id, s."Key 2", s.v, s.n)')
        expected = arrow_rows(con.execute("SELECT rowid, * FROM lake.t").to_arrow_table())
    assert _rows_without_rowid(ours_rows) == _rows_without_rowid(expected)
    assert len(expected) == 3000 + 14 + 1 and sum(1 for r in expected if r[3].startswith("M")) == 72
    # updated and untouched rows keep their row ids, as in DuckDB (inserted rows may be numbered in another order)
    old = {r for r in expected if r[1] < 3000 and r[3] != "other key"}
    assert len(old) == 3000 and old <= set(ours_rows)
    assert violations(lakes["ours"]) == []


def test_merge_reads_the_target_once_like_duckdb(spark: SparkSession, tmp_path: object,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """dbt's merge (UPDATE SET *, INSERT *) into a table with deleted rows: the target is read by the one join that
    finds the matched rows; the updated and the inserted rows are made from the kept matches and the source, whose
    plans read no target file again. The result is DuckDB's MERGE on an identical lake."""
    from dbt.adapters.ducklake.spark.write import dml, write
    from dbt.adapters.ducklake.spark.write.one_shot import merge_into

    lakes = _twin_lakes(spark, tmp_path, spark.sql("SELECT id, id % 7 AS kind, id * 3 AS amount FROM range(0, 2000)"
                                                   ).repartition(2))
    lake = DuckLake.open(lakes["ours"])
    delete_where(spark, lake, "main", "t", "id % 10 = 3")
    plans: list[str] = []
    real_write = write.write_files

    def spy(spark_: SparkSession, df: object, *args: object, **kwargs: object) -> object:
        plans.append(df._jdf.queryExecution().executedPlan().toString())  # type: ignore[attr-defined]  # noqa: SLF001
        return real_write(spark_, df, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(write, "write_files", spy)
    monkeypatch.setattr(dml, "SMALL_MERGE_TARGET_ROWS", -1)  # the passes (a small merge is one join)
    source = "SELECT id, id % 5 AS kind, id * 11 AS amount FROM range(1500, 2600, 3)"
    merge_into(spark, lake, "main", "t", spark.sql(source), "t.id = s.id", matched="update", not_matched_insert=True)
    monkeypatch.setattr(write, "write_files", real_write)
    assert len(plans) == 2 and not [p for p in plans if "_ducklake_manifests" in p]  # updated rows, then inserted
    st = lake.snapshot()
    ours_rows = arrow_rows(read_arrow(st, st.table("main", "t")))
    lake.close()
    with reference.attached(lakes["theirs"]) as con:
        con.execute("DELETE FROM lake.t WHERE id % 10 = 3")
        con.execute("MERGE INTO lake.t AS t USING (SELECT range AS id, range % 5 AS kind, range * 11 AS amount FROM "
                    "range(1500, 2600, 3)) AS s ON t.id = s.id "
                    "WHEN MATCHED THEN UPDATE SET kind = s.kind, amount = s.amount "
                    "WHEN NOT MATCHED THEN INSERT (id, kind, amount) VALUES (s.id, s.kind, s.amount)")
        expected = arrow_rows(con.execute("SELECT rowid, * FROM lake.t").to_arrow_table())
    assert _rows_without_rowid(ours_rows) == _rows_without_rowid(expected)
    kept = {i for i in range(2000) if i % 10 != 3}
    assert len(expected) == len(kept | set(range(1500, 2600, 3))) and violations(lakes["ours"]) == []


@pytest.mark.parametrize("on", [
    "t.id = s.id",
    # a term of the target alone: the key still decides the matches (only the unmatched rows' keys are counted)
    "t.id = s.id AND t.id >= 0",
    # a term of the source: a repeated key can be matched once and unmatched once (every source key is counted)
    "t.id = s.id AND s.v <> 'skip'",
])
def test_merge_with_duplicate_source_keys_fails_and_changes_nothing(spark: SparkSession, tmp_path: object,
                                                                    on: str) -> None:
    from dbt.adapters.ducklake.spark.write.dml import MergeCardinalityError, matched_by_keys_alone
    from dbt.adapters.ducklake.spark.write.one_shot import merge_into

    assert matched_by_keys_alone(on) == ("s.v" not in on)

    catalog = f"duckdb:///{tmp_path}/m.ducklake"
    build(catalog, f"{tmp_path}/data/", "repeated_deletes")
    lake = DuckLake.open(catalog)
    before = [s.snapshot_id for s in lake.snapshots()]
    st = lake.snapshot()
    rows_before = arrow_rows(read_arrow(st, st.table("main", "d")))
    source = spark.sql("SELECT CAST(25 AS INT) AS id, 'x' AS v UNION ALL SELECT CAST(25 AS INT), 'y'")
    with pytest.raises(MergeCardinalityError, match=r"the source repeats keys \(id\): id=25 \(2 rows\)"):
        merge_into(spark, lake, "main", "d", source, on, matched="update", not_matched_insert=True)
    # a key the target does not have yet, repeated: refused too (it would insert both rows), the values named
    source = spark.sql("SELECT CAST(99999 AS INT) AS id, 'x' AS v UNION ALL SELECT CAST(99999 AS INT), 'y' "
                       "UNION ALL SELECT CAST(7 AS INT), 'z' UNION ALL SELECT NULL, 'n1' UNION ALL SELECT NULL, 'n2'")
    with pytest.raises(MergeCardinalityError, match=r"id=99999 \(2 rows\); a merge key must be unique"):
        merge_into(spark, lake, "main", "d", source, on, matched="update", not_matched_insert=True)
    # a key of the target repeated, one of its rows matched and the other not (its own term is false): refused
    source = spark.sql("SELECT CAST(25 AS INT) AS id, 'x' AS v UNION ALL SELECT CAST(25 AS INT), 'skip'")
    with pytest.raises(MergeCardinalityError, match=r"the source repeats keys \(id\): id=25 \(2 rows\)"):
        merge_into(spark, lake, "main", "d", source, on, matched="update", not_matched_insert=True)
    assert [s.snapshot_id for s in lake.snapshots()] == before
    st = lake.snapshot()
    assert arrow_rows(read_arrow(st, st.table("main", "d"))) == rows_before
    lake.close()
    assert violations(catalog) == []


@pytest.mark.parametrize("key", ["id", "k", "null"])
def test_merge_by_a_narrow_key_range_like_duckdb(spark: SparkSession, tmp_path: object, monkeypatch: pytest.MonkeyPatch,
                                                 key: str) -> None:
    """A target file of many row groups (DuckDB's 122,880 rows make them for large tables; 2,048 rows here)
    merged with a source whose keys cover a narrow range: the join reads the target under key_range_sql's filter, so
    Spark skips the row groups outside the range. The result is DuckDB's MERGE on the same lake. key 'null': every
    source key is NULL (the filter is `false`: nothing matches, every source row is inserted)."""
    import pyarrow.parquet as pq

    from dbt.adapters.ducklake.spark.write import local_write, write
    from dbt.adapters.ducklake.spark.write.dml import key_range_sql
    from dbt.adapters.ducklake.spark.write.one_shot import merge_into

    for bound in ("min", "max"):  # spark/write/write_layout: row groups cut at each check of the buffered bytes
        monkeypatch.setitem(write._WRITER_OPTIONS, f"parquet.page.size.row.check.{bound}", "2048")
    monkeypatch.setattr(local_write, "SMALL_RESULT_BYTES", -1)  # Spark's writer (row groups), not the driver's
    rows = "SELECT id, lpad(CAST(id AS STRING), 6, '0') AS k, concat('v', id) AS v FROM range(0, 20000)"
    lakes = _twin_lakes(spark, tmp_path, spark.sql(rows).coalesce(1))
    if key == "null":
        source = spark.sql("SELECT CAST(NULL AS BIGINT) AS id, 'x' AS k, 'n' AS v")
        on = "t.id = s.id"
    else:
        source = spark.sql("SELECT id, lpad(CAST(id AS STRING), 6, '0') AS k, concat('m', id) AS v "
                           "FROM range(15000, 15300, 7) UNION ALL "
                           "SELECT id, lpad(CAST(id AS STRING), 6, '0') AS k, 'new' AS v FROM range(20000, 20010)")
        on = f"t.{key} = s.{key}"
    lake = DuckLake.open(lakes["ours"])
    info = lake.snapshot().table("main", "t")
    assert key_range_sql(info, [("id", "id")], (3, "15000", "15300")) == "t.`id` >= 15000 AND t.`id` <= 15300"
    assert key_range_sql(info, [("k", "k")], (3, "01'5", "02")) == "t.`k` >= '01\\'5' AND t.`k` <= '02'"
    assert key_range_sql(info, [("id", "id")], (1, None, None)) == "false"
    merge_into(spark, lake, "main", "t", source, on, matched="update", matched_set={"v": "s.v"},
               not_matched_insert=True)
    st = lake.snapshot()
    ours_rows = arrow_rows(read_arrow(st, st.table("main", "t")))
    lake.close()
    with reference.attached(lakes["ours"]) as con:  # the target's file has many row groups, as meant
        (path,) = [r[0] for r in con.execute("SELECT data_file FROM ducklake_list_files('lake', 't') "
                                             "ORDER BY data_file").fetchall()][:1]
    assert pq.ParquetFile(path).num_row_groups > 5
    src = source.toArrow()  # noqa: F841 - read by DuckDB's replacement scan
    with reference.attached(lakes["theirs"]) as con:
        con.execute(f"MERGE INTO lake.t AS t USING src AS s ON {on} WHEN MATCHED THEN UPDATE SET v = s.v "
                    "WHEN NOT MATCHED THEN INSERT (id, k, v) VALUES (s.id, s.k, s.v)")
        expected = arrow_rows(con.execute("SELECT rowid, * FROM lake.t").to_arrow_table())
    assert sorted((r[1:] for r in ours_rows), key=repr) == sorted((r[1:] for r in expected), key=repr)
    assert len(expected) == 20000 + (1 if key == "null" else 10)
    assert violations(lakes["ours"]) == []


def test_update_and_merge_of_lists_and_maps_keep_row_ids_like_duckdb(spark: SparkSession, tmp_path: object) -> None:
    """A table with a list, a map and a struct holding a list (Spark's files of it are name-mapped): an UPDATE and a
    MERGE write post-images carrying the rows' ids, which DuckDB reads only by field id, so they are labelled on
    every node. DuckDB reads rowid and every column of our lake at every snapshot as we do, as it reads its own lake
    after the same statements, updated rows keeping their row ids; the change feed is DuckDB's."""
    import pyarrow.parquet as pq

    from dbt.adapters.ducklake.spark.write.one_shot import merge_into, update_where

    rows = ("SELECT CAST(id AS INT) AS id, array('a', CAST(id AS STRING)) AS tags, map('k', id) AS m, "
            "named_struct('l', array(id, id + 1), 'x', id) AS s FROM range(6)")
    lakes = _twin_lakes(spark, tmp_path, spark.sql(rows))
    source = spark.sql("SELECT CAST(id AS INT) AS id, array('m') AS tags, map('m', id) AS m, "
                       "named_struct('l', array(id * 10), 'x', -id) AS s FROM range(4, 7)")
    lake = DuckLake.open(lakes["ours"])
    first = lake.snapshot().snapshot_id
    update_where(spark, lake, "main", "t", {"tags": "array('u', tags[1])", "m": "map('u', id)"}, "id % 2 = 1")
    merge_into(spark, lake, "main", "t", source, "t.id = s.id", matched="update", not_matched_insert=True)
    last = lake.snapshot().snapshot_id
    assert last == first + 2
    table = lake.snapshot().table("main", "t")
    ours = {s: arrow_rows(read_arrow(lake.snapshot(s), table)) for s in range(first, last + 1)}
    our_changes = arrow_rows(read_changes(lake, "main", "t", first + 1, last))
    lake.close()
    src = source.toArrow()  # noqa: F841 - read by DuckDB's replacement scan
    with reference.attached(lakes["theirs"]) as con:
        con.execute("UPDATE lake.t SET tags = ['u', tags[2]], m = MAP {'u': id} WHERE id % 2 = 1")
        con.execute("MERGE INTO lake.t AS t USING src AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET tags = s.tags, "
                    "m = s.m, s = s.s WHEN NOT MATCHED THEN INSERT (id, tags, m, s) VALUES (s.id, s.tags, s.m, s.s)")
        theirs = {s: arrow_rows(con.execute(f"SELECT rowid, * FROM lake.t AT (VERSION => {s})").to_arrow_table())
                  for s in range(first, last + 1)}
        their_changes = arrow_rows(con.execute(
            f"SELECT * FROM ducklake_table_changes('lake', 'main', 't', {first + 1}, {last})").to_arrow_table())
    with reference.attached(lakes["ours"], read_only=True) as con:
        duck_on_ours = {s: arrow_rows(con.execute(f"SELECT rowid, * FROM lake.t AT (VERSION => {s})").to_arrow_table())
                        for s in range(first, last + 1)}
        written = dict(con.execute("SELECT path, mapping_id FROM __ducklake_metadata_lake.ducklake_data_file "
                                   "WHERE begin_snapshot > ?", [first]).fetchall())
    assert duck_on_ours == ours
    # DuckDB inlines its small updates without taking row ids, so the merge's new row (id 6) is numbered otherwise
    assert {s: _new_row_unnumbered(r, 0, 1) for s, r in ours.items()} == {
        s: _new_row_unnumbered(r, 0, 1) for s, r in theirs.items()}
    assert _new_row_unnumbered(our_changes, 1, 3) == _new_row_unnumbered(their_changes, 1, 3)
    assert {r[2] for r in our_changes} == {"update_preimage", "update_postimage", "insert"}
    # every row keeps its row id through both statements; the merge's new row (id 6) takes a new one
    ids = {r[1]: r[0] for r in ours[last]}
    new = ids.pop(6)
    assert ids == {r[1]: r[0] for r in ours[first]} == dict(zip(range(6), range(6), strict=True)) and new > 5
    assert ours[last][1] == (1, 1, ["u", "1"], {"u": 1}, {"l": [1, 2], "x": 1})
    assert ours[last][5] == (5, 5, ["m"], {"m": 5}, {"l": [50], "x": -5})
    # the post-images are labelled like DuckDB's files (every node but the repeated groups has a field id) and
    # registered without a name mapping; the merge's inserted row is name-mapped as any insert of this table
    schemas = {p: pq.read_schema(f"{tmp_path}/ours_data/main/t/{p}") for p in written}
    post_images = [p for p, schema in schemas.items() if "_ducklake_internal_row_id" in schema.names]
    assert len(post_images) >= 2 and all(written[p] is None for p in post_images)  # both statements wrote some
    assert [m is not None for p, m in written.items() if p not in post_images] == [True]
    for path in post_images:
        assert dict(_field_ids(schemas[path])) == {
            "id": 1, "tags": 2, "tags.element": 3, "m": 4, "m.key": 5, "m.value": 6, "s": 7, "s.l": 8,
            "s.l.element": 9, "s.x": 10, "_ducklake_internal_row_id": 2147483540}
    assert violations(lakes["ours"]) == []


def _new_row_unnumbered(rows: list[tuple], rowid_at: int, id_at: int) -> list[tuple]:
    """Rows (rowid, id, ...; or the change feed's snapshot, rowid, kind, id, ...) with the row of id 6 unnumbered."""
    return sorted(((*r[:rowid_at], None if r[id_at] == 6 else r[rowid_at], *r[rowid_at + 1:]) for r in rows), key=repr)


def _field_ids(fields: Iterable[pa.Field], path: str = "") -> Iterator[tuple[str, int]]:
    """(dotted path, Parquet field id) of every node of an Arrow schema read from a file (KeyError: a node has none)."""
    for f in fields:
        yield f"{path}{f.name}", int(f.metadata[b"PARQUET:field_id"])
        t = f.type
        children = ([t.key_field, t.item_field] if pa.types.is_map(t) else [t.value_field] if pa.types.is_list(t)
                    else list(t) if pa.types.is_struct(t) else [])
        yield from _field_ids(children, f"{path}{f.name}.")
