"""Change-feed incremental models: the rows of an upstream DuckLake table changed since the snapshot a model last
consumed, and the cursor committed with the model's own data.

The cursor of each upstream is a tag on the model's table, `dbt_ducklake.consumed.<schema>.<table>` =
`<upstream table_id>:<snapshot_id>`, set in the same snapshot as the model's rows: a failed run leaves it where it
was (the next run re-reads the same changes) and a successful one moves it past them (they are never read twice).
"""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from .lake.catalog.changes_text import parse_changes
from .lake.catalog.lookups import ci_lookup
from .lake.catalog.state import LakeState
from .lake.errors import DuckLakeError
from .lake.lake import DuckLake
from .spark.read.changes import changes_sql
from .spark.read.scan import table_sql
from .spark.sql_literals import ident
from .spark.write.work import LakeWork

# The column ducklake_changes() adds to the upstream's rows: insert | update_postimage | delete. The strategies read
# it (deletes become deletes of the model's rows) and never store it.
CHANGE_TYPE_COLUMN = "_ducklake_change_type"
CURSOR_TAG = "dbt_ducklake.consumed."

Key = tuple[str, str]  # (schema, table), lower case
# changes_made tokens that change a table's rows or columns (compaction and inlined-data flushes do not)
_ROW_CHANGES = ("inserted_into_table", "deleted_from_table", "altered_table", "inlined_insert", "inlined_delete")


def changes_rows(changes_made: str | None, table_id: int) -> bool:
    parsed = parse_changes(changes_made or "")
    return any(parsed.has(kind, table_id) for kind in _ROW_CHANGES)


class ChangeFeedError(DuckLakeError):
    """ducklake_changes() was given something it cannot read changes of."""


@dataclass
class _Pending:
    node: str | None  # the dbt node that read the changes: only its own commit may move its cursors
    tags: dict[str, str] = field(default_factory=dict)
    rebuild: bool = False


class Cursors:
    """Cursors read by models being compiled, waiting for the commit of the model's table (one per process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[Key, _Pending] = {}

    def note(self, target: Key, node: str | None, tag: str, value: str, rebuild: bool) -> None:
        with self._lock:
            p = self._pending.get(target)
            if p is None or p.node != node:
                p = self._pending[target] = _Pending(node)
            p.tags[tag] = value
            p.rebuild = p.rebuild or rebuild

    def needs_rebuild(self, target: Key) -> bool:
        with self._lock:
            p = self._pending.get(target)
            return p is not None and p.rebuild

    def stage(self, work: LakeWork, node: str | None) -> list[Key]:
        """Stage the cursors of the tables this commit writes (read by the same node) in its transaction."""
        staged = []
        with self._lock:
            for target in sorted(work.touched):
                p = self._pending.get(target)
                if p is None or p.node != node:
                    continue
                try:
                    info = work.table(*target)
                except DuckLakeError:
                    continue  # dropped in this unit: nothing to keep a cursor on
                for tag, value in sorted(p.tags.items()):
                    if info.tags.get(tag) != value:
                        work.set_tag(info.schema_name, info.name, tag, value)
                staged.append(target)
        return staged

    def done(self, targets: list[Key]) -> None:
        with self._lock:
            for t in targets:
                self._pending.pop(t, None)


SNAPSHOT_COLUMN = "_ducklake_snapshot_id"  # replay rows: the DuckLake snapshot of the change
COMMIT_TIME_COLUMN = "_ducklake_commit_time"  # replay rows: that snapshot's commit time (UTC)


def _cursor_start(lake: DuckLake, state: object, info: object, target: Key, tag: str) -> tuple[int | None, str | None]:
    """(first snapshot to read, the cursor) from the target's cursor tag; (None, None) when it has no usable one."""
    mine = ci_lookup(state.tables, target)  # type: ignore[attr-defined]
    cursor = mine.tags.get(tag) if mine is not None else None
    if cursor is None:
        return None, None
    table_id, _, snap = cursor.partition(":")
    if table_id != str(info.table_id) or not snap.isdigit() or int(snap) > state.snapshot_id:  # type: ignore[attr-defined]
        return None, None
    if not any(s.snapshot_id == int(snap) for s in lake.snapshots()):
        return None, None  # expired: the changes since it cannot be read
    return int(snap) + 1, cursor


