"""A DuckDB process that keeps committing to a lake's source table, as another team's loader would.

    python -m tests.support.busy_writer CATALOG DATA_PATH STOP_FILE [MIN_PERIOD MAX_PERIOD] [--history FILE]

Until STOP_FILE exists it commits, every MIN_PERIOD to MAX_PERIOD seconds, in turn: an INSERT of rows spread over every
group, a DELETE of every 97th row, an UPDATE of some amounts (`raw.src(id, g, amt, ts)`, see `SOURCE`). On a
DuckDB-file catalog each commit attaches and detaches the lake (the file is free between commits: the writer takes
turns with dbt); on SQLite and PostgreSQL it stays attached. A failed commit (a conflict, a locked file) is retried
with the next statement. Prints the number of commits.

With --history, right after each of its commits (and once at the start) it copies the source as that commit left it
into `src(sid, id, g, amt, ts)` of a DuckDB file: what the source held at every snapshot from `sid` to its next commit
(nothing else writes it). Tests judge by this record rather than by DuckDB's time travel to a snapshot another writer
made: DuckDB 1.5.5 writes a delete file's per-row snapshot ids while its transaction runs, and when its commit then
lands under a later id (another writer took the one it expected), the rows keep the expected id. A time-travel read of
that earlier snapshot then shows deletes that were not there when it was the latest (seen with PostgreSQL catalogs).
"""

from __future__ import annotations

import os
import random
import sys
import time

from tests.support import reference

GROUPS = 40
# the source, made by DuckDB: ids from 0, a group, an exact amount, an event time today (for microbatch models)
SOURCE = (f"SELECT i AS id, i % {GROUPS} AS g, i * 3 AS amt, "
          "current_date::TIMESTAMP + to_seconds(i % 3600) AS ts FROM range({n}) t(i)")


def create_source(catalog: str, data_path: str, rows: int) -> None:
    """raw.src with `rows` rows (the lake is created by this ATTACH)."""
    with reference.attached(catalog, data_path=data_path) as con:
        con.execute("CREATE SCHEMA lake.raw")
        con.execute(f"CREATE TABLE lake.raw.src AS {SOURCE.format(n=rows)}")


def statement(n: int) -> str:
    """The writer's n-th statement."""
    if n % 3 == 0:
        base = 1_000_000 + n * 100
        return (f"INSERT INTO lake.raw.src SELECT i, i % {GROUPS}, i * 3, current_date::TIMESTAMP + to_seconds(i % 3600) "
                f"FROM range({base}, {base + 60}) t(i)")
    if n % 3 == 1:
        return f"DELETE FROM lake.raw.src WHERE id % 97 = {n % 97}"
    return f"UPDATE lake.raw.src SET amt = amt + 1 WHERE id % 89 = {n % 89}"


def _record(con: object, history: str | None) -> None:
    """Copy the source as the writer's last commit left it into the history file (see the module's text)."""
    if history is None:
        return
    # the writer's commits are the only snapshots without a commit message (dbt's carry the node's name)
    con.execute(f"ATTACH IF NOT EXISTS '{history}' AS hist")  # type: ignore[attr-defined]
    con.execute("CREATE TABLE IF NOT EXISTS hist.src (sid BIGINT, id BIGINT, g BIGINT, amt BIGINT, ts TIMESTAMP)")  # type: ignore[attr-defined]
    con.execute("INSERT INTO hist.src SELECT (SELECT max(snapshot_id) FROM lake.snapshots() "  # type: ignore[attr-defined]
                "WHERE commit_message IS NULL), id, g, amt, ts FROM lake.raw.src")


def main(catalog: str, data_path: str, stop: str, low: float, high: float, history: str | None = None) -> None:
    n = commits = 0
    started = False
    # a DuckDB-file catalog is held by one process at a time: attached per commit; others stay attached
    per_commit = not catalog.startswith(("sqlite:", "postgresql:", "postgres:"))
    con = None
    while not os.path.exists(stop):
        try:
            if con is None:
                con = reference.connect()
                con.execute(reference.attach_sql(catalog, data_path=data_path))
            if not started:
                _record(con, history)  # the source as it was made
                started = True
            con.execute(statement(n))
            commits += 1
            _record(con, history)
        except Exception as e:  # noqa: BLE001 - a conflict or a locked catalog file: the next statement retries
            print(f"writer: {type(e).__name__}: {str(e).splitlines()[0][:200]}", file=sys.stderr, flush=True)
        finally:
            if per_commit and con is not None:
                con.close()
                con = None
        n += 1
        time.sleep(random.uniform(low, high))
    if con is not None:
        con.close()
    print(f"commits {commits}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    hist = None
    if "--history" in args:
        i = args.index("--history")
        hist = args[i + 1]
        del args[i:i + 2]
    main(args[0], args[1], args[2], float(args[3]) if len(args) > 3 else 0.1, float(args[4]) if len(args) > 4 else 0.5,
         hist)
