"""Spark SQL that reads a table or view as an open `LakeWork` has it: its committed rows with the unit's staged
deletes taken out and its staged files added (read your own writes across the statements of a long unit of work,
e.g. a whole dbt build published as one snapshot).

The staged state is not in the catalog yet, so these reads go to the written Parquet files directly: a table created
in the unit is its staged files; a table the unit changed is the base snapshot's rows (with their locators) minus the
staged deleted positions (a small Parquet file the driver writes into a scratch directory, read by Spark like a
delete file) plus the staged files.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from ...lake.catalog.lookups import ci_lookup
from ...lake.errors import NoSuchTableError
from ...lake.paths import file_io, join_path
from ...lake.records import TableInfo
from ...lake.write.datafiles import DataFileSpec
from ...lake.write.transaction import Transaction
from ..read.manifest import FILE, POS, RID
from ..read.names import ABSENT
from ..read.scan import file_uri, table_sql
from ..sql_literals import ident, literal
from ..types import to_spark

SCRATCH_PREFIX = "__ducklake_staged_reads_"  # scratch directories in the data path, removed with the unit


class StagedUnit(Protocol):
    """What a staged read needs of the unit of work (`work.LakeWork`, which imports this module)."""

    spark: SparkSession
    tx: Transaction
    touched: set[tuple[str, str]]

    def scratch_dir(self) -> str: ...


def staged_sql(work: StagedUnit, schema: str, name: str, spark_sql_tag: str) -> str | None:
    """The SELECT of the object as the unit has it; None when the unit did not change it (read the base); ABSENT
    when the unit dropped it."""
    if (schema.lower(), name.lower()) not in work.touched:
        return None
    tx = work.tx
    try:
        info = tx.table(schema, name)
    except NoSuchTableError:
        try:
            view = tx.view(schema, name)
        except NoSuchTableError:  # no view of that name either: dropped in the unit
            return ABSENT
        return view.tags.get(spark_sql_tag) or view.sql
    columns = ", ".join(f"CAST({ident(c.name)} AS {to_spark(c).simpleString()}) AS {ident(c.name)}"
                        for c in info.columns)
    branches = [f"SELECT {columns} FROM parquet.{ident(src)}" for src in _sources(tx.staged_files(schema, name))]
    if not tx.is_new_table(schema, name):
        base = ci_lookup(tx.base.tables, (schema, name))
        if base is not None:
            branches.insert(0, _base_rows(work, base, info))
    if not branches:
        nulls = ", ".join(f"{literal(None, c)} AS {ident(c.name)}" for c in info.columns)
        return f"SELECT {nulls} WHERE false"
    return "\nUNION ALL\n".join(branches)


def _sources(files: list[DataFileSpec]) -> list[str]:
    """Parquet sources of files, one per directory (Hadoop globs alternate within one directory: dir/{a,b})."""
    by_dir: dict[str, list[str]] = defaultdict(list)
    for f in files:
        uri = file_uri(f.path)
        by_dir[uri.rpartition("/")[0]].append(uri.rpartition("/")[2])
    return [f"{d}/{names[0]}" if len(names) == 1 else f"{d}/{{{','.join(names)}}}" for d, names in by_dir.items()]


def _base_rows(work: StagedUnit, base: TableInfo, info: TableInfo) -> str:
    """The committed rows of a table the unit changed, minus the rows it deleted, in the unit's columns (a column
    added in the unit reads NULL in them, as its initial default is not applied here)."""
    from .dml import live_rows  # the DML's own reading of target rows with their locators

    have = {c.column_id: c for c in base.columns}
    cols = ", ".join(
        f"CAST(t.{ident(have[c.column_id].name)} AS {to_spark(c).simpleString()}) AS {ident(c.name)}"
        if c.column_id in have else f"{literal(None, c)} AS {ident(c.name)}" for c in info.columns)
    positions, row_ids = work.tx.staged_deletes(base.schema_name, base.name)
    if not positions and not row_ids:
        return f"SELECT {cols} FROM ({table_sql(work.spark, work.tx.base, base)}) t"
    rows = live_rows(work.spark, work.tx.base, base)
    if rows is None:
        return f"SELECT {cols} FROM ({table_sql(work.spark, work.tx.base, base)}) t"
    deleted = _deleted_source(work, positions, row_ids)
    return (f"SELECT {cols} FROM ({rows.sql}) t LEFT ANTI JOIN parquet.{ident(deleted)} d "
            f"ON d.f = t.{FILE} AND d.p = CASE WHEN t.{FILE} = -1 THEN t.{RID} ELSE t.{POS} END")


def _deleted_source(work: StagedUnit, positions: dict[int, set[int]], row_ids: set[int]) -> str:
    """A Parquet file of the deleted rows: (f, p) = (data file id, position), or (-1, row id) for an inlined row."""
    fs: list[int] = []
    ps: list[int] = []
    for fid, pos in positions.items():
        fs.extend([fid] * len(pos))
        ps.extend(sorted(pos))
    fs.extend([-1] * len(row_ids))
    ps.extend(sorted(row_ids))
    path = join_path(work.scratch_dir(), f"deleted-{uuid.uuid4().hex}.parquet")
    with file_io(path).open_output(path) as out:
        pq.write_table(pa.table({"f": pa.array(fs, pa.int64()), "p": pa.array(ps, pa.int64())}), out)
    return file_uri(path)
