"""The reference's conflict rules: what another writer's commit forbids this transaction to commit on top of it."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from ..catalog.changes_text import OtherChanges, parse_changes
from ..catalog.database import CatalogDB
from ..errors import CommitConflictError
from .catalog_view import ChangeSet


def other_created_names(other: OtherChanges) -> set[tuple[str, ...]]:
    """(schema, name) of the tables and views other writers created."""
    return {n for k in ("created_table", "created_view") for n in other.names.get(k, set())}


def check_conflicts(db: CatalogDB, conn: Connection, base_snapshot: int, mine: ChangeSet) -> None:
    """Raise CommitConflictError if a snapshot after base_snapshot conflicts with these changes."""
    rows = db.query(
        conn,
        "SELECT changes_made FROM {p}ducklake_snapshot_changes WHERE snapshot_id > :b ORDER BY snapshot_id",
        {"b": base_snapshot},
    )
    other = parse_changes(",".join(r[0] or "" for r in rows))

    def fail(what: str, oid: object, why: str) -> None:
        raise CommitConflictError(
            f"Transaction conflict - attempting to {what} {oid} - but another transaction has {why} "
            f"(committed after snapshot {base_snapshot})"
        )

    for t in mine.dropped_tables:
        if other.has("dropped_table", t):
            fail("drop table", t, "dropped it already")
    for v in mine.dropped_views:
        if other.has("dropped_view", v):
            fail("drop view", v, "dropped it already")
    for s in mine.dropped_schemas:
        if other.has("dropped_schema", s):
            fail("drop schema", s, "dropped it already")
    created_schemas = {n[0].lower() for n in other.names.get("created_schema", set())}
    for created in mine.created_schemas:
        if created.lower() in created_schemas:
            fail("create schema", created, "created a schema with this name already")
    other_created = {tuple(x.lower() for x in n) for n in other_created_names(other)}
    for schema, name, _ in mine.created_tables:
        if (schema.lower(), name.lower()) in other_created:
            fail("create", f"{schema}.{name}", "created an entry with this name already")
    for schema_id in mine.created_in_schemas:
        if other.has("dropped_schema", schema_id):
            fail("create an entry in schema", schema_id, "dropped this schema")
    other_schemas_with_new_entries = {n[0].lower() for n in other_created_names(other)}
    for name in mine.dropped_schema_names:
        if name.lower() in other_schemas_with_new_entries:
            fail("drop schema", f'"{name}"', "created an entry in this schema")
    for t in mine.inserted_tables:
        for kind, why in (("dropped_table", "dropped it"), ("altered_table", "altered it"),
                          ("deleted_from_table", "deleted from it"), ("inlined_delete", "deleted inlined data from it")):
            if other.has(kind, t):
                fail("insert into table", t, why)
    for t in mine.deleted_tables:
        for kind, why in (("dropped_table", "dropped it"), ("altered_table", "altered it"),
                          ("merge_adjacent", "compacted it"), ("rewrite_delete", "compacted it"),
                          ("inserted_into_table", "inserted into it"), ("inlined_insert", "inserted into it")):
            if other.has(kind, t):
                fail("delete from table", t, why)
        if other.has("deleted_from_table", t):
            touched = _files_deleted_since(db, conn, base_snapshot, t)
            same = touched & mine.deleted_files
            if same:
                fail("delete from file", min(same), "deleted from it")
    for t in mine.inlined_deleted:
        for kind, why in (("dropped_table", "dropped it"), ("altered_table", "altered it"),
                          ("inlined_delete", "deleted from it"), ("inline_flush", "flushed the inlined data"),
                          ("flushed_inlined", "flushed the inlined data"),
                          ("inserted_into_table", "inserted into it"), ("inlined_insert", "inserted into it")):
            if other.has(kind, t):
                fail("delete from table", t, why)
    for t in mine.altered_tables:
        for kind, why in (("dropped_table", "dropped it"), ("altered_table", "altered it")):
            if other.has(kind, t):
                fail("alter table", t, why)
    for v in mine.altered_views:
        if other.has("altered_view", v):
            fail("alter view", v, "altered it")


def _files_deleted_since(db: CatalogDB, conn: Connection, base: int, table_id: int) -> set[int]:
    rows = db.query(
        conn,
        "SELECT data_file_id FROM {p}ducklake_delete_file WHERE table_id = :t AND "
        "(begin_snapshot > :b OR partial_max > :b) "
        "UNION SELECT data_file_id FROM {p}ducklake_data_file WHERE table_id = :t AND end_snapshot > :b",
        {"t": table_id, "b": base},
    )
    out = {r[0] for r in rows}
    if db.has_table(conn, f"ducklake_inlined_delete_{table_id}"):
        out |= {r[0] for r in db.query(
            conn, f"SELECT DISTINCT file_id FROM {{p}}ducklake_inlined_delete_{table_id} WHERE begin_snapshot > :b",
            {"b": base},
        )}
    return out
