"""A DuckDB process that keeps committing to a lake's source table, as another team's loader would.

    python -m tests.support.busy_writer CATALOG DATA_PATH STOP_FILE [MIN_PERIOD MAX_PERIOD]

Until STOP_FILE exists it commits, every MIN_PERIOD to MAX_PERIOD seconds, in turn: an INSERT of rows spread over every
group, a DELETE of every 97th row, an UPDATE of some amounts (`raw.src(id, g, amt, ts)`, see `SOURCE`). On a
DuckDB-file catalog each commit attaches and detaches the lake (the file is free between commits: the writer takes
turns with dbt); on SQLite and PostgreSQL it stays attached. A failed commit (a conflict, a locked file) is retried
with the next statement. Prints the number of commits.
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


def main(catalog: str, data_path: str, stop: str, low: float, high: float) -> None:
    n = commits = 0
    # a DuckDB-file catalog is held by one process at a time: attached per commit; others stay attached
    per_commit = not catalog.startswith(("sqlite:", "postgresql:", "postgres:"))
    con = None
    while not os.path.exists(stop):
        try:
            if con is None:
                con = reference.connect()
                con.execute(reference.attach_sql(catalog, data_path=data_path))
            con.execute(statement(n))
            commits += 1
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
    main(args[0], args[1], args[2], float(args[3]) if len(args) > 3 else 0.1, float(args[4]) if len(args) > 4 else 0.5)
