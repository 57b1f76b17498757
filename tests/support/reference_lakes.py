"""Lakes built by the reference (DuckDB 1.5.5 + ducklake, spec 1.0), and DuckDB's own answers about them.

Conformance tests build a lake with `build(catalog, data_path, scenario)`, read it with our format layer, and compare
with `reference_state(catalog)`. Each scenario runs its statements one by one in autocommit mode, so every statement
(or explicit BEGIN ... COMMIT group) is its own snapshot. The second argument of a scenario is the alias under which
the caller attached the lake (normally "lake"); scenarios `USE` it, so the SQL below names `s.t`, not `lake.s.t`.

Python types in `reference_state` (as DuckDB's Python client returns them, session TimeZone = 'UTC'):
    TINYINT..UBIGINT, HUGEINT, UHUGEINT -> int        FLOAT, DOUBLE -> float (FLOAT widened exactly)
    DECIMAL -> decimal.Decimal                       VARCHAR, JSON -> str         BLOB -> bytes       BOOLEAN -> bool
    DATE -> datetime.date      TIME -> datetime.time      TIMETZ -> datetime.time with tzinfo (inlined rows keep the
    written offset, Parquet rows come back in UTC; aware times compare equal across offsets)
    TIMESTAMP, TIMESTAMP_S/_MS/_NS -> naive datetime.datetime (_NS truncated to microseconds by the client)
    TIMESTAMPTZ -> aware datetime.datetime in UTC    UUID -> uuid.UUID
    INTERVAL -> datetime.timedelta (the client counts a month as 30 days)
    LIST -> list      STRUCT -> dict (field order kept)      MAP -> dict {key: value}       NULL -> None
Compare with ==; order rows with `sort_rows` (rowid first, so it decides). No scenario writes NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import duckdb

from tests.support.reference import attach_sql, attached, connect

Scenario = Callable[[duckdb.DuckDBPyConnection, str], None]
SCENARIOS: dict[str, Scenario] = {}


def _scenario(fn: Scenario) -> Scenario:
    """Register a scenario under its name (without the leading underscore); it runs with the lake as default catalog."""

    def scenario(con: duckdb.DuckDBPyConnection, lake: str) -> None:
        con.execute(f"USE {lake}")
        fn(con, lake)

    scenario.__name__ = scenario.__qualname__ = fn.__name__.lstrip("_")
    scenario.__doc__ = fn.__doc__
    SCENARIOS[scenario.__name__] = scenario
    return scenario


def _run(con: duckdb.DuckDBPyConnection, *statements: str) -> None:
    """Execute each statement in autocommit mode: one snapshot each, or one per explicit BEGIN ... COMMIT."""
    for statement in statements:
        con.execute(statement)


def _inlining(lake: str, limit: int, table: str | None = None) -> str:
    """`set_option` persists the inlining limit (ATTACH options are not persisted); optionally for one table."""
    scope = f", table_name => '{table}'" if table else ""
    return f"CALL {lake}.set_option('data_inlining_row_limit', {limit}{scope})"


def _rows(n: int, start: int = 0) -> str:
    """`n` rows (id, 'r' || id) from `start` on, as an INSERT source."""
    return f"SELECT i::INTEGER, 'r' || i FROM range({start}, {start + n}) r(i)"


@_scenario
def _inlined(con: duckdb.DuckDBPyConnection, lake: str) -> None:
    """Default limit 10: small inserts inlined, deletes/updates of inlined rows, a large insert, evolution of inlined."""
    _run(
        con,
        "CREATE SCHEMA s",
        "CREATE TABLE s.t (id INTEGER, name VARCHAR, score DOUBLE)",
        "INSERT INTO s.t VALUES (1, 'a', 1.5), (2, 'b', NULL), (3, NULL, 3.5)",
        "INSERT INTO s.t SELECT i, 'n' || i, i / 4 FROM range(4, 14) r(i)",  # exactly 10 rows: still inlined
        "DELETE FROM s.t WHERE id = 2",
        "UPDATE s.t SET name = 'upd' WHERE id IN (3, 4)",
        "BEGIN", "INSERT INTO s.t VALUES (20, 'tx', 0)", "DELETE FROM s.t WHERE id = 5", "COMMIT",
        "INSERT INTO s.t SELECT i, 'big' || i, i FROM range(100, 140) r(i)",  # 40 rows: a Parquet file
        "DELETE FROM s.t WHERE id IN (100, 101, 6)",  # file rows -> inlined file deletes; inlined row -> end_snapshot
        "UPDATE s.t SET score = -1 WHERE id IN (102, 7)",
        "ALTER TABLE s.t ADD COLUMN flag INTEGER DEFAULT 42",  # new inlined table; old one keeps its rows
        "INSERT INTO s.t VALUES (30, 'after', 30, 0), (31, 'after', 31, NULL)",
        "DELETE FROM s.t WHERE id IN (1, 30)",  # one row in each inlined table
        "CREATE TABLE main.other (k VARCHAR, v BIGINT)",
        "INSERT INTO main.other VALUES ('x', 1)",
        "DELETE FROM main.other",
        "INSERT INTO main.other VALUES ('y', 2)",
    )


@_scenario
def _repeated_deletes(con: duckdb.DuckDBPyConnection, lake: str) -> None:
    """Several deletes on the same files: partial delete files (1.0) and inlined file deletes (<= 10 rows)."""
    _run(
        con,
        "CREATE TABLE d (id INTEGER, v VARCHAR)",
        f"INSERT INTO d {_rows(100)}",
        f"INSERT INTO d {_rows(50, 100)}",
        "DELETE FROM d WHERE id < 20",  # 20 rows: a delete file
        "DELETE FROM d WHERE id BETWEEN 40 AND 59",  # again on file 1: partial delete file holding both
        "DELETE FROM d WHERE id IN (70, 71, 72)",  # 3 rows: inlined file delete
        "DELETE FROM d WHERE id BETWEEN 80 AND 94",  # 15 rows: delete file again, after inlined deletes
        "DELETE FROM d WHERE id IN (99, 120)",  # touches both files, inlined
        "DELETE FROM d WHERE id >= 130",  # 20 rows of file 2: its first delete file
        "UPDATE d SET v = 'u' WHERE id IN (21, 22)",
        "DELETE FROM d WHERE id BETWEEN 100 AND 129 AND id % 2 = 0",  # 14 rows (120 already gone): 2nd on file 2
        "DELETE FROM d WHERE id BETWEEN 60 AND 69",  # exactly 10: inlined
        "DELETE FROM d WHERE id BETWEEN 100 AND 129",  # the rest of file 2 (some deletes of it are inlined)
        f"INSERT INTO d {_rows(30, 200)}",
        "DELETE FROM d WHERE id >= 200",  # a whole file at once: the data file ends, no delete file
    )


@_scenario
def _deletion_vectors(con: duckdb.DuckDBPyConnection, lake: str) -> None:
    """Deletes as deletion vectors (the write_deletion_vectors option): first and repeated deletes on one file, beside
    a Parquet delete file on the other (written before the option was on)."""
    _run(
        con,
        _inlining(lake, 0),
        "CREATE TABLE dv (id INTEGER, v VARCHAR)",
        f"INSERT INTO dv {_rows(3000)}",
        f"INSERT INTO dv {_rows(200, 5000)}",
        "DELETE FROM dv WHERE id >= 5180",  # a Parquet delete file on the second data file
        f"CALL {lake}.set_option('write_deletion_vectors', true)",
        "DELETE FROM dv WHERE id % 10 = 0 AND id < 3000",  # a vector on the first
        "DELETE FROM dv WHERE id % 7 = 0 AND id < 3000",  # again: the vector replaced by one holding both
        # (no UPDATE: DuckDB 1.5.5 reads its own vector-mode UPDATE with the old row versions still live)
        "DELETE FROM dv WHERE id IN (1, 2, 3)",
    )


@_scenario
def _updates(con: duckdb.DuckDBPyConnection, lake: str) -> None:
    """UPDATE small (inlined post-images) and large (files with explicit row ids); rowids are preserved."""
    _run(
        con,
        "CREATE TABLE u (id INTEGER, v VARCHAR, n DOUBLE)",
        "INSERT INTO u SELECT i, 'v' || i, i FROM range(0, 60) r(i)",
        "UPDATE u SET v = 'small' WHERE id IN (1, 2, 3)",
        "UPDATE u SET n = n * 10 WHERE id >= 30",  # 30 rows: new file with _ducklake_internal_row_id
        "UPDATE u SET v = 'again' WHERE id BETWEEN 28 AND 33",  # rows in old and updated file, some inlined
        "UPDATE u SET v = 'twice' WHERE id = 1",  # update an inlined post-image
        "DELETE FROM u WHERE id IN (2, 40)",
        "INSERT INTO u VALUES (100, 'new', 1)",
        "UPDATE u SET id = id + 1000 WHERE id < 20",  # 19 rows incl. inlined ones
        "BEGIN", "UPDATE u SET n = -1 WHERE id = 1010", "UPDATE u SET n = -2 WHERE id = 1010", "COMMIT",
        _inlining(lake, 0),
        "UPDATE u SET v = 'file' WHERE id IN (1005, 1006)",  # limit 0: even a small update writes files
        "UPDATE u SET v = 'all'",
    )


@_scenario
def _schema_evolution(con: duckdb.DuckDBPyConnection, lake: str) -> None:
    """Add (with default), drop, rename columns, int32->int64, float->double, struct field, rename table.

    The default limit stays in force: each step inserts 2 inlined rows and a 12-row file. (Lowering the limit to 0
    around an ALTER and raising it again makes DuckDB 1.5.5 write later inlined rows into the stale inlined table
    positionally: an error, or silently wrong data when the types line up. Scenarios avoid that.)
    """

    def step(table: str, k: int, *values: str) -> list[str]:
        cols = ", ".join(values)
        return [
            f"INSERT INTO ev.{table} SELECT {cols} FROM range({k}, {k + 2}) r(i)",
            f"INSERT INTO ev.{table} SELECT {cols} FROM range({k + 100}, {k + 112}) r(i)",
        ]

    _run(
        con,
        "CREATE SCHEMA ev",
        "CREATE TABLE ev.t (a INTEGER, b FLOAT, c VARCHAR, st STRUCT(x INTEGER))",
        *step("t", 1000, "i", "i + 0.5", "'c' || i", "{'x': i}"),
        "ALTER TABLE ev.t ADD COLUMN d INTEGER DEFAULT 7",
        *step("t", 2000, "i", "i + 0.5", "'c' || i", "{'x': i}", "i * 10"),
        "ALTER TABLE ev.t DROP COLUMN c",
        *step("t", 3000, "i", "i + 0.5", "{'x': i}", "NULL"),
        "ALTER TABLE ev.t RENAME COLUMN b TO bee",
        *step("t", 4000, "i", "i / 3", "{'x': NULL}", "i"),
        "ALTER TABLE ev.t ALTER COLUMN a SET DATA TYPE BIGINT",
        *step("t", 5000, "i * 1000000000", "i / 3", "NULL", "i"),
        "ALTER TABLE ev.t ALTER COLUMN bee SET DATA TYPE DOUBLE",
        *step("t", 6000, "i", "i / 3", "{'x': i}", "i"),
        "ALTER TABLE ev.t ADD COLUMN st.y VARCHAR",
        *step("t", 7000, "i", "i / 3", "{'x': i, 'y': 'y' || i}", "i"),
        "ALTER TABLE ev.t RENAME TO t2",
        *step("t2", 8000, "i", "i", "{'x': i, 'y': NULL}", "i"),
        "ALTER TABLE ev.t2 ADD COLUMN c VARCHAR DEFAULT 'again'",  # the dropped column's name, a new column id
        *step("t2", 9000, "i", "i", "NULL", "i", "'c' || i"),
    )
    _run(
        con,
        "DELETE FROM ev.t2 WHERE a IN (1000, 2100, 9001)",  # inlined rows and file rows of old schema versions
        "UPDATE ev.t2 SET d = -1 WHERE a IN (3000, 3100)",
    )


_NESTED_COLS = (
    "id INTEGER, l INTEGER[], s STRUCT(a INTEGER, b VARCHAR), m MAP(VARCHAR, INTEGER), "
    "ls STRUCT(x INTEGER, y VARCHAR)[], sl STRUCT(name VARCHAR, tags VARCHAR[]), ll INTEGER[][], "
    "ms MAP(INTEGER, STRUCT(p DOUBLE, q INTEGER[]))"
)
_NESTED_ROWS = """
    (1, [1, 2, 3], {'a': 1, 'b': 'x'}, MAP {'k1': 1, 'k2': 2}, [{'x': 1, 'y': 'a'}, {'x': 2, 'y': 'b'}],
     {'name': 'n1', 'tags': ['t1', 't2']}, [[1], [2, 3]], MAP {1: {'p': 1.5, 'q': [1]}}),
    (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
    (3, [], {'a': NULL, 'b': NULL}, MAP {}, [], {'name': NULL, 'tags': NULL}, [], MAP {}),
    (4, [NULL, 4], {'a': 4, 'b': NULL}, MAP {'k': NULL}, [NULL, {'x': NULL, 'y': NULL}],
     {'name': 'n4', 'tags': [NULL, 'u']}, [NULL, [], [NULL]], MAP {2: NULL, 3: {'p': NULL, 'q': [NULL]}}),
    (5, [5], {'a': 5, 'b': 'five'}, MAP {'a': 5, 'b': NULL, 'c': 7}, [{'x': 5, 'y': NULL}],
     {'name': 'n5', 'tags': []}, [[5, NULL]], MAP {5: {'p': 5.0, 'q': []}})
"""


@_scenario
def _nested(con: duckdb.DuckDBPyConnection, lake: str) -> None:
    """Lists, structs, maps, lists of structs, structs with lists, NULLs at every level; inlined and in files."""
    big = (
        "SELECT i, [i, NULL, i + 1], {'a': i, 'b': 'b' || i}, MAP {'k' || i: i}, [{'x': i, 'y': NULL}], "
        "{'name': NULL, 'tags': ['t' || i]}, [[i], NULL], MAP {i: {'p': i / 2, 'q': [i]}} FROM range(100, 130) r(i)"
    )
    _run(
        con,
        f"CREATE TABLE n ({_NESTED_COLS})",
        f"INSERT INTO n VALUES {_NESTED_ROWS}",  # 5 rows: inlined
        f"INSERT INTO n {big}",  # 30 rows: a file
        _inlining(lake, 0, table="n"),  # a table-scoped option
        "INSERT INTO n SELECT id + 10, l, s, m, ls, sl, ll, ms FROM n WHERE id <= 5",  # the same values in a file
        "DELETE FROM n WHERE id IN (2, 104)",
        "UPDATE n SET s = {'a': -1, 'b': 'upd'}, l = [] WHERE id IN (1, 11, 100)",
    )


@_scenario
def _partitioning(con: duckdb.DuckDBPyConnection, lake: str) -> None:
    """identity, year/month/day/hour, bucket(N); spec changes midway; NULL partition values; a reset."""

    def ins(start: int) -> str:
        return (
            f"INSERT INTO p SELECT i, CASE WHEN i % 5 = 4 THEN NULL ELSE chr((97 + i % 3)::INTEGER) END, "
            f"CASE WHEN i % 7 = 6 THEN NULL ELSE TIMESTAMP '2023-12-30 20:00:00' + INTERVAL (i * 5) HOUR END, "
            f"TIMESTAMPTZ '2024-02-28 22:30:00+00' + INTERVAL (i * 3) HOUR, i / 8 FROM range({start}, {start + 15}) r(i)"
        )

    _run(
        con,
        _inlining(lake, 0),
        "CREATE TABLE p (id INTEGER, cat VARCHAR, ts TIMESTAMP, tz TIMESTAMPTZ, v DOUBLE)",
        ins(1000),  # unpartitioned file first
        "ALTER TABLE p SET PARTITIONED BY (cat)",
        ins(0),
        "ALTER TABLE p SET PARTITIONED BY (year(ts), month(ts))",
        ins(15),
        "ALTER TABLE p SET PARTITIONED BY (day(ts), hour(tz))",
        ins(30),
        "ALTER TABLE p SET PARTITIONED BY (bucket(4, id), cat)",
        ins(45),
        "INSERT INTO p VALUES (NULL, NULL, NULL, NULL, NULL)",
        "DELETE FROM p WHERE cat = 'a'",
        _inlining(lake, 10),
        "INSERT INTO p VALUES (2000, 'z', '2025-05-05 05:05:05', NULL, 1)",  # inlined: no partition values
        "ALTER TABLE p RESET PARTITIONED BY",
        ins(60),
        "CREATE TABLE pd (d DATE, n INTEGER)",
        "ALTER TABLE pd SET PARTITIONED BY (year(d), bucket(3, n))",
        "INSERT INTO pd SELECT DATE '2020-01-01' + INTERVAL (i * 40) DAY, i FROM range(20) r(i)",
    )


def _current(con: duckdb.DuckDBPyConnection, lake: str) -> int:
    return int(con.execute(f"SELECT id FROM {lake}.current_snapshot()").fetchall()[0][0])


@_scenario
def _compaction(con: duckdb.DuckDBPyConnection, lake: str) -> None:
    """Small inserts -> merge_adjacent_files; deletes -> rewrite_data_files; flush of inlined rows; expiry."""
    expire: list[int] = []
    _run(con, _inlining(lake, 0), "CREATE TABLE c (id INTEGER, v VARCHAR)")
    for k in range(6):
        _run(con, f"INSERT INTO c {_rows(4, 10 * k)}")
        if k in (1, 2):
            expire.append(_current(con, lake))
    _run(
        con,
        "DELETE FROM c WHERE id = 21",  # file 3 now has deletes: merging skips it -> non-contiguous row ids
        f"CALL ducklake_merge_adjacent_files('{lake}')",
        "DELETE FROM c WHERE id IN (0, 1, 30)",
    )
    expire.append(_current(con, lake))
    _run(
        con,
        f"CALL ducklake_rewrite_data_files('{lake}', delete_threshold => 0)",
        _inlining(lake, 10),
        f"INSERT INTO c {_rows(3, 100)}",
        f"INSERT INTO c {_rows(3, 200)}",
        "DELETE FROM c WHERE id = 101",
        "UPDATE c SET v = 'upd' WHERE id = 200",
        f"CALL ducklake_flush_inlined_data('{lake}')",
        "DELETE FROM c WHERE id IN (2, 102)",
        f"INSERT INTO c {_rows(2, 300)}",
        f"CALL ducklake_flush_inlined_data('{lake}')",  # also turns the inlined file deletes into delete files
        f"INSERT INTO c {_rows(2, 400)}",
        f"CALL ducklake_flush_inlined_data('{lake}')",
        f"CALL ducklake_merge_adjacent_files('{lake}')",  # merges the last two flushed files
        f"INSERT INTO c {_rows(2, 500)}",  # stays inlined
    )
    # Expire two of the first inserts and the pre-rewrite delete, then really delete the files nobody needs.
    _run(
        con,
        f"CALL ducklake_expire_snapshots('{lake}', versions => {expire})",
        f"CALL ducklake_cleanup_old_files('{lake}', cleanup_all => true)",
        "DELETE FROM c WHERE id = 500",
    )


@_scenario
def _views_comments(con: duckdb.DuckDBPyConnection, lake: str) -> None:
    """Views with and without column aliases, comments on tables/columns/views, changed comments, dropped view."""
    _run(
        con,
        "CREATE SCHEMA vs",
        "CREATE TABLE vs.base (i INTEGER, v VARCHAR)",
        "INSERT INTO vs.base VALUES (1, 'a'), (200, 'b')",
        "CREATE VIEW vs.v1 AS SELECT i, v FROM vs.base WHERE i > 100",
        "CREATE VIEW vs.v2 (x, y) AS SELECT i, v FROM vs.base",
        "CREATE VIEW main.v3 AS SELECT count(*) AS n FROM vs.base",
        "COMMENT ON TABLE vs.base IS 'the base table'",
        "COMMENT ON COLUMN vs.base.i IS 'an integer'",
        "COMMENT ON VIEW vs.v1 IS 'big ones'",
        "COMMENT ON TABLE vs.base IS 'changed comment'",
        "COMMENT ON COLUMN vs.base.v IS 'it''s a \"quoted\" comment'",
        "CREATE OR REPLACE VIEW vs.v1 AS SELECT i FROM vs.base WHERE i < 100",
        "COMMENT ON VIEW vs.v1 IS 'small ones'",
        "DROP VIEW vs.v2",
        "BEGIN", "COMMENT ON COLUMN vs.base.i IS NULL", "INSERT INTO vs.base VALUES (3, 'c')", "COMMIT",
        "ALTER VIEW main.v3 RENAME TO v4",
        "ALTER TABLE vs.base ADD COLUMN w DOUBLE",
        "COMMENT ON COLUMN vs.base.w IS 'added later'",
    )


_TYPES_COLS = (
    "c_i8 TINYINT, c_i16 SMALLINT, c_i32 INTEGER, c_i64 BIGINT, c_i128 HUGEINT, c_u8 UTINYINT, c_u16 USMALLINT, "
    "c_u32 UINTEGER, c_u64 UBIGINT, c_u128 UHUGEINT, c_f32 FLOAT, c_f64 DOUBLE, c_d41 DECIMAL(4,1), "
    "c_d183 DECIMAL(18,3), c_d3810 DECIMAL(38,10), c_s VARCHAR, c_b BLOB, c_bool BOOLEAN, c_date DATE, c_time TIME, "
    "c_timetz TIMETZ, c_ts TIMESTAMP, c_tstz TIMESTAMPTZ, c_ts_s TIMESTAMP_S, c_ts_ms TIMESTAMP_MS, "
    "c_ts_ns TIMESTAMP_NS, c_uuid UUID, c_iv INTERVAL, c_json JSON"
)
# HUGEINT/UHUGEINT go to Parquet as DOUBLE: only values a double holds exactly survive (the maxima fail to read back).
# INTERVAL goes to Parquet as months/days/milliseconds: sub-millisecond parts are lost, so none are written, and
# negative intervals are rejected ("Parquet files do not support negative intervals"): only inlined rows have them.
_TYPES_ROWS = """
    (127, 32767, 2147483647, 9223372036854775807, -(2::HUGEINT ** 80), 255, 65535, 4294967295,
     18446744073709551615, 2::UHUGEINT ** 100, 1.5, 0.1, 999.9, 123456789012345.678,
     1234567890123456789012345678.0123456789, 'héllo ✓', '\\x00\\xFF'::BLOB, true, '2024-02-29',
     '23:59:59.999999', '12:00:00+05:30', '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05.123456+02',
     '2024-01-02 03:04:05', '2024-01-02 03:04:05.123', '2024-01-02 03:04:05.123456789',
     'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', INTERVAL '14 months 2 days 3 hours 4.005 seconds', '{"a": [1, 2]}'),
    (-128, -32768, -2147483648, -9223372036854775808, 0, 0, 0, 0, 0, 0, '-inf', 'inf', -999.9, -0.001,
     -0.0000000001, '', ''::BLOB, false, '1900-01-01', '00:00:00', '00:00:00-12:00', '1969-12-31 23:59:59.999999',
     '1970-01-01 00:00:00+00', '1677-09-22 00:00:00', '1969-12-31 23:59:59.999', '1970-01-01 00:00:00.000000001',
     '00000000-0000-0000-0000-000000000000', INTERVAL '0 days', '[]'),
    (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
     NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
"""


@_scenario
def _types(con: duckdb.DuckDBPyConnection, lake: str) -> None:
    """Every DuckLake type with extreme values and NULLs, inlined (text on SQLite/Postgres) and in Parquet."""
    _run(
        con,
        f"CREATE TABLE ty ({_TYPES_COLS})",
        f"INSERT INTO ty VALUES {_TYPES_ROWS}",  # 3 rows: inlined
        _inlining(lake, 0),
        f"INSERT INTO ty VALUES {_TYPES_ROWS}",  # the same rows in a file
        "DELETE FROM ty WHERE c_i8 = -128",  # one inlined row and one file row
        _inlining(lake, 10),
        "CREATE TABLE ty_inlined (h HUGEINT, uh UHUGEINT, iv INTERVAL)",  # values only inlined rows can hold
        "INSERT INTO ty_inlined VALUES (170141183460469231731687303715884105727, "
        "340282366920938463463374607431768211455, INTERVAL '-1 month -2 days -3.000004 seconds'), "
        "(-170141183460469231731687303715884105728, 0, INTERVAL '1 microsecond')",
    )


@_scenario
def _drops(con: duckdb.DuckDBPyConnection, lake: str) -> None:
    """Drop a table, recreate the name with other columns, DROP SCHEMA CASCADE, drop+create in one commit."""
    _run(
        con,
        "CREATE SCHEMA a",
        "CREATE TABLE a.t (i INTEGER)",
        "INSERT INTO a.t VALUES (1), (2)",
        "INSERT INTO a.t SELECT i FROM range(100, 120) r(i)",
        "DROP TABLE a.t",
        "CREATE TABLE a.t (j VARCHAR, k INTEGER)",
        "INSERT INTO a.t VALUES ('x', 1)",
        "INSERT INTO a.t SELECT 'y' || i, i FROM range(20) r(i)",
        "CREATE SCHEMA b",
        "CREATE TABLE b.u (i INTEGER)",
        "INSERT INTO b.u VALUES (7)",
        "CREATE VIEW b.vw AS SELECT i FROM b.u",
        "CREATE TABLE b.u2 (s VARCHAR)",
        "INSERT INTO b.u2 SELECT 's' || i FROM range(15) r(i)",
        "DROP SCHEMA b CASCADE",  # one snapshot drops the schema, both tables and the view
        "CREATE SCHEMA b",
        "CREATE TABLE b.u (z DOUBLE)",
        "INSERT INTO b.u VALUES (0.5)",
        "BEGIN", "CREATE TABLE a.tmp (i INTEGER)", "INSERT INTO a.tmp VALUES (1)", "DROP TABLE a.tmp", "COMMIT",  # no-op
        "CREATE TABLE main.empty (i INTEGER)",  # a table that never gets rows
        "BEGIN", "DROP TABLE a.t", "CREATE TABLE a.t (j VARCHAR)", "INSERT INTO a.t VALUES ('third')", "COMMIT",
    )


def build(catalog: str, data_path: str, scenario: str) -> None:
    """Create a lake at `catalog` with DATA_PATH `data_path` and run `scenario` in it; DuckDB is closed afterwards."""
    with attached(catalog, "lake", data_path=data_path) as con:
        con.execute("SET TimeZone = 'UTC'")
        SCENARIOS[scenario](con, "lake")


def _sort_key(value: Any) -> tuple[Any, ...]:
    return (0,) if value is None else (2, repr(value)) if isinstance(value, (list, dict, tuple)) else (1, value)


def sort_rows(rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows in the order `reference_state` uses: element-wise, NULL first, nested values by repr."""
    return sorted(rows, key=lambda row: tuple(_sort_key(v) for v in row))


def reference_state(catalog: str) -> dict[str, Any]:
    """DuckDB's answers about every readable snapshot of the lake at `catalog` (read only; expired ones are skipped).

    Returns:
        snapshots: `lake.snapshots()` rows (snapshot_id, snapshot_time, schema_version, changes, author,
            commit_message, commit_extra_info), by snapshot id.
        tables: {(snapshot_id, schema, table): {"columns": [(name, duckdb type string)],
            "rows": sorted `SELECT rowid, * ... AT (VERSION => n)` tuples, "count": count(*) at n,
            "comment": table comment or None, "column_comments": {column: comment or None}}}
            for every table visible at the snapshot.
        views: {(snapshot_id, schema, view): {"sql": DuckDB's CREATE VIEW text, "comment": ...,
            "columns": [(name, type)], "column_comments": {...}}}.
        changes: {(schema, table, start, end): sorted `ducklake_table_changes` rows (snapshot_id, rowid,
            change_type, *columns)} for each table visible at `end` and each pair of consecutive readable
            snapshots (start, end), plus (first readable snapshot, latest) for the tables of the latest snapshot.

    Which objects exist at a snapshot comes from attaching it (SNAPSHOT_VERSION); rows come from a plain attach
    with AT (VERSION => n): a SNAPSHOT_VERSION attach before an int32->int64 promotion fails to scan the table
    (DuckDB casts today's column stats to the old type).
    """
    con = connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        objects: dict[int, _Objects] = {}
        con.execute(attach_sql(catalog, "lake", read_only=True))
        versions = {int(r[0]): int(r[1]) for r in con.execute(
            "SELECT snapshot_id, schema_version FROM lake.snapshots()").fetchall()}
        ids = list(versions)
        con.execute("DETACH lake")
        # the objects of a snapshot (tables, views, columns, comments) are those of its schema version: one attach
        # per schema version, not per snapshot (every DDL statement and comment starts a new schema version)
        by_version: dict[int, _Objects] = {}
        for sid in ids:
            if versions[sid] not in by_version:
                con.execute(attach_sql(catalog, "lake", read_only=True, options={"SNAPSHOT_VERSION": sid}))
                by_version[versions[sid]] = _objects(con)
                con.execute("DETACH lake")
            objects[sid] = by_version[versions[sid]]
        con.execute(attach_sql(catalog, "lake", read_only=True))
        snapshots = [tuple(r) for r in con.execute("SELECT * FROM lake.snapshots() ORDER BY snapshot_id").fetchall()]
        tables: dict[tuple[int, str, str], dict[str, Any]] = {}
        views: dict[tuple[int, str, str], dict[str, Any]] = {}
        changes: dict[tuple[str, str, int, int], list[tuple[Any, ...]]] = {}
        for pos, sid in enumerate(ids):
            ranges = [(ids[pos - 1], sid)] if pos else []
            if pos == len(ids) - 1 and pos > 1:
                ranges.append((ids[0], sid))
            for (kind, schema, name), info in objects[sid].items():
                if kind == "view":
                    views[(sid, schema, name)] = info
                    continue
                tables[(sid, schema, name)] = {**_table_at(con, schema, name, sid), **info}
                for start, end in ranges:
                    got = con.execute(
                        "SELECT * FROM ducklake_table_changes('lake', ?, ?, ?, ?)", [schema, name, start, end]
                    ).fetchall()
                    changes[(schema, name, start, end)] = sort_rows([tuple(r) for r in got])
        return {"snapshots": snapshots, "tables": tables, "views": views, "changes": changes}
    finally:
        con.close()


_Objects = dict[tuple[str, str, str], dict[str, Any]]


def _objects(con: duckdb.DuckDBPyConnection) -> _Objects:
    """Tables and views of `lake` as attached: {("table"|"view", schema, name): comments (and SQL for views)}."""
    columns: dict[tuple[str, str], list[tuple[str, str, str | None]]] = {}
    for schema, table, column, data_type, comment in con.execute(
        "SELECT schema_name, table_name, column_name, data_type, comment FROM duckdb_columns() "
        "WHERE database_name = 'lake' ORDER BY column_index"
    ).fetchall():
        columns.setdefault((schema, table), []).append((column, data_type, comment))
    found: _Objects = {}
    for schema, table, comment in con.execute(
        "SELECT schema_name, table_name, comment FROM duckdb_tables() WHERE database_name = 'lake'"
    ).fetchall():
        found[("table", schema, table)] = {
            "comment": comment,
            "column_comments": {c: note for c, _, note in columns.get((schema, table), [])},
        }
    for schema, view, sql, comment in con.execute(
        "SELECT schema_name, view_name, sql, comment FROM duckdb_views() WHERE database_name = 'lake' AND NOT internal"
    ).fetchall():
        found[("view", schema, view)] = {
            "sql": sql,
            "comment": comment,
            "columns": [(c, t) for c, t, _ in columns.get((schema, view), [])],
            "column_comments": {c: note for c, _, note in columns.get((schema, view), [])},
        }
    return found


def _table_at(con: duckdb.DuckDBPyConnection, schema: str, table: str, sid: int) -> dict[str, Any]:
    name = "lake." + ".".join('"' + part.replace('"', '""') + '"' for part in (schema, table))
    rel = con.sql(f"SELECT rowid, * FROM {name} AT (VERSION => {sid})")
    return {
        "columns": [(c, str(t)) for c, t in zip(rel.columns[1:], rel.types[1:], strict=True)],
        "rows": sort_rows([tuple(r) for r in rel.fetchall()]),
        "count": con.execute(f"SELECT count(*) FROM {name} AT (VERSION => {sid})").fetchall()[0][0],
    }

