"""Time travel for models, tests and analyses: a relation as of a snapshot version, a time, or N changes back.

The relation becomes the Spark view `schema.<table>__at_<snapshot>` over the table's files at that snapshot (the view
the Spark layer registers for time travel), so compiled SQL names the version it reads.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import SparkSession

from .change_feed import changes_rows
from .lake.catalog.changes_text import parse_changes
from .lake.catalog.lookups import ci_lookup
from .lake.errors import DuckLakeError, NoSuchSnapshotError, NoSuchTableError
from .lake.lake import DuckLake
from .spark.read.scan import register_at


class TimeTravelError(DuckLakeError):
    """A version, time or table that time travel cannot reach (the message says which and what exists)."""


def table_versions(lake: DuckLake, schema: str, table: str) -> list[int]:
    """The snapshots that made versions of the table under this name: each creation (a full refresh replaces the
    table: its earlier incarnation is still its history, as DuckDB's AT (VERSION => n) reads it by name), then every
    change of rows or columns (compaction and inlined-data flushes make no new version)."""
    info = ci_lookup(lake.snapshot().tables, (schema, table))
    if info is None:
        raise TimeTravelError(f"{schema}.{table} is not a DuckLake table")
    snaps = lake.snapshots()
    key = (schema.lower(), table.lower())
    created = {s.snapshot_id for s in snaps
               if any(tuple(p.lower() for p in n) == key for n in parse_changes(s.changes_made or "").names.get(
                   "created_table", set()))} | {info.begin_snapshot}
    ids = {info.table_id}
    for c in created - {info.begin_snapshot}:
        earlier = ci_lookup(lake.snapshot(c).tables, (schema, table))
        if earlier is not None:
            ids.add(earlier.table_id)
    return sorted(created | {s.snapshot_id for s in snaps if any(changes_rows(s.changes_made, i) for i in ids)})


def resolve(lake: DuckLake, schema: str, table: str, version: int | None = None,
            timestamp: dt.datetime | str | None = None, changes_back: int | None = None) -> int | None:
    """The snapshot id to read: a version, the last snapshot at or before a time, or the table's version
    `changes_back` changes before its latest (None when the table has no such earlier version)."""
    given = [x is not None for x in (version, timestamp, changes_back)]
    if sum(given) != 1:
        raise TimeTravelError("give exactly one of version, timestamp or changes_back")
    if changes_back is not None:
        if int(changes_back) < 0:
            raise TimeTravelError(f"changes_back must be >= 0, got {changes_back}")
        versions = table_versions(lake, schema, table)
        k = len(versions) - 1 - int(changes_back)
        return versions[k] if k >= 0 else None
    if timestamp is not None:
        ts = dt.datetime.fromisoformat(timestamp) if isinstance(timestamp, str) else timestamp
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=dt.timezone.utc)
        try:
            return lake.snapshot(timestamp=ts).snapshot_id
        except NoSuchSnapshotError as e:
            raise TimeTravelError(f"{schema}.{table} as of {ts.isoformat()}: {e}") from e
    snaps = [s.snapshot_id for s in lake.snapshots()]
    if int(version) not in snaps:  # type: ignore[arg-type]
        raise TimeTravelError(f"{schema}.{table}: snapshot {version} does not exist (never made, or expired); "
                              f"snapshots {snaps[0]}..{snaps[-1]} exist" if snaps else "the lake has no snapshots")
    return int(version)  # type: ignore[arg-type]


def relation_at(spark: SparkSession, lake: DuckLake, schema: str, table: str, snapshot_id: int) -> str:
    """Register the table as of the snapshot and return its Spark name."""
    try:
        state = lake.snapshot(snapshot_id)
    except NoSuchSnapshotError as e:
        raise TimeTravelError(f"{schema}.{table}: {e}") from e
    try:
        info = state.table(schema, table)
    except NoSuchTableError as e:
        raise TimeTravelError(f"{schema}.{table} did not exist at snapshot {snapshot_id}") from e
    return register_at(spark, state, info)
