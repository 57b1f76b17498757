"""The reference's catalog invariants that a foreign writer can silently break, checked on any backend.

Each check mirrors a pitfall of the DuckLake protocol: counters, change strings, schema_versions rows, file sizes, footer
sizes, record counts, field ids on every node (or a name mapping), stats castable and true bounds of the data, null
counts, one live delete file per data file, row-id ranges, table stats rows. `violations(catalog)` returns messages.
"""

from __future__ import annotations

import os
import re

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from dbt.adapters.ducklake.lake.catalog.changes_text import parse_changes
from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.lake.paths import join_path, to_local
from dbt.adapters.ducklake.lake.read.deletes import read_deletion_vector

KNOWN = {"created_schema", "created_table", "created_view", "created_scalar_macro", "created_table_macro",
         "dropped_schema", "dropped_table", "dropped_view", "dropped_scalar_macro", "dropped_table_macro",
         "inserted_into_table", "deleted_from_table", "altered_table", "altered_view", "inlined_insert",
         "inlined_delete", "inline_flush", "flushed_inlined", "merge_adjacent", "rewrite_delete", "compacted_table"}
_DDL = ("created_", "dropped_", "altered_")
SQLTYPE = {"int8": "TINYINT", "int16": "SMALLINT", "int32": "INTEGER", "int64": "BIGINT", "uint8": "UTINYINT",
           "uint16": "USMALLINT", "uint32": "UINTEGER", "uint64": "UBIGINT", "float32": "FLOAT", "float64": "DOUBLE",
           "varchar": "VARCHAR", "boolean": "BOOLEAN", "date": "DATE", "timestamp": "TIMESTAMP",
           "timestamptz": "TIMESTAMPTZ", "time": "TIME"}
_FID = b"PARQUET:field_id"


