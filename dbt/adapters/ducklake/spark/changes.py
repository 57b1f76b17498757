"""The change feed of a table as a Spark DataFrame, equal to DuckDB's ducklake_table_changes.

Columns: snapshot_id, rowid, change_type (insert, delete, update_preimage, update_postimage), then the table's columns
as of the end snapshot. The lake layer plans which files, positions and inlined rows changed; Spark reads the rows.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame, SparkSession

from ..lake.changes import plan_changes
from ..lake.deletes import ROW_ID_COLUMN, SNAPSHOT_COLUMN
from ..lake.inlined import read_inlined
from ..lake.lake import DuckLake
from ..lake.records import Column, DataFile
from ..lake.scan import FileScanTask
from .scan import POS, _physical_schema, _projection, file_uri
from .sql_literals import ident, literal


def table_changes(spark: SparkSession, lake: DuckLake, schema: str, table: str, start: int | dt.datetime,
                  end: int | dt.datetime) -> DataFrame:
    """Rows inserted, deleted and updated in schema.table within snapshots [start, end] (ids or timestamps)."""
    start_id = start if isinstance(start, int) else lake.snapshot(timestamp=start).snapshot_id + 1
    end_id = end if isinstance(end, int) else lake.snapshot(timestamp=end).snapshot_id
    return spark.sql(changes_sql(lake, schema, table, start_id, end_id))


def changes_sql(lake: DuckLake, schema: str, table: str, start: int, end: int) -> str:
    """The Spark SQL of the change feed (see table_changes)."""
    plan = plan_changes(lake, schema, table, start, end)
    cols = plan.table.columns
    mappings = lake.snapshot(end).name_mappings(plan.table) if any(
        f.data_file.mapping_id is not None for f in plan.insertions) or any(
        f.data_file.mapping_id is not None for f in plan.deletions) else {}
    names = ", ".join(ident(c.name) for c in cols)
    parts = []
    for ins in plan.insertions:
        f = ins.data_file
        proj, rowid = _file_parts(f, cols, mappings)
        snap = ident(SNAPSHOT_COLUMN) if ins.per_row_snapshots else str(f.begin_snapshot)
        parts.append(
            f"SELECT CAST({snap} AS BIGINT) AS snapshot_id, CAST({rowid} AS BIGINT) AS rowid, 'i' AS kind, {', '.join(proj)} "
            f"FROM (SELECT *, _metadata.row_index AS {POS} FROM parquet.{ident(file_uri(f.path))}) "
            f"WHERE {snap} BETWEEN {start} AND {end}"
        )
    for de in plan.deletions:
        f = de.data_file
        proj, rowid = _file_parts(f, cols, mappings)
        values = ", ".join(f"({p}, {s})" for p, s in de.positions)
        parts.append(
            f"SELECT CAST(d.snap AS BIGINT) AS snapshot_id, CAST({rowid} AS BIGINT) AS rowid, 'd' AS kind, {', '.join(proj)} "
            f"FROM (SELECT *, _metadata.row_index AS {POS} FROM parquet.{ident(file_uri(f.path))}) x "
            f"JOIN (SELECT * FROM VALUES {values} AS d(pos, snap)) d ON x.{POS} = d.pos"
        )
    if plan.inlined_inserts or plan.inlined_deletes:
        for t in read_inlined(lake.snapshot(end), plan.table, True, history=True):
            for row in t.to_pylist():
                values = ", ".join(f"{literal(row[c.name], c)} AS {ident(c.name)}" for c in cols)
                if start <= row["begin_snapshot"] <= end:
                    parts.append(f"SELECT CAST({row['begin_snapshot']} AS BIGINT) AS snapshot_id, "
                                 f"CAST({row['rowid']} AS BIGINT) AS rowid, 'i' AS kind, {values}")
                if row["end_snapshot"] is not None and start <= row["end_snapshot"] <= end:
                    parts.append(f"SELECT CAST({row['end_snapshot']} AS BIGINT) AS snapshot_id, "
                                 f"CAST({row['rowid']} AS BIGINT) AS rowid, 'd' AS kind, {values}")
    if not parts:
        nulls = ", ".join(f"{literal(None, c)} AS {ident(c.name)}" for c in cols)
        return f"SELECT CAST(NULL AS BIGINT) AS snapshot_id, CAST(NULL AS BIGINT) AS rowid, " \
               f"CAST(NULL AS STRING) AS change_type, {nulls} WHERE false"
    union = "\nUNION ALL\n".join(parts)
    # an insert and a delete of one rowid in one snapshot are the two halves of an update
    return (
        "SELECT snapshot_id, rowid, CASE WHEN count(*) OVER (PARTITION BY snapshot_id, rowid) > 1 THEN "
        "(CASE kind WHEN 'i' THEN 'update_postimage' ELSE 'update_preimage' END) "
        "ELSE (CASE kind WHEN 'i' THEN 'insert' ELSE 'delete' END) END AS change_type, "
        f"{names} FROM (\n{union}\n) changes"
    )


def _file_parts(f: DataFile, cols: tuple[Column, ...], mappings: dict) -> tuple[tuple[str, ...], str]:
    proj = _projection(cols, FileScanTask(f, (), None, mappings.get(f.mapping_id or -1)))
    names = _physical_schema(f.path, f.file_size_bytes).names
    rowid = ident(ROW_ID_COLUMN) if ROW_ID_COLUMN in names else f"{f.row_id_start or 0} + {POS}"
    return proj, rowid
