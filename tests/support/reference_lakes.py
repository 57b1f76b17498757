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

import datetime
from collections.abc import Callable, Sequence
from typing import Any

import duckdb

from tests.support.reference import attach_sql, attached, connect

Scenario = Callable[[duckdb.DuckDBPyConnection, str], None]
SCENARIOS: dict[str, Scenario] = {}


def _scenario(fn: Callable[[Callable[..., None], str], None]) -> Scenario:
    """Register `fn(run, lake)`; `run(*statements)` executes each statement as its own commit inside the lake."""

    def scenario(con: duckdb.DuckDBPyConnection, lake: str) -> None:
        con.execute(f"USE {lake}")

        def run(*statements: str) -> None:
            for statement in statements:
                con.execute(statement)

        fn(run, lake)

    scenario.__name__ = scenario.__qualname__ = fn.__name__.lstrip("_")
    scenario.__doc__ = fn.__doc__
    SCENARIOS[scenario.__name__] = scenario
    return scenario


def _inlining(lake: str, limit: int, table: str | None = None, schema: str | None = None) -> str:
    """`set_option` persists the inlining limit (ATTACH options are not persisted)."""
    scope = (f", schema => '{schema}'" if schema else "") + (f", table_name => '{table}'" if table else "")
    return f"CALL {lake}.set_option('data_inlining_row_limit', {limit}{scope})"


def _rows(n: int, start: int = 0, fmt: str = "'r' || i") -> str:
    """`SELECT i, <fmt> FROM range(start, start+n)` as an INSERT source."""
    return f"SELECT i::INTEGER, {fmt} FROM range({start}, {start + n}) r(i)"


@_scenario
def _inlined(run: Callable[..., None], lake: str) -> None:
    """Default limit 10: small inserts inlined, deletes/updates of inlined rows, a large insert, evolution of inlined."""
    run(
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
        "ALTER TABLE s.t ADD COLUMN flag BOOLEAN DEFAULT true",  # new inlined table; old one keeps its rows
        "INSERT INTO s.t VALUES (30, 'after', 30, false), (31, 'after', 31, NULL)",
        "DELETE FROM s.t WHERE id IN (1, 30)",  # one row in each inlined table
        "CREATE TABLE main.other (k VARCHAR, v BIGINT)",
        "INSERT INTO main.other VALUES ('x', 1)",
        "DELETE FROM main.other",
        "INSERT INTO main.other VALUES ('y', 2)",
    )


@_scenario
def _repeated_deletes(run: Callable[..., None], lake: str) -> None:
    """Several deletes on the same files: partial delete files (1.0) and inlined file deletes (<= 10 rows)."""
    run(
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
        "DELETE FROM d WHERE id BETWEEN 100 AND 129",  # the rest of file 2: whole file ends, no delete file
    )


@_scenario
def _updates(run: Callable[..., None], lake: str) -> None:
    """UPDATE small (inlined post-images) and large (files with explicit row ids); rowids are preserved."""
    run(
        "CREATE TABLE u (id INTEGER, v VARCHAR, n DOUBLE)",
        "INSERT INTO u SELECT i, 'v' || i, i FROM range(0, 60) r(i)",
        "UPDATE u SET v = 'small' WHERE id IN (1, 2, 3)",
        "UPDATE u SET n = n * 10 WHERE id >= 30",  # 30 rows: new file with _ducklake_internal_row_id
        "UPDATE u SET v = 'again' WHERE id BETWEEN 28 AND 33",  # rows in old and updated file, some inlined
        "UPDATE u SET v = 'twice' WHERE id = 1",  # update an inlined post-image
        "DELETE FROM u WHERE id IN (2, 40)",
        "INSERT INTO u VALUES (100, 'new', 1)",
        "UPDATE u SET id = id + 1000 WHERE id < 20",  # 19 rows incl. inlined ones
        "BEGIN", "UPDATE u SET n = -1 WHERE id = 1100", "UPDATE u SET n = -2 WHERE id = 1100", "COMMIT",
        _inlining(lake, 0),
        "UPDATE u SET v = 'file' WHERE id IN (1005, 1006)",  # limit 0: even a small update writes files
        "UPDATE u SET v = 'all'",
    )


