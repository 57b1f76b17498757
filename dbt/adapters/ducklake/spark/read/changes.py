"""The change feed of a table as a Spark DataFrame, equal to DuckDB's ducklake_table_changes.

Columns: snapshot_id, rowid, change_type (insert, delete, update_preimage, update_postimage), then the table's columns
as of the end snapshot. The lake layer plans which files, positions and inlined rows changed; Spark reads the rows.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from ...lake.lake import DuckLake
from ...lake.read.changes import FileDeletions, FileInsertions, TableChanges, changes_context, plan_changes
from ...lake.read.deletes import ROW_ID_COLUMN, SNAPSHOT_COLUMN
from ...lake.read.file_checks import data_file, reading_any
from ...lake.read.inlined import read_inlined
from ...lake.read.scan import FileScanTask
from ...lake.records import Column, DataFile, TableInfo
from ..sql_literals import ident, literal
from . import manifest, read_errors, scan
from .projection import physical_schema, projection
from .scan import POS, file_uri, footer_relation, readable_files
from .type_readings import Encoding


def table_changes(spark: SparkSession, lake: DuckLake, schema: str, table: str, start: int | dt.datetime,
                  end: int | dt.datetime) -> DataFrame:
    """Rows inserted, deleted and updated in schema.table within snapshots [start, end] (ids or timestamps)."""
    start_id = start if isinstance(start, int) else lake.snapshot(timestamp=start).snapshot_id + 1
    end_id = end if isinstance(end, int) else lake.snapshot(timestamp=end).snapshot_id
    return spark.sql(changes_sql(spark, lake, schema, table, start_id, end_id))


def changes_sql(spark: SparkSession, lake: DuckLake, schema: str, table: str, start: int, end: int) -> str:
    """The Spark SQL of the change feed (see table_changes). Files are read through a manifest (see spark/read/manifest):
    the SQL does not grow with the number of files that changed; the deleted positions are a Parquet file of it."""
    plan = plan_changes(lake, schema, table, start, end)  # checks the files it reads
    files = [*(c.data_file for c in plan.insertions), *(c.data_file for c in plan.deletions)]
    context = changes_context(plan.table.schema_name, plan.table.name, start, end)
    read_errors.note_files(plan.table.table_id, context, end, files)
    with reading_any(context, lambda: [data_file(f) for f in files]):  # footers read while planning
        return _changes_sql(spark, lake, plan, start, end)


def _changes_sql(spark: SparkSession, lake: DuckLake, plan: TableChanges, start: int, end: int) -> str:
    cols = plan.table.columns
    use = scan.USE_MANIFESTS
    defaults = manifest.default_columns(cols)

    def linked(f: DataFile) -> bool:
        return use and manifest.linkable(FileScanTask(f, (), None, None), defaults) and f.mapping_id is None

    ins_linked = [i for i in plan.insertions if linked(i.data_file)]
    del_linked = [d for d in plan.deletions if linked(d.data_file)]
    parts = _manifest_parts(spark, lake.data_path, plan.table, ins_linked, del_linked, start, end)
    ins_rest = [i for i in plan.insertions if not linked(i.data_file)]
    del_rest = [d for d in plan.deletions if not linked(d.data_file)]
    mappings = lake.snapshot(end).name_mappings(plan.table) if any(
        f.data_file.mapping_id is not None for f in ins_rest) or any(
        f.data_file.mapping_id is not None for f in del_rest) else {}
    names = ", ".join(ident(c.name) for c in cols)
    # files Spark cannot open (DuckDB's GEOMETRY / VARIANT) as their readable copies, remote ones made in one job
    originals = [i.data_file for i in ins_rest] + [d.data_file for d in del_rest]
    copies = dict(zip((id(f) for f in originals), readable_files(spark, lake.data_path, plan.table, originals),
                      strict=True))

    def readable(f: DataFile) -> DataFile:
        return copies[id(f)]

    for ins in ins_rest:
        f = readable(ins.data_file)
        proj, rowid = _file_parts(f, cols, mappings)
        snap = ident(SNAPSHOT_COLUMN) if ins.per_row_snapshots else str(f.begin_snapshot)
        parts.append(
            f"SELECT CAST({snap} AS BIGINT) AS snapshot_id, CAST({rowid} AS BIGINT) AS rowid, 'i' AS kind, {', '.join(proj)} "
            f"FROM (SELECT *, _metadata.row_index AS {POS} FROM {_source(spark, f)}) "
            f"WHERE {snap} BETWEEN {start} AND {end}"
        )
    for de in del_rest:
        f = readable(de.data_file)
        proj, rowid = _file_parts(f, cols, mappings)
        values = ", ".join(f"({p}, {s})" for p, s in de.positions)
        parts.append(
            f"SELECT CAST(d.snap AS BIGINT) AS snapshot_id, CAST({rowid} AS BIGINT) AS rowid, 'd' AS kind, {', '.join(proj)} "
            f"FROM (SELECT *, _metadata.row_index AS {POS} FROM {_source(spark, f)}) x "
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


def _manifest_parts(spark: SparkSession, data_path: str, info: TableInfo, insertions: Sequence[FileInsertions],
                    deletions: Sequence[FileDeletions], start: int, end: int) -> list[str]:
    """Branches reading the changed files through one manifest: inserted files (named with their begin snapshot, or
    `sp` when their rows carry their own), files with deletions in range, and the deleted (file, position, snapshot)
    as a Parquet file joined to them. One branch per kind and set of present default-bearing columns."""
    cols = info.columns
    defaults = manifest.default_columns(cols)
    links: dict[str, list[tuple[str, str]]] = {}
    present: dict[str, tuple[frozenset[int], Encoding]] = {}
    encoding_of = scan.encoding_of(info)
    encodings: list[Encoding] = []

    entries: list[tuple[str, DataFile, str, frozenset[int], Encoding]] = []

    def add(kind: str, f: DataFile, name: str) -> None:
        task = FileScanTask(f, (), None, None)
        entries.append((kind, f, name, manifest.present_defaults(task, defaults), encoding_of(task)))

    for ins in insertions:
        f = ins.data_file
        snap = "p" if ins.per_row_snapshots else str(f.begin_snapshot)
        add("i", f, f"f{f.data_file_id}_r{f.row_id_start or 0}_s{snap}.parquet")
    for de in deletions:
        f = de.data_file
        add("x", f, f"f{f.data_file_id}_r{f.row_id_start or 0}.parquet")
    # the files themselves, or their readable copies (readable.py), made together (in parallel)
    targets = manifest.link_targets(manifest.table_root(data_path, info.table_id), info,
                                    [(f.path, f.file_size_bytes, e) for _, f, _, _, e in entries])
    for kind, f, name, p, e in entries:
        if e not in encodings:
            encodings.append(e)
        # no glob characters: it is a Hadoop path
        sub = kind + "_".join(str(c) for c in sorted(p)) + f"e{encodings.index(e)}"
        links.setdefault(sub, []).append((name, targets[f.path]))
        present[sub] = (p, e)
    if not links:
        return []
    rows = [(d.data_file.data_file_id, p, s) for d in deletions for p, s in d.positions]
    tables = {"pos/deleted.parquet": (repr(rows), lambda: manifest.positions_table(rows))} if rows else {}
    directory = manifest.materialize(data_path, info.table_id, links, tables)
    positions = manifest.spark_table(spark, os.path.join(directory, "pos"), manifest.DELETE_SCHEMA) if rows else None
    snapcol = ident(SNAPSHOT_COLUMN)
    out = []
    for sub in sorted(links):
        p, e = present[sub]
        name = manifest.spark_table(spark, os.path.join(directory, sub), manifest.data_schema(cols, e))
        proj = manifest.columns_sql(info, p, e)
        rowid = f"coalesce(x.{ident(ROW_ID_COLUMN)}, x.__ducklake_start + x.{POS})"
        inner = (f"SELECT *, _metadata.row_index AS {POS}, {manifest.file_id_sql()} AS {manifest.FILE}, "
                 f"CAST(regexp_extract(_metadata.file_name, '_r([0-9]+)[_.]', 1) AS BIGINT) AS __ducklake_start")
        if sub.startswith("i"):
            snap = (f"CASE WHEN endswith(_metadata.file_name, '_sp.parquet') THEN {snapcol} ELSE "
                    "CAST(regexp_extract(_metadata.file_name, '_s([0-9]+)[.]parquet$', 1) AS BIGINT) END")
            out.append(f"SELECT CAST(x.__ducklake_snap AS BIGINT) AS snapshot_id, CAST({rowid} AS BIGINT) AS rowid, "
                       f"'i' AS kind, {', '.join(proj)} FROM ({inner}, {snap} AS __ducklake_snap FROM {name}) x "
                       f"WHERE x.__ducklake_snap BETWEEN {start} AND {end}")
        elif positions is not None:
            out.append(f"SELECT CAST(d.{snapcol} AS BIGINT) AS snapshot_id, CAST({rowid} AS BIGINT) AS rowid, "
                       f"'d' AS kind, {', '.join(proj)} FROM ({inner} FROM {name}) x JOIN {positions} d "
                       f"ON d.__ducklake_data_file = x.{manifest.FILE} AND d.pos = x.{POS}")
    return out


def _source(spark: SparkSession, f: DataFile) -> str:
    """A footer-based read of one file, with the explicit schema of its fields (scan.footer_relation)."""
    return footer_relation(spark, file_uri(f.path), physical_schema(f.path, f.file_size_bytes))


def _file_parts(f: DataFile, cols: tuple[Column, ...], mappings: dict) -> tuple[tuple[str, ...], str]:
    proj = projection(cols, FileScanTask(f, (), None, mappings.get(f.mapping_id or -1)))
    names = physical_schema(f.path, f.file_size_bytes).names
    rowid = ident(ROW_ID_COLUMN) if ROW_ID_COLUMN in names else f"{f.row_id_start or 0} + {POS}"
    return proj, rowid
