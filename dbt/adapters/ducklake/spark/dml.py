"""DML on DuckLake tables with Spark, merge-on-read: rows are found by Spark, deletes become delete files.

DELETE: Spark evaluates the condition over each live file (columns mapped as in the table's view) and yields the
positions of matching rows; the lake layer writes cumulative delete files (or ends files whose rows are all gone)
and deletes matching inlined rows, all in one snapshot. Only (file, position) pairs reach the driver, never rows.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pyspark.sql import SparkSession
from sqlglot import exp

from ..lake.deletes import SNAPSHOT_COLUMN
from ..lake.inlined import read_inlined
from ..lake.lake import DuckLake
from ..lake.pruning import And, Compare, InValues, Predicate
from ..lake.records import Snapshot, TableInfo
from ..lake.scan import plan_scan
from ..lake.state import LakeState
from ..lake.transaction import Transaction
from .predicates import column_ref, conjuncts, to_predicate
from .scan import POS, _projection, file_uri
from .sql_literals import ident, literal


@dataclass(frozen=True)
class DeletePlan:
    """What a DELETE removes: (data_file_id, position, rowid) of the matching rows; data_file_id -1 = inlined row."""

    hits: list[tuple[int, int, int]]

    @property
    def empty(self) -> bool:
        return not self.hits


def plan_delete(spark: SparkSession, state: LakeState, table: TableInfo, condition: str | None) -> DeletePlan:
    """Find the rows a DELETE ... WHERE condition removes (condition None = every row)."""
    target = _target_rows_sql(state, table, to_predicate(condition, table.columns, (None, "t")))
    if target is None:
        return DeletePlan([])
    cond = condition if condition else "true"
    rows = spark.sql(f"SELECT __file, __pos, __rowid FROM ({target}) t WHERE ({cond})").collect()
    return DeletePlan([tuple(r) for r in rows])


def _stage_deletes(tx: Transaction, info: TableInfo, hits: list[tuple[int, int, int]]) -> None:
    """Stage the deletion of rows found by (file, position, rowid): positions per file, inlined rows by rowid."""
    by_file: dict[int, list[int]] = defaultdict(list)
    inlined_ids: list[int] = []
    for fid, pos, rid in hits:
        if fid == -1:
            inlined_ids.append(rid)
        else:
            by_file[fid].append(pos)
    for fid, positions in sorted(by_file.items()):
        tx.delete_rows(info.schema_name, info.name, fid, positions)
    if inlined_ids:
        tx.delete_inlined_rows(info.schema_name, info.name, inlined_ids)



@dataclass
class Staged:
    """What a staged statement wrote: files to remove if its transaction fails, and whether it changed anything."""

    files: list = field(default_factory=list)
    table_dir: str = ""
    changed: bool = False


def _run(lake: DuckLake, provenance: dict[str, str | None], stage: Callable[[Transaction], Staged]
         ) -> Snapshot | None:
    """One statement as one snapshot: stage it, commit, and remove its files after a definite failure."""
    from ..lake.errors import CommitStateUnknownError
    from .write import discard_files

    tx = lake.transaction(**provenance)
    done = Staged()
    try:
        done = stage(tx)
        if not done.changed or tx.is_empty:
            tx.abandon()
            discard_files(done.files, done.table_dir)
            return None
        return tx.commit()
    except BaseException as e:
        tx.abandon()
        if not isinstance(e, CommitStateUnknownError):
            discard_files(done.files, done.table_dir)
        raise

def delete_where(spark: SparkSession, lake: DuckLake, schema: str, table: str, condition: str | None = None, *,
                 author: str | None = None, commit_message: str | None = None,
                 commit_extra_info: str | None = None) -> Snapshot | None:
    """DELETE FROM schema.table [WHERE condition] as one snapshot; None when no row matched (no snapshot, as DuckDB).

    Raises:
        NoSuchTableError: no such table. AnalysisException: the condition is not valid Spark SQL for the table.
        CommitConflictError: another writer deleted from the same files (or altered/dropped the table) meanwhile.
    """
    return _run(lake, _prov(author, commit_message, commit_extra_info),
                lambda tx: stage_delete(spark, tx, schema, table, condition))


def stage_delete(spark: SparkSession, tx: Transaction, schema: str, table: str, condition: str | None) -> Staged:
    """Stage DELETE FROM schema.table [WHERE condition] in tx (rows as of the transaction's base snapshot)."""
    info = tx.base.table(schema, table)
    plan = plan_delete(spark, tx.base, info, condition)
    if plan.empty:
        return Staged()
    _stage_deletes(tx, info, plan.hits)
    return Staged(changed=True)


def _prov(author: str | None, commit_message: str | None, commit_extra_info: str | None) -> dict[str, str | None]:
    return {"author": author, "commit_message": commit_message, "commit_extra_info": commit_extra_info}


def _rowid_expr(state: LakeState, table: TableInfo, data_file_id: int) -> str:
    from ..lake.deletes import ROW_ID_COLUMN
    from .scan import _physical_schema

    f = next(x for x in state.files(table) if x.data_file_id == data_file_id)
    if ROW_ID_COLUMN in _physical_schema(f.path, f.file_size_bytes).names:
        return ident(ROW_ID_COLUMN)
    return f"{f.row_id_start or 0} + {POS}"


def update_where(spark: SparkSession, lake: DuckLake, schema: str, table: str, assignments: dict[str, str],
                 condition: str | None = None, *, author: str | None = None, commit_message: str | None = None,
                 commit_extra_info: str | None = None) -> Snapshot | None:
    """UPDATE schema.table SET col = expr, … [WHERE condition] as one snapshot, merge-on-read.

    Matching rows are deleted by position and their new versions written by Spark's executors with their row ids
    kept (_ducklake_internal_row_id), so the change feed shows update pre- and post-images, as DuckDB does.
    None when no row matched.

    Raises:
        NoSuchColumnError: an assignment names no column. AnalysisException: an expression is not valid Spark SQL.
        CommitConflictError: another writer changed the same files (or the table) meanwhile.
    """
    return _run(lake, _prov(author, commit_message, commit_extra_info),
                lambda tx: stage_update(spark, tx, schema, table, assignments, condition))


def stage_update(spark: SparkSession, tx: Transaction, schema: str, table: str, assignments: dict[str, str],
                 condition: str | None) -> Staged:
    """Stage UPDATE schema.table SET ... [WHERE condition] in tx."""
    from ..lake.errors import NoSuchColumnError
    from .write import write_files

    info = tx.base.table(schema, table)
    names = {c.name.lower(): c.name for c in info.columns}
    for col in assignments:
        if col.lower() not in names:
            raise NoSuchColumnError(f"UPDATE of {schema}.{table}: no column {col!r} (columns: {list(names.values())})")
    sets = {names[k.lower()]: v for k, v in assignments.items()}
    cond = condition if condition else "true"
    new_values = ", ".join(f"({sets[c.name]}) AS {ident(c.name)}" if c.name in sets else ident(c.name)
                           for c in info.columns)
    target = _target_rows_sql(tx.base, info, to_predicate(condition, info.columns, (None, "t")))
    if target is None:
        return Staged()
    matched = spark.sql(f"SELECT __file, __pos, __rowid, {new_values} FROM ({target}) t WHERE ({cond})")
    hits = [tuple(r) for r in matched.select("__file", "__pos", "__rowid").collect()]  # ids only, never row values
    if not hits:
        return Staged()
    table_dir = tx.base.table_path(info)
    done = Staged(write_files(spark, matched.drop("__file", "__pos"), info, table_dir, row_ids="__rowid"), table_dir,
                  True)
    with _removed_on_error(done):
        _stage_deletes(tx, info, hits)
        tx.add_data_files(info.schema_name, info.name, done.files)
    return done


@contextlib.contextmanager
def _removed_on_error(done: Staged) -> Iterator[None]:
    """Files written by a statement go if staging them fails (nothing can reference them yet)."""
    from .write import discard_files

    try:
        yield
    except BaseException:
        discard_files(done.files, done.table_dir)
        done.files = []
        raise


def _remove_all(tx: Transaction, state: LakeState, info: TableInfo, keep: object = None) -> None:
    """Stage the removal of every live row (files end; inlined rows end), except files keep(file) says to keep."""
    for f in state.files(info):
        if keep is not None and keep(f):  # type: ignore[operator]
            continue
        tx.delete_rows(info.schema_name, info.name, f.data_file_id, range(f.record_count))
    if keep is None:
        ids = [r["rowid"] for t in read_inlined(state, info, with_rowid=True) for r in t.to_pylist()]
        if ids:
            tx.delete_inlined_rows(info.schema_name, info.name, ids)


def truncate(lake: DuckLake, schema: str, table: str, *, author: str | None = None,
             commit_message: str | None = None, commit_extra_info: str | None = None) -> Snapshot | None:
    """TRUNCATE schema.table: every data file ends and inlined rows end, in one snapshot (None if already empty)."""
    return _run(lake, _prov(author, commit_message, commit_extra_info), lambda tx: stage_truncate(tx, schema, table))


def stage_truncate(tx: Transaction, schema: str, table: str) -> Staged:
    info = tx.base.table(schema, table)
    _remove_all(tx, tx.base, info)
    return Staged(changed=not tx.is_empty)


def insert_overwrite(spark: SparkSession, lake: DuckLake, schema: str, table: str, df: object, *,
                     dynamic_partitions: bool = False, author: str | None = None, commit_message: str | None = None,
                     commit_extra_info: str | None = None) -> Snapshot | None:
    """INSERT OVERWRITE: the DataFrame's rows replace the table's (or, with dynamic_partitions on a partitioned
    table, replace only the partitions the new rows fall in), in one snapshot. Old files end, none is rewritten.

    Raises:
        ValueError: dynamic_partitions on a table without partitioning.
        CommitConflictError: another writer changed the table meanwhile (the written files are removed).
    """
    return _run(lake, _prov(author, commit_message, commit_extra_info),
                lambda tx: stage_insert_overwrite(spark, tx, schema, table, df, dynamic_partitions=dynamic_partitions))


def stage_insert_overwrite(spark: SparkSession, tx: Transaction, schema: str, table: str, df: object, *,
                           dynamic_partitions: bool = False) -> Staged:
    from .write import write_files

    info = tx.base.table(schema, table)
    if dynamic_partitions and info.partition is None:
        raise ValueError(f"{schema}.{table} is not partitioned: dynamic partition overwrite needs a partitioned table")
    table_dir = tx.base.table_path(info)
    done = Staged(write_files(spark, df, info, table_dir), table_dir)  # type: ignore[arg-type]
    with _removed_on_error(done):
        if dynamic_partitions:
            assert info.partition is not None
            written = {f.partition_values for f in done.files}
            pid = info.partition.partition_id
            # files of the current spec in a written partition go; files of older specs cannot be matched, so stay
            _remove_all(tx, tx.base, info,
                        keep=lambda f: f.partition_id != pid or tuple(f.partition_values) not in written)
        else:
            _remove_all(tx, tx.base, info)
        if done.files:
            tx.add_data_files(info.schema_name, info.name, done.files)
    done.changed = not tx.is_empty
    return done


class MergeCardinalityError(ValueError):
    """A MERGE whose source has several rows matching one target row."""


def _target_rows_sql(state: LakeState, info: TableInfo, predicate: Predicate | None = None) -> str | None:
    """Live target rows with their (file, position, rowid): __file = -1 marks inlined rows.

    With a predicate, files whose statistics exclude it are left out (inlined rows are always in).
    """
    parts = []
    for task in plan_scan(state, info, predicate).files:
        f = task.data_file
        proj = _projection(info.columns, task)
        where = []
        if task.deleted_positions:
            where.append(f"{POS} NOT IN ({', '.join(str(p) for p in task.deleted_positions)})")
        if task.max_snapshot is not None:
            where.append(f"{ident(SNAPSHOT_COLUMN)} <= {task.max_snapshot}")
        inner_where = f" WHERE {' AND '.join(where)}" if where else ""
        rowid = _rowid_expr(state, info, f.data_file_id)
        parts.append(
            f"SELECT CAST({f.data_file_id} AS BIGINT) AS __file, CAST({POS} AS BIGINT) AS __pos, "
            f"CAST(__rid AS BIGINT) AS __rowid, {', '.join(ident(c.name) for c in info.columns)} FROM "
            f"(SELECT {', '.join(proj)}, {POS}, {rowid} AS __rid "
            f"FROM (SELECT *, _metadata.row_index AS {POS} FROM parquet.{ident(file_uri(f.path))})"
            f"{inner_where}) x"
        )
    rows = [r for t in read_inlined(state, info, with_rowid=True) for r in t.to_pylist()]
    if rows:
        cols = ", ".join(ident(c.name) for c in info.columns)
        values = ", ".join(
            "(" + ", ".join([f"CAST({r['rowid']} AS BIGINT)"] + [literal(r[c.name], c) for c in info.columns]) + ")"
            for r in rows
        )
        parts.append(f"SELECT CAST(-1 AS BIGINT) AS __file, CAST(-1 AS BIGINT) AS __pos, __rowid, {cols} "
                     f"FROM VALUES {values} AS v(__rowid, {cols})")
    return "\nUNION ALL\n".join(parts) if parts else None


MAX_KEY_LIST = 1000  # a source with at most this many rows prunes target files by its key values, not just their range
_INTEGRAL = frozenset({"tinyint", "smallint", "int", "bigint"})


def merge_predicate(spark: SparkSession, source_view: str, info: TableInfo, on: str) -> Predicate | None:
    """What the target rows a MERGE can match must satisfy, for file pruning.

    From the ON condition: its terms on target columns and literals (e.g. incremental predicates), and for each
    equality t.<col> = s.<col>, the source keys' range (their values too, when the source is small). A key pair is
    used only when both sides have the same type (or both are integers), so Spark compares them as the stats do.
    """
    from .types import to_spark

    parts: list[Predicate] = []
    own = to_predicate(on, info.columns, ("t",))
    if own is not None:
        parts.append(own)
    src_types = {f.name.lower(): f.dataType.simpleString() for f in spark.table(source_view).schema.fields}
    target = {c.name.lower(): c for c in info.columns}
    keys: list[tuple[str, str]] = []  # (target column, source column)
    for term in conjuncts(on):
        if not isinstance(term, exp.EQ):
            continue
        a, b = column_ref(term.this), column_ref(term.expression)
        if a is None or b is None:
            continue
        if (a[0] or "").lower() == "s":
            a, b = b, a
        if (a[0] or "").lower() != "t" or (b[0] or "").lower() != "s":
            continue
        col, src_type = target.get(a[1].lower()), src_types.get(b[1].lower())
        if col is None or src_type is None or col.is_nested:
            continue
        t_type = to_spark(col).simpleString()
        same = t_type == src_type or (t_type in _INTEGRAL and src_type in _INTEGRAL)
        if same and src_type != "binary":  # a binary's STRING cast is not the stats' hex
            keys.append((col.name, b[1]))
    if keys:
        aggs = ", ".join(f"CAST(min(s.{ident(sc)}) AS STRING), CAST(max(s.{ident(sc)}) AS STRING)" for _, sc in keys)
        row = spark.sql(f"SELECT count(*), {aggs} FROM {source_view} s").collect()[0]
        small = row[0] <= MAX_KEY_LIST
        for i, (tc, sc) in enumerate(keys):
            lo, hi = row[1 + 2 * i], row[2 + 2 * i]
            if lo is None:  # no non-null key: an equality on it matches no target row
                parts.append(InValues(tc, ()))
                continue
            if small:
                values = [r[0] for r in spark.sql(f"SELECT DISTINCT CAST(s.{ident(sc)} AS STRING) FROM {source_view} s "
                                                  f"WHERE s.{ident(sc)} IS NOT NULL").collect()]
                parts.append(InValues(tc, tuple(values)))
            else:
                parts.append(And((Compare(tc, ">=", lo), Compare(tc, "<=", hi))))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def merge_into(spark: SparkSession, lake: DuckLake, schema: str, table: str, source: object, on: str, *,
               matched: str | None = None, matched_set: dict[str, str] | None = None,
               not_matched_insert: bool = False, not_matched_by_source_delete: bool = False,
               author: str | None = None, commit_message: str | None = None,
               commit_extra_info: str | None = None) -> Snapshot | None:
    """MERGE INTO schema.table AS t USING source AS s ON <on>, as one snapshot, merge-on-read.

    matched: 'update' (SET from matched_set, or every column from s when None) or 'delete'; not_matched_insert
    inserts source rows matching no target row (columns by name); not_matched_by_source_delete deletes target rows
    no source row matches. Updated rows keep their row ids. Target files whose statistics exclude the ON terms or
    the source's keys are not read. None when nothing changed.

    Raises:
        MergeCardinalityError: a target row is matched by several source rows (nothing is committed).
        CommitConflictError: another writer changed the same files (or the table) meanwhile.
    """
    return _run(lake, _prov(author, commit_message, commit_extra_info),
                lambda tx: stage_merge(spark, tx, schema, table, source, on, matched=matched, matched_set=matched_set,
                                       not_matched_insert=not_matched_insert,
                                       not_matched_by_source_delete=not_matched_by_source_delete))


def stage_merge(spark: SparkSession, tx: Transaction, schema: str, table: str, source: object, on: str, *,
                matched: str | None = None, matched_set: dict[str, str] | None = None,
                not_matched_insert: bool = False, not_matched_by_source_delete: bool = False) -> Staged:
    """Stage MERGE INTO schema.table in tx (see merge_into)."""
    from .write import write_files

    info = tx.base.table(schema, table)
    src_view = f"__ducklake_merge_source_{uuid.uuid4().hex[:12]}"
    source.createOrReplaceTempView(src_view)  # type: ignore[attr-defined]
    table_dir = tx.base.table_path(info)
    done = Staged(table_dir=table_dir)
    try:
        with _removed_on_error(done):
            # every target row counts when unmatched target rows are deleted; otherwise only files that can match
            prune_by = None if not_matched_by_source_delete else merge_predicate(spark, src_view, info, on)
            target_sql = _target_rows_sql(tx.base, info, prune_by) or (
                "SELECT CAST(NULL AS BIGINT) AS __file, CAST(NULL AS BIGINT) AS __pos, CAST(NULL AS BIGINT) AS __rowid, "
                + ", ".join(f"{literal(None, c)} AS {ident(c.name)}" for c in info.columns) + " WHERE false")
            target = f"({target_sql})"
            cols = [c.name for c in info.columns]
            if matched:
                dup = spark.sql(f"SELECT t.__rowid FROM {target} t JOIN {src_view} s ON ({on}) "
                                "GROUP BY t.__file, t.__pos, t.__rowid HAVING count(*) > 1 LIMIT 1").collect()
                if dup:
                    raise MergeCardinalityError(
                        f"MERGE into {schema}.{table}: several source rows match the target row with rowid {dup[0][0]}; "
                        "each target row may be matched by at most one source row (nothing was changed)")
            deletes: list[tuple[int, int, int]] = []
            if matched == "delete":
                deletes += [tuple(r) for r in spark.sql(
                    f"SELECT DISTINCT t.__file, t.__pos, t.__rowid FROM {target} t JOIN {src_view} s ON ({on})").collect()]
            elif matched == "update":
                sets = matched_set or {c: f"s.{ident(c)}" for c in cols}
                exprs = ", ".join(f"({sets[c]}) AS {ident(c)}" if c in sets else f"t.{ident(c)}" for c in cols)
                upd = spark.sql(f"SELECT t.__file, t.__pos, t.__rowid, {exprs} FROM {target} t "
                                f"JOIN {src_view} s ON ({on})")
                hits = [tuple(r) for r in upd.select("__file", "__pos", "__rowid").collect()]
                if hits:
                    deletes += hits
                    done.files += write_files(spark, upd.drop("__file", "__pos"), info, table_dir, row_ids="__rowid")
            if not_matched_insert:
                ins = spark.sql(f"SELECT s.* FROM {src_view} s LEFT ANTI JOIN {target} t ON ({on})")
                done.files += write_files(spark, ins.select(*[ident(c) for c in cols]), info, table_dir)
            if not_matched_by_source_delete:
                deletes += [tuple(r) for r in spark.sql(
                    f"SELECT t.__file, t.__pos, t.__rowid FROM {target} t LEFT ANTI JOIN {src_view} s ON ({on})").collect()]
            _stage_deletes(tx, info, deletes)
            if done.files:
                tx.add_data_files(info.schema_name, info.name, done.files)
            done.changed = bool(deletes or done.files)
            return done
    finally:
        spark.catalog.dropTempView(src_view)
