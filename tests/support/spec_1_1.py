"""DuckLake 1.1 lakes made from the specification, for conformance tests where DuckDB 2.0 cannot run.

DuckDB 2.0 downloads its ducklake extension at run time, which these machines cannot, so the 1.1 lakes of the tests
are DuckDB 1.5.5's 1.0 lakes turned into 1.1 as the specification says DuckDB's migration does (new columns at the
end of ducklake_data_file and ducklake_delete_file, NULL for existing rows; the ducklake_view_column_tag table; the
system columns of registered inlined-data tables renamed with the `_ducklake_` prefix; version '1.1'). Migration
changes no data, so DuckDB 1.5.5's answers on the lake before it are the oracle for every read after it.

`consolidate_vectors` rewrites a data file's deletes of several snapshots (a Parquet delete file that names each
position's snapshot, as 1.0 has them) into the one Puffin file of cumulative vectors per snapshot that 1.1 writes;
`to_1_0` undoes the migration so that DuckDB 1.5.5 can judge what we wrote into a 1.1 lake.
"""

from __future__ import annotations

import os
import uuid

import numpy as np

from dbt.adapters.ducklake.lake.catalog import ddl
from dbt.adapters.ducklake.lake.catalog.database import CatalogDB
from dbt.adapters.ducklake.lake.catalog.url import parse_catalog
from dbt.adapters.ducklake.lake.read.deletes import DeletePositions, read_delete_arrays, write_puffin_deletes

SYSTEM = ("row_id", "begin_snapshot", "end_snapshot")


def _db(catalog: str) -> CatalogDB:
    return CatalogDB(parse_catalog(catalog))


def migrate(catalog: str, version: str = "1.1") -> None:
    """Turn a 1.0 catalog into a 1.1 one as the specification's migration does."""
    db = _db(catalog)
    try:
        with db.write() as conn:
            for (name,) in db.query(conn, "SELECT table_name FROM {p}ducklake_inlined_data_tables"):
                if not db.has_table(conn, name):
                    continue
                for col in SYSTEM:
                    db.execute(conn, f"ALTER TABLE {{p}}{name} RENAME COLUMN {col} TO _ducklake_{col}")
            for table, added in ddl.ADDED_IN_1_1.items():
                for col, type_ in added.items():
                    db.execute(conn, f"ALTER TABLE {{p}}{table} ADD COLUMN {col} {type_}")
            db.execute(conn, db.dialect.ddl(ddl.VIEW_COLUMN_TAG_1_1.replace("{schema}", db.prefix)))
            db.execute(conn, "UPDATE {p}ducklake_metadata SET value = :v WHERE key = 'version'", {"v": version})
    finally:
        db.dispose()


def to_1_0(catalog: str) -> None:
    """Undo migrate: what DuckDB 1.5.5 reads (view column tags, which 1.0 has no place for, are dropped)."""
    db = _db(catalog)
    try:
        with db.write() as conn:
            for (name,) in db.query(conn, "SELECT table_name FROM {p}ducklake_inlined_data_tables"):
                if db.has_table(conn, name):
                    for col in SYSTEM:
                        db.execute(conn, f"ALTER TABLE {{p}}{name} RENAME COLUMN _ducklake_{col} TO {col}")
            for table, added in ddl.ADDED_IN_1_1.items():
                for col in added:
                    db.execute(conn, f"ALTER TABLE {{p}}{table} DROP COLUMN {col}")
            db.execute(conn, "DROP TABLE {p}ducklake_view_column_tag")
            db.execute(conn, "UPDATE {p}ducklake_metadata SET value = '1.0' WHERE key = 'version'")
    finally:
        db.dispose()


def consolidate_vectors(catalog: str, data_path: str) -> int:
    """Rewrite each data file's deletes of several snapshots (a Parquet delete file naming each position's
    snapshot, as DuckDB 1.5.5 writes without deletion vectors) into the one 1.1 Puffin file of cumulative vectors
    per snapshot; the file's older delete rows go, as 1.1 removes them. Returns how many data files were rewritten."""
    db = _db(catalog)
    done = 0
    try:
        with db.write() as conn:
            rows = db.query(conn, "SELECT d.data_file_id, d.path, f.path, t.path, s.path, d.table_id "
                                  "FROM {p}ducklake_delete_file d JOIN {p}ducklake_data_file f USING (data_file_id) "
                                  "JOIN {p}ducklake_table t ON t.table_id = d.table_id AND t.end_snapshot IS NULL "
                                  "JOIN {p}ducklake_schema s ON s.schema_id = t.schema_id AND s.end_snapshot IS NULL "
                                  "WHERE d.end_snapshot IS NULL AND f.end_snapshot IS NULL AND d.format = 'parquet'")
            last = db.query(conn, "SELECT max(snapshot_id) FROM {p}ducklake_snapshot")[0][0]
            next_file = db.query(conn, "SELECT next_file_id FROM {p}ducklake_snapshot WHERE snapshot_id = :s",
                                 {"s": last})[0][0]
            for fid, path, data_file, table_path, schema_path, table_id in rows:
                table_dir = os.path.join(data_path, schema_path, table_path)
                pos, snaps = read_delete_arrays(os.path.join(table_dir, path), 0)
                positions = np.asarray(pos.to_numpy(zero_copy_only=False), dtype=np.int64)
                snapshots = np.asarray(snaps.to_numpy(zero_copy_only=False), dtype=np.int64)
                if np.unique(snapshots).size < 2:
                    continue
                name = f"ducklake-{uuid.uuid4()}-delete.puffin"
                size, footer = write_puffin_deletes(os.path.join(table_dir, name), os.path.join(table_dir, data_file),
                                                    DeletePositions(tuple(positions), tuple(snapshots)))
                db.execute(conn, "DELETE FROM {p}ducklake_delete_file WHERE data_file_id = :f", {"f": fid})
                db.execute(conn, "INSERT INTO {p}ducklake_delete_file (delete_file_id, table_id, begin_snapshot, "
                                 "end_snapshot, data_file_id, path, path_is_relative, format, delete_count, "
                                 "file_size_bytes, footer_size, encryption_key, partial_max) VALUES (:d, :t, :b, "
                                 "NULL, :f, :p, :rel, 'puffin', :n, :size, :footer, NULL, :pmax)",
                           {"d": next_file, "t": table_id, "b": int(snapshots.min()), "f": fid, "p": name,
                            "rel": db.dialect.bool_param(True), "n": int(positions.size), "size": size,
                            "footer": footer, "pmax": int(snapshots.max())})
                next_file += 1
                done += 1
            db.execute(conn, "UPDATE {p}ducklake_snapshot SET next_file_id = :n WHERE snapshot_id = :s",
                       {"n": next_file, "s": last})
    finally:
        db.dispose()
    return done