@_scenario
def _schema_evolution(run: Callable[..., None], lake: str) -> None:
    """Add (with default), drop, rename columns, int32->int64 and float->double, rename table; files and inlined."""
    run(
        _inlining(lake, 0),
        "CREATE SCHEMA ev",
        "CREATE TABLE ev.t (a INTEGER, b FLOAT, c VARCHAR, st STRUCT(x INTEGER))",
        "INSERT INTO ev.t VALUES (1, 1.5, 'one', {'x': 1}), (2, 2.5, NULL, NULL)",
        "ALTER TABLE ev.t ADD COLUMN d INTEGER DEFAULT 7",
        "INSERT INTO ev.t VALUES (3, 3.5, 'three', {'x': 3}, 30)",
        _inlining(lake, 10),
        "INSERT INTO ev.t VALUES (4, 4.5, 'four', {'x': 4}, 40)",  # inlined at this schema version
        "ALTER TABLE ev.t DROP COLUMN c",
        "INSERT INTO ev.t VALUES (5, 5.5, {'x': 5}, 50)",
        "ALTER TABLE ev.t RENAME COLUMN b TO bee",
        "INSERT INTO ev.t (a, bee) VALUES (6, 6.5)",
        "ALTER TABLE ev.t ALTER COLUMN a SET DATA TYPE BIGINT",
        "INSERT INTO ev.t VALUES (9000000000, 7.5, {'x': 7}, 70)",
        "ALTER TABLE ev.t ALTER COLUMN bee SET DATA TYPE DOUBLE",
        _inlining(lake, 0),
        "INSERT INTO ev.t VALUES (8, 8.25, {'x': 8}, 80)",
        "ALTER TABLE ev.t ADD COLUMN st.y VARCHAR",
        "INSERT INTO ev.t VALUES (9, 9.5, {'x': 9, 'y': 'nine'}, 90)",
        "ALTER TABLE ev.t RENAME TO t2",
        "INSERT INTO ev.t2 VALUES (10, 10.5, {'x': 10, 'y': 'ten'}, 100)",
        "ALTER TABLE ev.t2 ADD COLUMN c VARCHAR DEFAULT 'again'",  # same name as the dropped column, new id
        _inlining(lake, 10),
        "INSERT INTO ev.t2 VALUES (11, 11.5, NULL, 110, 'c11')",
        "DELETE FROM ev.t2 WHERE a IN (1, 4, 11)",
        "UPDATE ev.t2 SET d = -1 WHERE a = 3",
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
def _nested(run: Callable[..., None], lake: str) -> None:
    """Lists, structs, maps, lists of structs, structs with lists, NULLs at every level; inlined and in files."""
    big = (
        "SELECT i, [i, NULL, i + 1], {'a': i, 'b': 'b' || i}, MAP {'k' || i: i}, [{'x': i, 'y': NULL}], "
        "{'name': NULL, 'tags': ['t' || i]}, [[i], NULL], MAP {i: {'p': i / 2, 'q': [i]}} FROM range(100, 130) r(i)"
    )
    run(
        f"CREATE TABLE n ({_NESTED_COLS})",
        f"INSERT INTO n VALUES {_NESTED_ROWS}",  # 5 rows: inlined
        f"INSERT INTO n {big}",  # 30 rows: a file
        _inlining(lake, 0),
        "INSERT INTO n SELECT id + 10, l, s, m, ls, sl, ll, ms FROM n WHERE id <= 5",  # the same values in a file
        "DELETE FROM n WHERE id IN (2, 104)",
        "UPDATE n SET s = {'a': -1, 'b': 'upd'}, l = [] WHERE id IN (1, 11, 100)",
    )