def violations(catalog: str) -> list[str]:
    """Every invariant the lake breaks (empty when it is as the reference would write it)."""
    lake = DuckLake.open(catalog)
    db = lake.db
    v: list[str] = []
    with db.read() as conn:
        q = lambda sql, p=None: db.query(conn, sql, p)  # noqa: E731
        snaps = q("SELECT s.snapshot_id, schema_version, next_catalog_id, next_file_id, changes_made FROM "
                  "{p}ducklake_snapshot s LEFT JOIN {p}ducklake_snapshot_changes c USING (snapshot_id) ORDER BY 1")
        prev = None
        for sid, sv, nci, nfi, changes in snaps:
            if changes is None:
                v.append(f"snapshot {sid}: no ducklake_snapshot_changes row")
            else:
                parsed = parse_changes(changes)
                kinds = set(parsed.ids) | set(parsed.names)
                tokens = [t for t in re.split(r',(?=[a-z_]+:)', changes) if t]
                for tok in tokens:
                    if tok.split(":", 1)[0] not in KNOWN:
                        v.append(f"snapshot {sid}: unknown change token {tok!r}")
                if len(tokens) != sum(len(x) for x in (*parsed.ids.values(), *parsed.names.values())) and not (
                    kinds and len(tokens) >= len(kinds)
                ):
                    v.append(f"snapshot {sid}: unparsable changes {changes!r}")
            if prev and (sv < prev[1] or nci < prev[2] or nfi < prev[3]):
                v.append(f"snapshot {sid}: a counter went backwards")
            # a snapshot's objects are those of its schema version (DuckDB caches them by it, and the tests' oracle
            # reads them once per version): a schema change must start a new one
            ddl = sorted(k for k in (kinds if changes is not None else ()) if k.startswith(_DDL))
            if prev and ddl and sv == prev[1]:
                v.append(f"snapshot {sid}: {', '.join(ddl)} without a new schema_version")
            prev = (sid, sv, nci, nfi)
        last = snaps[-1]
        maxfile = q("SELECT max(x) FROM (SELECT max(data_file_id) x FROM {p}ducklake_data_file UNION ALL "
                    "SELECT max(delete_file_id) FROM {p}ducklake_delete_file UNION ALL "
                    "SELECT max(mapping_id) FROM {p}ducklake_column_mapping) m")[0][0]
        if maxfile is not None and last[3] <= maxfile:
            v.append(f"next_file_id {last[3]} <= max file/mapping id {maxfile}")
        maxcat = q("SELECT max(x) FROM (SELECT max(schema_id) x FROM {p}ducklake_schema UNION ALL "
                   "SELECT max(table_id) FROM {p}ducklake_table UNION ALL SELECT max(view_id) FROM {p}ducklake_view "
                   "UNION ALL SELECT max(partition_id) FROM {p}ducklake_partition_info) m")[0][0]
        if maxcat is not None and last[2] <= maxcat:
            v.append(f"next_catalog_id {last[2]} <= max catalog id {maxcat}")
        sv_tables = {r[0] for r in q("SELECT DISTINCT table_id FROM {p}ducklake_schema_versions")}
        for (tid,) in q("SELECT DISTINCT table_id FROM {p}ducklake_table"):
            if tid not in sv_tables:
                v.append(f"table {tid}: no ducklake_schema_versions row")
        for (sid,) in q("SELECT snapshot_id FROM {p}ducklake_snapshot"):
            for dfid, n in q("SELECT data_file_id, count(*) FROM {p}ducklake_delete_file WHERE begin_snapshot <= :s "
                             "AND (end_snapshot IS NULL OR :s < end_snapshot) GROUP BY data_file_id HAVING count(*) > 1",
                             {"s": sid}):
                v.append(f"snapshot {sid}: data file {dfid} has {n} live delete files")
        for tid, nri in q("SELECT table_id, next_row_id FROM {p}ducklake_table_stats"):
            end = q("SELECT max(row_id_start + record_count) FROM {p}ducklake_data_file WHERE table_id = :t",
                    {"t": tid})[0][0]
            if end is not None and nri < end:
                v.append(f"table {tid}: next_row_id {nri} < row id end {end}")
        have_stats = {r[0] for r in q("SELECT table_id FROM {p}ducklake_table_stats")}
        for (tid,) in q("SELECT DISTINCT table_id FROM {p}ducklake_data_file"):
            if tid not in have_stats:
                v.append(f"table {tid}: data files but no ducklake_table_stats row")
        coltype = {(r[0], r[1]): (r[2], r[3]) for r in q(
            "SELECT table_id, column_id, column_type, parent_column FROM {p}ducklake_column")}
        stats: dict[int, list[tuple]] = {}
        for r in q("SELECT data_file_id, column_id, min_value, max_value, value_count, null_count "
                   "FROM {p}ducklake_file_column_stats"):
            stats.setdefault(r[0], []).append(r[1:])
        files = q("SELECT f.data_file_id, f.table_id, f.path, f.path_is_relative, f.record_count, f.file_size_bytes, "
                  "f.footer_size, f.mapping_id, f.partial_max, t.path, t.path_is_relative, s.path, s.path_is_relative "
                  "FROM {p}ducklake_data_file f JOIN (SELECT DISTINCT table_id, schema_id, path, path_is_relative "
                  "FROM {p}ducklake_table) t USING (table_id) JOIN {p}ducklake_schema s USING (schema_id) "
                  "WHERE f.end_snapshot IS NULL")
        deletes = q("SELECT delete_file_id, path, path_is_relative, delete_count, file_size_bytes, footer_size, "
                    "data_file_id, format FROM {p}ducklake_delete_file")
    rd = db.dialect.read_bool
    tdirs: dict[int, str] = {}
    duck = duckdb.connect()
    for fid, tid, path, rel, rc, size, footer, mapping, pmax, tpath, trel, spath, srel in files:
        sdir = join_path(lake.data_path, spath) if rd(srel) is not False else spath
        tdir = join_path(sdir, tpath or "") if rd(trel) is not False else tpath
        tdirs[fid] = tdir
        full = to_local(join_path(tdir, path) if rd(rel) is not False else path)
        if "://" in full:  # on object storage: the files' checks need local files (the tests read them with DuckDB)
            continue
        if not os.path.exists(full):
            v.append(f"data file {fid}: missing at {full}")
            continue
        _file_checks(v, f"data file {fid}", full, size, footer)
        pf = pq.ParquetFile(full)
        if pf.metadata.num_rows != rc:
            v.append(f"data file {fid}: record_count {rc} != {pf.metadata.num_rows}")
        if mapping is None:
            _field_id_checks(v, fid, pf.schema_arrow)
        table = pf.read() if mapping is None else None
        for cid, mn, mx, _vc, nc in stats.get(fid, []):
            typ, parent = coltype.get((tid, cid), (None, None))
            if parent is not None or typ not in SQLTYPE or table is None:
                continue
            name = next((f.name for f in pf.schema_arrow if f.metadata and f.metadata.get(_FID) == str(cid).encode()),
                        None)
            if name is None:
                continue
            vals = pa.table({"x": table.column(name)})  # noqa: F841 - read by DuckDB's replacement scan
            st = SQLTYPE[typ]
            row = duck.execute(
                # NaN is outside the bounds by design: the reference keeps it out of min/max (contains_nan says it)
                f"SELECT count(*) FILTER (WHERE (CAST(x AS {st}) < TRY_CAST($1 AS {st}) OR CAST(x AS {st}) > "
                f"TRY_CAST($2 AS {st})) AND NOT (x::VARCHAR = 'nan' OR x::VARCHAR = 'NaN')), "
                "count(*) FILTER (WHERE x IS NULL), "
                f"($1 IS NOT NULL AND TRY_CAST($1 AS {st}) IS NULL) OR ($2 IS NOT NULL AND TRY_CAST($2 AS {st}) IS NULL) "
                "FROM vals", [mn, mx]).fetchone()
            if row[2]:
                v.append(f"data file {fid} column {cid}: stats {mn!r}..{mx!r} not castable to {st}")
            elif row[0]:
                v.append(f"data file {fid} column {cid}: {row[0]} values outside {mn!r}..{mx!r}")
            if nc is not None and row[1] != nc and pmax is None:
                v.append(f"data file {fid} column {cid}: null_count {nc} != {row[1]}")
    for did, path, rel, count, size, footer, dfid, fmt in deletes:
        if dfid not in tdirs:
            continue
        full = to_local(join_path(tdirs[dfid], path) if rd(rel) is not False else path)
        if "://" in full:  # on object storage (see above)
            continue
        if not os.path.exists(full):
            continue
        if fmt == "puffin":  # a deletion vector: as DuckDB writes one, no footer
            if size != os.path.getsize(full):
                v.append(f"delete file {did}: file_size_bytes {size} != {os.path.getsize(full)}")
            with open(full, "rb") as fh:
                several = fh.read(4) == b"PFA1"  # DuckLake 1.1: a Puffin file of several snapshots' vectors
            if footer not in (0, None) and not several:
                v.append(f"delete file {did}: a deletion vector with footer_size {footer}")
            values = read_deletion_vector(full).tolist()
        else:
            _file_checks(v, f"delete file {did}", full, size, footer)
            t = pq.read_table(full)
            pos = t.column(1)
            if pos.type != pa.int64():
                v.append(f"delete file {did}: pos is {pos.type}, not int64")
            values = pos.to_pylist()
        if values != sorted(set(values)):
            v.append(f"delete file {did}: positions not strictly increasing")
        if len(values) != count:
            v.append(f"delete file {did}: delete_count {count} != {len(values)}")
    duck.close()
    lake.close()
    return v


def _file_checks(v: list[str], what: str, full: str, size: int, footer: int | None) -> None:
    real = os.path.getsize(full)
    if size != real:
        v.append(f"{what}: file_size_bytes {size} != {real}")
    with open(full, "rb") as fh:
        fh.seek(real - 8)
        flen = int.from_bytes(fh.read(4), "little")
    if footer is not None and footer != flen:
        v.append(f"{what}: footer_size {footer} != {flen}")


def _field_id_checks(v: list[str], fid: int, schema: pa.Schema) -> None:
    def walk(t: pa.DataType, name: str) -> None:
        kids = []
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            kids = [t.value_field]
        elif pa.types.is_struct(t):
            kids = list(t)
        elif pa.types.is_map(t):
            kids = [t.key_field, t.item_field]
        for k in kids:
            if k.metadata is None or _FID not in k.metadata:
                v.append(f"data file {fid}: nested node {name}.{k.name} has no field id (DuckDB reads NULL)")
            walk(k.type, f"{name}.{k.name}")

    for fld in schema:
        if fld.metadata is None or _FID not in fld.metadata:
            v.append(f"data file {fid}: column {fld.name} has no field id and no name mapping")
        walk(fld.type, fld.name)
