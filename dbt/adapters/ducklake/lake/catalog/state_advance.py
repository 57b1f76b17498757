"""Move a loaded catalog state forward to a newer snapshot without reloading what did not change.

A reader that holds the state of snapshot S and sees snapshot S' > S (another model committed, or a DuckDB writer)
would reload every table's files, which at 10,000 files costs seconds per statement. The snapshots in (S, S'] say
what they changed (`ducklake_snapshot_changes.changes_made`): a table that none of them names has, at S', exactly
the files, deletes and inlined rows it had at S. Anything this module cannot account for (a snapshot missing in
between, S replaced by a restored catalog, a change not about one table) makes every table count as changed.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from ..records import Snapshot
from .changes_text import parse_changes, unparsed
from .database import CatalogDB

# change kinds that touch the table whose id they carry (its files, deletes, inlined rows or definition)
TABLE_CHANGES = frozenset({
    "inserted_into_table", "deleted_from_table", "altered_table", "dropped_table", "inlined_insert",
    "inlined_delete", "inline_flush", "flushed_inlined", "merge_adjacent", "rewrite_delete", "compacted_table",
})
# change kinds that leave every existing table's rows and definition as they were
OTHER_OBJECT_CHANGES = frozenset({
    "created_schema", "created_table", "created_view", "created_scalar_macro", "created_table_macro",
    "dropped_view", "altered_view", "dropped_scalar_macro", "dropped_table_macro",
})


def tables_changed(db: CatalogDB, conn: Connection, old: Snapshot, new: Snapshot) -> frozenset[int] | None:
    """Ids of the tables whose files, deletes, inlined rows or definition the snapshots after `old` up to `new`
    changed; None when that cannot be known (then treat every table as changed)."""
    if new.snapshot_id < old.snapshot_id:
        return None
    rows = db.query(
        conn,
        "SELECT s.snapshot_id, s.snapshot_time, c.changes_made FROM {p}ducklake_snapshot s "
        "LEFT JOIN {p}ducklake_snapshot_changes c USING (snapshot_id) "
        "WHERE s.snapshot_id >= :a AND s.snapshot_id <= :b ORDER BY s.snapshot_id",
        {"a": old.snapshot_id, "b": new.snapshot_id},
    )
    ids = [r[0] for r in rows]
    if ids != list(range(old.snapshot_id, new.snapshot_id + 1)):
        return None  # a snapshot in between was expired (or the old one): its changes are unknown
    if db.dialect.read_timestamp(rows[0][1]) != old.snapshot_time:
        return None  # the catalog was replaced (restored from a copy): same id, another snapshot
    changed: set[int] = set()
    for _, _, text in rows[1:]:
        one = changed_by(text)
        if one is None:
            return None
        changed |= one
    return frozenset(changed)


def changed_by(text: str | None) -> frozenset[int] | None:
    """Ids of the tables one snapshot's changes_made string changes (see tables_changed); None when unknown."""
    if text is None or unparsed(text):
        return None
    parsed = parse_changes(text)
    kinds = set(parsed.ids) | set(parsed.names)
    if not kinds <= TABLE_CHANGES | OTHER_OBJECT_CHANGES:
        return None  # e.g. dropped_schema (its tables go with it) or a kind this reader does not know
    out: set[int] = set()
    for kind in kinds & TABLE_CHANGES:
        out |= parsed.ids.get(kind, set())
    return frozenset(out)
