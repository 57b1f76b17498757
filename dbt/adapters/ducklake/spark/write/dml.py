"""DML on DuckLake tables with Spark, merge-on-read: rows are found by Spark, deletes become delete files.

DELETE: Spark evaluates the condition over each live file (columns mapped as in the table's view) and yields the
positions of matching rows; the lake layer writes cumulative delete files (or ends files whose rows are all gone)
and deletes matching inlined rows, all in one snapshot. Only (file, position) pairs reach the driver, never rows.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from sqlglot import exp
from sqlglot.errors import ParseError

from ...lake.catalog.state import LakeState
from ...lake.faults import fault_point
from ...lake.read.inlined import read_inlined
from ...lake.read.pruning import And, Compare, InValues, Predicate, all_of
from ...lake.read.scan import plan_scan
from ...lake.records import Column, TableInfo
from ...lake.write.datafiles import DataFileSpec
from ...lake.write.transaction import Transaction
from ..env.session import is_classic
from ..read.predicates import column_ref, conjuncts, to_predicate, unparen
from ..read.scan import LOCATORS, target_rows_sql
from ..sql_literals import ident, literal, string_literal
from ..types import spark_schema
from .kept_rows import ATTEMPTS, computed_once, lost_kept_rows, note_retry
from .local_write import SMALL_RESULT_ROWS, arrow_type, driver_writable, write_collected
from .write import conformed_value

IDS = ("__file", "__pos", "__rowid")
_IDS_SCHEMA = pa.schema([(c, pa.int64()) for c in IDS])


def ids_of(rows: pa.Table) -> pa.Table:
    """The (__file, __pos, __rowid) columns of rows, as int64 (Arrow: a MERGE's hits can be millions of rows)."""
    return rows.select(list(IDS)).cast(_IDS_SCHEMA)


@dataclass(frozen=True)
class DeletePlan:
    """What a DELETE removes: (__file, __pos, __rowid) of the matching rows (ids_of); __file -1 = inlined row."""

    hits: pa.Table

    @property
    def empty(self) -> bool:
        return self.hits.num_rows == 0


def plan_delete(spark: SparkSession, state: LakeState, table: TableInfo, condition: str | None) -> DeletePlan:
    """Find the rows a DELETE ... WHERE condition removes (condition None = every row)."""
    target = _target_rows_sql(spark, state, table, delete_predicate(spark, table, condition))
    if target is None:
        return DeletePlan(_IDS_SCHEMA.empty_table())
    cond = condition if condition else "true"
    rows = spark.sql(target.ids(f"SELECT {target.locators('t')} FROM ({target.sql}) t WHERE ({cond})", []))
    return DeletePlan(ids_of(rows.toArrow()))


def _stage_deletes(tx: Transaction, info: TableInfo, hits: pa.Table) -> None:
    """Stage the deletion of rows found by ids_of: positions per data file, grouped in one vectorized sort (no Python
    object per row), then inlined rows (__file -1) by rowid."""
    if hits.num_rows == 0:
        return
    is_inlined = pc.equal(hits["__file"], -1)
    in_files = hits.filter(pc.invert(is_inlined))
    files, pos = in_files["__file"].to_numpy(), in_files["__pos"].to_numpy()
    order = np.lexsort((pos, files))
    files, pos = files[order], pos[order]
    if files.size:  # each data file's run of positions: from where its id starts to where the next one does
        starts = np.flatnonzero(np.r_[True, files[1:] != files[:-1]])
        for a, b in zip(starts.tolist(), np.r_[starts[1:], files.size].tolist(), strict=True):
            tx.delete_rows(info.schema_name, info.name, int(files[a]), pos[a:b])
    inlined_ids = hits.filter(is_inlined)["__rowid"]
    if len(inlined_ids):
        tx.delete_inlined_rows(info.schema_name, info.name, inlined_ids.to_pylist())



@dataclass
class Staged:
    """What a staged statement wrote (its transaction owns the files), whether it changed anything, and how many rows
    it deleted, updated or inserted (-1: not counted)."""

    files: list[DataFileSpec] = field(default_factory=list)
    changed: bool = False
    rows: int = 0

    def add(self, tx: Transaction, files: list[DataFileSpec], table_dir: str) -> None:
        """Files the statement wrote: the transaction owns them (removes them if it does not commit)."""
        tx.own_files([f.path for f in files], table_dir)
        self.files += files


def stage_delete(spark: SparkSession, tx: Transaction, schema: str, table: str, condition: str | None) -> Staged:
    """Stage DELETE FROM schema.table [WHERE condition] in tx (rows as of the transaction's base snapshot)."""
    info = tx.base.table(schema, table)
    plan = plan_delete(spark, tx.base, info, condition)
    if plan.empty:
        return Staged()
    _stage_deletes(tx, info, plan.hits)
    return Staged(changed=True, rows=len(plan.hits))


def stage_update(spark: SparkSession, tx: Transaction, schema: str, table: str, assignments: dict[str, str],
                 condition: str | None) -> Staged:
    """Stage UPDATE schema.table SET ... [WHERE condition] in tx."""
    from ...lake.errors import NoSuchColumnError
    from .write import write_files

    base, info, from_t = evolved_columns(tx, schema, table)
    names = {c.name.lower(): c.name for c in info.columns}
    for col in assignments:
        if col.lower() not in names:
            raise NoSuchColumnError(f"UPDATE of {schema}.{table}: no column {col!r} (columns: {list(names.values())})")
    sets = {names[k.lower()]: v for k, v in assignments.items()}
    cond = condition if condition else "true"
    new_values = ", ".join(f"({sets[c.name]}) AS {ident(c.name)}" if c.name in sets else f"{from_t[c.name]} AS "
                           f"{ident(c.name)}" for c in info.columns)
    target = _target_rows_sql(spark, tx.base, base, to_predicate(condition, base.columns, (None, "t")))
    if target is None:
        return Staged()
    matched = spark.sql(target.ids(f"SELECT {target.locators('t')}, {new_values} FROM ({target.sql}) t WHERE ({cond})",
                                   [ident(c.name) for c in info.columns]))
    hits = ids_of(matched.select(*IDS).toArrow())  # ids only, never row values
    if not hits.num_rows:
        return Staged()
    table_dir = tx.table_path(info)
    done = Staged(changed=True, rows=hits.num_rows)
    done.add(tx, write_files(spark, matched.drop("__file", "__pos"), info, table_dir, row_ids="__rowid",
                                  options=tx.write_options(info)), table_dir)
    _stage_deletes(tx, base, hits)
    tx.add_data_files(info.schema_name, info.name, done.files)
    return done


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


def stage_truncate(tx: Transaction, schema: str, table: str) -> Staged:
    info = tx.base.table(schema, table)
    _remove_all(tx, tx.base, info)
    return Staged(changed=not tx.is_empty, rows=-1)


def stage_insert_overwrite(spark: SparkSession, tx: Transaction, schema: str, table: str, df: object, *,
                           dynamic_partitions: bool = False) -> Staged:
    from .write import write_files

    base, info = tx.base.table(schema, table), tx.table(schema, table)
    if dynamic_partitions and info.partition is None:
        raise ValueError(f"{schema}.{table} is not partitioned: dynamic partition overwrite needs a partitioned table")
    table_dir = tx.table_path(info)
    done = Staged()
    done.add(tx, write_files(spark, df, info, table_dir, options=tx.write_options(info)), table_dir)  # type: ignore[arg-type]
    if dynamic_partitions:
        assert info.partition is not None
        written = {f.partition_values for f in done.files}
        pid = info.partition.partition_id
        # files of the current spec in a written partition go; files of older specs cannot be matched, so stay
        _remove_all(tx, tx.base, base, keep=lambda f: f.partition_id != pid or tuple(f.partition_values) not in written)
    else:
        _remove_all(tx, tx.base, base)
    if done.files:
        tx.add_data_files(info.schema_name, info.name, done.files)
    done.changed = not tx.is_empty
    done.rows = sum(f.record_count for f in done.files)  # rows inserted (dbt's INSERT OVERWRITE count)
    return done


class MergeCardinalityError(ValueError):
    """A MERGE whose source has several rows matching one target row."""


MERGE_BROADCAST_ROWS = 2_000_000  # a MERGE source of at most this many rows is broadcast to the target's tasks


def _check_cardinality(ids: pa.Table, schema: str, table: str) -> None:
    """Raise MergeCardinalityError when a target row (file, position, rowid) is among the hits more than once."""
    if ids.num_rows < 2:
        return
    counts = ids.group_by(["__file", "__pos", "__rowid"]).aggregate([([], "count_all")])
    dup = counts.filter(pc.greater(counts["count_all"], 1))
    if dup.num_rows:
        raise MergeCardinalityError(
            f"MERGE into {schema}.{table}: several source rows match the target row with rowid "
            f"{dup['__rowid'][0].as_py()}; each target row may be matched by at most one source row (nothing was "
            "changed)")


@dataclass(frozen=True)
class TargetRows:
    """Live rows of a DML target: `sql` yields scan.LOCATORS (data file id, -1 for inlined rows; position; row id)
    then the table's columns; `ids` names them (__file, __pos, __rowid)."""

    sql: str

    @staticmethod
    def locators(alias: str) -> str:
        return ", ".join(f"{alias}.{c}" for c in LOCATORS)

    def ids(self, query: str, columns: list[str]) -> str:
        """query (rows of `sql` with their LOCATORS, plus columns) as __file, __pos, __rowid, columns."""
        file, pos, rid = LOCATORS
        rest = "".join(f", h.{c}" for c in columns)
        return (f"SELECT CAST(h.{file} AS BIGINT) AS __file, CAST(h.{pos} AS BIGINT) AS __pos, "
                f"CAST(h.{rid} AS BIGINT) AS __rowid{rest} FROM ({query}) h")


def _target_rows_sql(spark: SparkSession, state: LakeState, info: TableInfo,
                     predicate: Predicate | None = None) -> TargetRows | None:
    """Live target rows with their locators (see TargetRows); None when the table has no row.

    With a predicate, files whose statistics exclude it are left out (inlined rows are always in).
    """
    plan = plan_scan(state, info, predicate, positions=False)
    parts = target_rows_sql(spark, state, info, plan)
    rows = [r for t in read_inlined(state, info, with_rowid=True) for r in t.to_pylist()]
    if rows:
        cols = ", ".join(ident(c.name) for c in info.columns)
        values = ", ".join(
            "(" + ", ".join([f"CAST({r['rowid']} AS BIGINT)"] + [literal(r[c.name], c) for c in info.columns]) + ")"
            for r in rows
        )
        file, pos, rid = LOCATORS  # inlined rows: no file (-1), their row ids as stored
        parts.append(f"SELECT CAST(-1 AS BIGINT) AS {file}, CAST(-1 AS BIGINT) AS {pos}, "
                     f"__rowid AS {rid}, {cols} FROM VALUES {values} AS v(__rowid, {cols})")
    if not parts:
        return None
    return TargetRows("\nUNION ALL\n".join(parts))


def live_rows(spark: SparkSession, state: LakeState, info: TableInfo) -> TargetRows | None:
    """A table's live rows with their locators (see TargetRows); None when it has no row."""
    return _target_rows_sql(spark, state, info)


def _no_rows(info: TableInfo) -> TargetRows:
    """An empty target (no file, no inlined row) with the columns of _target_rows_sql."""
    nulls = ", ".join([f"CAST(NULL AS BIGINT) AS {c}" for c in LOCATORS]
                      + [f"{literal(None, c)} AS {ident(c.name)}" for c in info.columns])
    return TargetRows(f"SELECT {nulls} WHERE false")


MAX_KEY_LIST = 1000  # a source with at most this many rows prunes target files by its key values, not just their range
_INTEGRAL = frozenset({"tinyint", "smallint", "int", "bigint"})


def _comparable(col: Column | None, src_type: str | None) -> bool:
    """Whether source values of src_type can prune a target column by its stats: both sides of the same type (or both
    integers), so Spark compares them as the stats do; binary never (its STRING cast is not the stats' hex)."""
    from ..types import to_spark

    if col is None or src_type is None or col.is_nested:
        return False
    t_type = to_spark(col).simpleString()
    same = t_type == src_type or (t_type in _INTEGRAL and src_type in _INTEGRAL)
    return same and src_type != "binary"


def bounds_sql(relation: str, keys: list[tuple[str, str]], unique: Sequence[str] = ()) -> str:
    """The row key_bounds needs: count(*), then min and max (as strings) of each key's source column; with `unique`
    columns, then the count of rows with none of them NULL and the count of their distinct combinations."""
    aggs = "".join(f", CAST(min(s.{ident(sc)}) AS STRING), CAST(max(s.{ident(sc)}) AS STRING)" for _, sc in keys)
    if unique:
        cols = ", ".join(f"s.{ident(c)}" for c in unique)
        aggs += f", count_if({' AND '.join(f's.{ident(c)} IS NOT NULL' for c in unique)}), count(DISTINCT {cols})"
    return f"SELECT count(*){aggs} FROM {relation} s"


def _key_column(term: exp.Expr) -> str | None:
    """The source column of an ON term t.<col> = s.<col> (either way round); None for any other term."""
    if not isinstance(term, exp.EQ):
        return None
    a, b = column_ref(term.this), column_ref(term.expression)
    if a is None or b is None:
        return None
    if (a[0] or "").lower() == "s":
        a, b = b, a
    return b[1] if (a[0] or "").lower() == "t" and (b[0] or "").lower() == "s" else None


def merge_equality_columns(on: str) -> list[str]:
    """The source columns of the ON condition's equalities t.<col> = s.<col> (a MERGE's key)."""
    out = []
    for term in conjuncts(on):
        col = _key_column(term)
        if col is not None and col not in out:
            out.append(col)
    return out


def matched_by_keys_alone(on: str) -> bool:
    """Whether the ON condition's key equalities (merge_equality_columns) alone decide which target rows a source row
    matches: every other term names no source column. Then two source rows with the same key match the same target
    rows: both matched (the target join's cardinality check sees them) or both unmatched."""
    try:
        terms = conjuncts(on)
    except ParseError:
        return False
    keys = 0
    for term in terms:
        if _key_column(term) is not None:
            keys += 1
            continue
        if any((c.table or "").lower() != "t" for c in term.find_all(exp.Column)):
            return False
        if any(isinstance(f, (exp.Rand, exp.Randn, exp.Uuid)) for f in term.find_all(exp.Func)):
            return False
    return keys > 0


def _refuse_repeated_keys(spark: SparkSession, relation: str, columns: list[str], schema: str, table: str) -> None:
    """MergeCardinalityError naming the first repeated keys of a MERGE source (whether or not the target has them:
    a key must identify one row, else the target's rows would depend on which duplicate wins or both be inserted).
    Returns when the source repeats no key."""
    cols = ", ".join(f"s.{ident(c)}" for c in columns)
    rows = spark.sql(f"SELECT {cols}, count(*) AS n FROM {relation} s WHERE "
                     f"{' AND '.join(f's.{ident(c)} IS NOT NULL' for c in columns)} GROUP BY {cols} "
                     f"HAVING count(*) > 1 ORDER BY n DESC LIMIT 5").collect()
    if not rows:
        return
    shown = "; ".join(", ".join(f"{c}={r[i]!r}" for i, c in enumerate(columns)) + f" ({r[-1]} rows)" for r in rows)
    raise MergeCardinalityError(
        f"MERGE into {schema}.{table}: the source repeats keys ({', '.join(columns)}): {shown}; a merge key must be "
        "unique in the source (nothing was changed)")


def key_bounds(spark: SparkSession, relation: str, keys: list[tuple[str, str]], row: tuple | None = None,
               values: bool = True) -> list[Predicate]:
    """For each (target column, source column) key pair, the target rows a key of `relation` (a SQL relation) can
    equal: its values when the relation is small (MAX_KEY_LIST rows) and `values`, else its [min, max] range. row:
    the result of bounds_sql, when the caller has it."""
    if not keys:
        return []
    if row is None:
        row = tuple(spark.sql(bounds_sql(relation, keys)).collect()[0])
    small = values and row[0] <= MAX_KEY_LIST
    parts: list[Predicate] = []
    for i, (tc, sc) in enumerate(keys):
        lo, hi = row[1 + 2 * i], row[2 + 2 * i]
        if lo is None:  # no non-null key: an equality on it matches no target row
            parts.append(InValues(tc, ()))
        elif small:
            listed = [r[0] for r in spark.sql(f"SELECT DISTINCT CAST(s.{ident(sc)} AS STRING) FROM {relation} s "
                                              f"WHERE s.{ident(sc)} IS NOT NULL").collect()]
            parts.append(InValues(tc, tuple(listed)))
        else:
            parts.append(And((Compare(tc, ">=", lo), Compare(tc, "<=", hi))))
    return parts


def key_range_sql(info: TableInfo, keys: list[tuple[str, str]], row: tuple, alias: str = "t") -> str | None:
    """A filter on the target's rows that a MERGE's key equalities can match, from bounds_sql's row: each integer
    or string key column between the source keys' min and max (None: no such key). Unlike file pruning (catalog
    statistics), Spark pushes it into the Parquet reader, which skips the row groups whose statistics exclude it: a
    source of clustered keys reads the target's row groups it can hit, not the whole of every file it can hit."""
    from ..types import to_spark

    by_name = {c.name: c for c in info.columns}
    terms = []
    for i, (tc, _sc) in enumerate(keys):
        lo, hi = row[1 + 2 * i], row[2 + 2 * i]
        t_type = to_spark(by_name[tc]).simpleString()
        if lo is None:
            return "false"  # no non-null source key: the equality matches no target row
        if t_type in _INTEGRAL:
            a, b = str(int(lo)), str(int(hi))
        elif t_type == "string":
            a, b = string_literal(lo), string_literal(hi)
        else:
            continue
        terms.append(f"{alias}.{ident(tc)} >= {a} AND {alias}.{ident(tc)} <= {b}")
    return " AND ".join(terms) or None


def merge_keys(spark: SparkSession, source_view: str, info: TableInfo, on: str) -> list[tuple[str, str]]:
    """The (target column, source column) pairs of the ON condition's equalities t.<col> = s.<col> whose sides have
    the same type (or both are integers), so that Spark compares source values as the target's stats do."""
    src_types = {f.name.lower(): f.dataType.simpleString() for f in spark.table(source_view).schema.fields}
    target = {c.name.lower(): c for c in info.columns}
    keys: list[tuple[str, str]] = []
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
        col = target.get(a[1].lower())
        if _comparable(col, src_types.get(b[1].lower())):
            keys.append((col.name, b[1]))  # type: ignore[union-attr]
    return keys


def merge_predicate(spark: SparkSession, source_view: str, info: TableInfo, on: str,
                    keys: list[tuple[str, str]] | None = None, bounds: tuple | None = None, *,
                    values: bool = True) -> Predicate | None:
    """What the target rows a MERGE can match must satisfy, for file pruning.

    From the ON condition: its terms on target columns and literals (e.g. incremental predicates), and for each
    key pair (merge_keys), the source keys' range (their values too, when the source is small and `values`). keys
    and bounds (bounds_sql's row): when the caller has them.
    """
    parts: list[Predicate] = []
    own = to_predicate(on, info.columns, ("t",))
    if own is not None:
        parts.append(own)
    if keys is None:
        keys = merge_keys(spark, source_view, info, on)
    parts += key_bounds(spark, source_view, keys, bounds, values)
    return all_of(parts)


def delete_predicate(spark: SparkSession, info: TableInfo, condition: str | None) -> Predicate | None:
    """What the rows a DELETE removes must satisfy, for file pruning: the condition's terms on literals, and for a
    term `col IN (SELECT ...)` or `(a, b) IN (SELECT ...)` (dbt's delete+insert), the subquery's values or range."""
    if not condition:
        return None
    parts: list[Predicate] = []
    own = to_predicate(condition, info.columns, (None, "t"))
    if own is not None:
        parts.append(own)
    target = {c.name.lower(): c for c in info.columns}
    try:
        terms = conjuncts(condition)
    except (ParseError, ValueError):
        return all_of(parts)
    for term in map(unparen, terms):
        query = term.args.get("query") if isinstance(term, exp.In) else None
        if query is None:
            continue
        lhs = unparen(term.this)
        refs = [column_ref(x) for x in (lhs.expressions if isinstance(lhs, exp.Tuple) else [lhs])]
        if any(r is None or (r[0] or "t").lower() != "t" for r in refs):
            continue
        sub = (query.this if isinstance(query, exp.Subquery) else query).sql(dialect="spark")
        aliases = [f"__k{i}" for i in range(len(refs))]
        relation = f"(SELECT * FROM ({sub}) AS __q({', '.join(aliases)}))"
        try:
            types = [f.dataType.simpleString() for f in spark.sql(f"SELECT * FROM {relation}").schema.fields]
        except Exception:  # noqa: BLE001 - a correlated or invalid subquery: Spark reports it when the DELETE runs
            continue
        keys = [(target[r[1].lower()].name, a) for r, a, t in zip(refs, aliases, types, strict=False)  # type: ignore[index]
                if _comparable(target.get(r[1].lower()), t)]  # type: ignore[index]
        parts += key_bounds(spark, relation, keys)
    return all_of(parts)


@dataclass(frozen=True)
class When:
    """One WHEN clause of a MERGE: `when` is matched | not_matched | not_matched_by_source; `action` update | delete |
    insert; `condition` the clause's AND condition (Spark SQL on t and s), None = always; `assignments` column -> Spark
    SQL (None = every column from s, for update); `columns` the INSERT column list (empty = every column, by name)."""

    when: str
    action: str
    condition: str | None = None
    assignments: dict[str, str] | None = None
    columns: tuple[str, ...] = ()


def clauses_of(matched: str | None = None, matched_set: dict[str, str] | None = None, not_matched_insert: bool = False,
               not_matched_by_source_delete: bool = False) -> list[When]:
    """The clause list of the simple keyword form of merge_into."""
    out = []
    if matched:
        out.append(When("matched", matched, None, matched_set))
    if not_matched_insert:
        out.append(When("not_matched", "insert"))
    if not_matched_by_source_delete:
        out.append(When("not_matched_by_source", "delete"))
    return out


def evolved_columns(tx: Transaction, schema: str, table: str) -> tuple[TableInfo, TableInfo, dict[str, str]]:
    """The table as committed (rows are read with it) and as this transaction has it (rows are written with it: an
    ALTER staged before the DML adds, drops, renames or widens columns), and for each staged column the Spark SQL
    giving its value from a committed row `t` (NULL for an added column)."""
    from ..types import to_spark

    base, now = tx.base.table(schema, table), tx.table(schema, table)
    by_id = {c.column_id: c for c in base.columns}
    out = {}
    for c in now.columns:
        old = by_id.get(c.column_id)
        spark_type = to_spark(c).simpleString()
        if old is None:
            out[c.name] = f"CAST(NULL AS {spark_type})"
        elif old.type != c.type:
            out[c.name] = f"CAST(t.{ident(old.name)} AS {spark_type})"
        else:
            out[c.name] = f"t.{ident(old.name)}"
    return base, now, out


def _small(df: object) -> bool:
    """Whether Spark estimates the DataFrame small (classic sessions; local_write.SMALL_RESULT_BYTES): its keys are
    then counted with the source's bounds, in the job that keeps it, rather than after the target join in a job of
    their own. A wrong estimate costs time, never a result: both ways refuse the same repeated keys."""
    from .local_write import SMALL_RESULT_BYTES, estimated_bytes

    size = estimated_bytes(df)
    return size is not None and size <= SMALL_RESULT_BYTES


def _first(conds: list[str | None]) -> str:
    """CASE giving the index of the first clause whose condition holds (-1: none)."""
    if not conds:
        return "-1"
    return "CASE " + " ".join(f"WHEN coalesce(({c or 'true'}), false) THEN {i}" for i, c in enumerate(conds)) + \
        " ELSE -1 END"


def _values(clauses: list[When], idx: str, cols: list[str], default: dict[str, str], source: bool) -> list[str]:
    """Each column's new value, an expression without an alias (see _as_columns): per clause (idx: the SQL giving the
    index of the clause that applies), its assignment (or s.col for SET * / INSERT), else default."""
    out = []
    for c in cols:
        cases = []
        for i, w in enumerate(clauses):
            if w.action == "delete":
                continue
            if w.action == "insert":
                listed = {x.lower() for x in w.columns}
                if not listed or c.lower() in listed:
                    cases.append((i, f"s.{ident(c)}"))
                continue
            sets = {k.lower(): v for k, v in (w.assignments or {}).items()} if w.assignments is not None else None
            if sets is None and source:
                cases.append((i, f"s.{ident(c)}"))
            elif sets is not None and c.lower() in sets:
                cases.append((i, f"({sets[c.lower()]})"))
        base = default.get(c, "NULL")
        if not cases:
            out.append(base)
        elif len(cases) == 1 and len([w for w in clauses if w.action != "delete"]) == 1:
            out.append(cases[0][1])
        else:
            out.append("CASE " + " ".join(f"WHEN ({idx}) = {i} THEN {e}" for i, e in cases) + f" ELSE {base} END")
    return out


def _as_columns(values: list[str], cols: list[str]) -> list[str]:
    """_values' expressions named as the table's columns."""
    return [f"{v} AS {ident(c)}" for v, c in zip(values, cols, strict=True)]


VALID_CLAUSES = frozenset({("matched", "update"), ("matched", "delete"), ("not_matched", "insert"),
                           ("not_matched_by_source", "update"), ("not_matched_by_source", "delete")})


def check_clauses(schema: str, table: str, clauses: Sequence[When]) -> None:
    """Raises ValueError for a WHEN clause MERGE does not have (e.g. WHEN NOT MATCHED THEN DELETE)."""
    for w in clauses:
        if (w.when, w.action) not in VALID_CLAUSES:
            raise ValueError(f"MERGE INTO {schema}.{table}: WHEN {w.when.replace('_', ' ').upper()} THEN "
                             f"{w.action.upper()} is not a valid clause")


def merged_rows_sql(spark: SparkSession, target: str, source: str, cols: list[str], on: str, clauses: list[When],
                    schema: str, table: str) -> str:
    """The SELECT giving every row of a MERGE's result, from the target's rows (the view `target`, its columns
    `cols`) and the source's (the view `source`): for a target whose rows are all rewritten (a table created in the
    same transaction, see LakeWork). Checks the source's keys and the matches as stage_merge does.

    Raises:
        MergeCardinalityError: the source repeats a key, or a target row is matched by several source rows.
    """
    check_clauses(schema, table, clauses)
    matched = [w for w in clauses if w.when == "matched"]
    inserts = [w for w in clauses if w.when == "not_matched"]
    by_source = [w for w in clauses if w.when == "not_matched_by_source"]
    unique = merge_equality_columns(on) if (matched or inserts) else []
    if unique:
        row = spark.sql(bounds_sql(source, [], unique)).collect()[0]
        if row[-2] != row[-1]:
            _refuse_repeated_keys(spark, source, unique, schema, table)
    if matched:
        pairs, rows = spark.sql(f"SELECT (SELECT count(*) FROM {target} t JOIN {source} s ON ({on})), "
                                f"(SELECT count(*) FROM {target} t LEFT SEMI JOIN {source} s ON ({on}))").collect()[0]
        if pairs > rows:
            raise MergeCardinalityError(f"MERGE into {schema}.{table}: several source rows match one target row; "
                                        "each target row may be matched by at most one source row (nothing was "
                                        "changed)")
    old = [f"t.{ident(c)}" for c in cols]
    keep = {c: f"t.{ident(c)}" for c in cols}
    parts = []

    def acted(whens: list[When], join: str, source_values: bool) -> None:
        """Rows of `join` (a FROM ... clause): unchanged where no clause applies, new values where an update
        applies, none where a delete applies."""
        if not whens:
            parts.append(f"SELECT {', '.join(old)} {join}")
            return
        idx = _first([w.condition for w in whens])
        upd = [str(i) for i, w in enumerate(whens) if w.action == "update"]
        parts.append(f"SELECT {', '.join(old)} {join} WHERE ({idx}) = -1")
        if upd:
            new = _as_columns(_values(whens, idx, cols, keep, source_values), cols)
            parts.append(f"SELECT {', '.join(new)} {join} WHERE ({idx}) IN ({', '.join(upd)})")

    acted(matched, f"FROM {target} t {'JOIN' if matched else 'LEFT SEMI JOIN'} {source} s ON ({on})", True)
    acted(by_source, f"FROM {target} t LEFT ANTI JOIN {source} s ON ({on})", False)
    if inserts:
        idx = _first([w.condition for w in inserts])
        parts.append(f"SELECT {', '.join(_as_columns(_values(inserts, idx, cols, {}, source=True), cols))} FROM {source} s "
                     f"LEFT ANTI JOIN {target} t ON ({on}) WHERE ({idx}) >= 0")
    return "\nUNION ALL\n".join(parts)


def _source_columns(sql_texts: Sequence[str], allowed: frozenset[str]) -> set[str] | None:
    """The source columns that these Spark SQL texts read, when each column they name is qualified with
    one of the `allowed` aliases (`s`: the MERGE source, `t`: its target); None when one names another or an
    unqualified column, or a text does not parse."""
    import sqlglot

    needed: set[str] = set()
    for text in sql_texts:
        try:
            tree = sqlglot.parse_one(text, read="spark")
        except ParseError:
            return None
        for col in tree.find_all(exp.Column):
            alias = (col.table or "").lower()
            if alias not in allowed:
                return None
            if alias == "s":
                needed.add(col.name)
    return needed


def _keys_only(on: str, matched: list[When], new: list[str], by_source: list[When]) -> set[str] | None:
    """The source columns the target join needs when a MERGE's matched rows take their new values from the source
    alone (one unconditional UPDATE whose values name only `s` columns, no NOT MATCHED BY SOURCE clause): then the
    join carries the source's keys and row numbers only, and the updated rows are made from the source by row
    number. None otherwise (the join carries every new value)."""
    if by_source or len(matched) != 1 or matched[0].action != "update" or matched[0].condition is not None:
        return None
    if _source_columns(new, frozenset({"s"})) is None:
        return None
    return _source_columns([on], frozenset({"s", "t"}))


@contextlib.contextmanager
def source_view(source: object) -> Iterator[str]:
    """A MERGE source as a temporary view, computed once (its rows cannot differ between the passes)."""
    name = f"__ducklake_merge_source_{uuid.uuid4().hex[:12]}"
    with computed_once(source) as df:  # type: ignore[arg-type]
        df.createOrReplaceTempView(name)
        try:
            yield name
        finally:
            df.sparkSession.catalog.dropTempView(name)


def stage_merge(spark: SparkSession, tx: Transaction, schema: str, table: str, source: object, on: str,
                clauses: list[When]) -> Staged:
    """Stage MERGE INTO schema.table in tx (see merge_into).

    The source is materialized once (its query runs once, and its rows cannot differ between the passes), the target
    is joined with it once, and only the matched rows are kept for the update, delete and insert passes. When the
    kept source is lost with an executor, the statement runs again from the start (see kept_rows): the files the
    failed run wrote are removed, and nothing of it was staged yet.
    """
    small = _stage_small_merge(spark, tx, schema, table, source, on, clauses)
    if small is not None:
        return small
    for attempt in range(1, ATTEMPTS + 1):
        mark = tx.owned_mark()
        try:
            return _stage_merge_once(spark, tx, schema, table, source, on, clauses, replicated=attempt > 1)
        except Exception as e:
            if attempt == ATTEMPTS or not lost_kept_rows(e):
                raise
            tx.discard_owned_since(mark)
            note_retry(f"MERGE INTO {schema}.{table}", attempt)
    raise AssertionError("unreachable")


# A small MERGE's one join reads its whole target: it has no source keys to prune files by (listing them is the job it
# saves). Bounded in rows and in files, that read costs less than the job; a larger target goes the way of the passes,
# which read only the files the source's keys can match.
SMALL_MERGE_TARGET_ROWS = 100_000
SMALL_MERGE_TARGET_FILES = 64


def _stage_small_merge(spark: SparkSession, tx: Transaction, schema: str, table: str, source: object, on: str,
                       clauses: list[When]) -> Staged | None:
    """A MERGE of a small source into a small target in ONE Spark job (None when it is not such a merge).

    The passes of _stage_merge_once (the source's bounds, the target join, the updated rows, the inserted rows) are
    each a Spark job, 0.05-0.25 s apiece on a warm driver: most of a small incremental run. Here one query joins
    each source row (with the count of source rows sharing its key) to the target rows it matches, and yields per
    row its locators, the clause that applies and the values of the row it writes (conformed to the table's types
    as the writer conforms them); the driver checks the keys and the matches as the passes do, and writes the
    updated and the inserted rows (local_write). The source is read once, so no kept copy is needed, and the target
    is read whole (see SMALL_MERGE_TARGET_ROWS). A result larger than the driver's bound, or a table the driver
    cannot write, goes the way of the passes.
    """
    if not is_classic(spark) or any(w.when == "not_matched_by_source" for w in clauses):
        return None
    check_clauses(schema, table, clauses)
    base, info, from_t = evolved_columns(tx, schema, table)
    if not driver_writable(info) or not _small(source):
        return None
    files = tx.base.files(base)
    if len(files) > SMALL_MERGE_TARGET_FILES or sum(f.record_count for f in files) > SMALL_MERGE_TARGET_ROWS:
        return None
    matched = [w for w in clauses if w.when == "matched"]
    inserts = [w for w in clauses if w.when == "not_matched"]
    upd = [i for i, w in enumerate(matched) if w.action == "update"]
    acted = [i for i, w in enumerate(matched) if w.action in ("update", "delete")]
    cols = [c.name for c in info.columns]
    rows_of = _target_rows_sql(spark, tx.base, base) or _no_rows(base)
    hit = f"t.{LOCATORS[2]} IS NOT NULL"  # a target row's id is never NULL: NULL = no target row matched
    midx = f"(CASE WHEN {hit} THEN {_first([w.condition for w in matched])} ELSE -1 END)"
    iidx = f"(CASE WHEN {hit} THEN -1 ELSE {_first([w.condition for w in inserts])} END)"

    # both kinds of new row share the joined row: their values are named __u0, __u1, ... and __v0, __v1, ...
    new = [f"{v} AS __u{i}" for i, v in enumerate(_values(matched, midx, cols, from_t, source=True))] if upd else []
    ins = [f"{v} AS __v{i}" for i, v in enumerate(_values(inserts, iidx, cols, {}, source=True))] if inserts else []
    unique = merge_equality_columns(on)
    # as bounds_sql counts them: source rows whose key has no NULL, per key
    rep = (f"CASE WHEN {' AND '.join(f'{ident(c)} IS NOT NULL' for c in unique)} THEN count(*) OVER (PARTITION BY "
           f"{', '.join(ident(c) for c in unique)}) ELSE 1 END" if unique else "1")
    src_view = f"__ducklake_merge_source_{uuid.uuid4().hex[:12]}"
    source.createOrReplaceTempView(src_view)  # type: ignore[attr-defined]
    where = f"table {info.schema_name}.{info.name}"
    try:
        extra = ["__rep", "__m", "__i", *[f"__u{i}" for i in range(len(new))], *[f"__v{i}" for i in range(len(ins))]]
        query = rows_of.ids(
            f"SELECT {rows_of.locators('t')}, s.__rep, {midx} AS __m, {iidx} AS __i{''.join(', ' + v for v in new + ins)}"
            f" FROM (SELECT *, {rep} AS __rep FROM {src_view}) s LEFT JOIN ({rows_of.sql}) t ON ({on})", extra)
        try:
            joined = spark.sql(query)
            types_of = {f.name: f.dataType for f in joined.schema.fields}
            target = spark_schema(info.columns)
            values = []
            for i, field in enumerate(target.fields):
                value = None
                if upd:
                    value = F.when(F.col("__m").isin(upd), conformed_value(
                        F.col(f"__u{i}"), types_of[f"__u{i}"], field, f"{where} column {field.name!r}"))
                if inserts:
                    cond = F.col("__i") >= 0
                    insert = conformed_value(F.col(f"__v{i}"), types_of[f"__v{i}"], field,
                                             f"{where} column {field.name!r}")
                    value = F.when(cond, insert) if value is None else value.when(cond, insert)
                values.append((F.lit(None).cast(field.dataType) if value is None else value).alias(field.name))
            rows = joined.select(*values, *IDS, "__rep", "__m", "__i")
            types = [arrow_type(f.dataType) for f in rows.schema.fields[:len(values)]]
        except AnalysisException:
            return None  # the passes report it as they do
        if any(t is None for t in types):
            return None
        got = rows.limit(SMALL_RESULT_ROWS + 1).toArrow()
        if got.num_rows > SMALL_RESULT_ROWS:
            return None
        if unique and got.num_rows and pc.max(got["__rep"]).as_py() > 1:
            _refuse_repeated_keys(spark, src_view, unique, schema, table)
            raise MergeCardinalityError(f"MERGE into {schema}.{table}: the source repeats keys "
                                        f"({', '.join(unique)}); a merge key must be unique in the source (nothing "
                                        "was changed)")
        matches = got.filter(pc.is_valid(got["__rowid"]))
        _check_cardinality(matches, schema, table)
        done = Staged()
        table_dir = tx.table_path(info)
        options = tx.write_options(info)
        n = len(values)
        written = [t for t in types if t is not None]
        if upd:
            post = matches.filter(pc.is_in(matches["__m"], value_set=pa.array(upd, matches["__m"].type)))
            if post.num_rows:
                data = pa.Table.from_arrays([*post.columns[:n], post["__rowid"]], names=[*cols, "__rowid"])
                done.add(tx, write_collected(info, table_dir, data, [*written, pa.int64()], True, options),
                         table_dir)
        if inserts:
            new_rows = got.filter(pc.and_(pc.invert(pc.is_valid(got["__rowid"])), pc.greater_equal(got["__i"], 0)))
            if new_rows.num_rows:
                data = pa.Table.from_arrays(new_rows.columns[:n], names=cols)
                inserted = write_collected(info, table_dir, data, written, False, options)
                done.add(tx, inserted, table_dir)
                done.rows += sum(f.record_count for f in inserted)
        gone = ids_of(matches.filter(pc.is_in(matches["__m"], value_set=pa.array(acted, matches["__m"].type))))
        _stage_deletes(tx, base, gone)
        if done.files:
            tx.add_data_files(info.schema_name, info.name, done.files)
        done.changed = bool(gone.num_rows or done.files)
        done.rows += gone.num_rows
        return done
    finally:
        spark.catalog.dropTempView(src_view)


def _stage_merge_once(spark: SparkSession, tx: Transaction, schema: str, table: str, source: object, on: str,
                      clauses: list[When], *, replicated: bool) -> Staged:
    from pyspark import StorageLevel

    from .write import write_files

    check_clauses(schema, table, clauses)
    base, info, from_t = evolved_columns(tx, schema, table)
    cols = [c.name for c in info.columns]
    matched = [w for w in clauses if w.when == "matched"]
    inserts = [w for w in clauses if w.when == "not_matched"]
    by_source = [w for w in clauses if w.when == "not_matched_by_source"]
    tag = uuid.uuid4().hex[:12]
    src_view, hit_view = f"__ducklake_merge_source_{tag}", f"__ducklake_merge_hits_{tag}"
    unmatched_view = f"__ducklake_merge_unmatched_{tag}"
    kept = contextlib.ExitStack()
    # the source rows and their numbers, the same in every pass
    src = kept.enter_context(computed_once(source.withColumn("__src_row", F.monotonically_increasing_id()),  # type: ignore[attr-defined]
                                          replicated=replicated))
    src.createOrReplaceTempView(src_view)
    table_dir = tx.table_path(info)
    done = Staged()
    unmatched_df = None
    try:
        # every target row counts when unmatched target rows change; otherwise only files that can match
        keys = [] if by_source else merge_keys(spark, src_view, base, on)
        unique = merge_equality_columns(on) if (matched or inserts) else []
        # when the keys alone decide the matches, a repeated key among matched rows fails the cardinality check, so
        # only the unmatched rows' keys are counted (after the target join: a count(DISTINCT) of every source key
        # is a shuffle of the whole source)
        unmatched_unique = unique if matched and matched_by_keys_alone(on) and not _small(source) else []
        # one job materializes the source now (the passes below read the same rows), bounds its keys and
        # counts its distinct keys
        bounds = tuple(spark.sql(bounds_sql(src_view, keys, [] if unmatched_unique else unique)).collect()[0])
        n_source = bounds[0]
        fault_point("merge_source_kept")
        if unique and not unmatched_unique and bounds[-2] != bounds[-1]:
            _refuse_repeated_keys(spark, src_view, unique, schema, table)
        # a target of one file: the source's key values can prune no more than their range does (unless every key
        # falls in a gap of the file's range), and listing them is a Spark job
        prune_by = None if by_source else merge_predicate(spark, src_view, base, on, keys, bounds,
                                                          values=len(tx.base.files(base)) > 1)
        key_range = key_range_sql(base, keys, bounds) if keys else None
        rows_of = _target_rows_sql(spark, tx.base, base, prune_by) or _no_rows(base)
        target = f"({rows_of.sql})"
        # a small source is sent to every task (the target is never shuffled), whatever Spark estimates its size
        hint = "/*+ BROADCAST(s) */ " if n_source <= MERGE_BROADCAST_ROWS else ""
        deletes: list[pa.Table] = []  # ids_of the target rows deleted or updated
        matched_rows = None
        few_hits = False  # the matched rows are few enough to be sent to every task
        if matched or inserts:
            idx = _first([w.condition for w in matched])
            values = _values(matched, idx, cols, from_t, source=True) if matched else []
            new = _as_columns(values, cols) if matched else []  # no WHEN MATCHED (skip_matched_step): nothing updated
            keys_only = _keys_only(on, matched, values, by_source)
            joined = src_view if keys_only is None else \
                f"(SELECT {', '.join(ident(c) for c in sorted(keys_only | {'__src_row'}))} FROM {src_view})"
            carried = new if keys_only is None else []  # else the updated rows are made from the source below
            # kept as a checkpoint, not cached: the passes below never matched a cache of this plan (Spark planned
            # the target's scan and join again in each of them)
            hits_df = kept.enter_context(computed_once(spark.sql(rows_of.ids(
                f"SELECT {hint}{rows_of.locators('t')}, s.__src_row, {idx} AS __clause"
                f"{''.join(', ' + v for v in carried)} FROM {target} t JOIN {joined} s ON ({on})"
                f"{f' WHERE {key_range}' if key_range else ''}",
                ["__src_row", "__clause", *([ident(c) for c in cols] if carried else [])])), replicated=replicated))
            hits_df.createOrReplaceTempView(hit_view)
            if matched:
                # one job joins, caches the hits and brings their ids (as Arrow) for the checks and the deletes
                ids = hits_df.select(*IDS, "__clause").toArrow()
                try:
                    _check_cardinality(ids, schema, table)
                except MergeCardinalityError:
                    if unmatched_unique:  # the bounds did not count repeated keys: name them if that is the cause
                        _refuse_repeated_keys(spark, src_view, unique, schema, table)
                    raise
                if unmatched_unique:
                    unmatched_df = kept.enter_context(computed_once(spark.sql(
                        f"SELECT s.* FROM {src_view} s LEFT ANTI JOIN (SELECT __src_row FROM {hit_view}) m "
                        "ON s.__src_row = m.__src_row"), replicated=replicated))
                    unmatched_df.createOrReplaceTempView(unmatched_view)
                    counts = spark.sql(bounds_sql(unmatched_view, [], unique)).collect()[0]
                    if counts[-2] != counts[-1]:
                        _refuse_repeated_keys(spark, unmatched_view, unique, schema, table)
                gone = [i for i, w in enumerate(matched) if w.action == "delete"]
                upd = [i for i, w in enumerate(matched) if w.action == "update"]
                acted = ids.filter(pc.is_in(ids["__clause"], value_set=pa.array(gone + upd, ids["__clause"].type)))
                deletes.append(ids_of(acted))
                if upd and pc.any(pc.is_in(acted["__clause"], value_set=pa.array(upd, ids["__clause"].type))).as_py():
                    if keys_only is None:
                        rows = spark.sql(f"SELECT * FROM {hit_view} WHERE __clause IN ({', '.join(map(str, upd))})")
                    else:  # every hit is updated: its new values from its source row (the hits' ids are small)
                        small = "/*+ BROADCAST(h) */ " if ids.num_rows <= MERGE_BROADCAST_ROWS else ""
                        rows = spark.sql(f"SELECT {small}h.__rowid, {', '.join(new)} FROM {src_view} s JOIN "
                                         f"(SELECT __src_row, __rowid FROM {hit_view}) h ON s.__src_row = h.__src_row")
                    done.add(tx, write_files(spark, rows.select("__rowid", *[ident(c) for c in cols]), info,
                                             table_dir, row_ids="__rowid", options=tx.write_options(info)), table_dir)
            matched_rows = f"(SELECT __src_row FROM {hit_view})"  # an anti join needs no DISTINCT
            few_hits = bool(matched) and ids.num_rows <= MERGE_BROADCAST_ROWS
        if inserts:
            idx = _first([w.condition for w in inserts])
            vals = _as_columns(_values(inserts, idx, cols, {}, source=True), cols)
            ins = spark.sql(f"SELECT {', '.join(vals)} FROM {unmatched_view} s WHERE ({idx}) >= 0"
                            if unmatched_df is not None else
                            f"SELECT {'/*+ BROADCAST(m) */ ' if few_hits else ''}{', '.join(vals)} FROM {src_view} s "
                            f"LEFT ANTI JOIN {matched_rows} m "
                            f"ON s.__src_row = m.__src_row WHERE ({idx}) >= 0")
            inserted = write_files(spark, ins, info, table_dir, options=tx.write_options(info))
            done.add(tx, inserted, table_dir)
            done.rows += sum(f.record_count for f in inserted)
        if by_source:
            idx = _first([w.condition for w in by_source])
            new = _as_columns(_values(by_source, idx, cols, from_t, source=False), cols)
            rest = spark.sql(rows_of.ids(
                f"SELECT {rows_of.locators('t')}, {idx} AS __clause, {', '.join(new)} "
                f"FROM {target} t LEFT ANTI JOIN {src_view} s ON ({on}) WHERE ({idx}) >= 0",
                ["__clause", *[ident(c) for c in cols]])).persist(StorageLevel.MEMORY_AND_DISK)
            try:
                gone = [i for i, w in enumerate(by_source) if w.action == "delete"]
                upd = [i for i, w in enumerate(by_source) if w.action == "update"]
                if gone:
                    deletes.append(ids_of(rest.where(F.col("__clause").isin(gone)).select(*IDS).toArrow()))
                if upd:
                    rows = rest.where(F.col("__clause").isin(upd))
                    got = ids_of(rows.select(*IDS).toArrow())
                    if got.num_rows:
                        deletes.append(got)
                        done.add(tx, write_files(spark, rows.select("__rowid", *[ident(c) for c in cols]),
                                                 info, table_dir, row_ids="__rowid",
                                                 options=tx.write_options(info)), table_dir)
            finally:
                rest.unpersist()
        gone_ids = pa.concat_tables(deletes) if deletes else _IDS_SCHEMA.empty_table()
        _stage_deletes(tx, base, gone_ids)
        if done.files:
            tx.add_data_files(info.schema_name, info.name, done.files)
        done.changed = bool(gone_ids.num_rows or done.files)
        done.rows += gone_ids.num_rows  # target rows deleted or updated, then source rows inserted (above)
        return done
    finally:
        kept.close()
        for view in (src_view, hit_view, unmatched_view):
            spark.catalog.dropTempView(view)
