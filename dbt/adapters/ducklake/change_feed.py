"""Change-feed incremental models: the rows of an upstream DuckLake table changed since the snapshot a model last
consumed, and the cursor committed with the model's own data.

The cursor of each upstream is a tag on the model's table, `dbt_ducklake.consumed.<schema>.<table>` =
`<upstream table_id>:<snapshot_id>`, set in the same snapshot as the model's rows: a failed run leaves it where it
was (the next run re-reads the same changes) and a successful one moves it past them (they are never read twice).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .lake.conflicts import parse_changes
from .lake.errors import DuckLakeError
from .lake.lake import DuckLake
from .lake.state import ci_lookup
from .spark.changes import changes_sql
from .spark.scan import table_sql
from .spark.sql_literals import ident
from .spark.work import LakeWork

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
                    info = work.tx.table(*target)
                except DuckLakeError:
                    continue  # dropped in this unit: nothing to keep a cursor on
                for tag, value in sorted(p.tags.items()):
                    if info.tags.get(tag) != value:
                        work.tx.set_tag(info.schema_name, info.name, tag, value)
                staged.append(target)
        return staged

    def done(self, targets: list[Key]) -> None:
        with self._lock:
            for t in targets:
                self._pending.pop(t, None)


def changes_query(lake: DuckLake, cursors: Cursors, upstream: Key, target: Key, node: str | None, incremental: bool,
                  unique_key: list[str] | None) -> str:
    """The Spark SQL of an upstream's rows for a model's run, with CHANGE_TYPE_COLUMN.

    Incremental runs get the changes since the model's cursor, netted to the last change per key (unique_key columns
    of the upstream, else its row id); update pre-images are left out. The first run, a full refresh, a cursor on a
    replaced upstream or an expired snapshot get every current row as an insert, and mark the model for a rebuild.
    """
    state = lake.snapshot()
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
        return f"SELECT {cols}, 'insert' AS {CHANGE_TYPE_COLUMN} FROM ({table_sql(state, info)}) AS upstream_rows"
    if start > current:
        return f"SELECT {cols}, CAST(NULL AS STRING) AS {CHANGE_TYPE_COLUMN} FROM ({table_sql(state, info)}) " \
               "AS upstream_rows WHERE false"
    names = {c.name.lower(): c.name for c in info.columns}
    keys = [names[k.lower()] for k in unique_key or [] if k.lower() in names]
    by = ", ".join(ident(k) for k in keys) if keys and len(keys) == len(unique_key or []) else "rowid"
    return (
        f"SELECT {cols}, change_type AS {CHANGE_TYPE_COLUMN} FROM ("
        f"SELECT *, row_number() OVER (PARTITION BY {by} ORDER BY snapshot_id DESC, "
        "CASE WHEN change_type = 'delete' THEN 1 ELSE 0 END) AS __ducklake_latest "
        f"FROM ({changes_sql(lake, info.schema_name, info.name, start, current)}) AS upstream_changes "
        "WHERE change_type <> 'update_preimage') AS netted WHERE __ducklake_latest = 1"
    )
