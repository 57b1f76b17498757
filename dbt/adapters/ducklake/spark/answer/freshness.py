"""When a table last changed: the commit time of the newest snapshot whose changes name it."""

from __future__ import annotations

import datetime as dt

from ...lake.lake import DuckLake


def last_change_time(lake: DuckLake, schema: str, name: str) -> dt.datetime | None:
    st = lake.snapshot()
    from ...lake.catalog.lookups import ci_lookup

    table = ci_lookup(st.tables, (schema, name))
    if table is None:
        return None
    newest = table.begin_snapshot
    for f in st.files(table):
        newest = max(newest, f.begin_snapshot, f.delete_file.begin_snapshot if f.delete_file else 0,
                     max((b for _p, b in f.inlined_deletes), default=0))
    for it in st.inlined_tables(table):
        newest = max(newest, getattr(it, "max_begin_snapshot", 0) or 0)
    snap = next((s for s in lake.snapshots() if s.snapshot_id == newest), None)
    return snap.snapshot_time if snap else None