def replay_query(spark: SparkSession, lake: DuckLake, cursors: Cursors, upstream: Key, target: Key, node: str | None,
                 target_exists: bool, state: LakeState | None = None) -> str:
    """The Spark SQL of every change of an upstream since a snapshot table's cursor (from the upstream's creation on
    the first run), one row per change (update pre-images left out), with CHANGE_TYPE_COLUMN, SNAPSHOT_COLUMN and
    COMMIT_TIME_COLUMN: what the `ducklake` snapshot strategy turns into versions. state: the snapshot the model's
    unit reads (default: the latest), up to which the changes are read and the cursor moves."""
    state = state or lake.snapshot()
    info = ci_lookup(state.tables, upstream)
    if info is None:
        raise ChangeFeedError(f"ducklake_changes(): {upstream[0]}.{upstream[1]} is not a DuckLake table (a view or a "
                              "missing relation has no change feed)")
    current = state.snapshot_id
    tag = f"{CURSOR_TAG}{info.schema_name}.{info.name}".lower()
    start, cursor = _cursor_start(lake, state, info, target, tag) if target_exists else (None, None)
    if start is None:
        start = info.begin_snapshot
    snaps = [s for s in lake.snapshots() if start <= s.snapshot_id <= current]
    changed = any(changes_rows(s.changes_made, info.table_id) or s.snapshot_id == info.begin_snapshot for s in snaps)
    cursors.note(target, node, tag, f"{info.table_id}:{current}" if changed or cursor is None else cursor,
                 rebuild=False)
    cols = ", ".join(f"c.{ident(c.name)}" for c in info.columns)
    if not changed:
        return (f"SELECT {cols}, CAST(NULL AS STRING) AS {CHANGE_TYPE_COLUMN}, CAST(NULL AS BIGINT) AS "
                f"{SNAPSHOT_COLUMN}, CAST(NULL AS TIMESTAMP) AS {COMMIT_TIME_COLUMN} "
                f"FROM ({table_sql(spark, state, info)}) AS c WHERE false")
    times = ", ".join(f"({s.snapshot_id}, TIMESTAMP '{_utc(s.snapshot_time)}')" for s in snaps)
    return (
        f"SELECT {cols}, c.change_type AS {CHANGE_TYPE_COLUMN}, c.snapshot_id AS {SNAPSHOT_COLUMN}, "
        f"coalesce(t.commit_time, TIMESTAMP '{_utc(snaps[0].snapshot_time)}') AS {COMMIT_TIME_COLUMN} "
        f"FROM ({changes_sql(spark, lake, info.schema_name, info.name, start, current)}) AS c "
        f"LEFT JOIN (SELECT * FROM VALUES {times} AS v(sid, commit_time)) AS t ON c.snapshot_id = t.sid "
        "WHERE c.change_type <> 'update_preimage'"
    )


def _utc(ts: dt.datetime) -> str:
    if ts.tzinfo is not None:
        ts = ts.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return ts.strftime("%Y-%m-%d %H:%M:%S.%f")


def changes_query(spark: SparkSession, lake: DuckLake, cursors: Cursors, upstream: Key, target: Key, node: str | None,
                  incremental: bool, unique_key: list[str] | None, state: LakeState | None = None) -> str:
    """The Spark SQL of an upstream's rows for a model's run, with CHANGE_TYPE_COLUMN.

    Incremental runs get the changes since the model's cursor, netted to the last change per key (unique_key columns
    of the upstream, else its row id); update pre-images are left out. The first run, a full refresh, a cursor on a
    replaced upstream or an expired snapshot get every current row as an insert, and mark the model for a rebuild.
    state: the snapshot the model's unit reads (default: the latest), up to which the changes are read.
    """
    state = state or lake.snapshot()
    info = ci_lookup(state.tables, upstream)
    if info is None:
        raise ChangeFeedError(f"ducklake_changes(): {upstream[0]}.{upstream[1]} is not a DuckLake table (a view or a "
                              "missing relation has no change feed)")
    current = state.snapshot_id
    tag = f"{CURSOR_TAG}{info.schema_name}.{info.name}".lower()
    start = None
    value = f"{info.table_id}:{current}"
    if incremental:
        mine = ci_lookup(state.tables, target)
        cursor = mine.tags.get(tag) if mine is not None else None
        if cursor is not None:
            table_id, _, snap = cursor.partition(":")
            snaps = lake.snapshots()
            if table_id == str(info.table_id) and snap.isdigit() and int(snap) <= current and \
                    any(s.snapshot_id == int(snap) for s in snaps):
                start = int(snap) + 1
                if not any(start <= s.snapshot_id <= current and changes_rows(s.changes_made, info.table_id)
                           for s in snaps):
                    start, value = current + 1, cursor  # nothing new: the cursor stays (no snapshot for it)
    cursors.note(target, node, tag, value, rebuild=incremental and start is None)
    cols = ", ".join(ident(c.name) for c in info.columns)
    if start is None:
        return f"SELECT {cols}, 'insert' AS {CHANGE_TYPE_COLUMN} FROM ({table_sql(spark, state, info)}) AS upstream_rows"
    if start > current:
        return f"SELECT {cols}, CAST(NULL AS STRING) AS {CHANGE_TYPE_COLUMN} FROM ({table_sql(spark, state, info)}) " \
               "AS upstream_rows WHERE false"
    names = {c.name.lower(): c.name for c in info.columns}
    keys = [names[k.lower()] for k in unique_key or [] if k.lower() in names]
    by = ", ".join(ident(k) for k in keys) if keys and len(keys) == len(unique_key or []) else "rowid"
    return (
        f"SELECT {cols}, change_type AS {CHANGE_TYPE_COLUMN} FROM ("
        f"SELECT *, row_number() OVER (PARTITION BY {by} ORDER BY snapshot_id DESC, "
        "CASE WHEN change_type = 'delete' THEN 1 ELSE 0 END) AS __ducklake_latest "
        f"FROM ({changes_sql(spark, lake, info.schema_name, info.name, start, current)}) AS upstream_changes "
        "WHERE change_type <> 'update_preimage') AS netted WHERE __ducklake_latest = 1"
    )
