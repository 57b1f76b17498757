"""DML on DuckLake tables with Spark, merge-on-read: rows are found by Spark, deletes become delete files.

DELETE: Spark evaluates the condition over each live file (columns mapped as in the table's view) and yields the
positions of matching rows; the lake layer writes cumulative delete files (or ends files whose rows are all gone)
and deletes matching inlined rows, all in one snapshot. Only (file, position) pairs reach the driver, never rows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pyspark.sql import SparkSession

from ..lake.deletes import SNAPSHOT_COLUMN
from ..lake.inlined import read_inlined
from ..lake.lake import DuckLake
from ..lake.records import Snapshot, TableInfo
from ..lake.scan import plan_scan
from ..lake.state import LakeState
from .scan import POS, _projection, file_uri
from .sql_literals import ident, literal


@dataclass(frozen=True)
class DeletePlan:
    """What a DELETE removes: positions per data file, and inlined row ids."""

    positions: dict[int, list[int]]
    inlined_row_ids: list[int]

    @property
    def empty(self) -> bool:
        return not self.positions and not self.inlined_row_ids


def matching_positions_sql(state: LakeState, table: TableInfo, condition: str) -> str | None:
    """SQL yielding (data_file_id, position) of the live rows that satisfy condition, or None without files."""
    parts = []
    for task in plan_scan(state, table).files:
        f = task.data_file
        proj = _projection(table.columns, task)
        where = []
        if task.deleted_positions:
            where.append(f"{POS} NOT IN ({', '.join(str(p) for p in task.deleted_positions)})")
        if task.max_snapshot is not None:
            where.append(f"{ident(SNAPSHOT_COLUMN)} <= {task.max_snapshot}")
        inner_where = f" WHERE {' AND '.join(where)}" if where else ""
        parts.append(
            f"SELECT {f.data_file_id} AS data_file_id, {POS} AS pos FROM (SELECT {', '.join(proj)}, {POS} FROM "
            f"(SELECT *, _metadata.row_index AS {POS} FROM parquet.{ident(file_uri(f.path))}){inner_where}) t "
            f"WHERE ({condition})"
        )
    return "\nUNION ALL\n".join(parts) if parts else None


def plan_delete(spark: SparkSession, state: LakeState, table: TableInfo, condition: str | None) -> DeletePlan:
    """Find the rows a DELETE ... WHERE condition removes (condition None = every row)."""
    cond = condition if condition else "true"
    positions: dict[int, list[int]] = defaultdict(list)
    sql = matching_positions_sql(state, table, cond)
    if sql is not None:
        for row in spark.sql(sql).collect():
            positions[row[0]].append(row[1])
    inlined: list[int] = []
    rows = [r for t in read_inlined(state, table, with_rowid=True) for r in t.to_pylist()]
    if rows:
        names = ", ".join(ident(c.name) for c in table.columns)
        values = ", ".join(
            "(" + ", ".join([f"CAST({r['rowid']} AS BIGINT)"] + [literal(r[c.name], c) for c in table.columns]) + ")"
            for r in rows
        )
        found = spark.sql(f"SELECT __rowid FROM VALUES {values} AS t(__rowid, {names}) WHERE ({cond})").collect()
        inlined = [r[0] for r in found]
    return DeletePlan(dict(positions), inlined)


def delete_where(spark: SparkSession, lake: DuckLake, schema: str, table: str, condition: str | None = None, *,
                 author: str | None = None, commit_message: str | None = None,
                 commit_extra_info: str | None = None) -> Snapshot | None:
    """DELETE FROM schema.table [WHERE condition] as one snapshot; None when no row matched (no snapshot, as DuckDB).

    Raises:
        NoSuchTableError: no such table. AnalysisException: the condition is not valid Spark SQL for the table.
        CommitConflictError: another writer deleted from the same files (or altered/dropped the table) meanwhile.
    """
    tx = lake.transaction(author=author, commit_message=commit_message, commit_extra_info=commit_extra_info)
    info = tx.base.table(schema, table)
    plan = plan_delete(spark, tx.base, info, condition)
    if plan.empty:
        tx.abandon()
        return None
    for fid, positions in sorted(plan.positions.items()):
        tx.delete_rows(info.schema_name, info.name, fid, positions)
    if plan.inlined_row_ids:
        tx.delete_inlined_rows(info.schema_name, info.name, plan.inlined_row_ids)
    return tx.commit()
