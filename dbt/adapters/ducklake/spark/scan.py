"""DuckLake tables in Spark SQL: one persistent view per table (in a session-catalog database per schema).

The view's SQL reads the table's data files with Spark's native Parquet reader, one branch per group of files with
the same physical layout, each column mapped as the reference maps it (field id, name mapping or position), renamed,
reordered, promoted or filled with its initial default; positional deletes (delete files and inlined deletes) removed
through `_metadata.row_index`; rows of partial files beyond the snapshot dropped; inlined rows added as literals.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from ..lake.deletes import ROW_ID_COLUMN, SNAPSHOT_COLUMN
from ..lake.inlined import read_inlined
from ..lake.paths import to_local
from ..lake.pruning import Predicate
from ..lake.records import Column, NameMapping, TableInfo
from ..lake.scan import FileScanTask, plan_scan
from ..lake.state import LakeState
from ..lake.types import parse_value
from .sql_literals import ident, literal, string_literal
from .types import spark_schema, to_spark

_FID = b"PARQUET:field_id"
POS = "__ducklake_pos"
MAX_LITERAL_DELETES = 5000  # more deleted positions than this in one file are read from its delete file instead


@functools.lru_cache(maxsize=20000)
def _physical_schema(path: str, size: int) -> pa.Schema:
    # data files never change once written: a footer read per (path, size) is enough
    return pq.read_schema(to_local(path))


def file_uri(path: str) -> str:
    """A path as Spark's Parquet source wants it."""
    if "://" in path:
        return path
    return "file://" + path


@dataclass(frozen=True)
class _Mapper:
    """How one file's columns map to the table's: by field id, by name mapping, or by position."""

    schema: pa.Schema
    mapping: NameMapping | None

    @property
    def by_id(self) -> bool:
        data = [f for f in self.schema if f.name not in (ROW_ID_COLUMN, SNAPSHOT_COLUMN)]
        return self.mapping is None and bool(data) and all(f.metadata and _FID in f.metadata for f in data)

    def find(self, fields: Sequence[pa.Field], col: Column, parent: int | None, pos: int,
             top: bool) -> tuple[pa.Field, int | None] | None:
        if self.mapping is not None:
            for idx, src, target, par, _part in self.mapping.entries:
                if par == parent and target == col.column_id:
                    for f in fields:
                        if f.name == src:
                            return f, idx
            return None
        if self.by_id:
            for f in fields:
                if f.metadata and f.metadata.get(_FID) == str(col.column_id).encode():
                    return f, None
            return None
        if not top:
            for f in fields:
                if f.name == col.name:
                    return f, None
        data = [f for f in fields if f.name not in (ROW_ID_COLUMN, SNAPSHOT_COLUMN)]
        return (data[pos], None) if pos < len(data) else None


def _default_sql(col: Column) -> str:
    if col.initial_default is None or col.is_nested:
        return literal(None, col)
    return literal(parse_value(col.type, col.initial_default), col)


def _project(col: Column, phys: pa.Field, ref: str, m: _Mapper, key: int | None, depth: int) -> str:
    """A Spark expression giving the table column from the file field at ref."""
    target = to_spark(col).simpleString()
    t = phys.type
    if col.type == "struct" and pa.types.is_struct(t):
        fields = list(t)
        parts, same = [], len(fields) == len(col.children)
        for pos, child in enumerate(col.children):
            found = m.find(fields, child, key, pos, False)
            if found is None:
                parts.append(f"{string_literal(child.name)}, {_default_sql(child)}")
                same = False
                continue
            pf, ckey = found
            same = same and fields.index(pf) == pos
            parts.append(f"{string_literal(child.name)}, {_project(child, pf, f'{ref}.{ident(pf.name)}', m, ckey, depth)}")
        if same:
            return f"CAST({ref} AS {target})"  # struct casts go by position: fine when only names differ
        return f"CASE WHEN {ref} IS NULL THEN NULL ELSE named_struct({', '.join(parts)}) END"
    if col.type == "list" and (pa.types.is_list(t) or pa.types.is_large_list(t)):
        (elem,) = col.children
        var = f"e{depth}"
        found = m.find([t.value_field], elem, key, 0, False) or (t.value_field, None)
        inner = _project(elem, found[0], var, m, found[1], depth + 1)
        if inner == f"CAST({var} AS {to_spark(elem).simpleString()})":
            return f"CAST({ref} AS {target})"
        return f"transform({ref}, {var} -> {inner})"
    if col.type == "map" and pa.types.is_map(t):
        kcol, vcol = col.children
        kf = m.find([t.key_field, t.item_field], kcol, key, 0, False) or (t.key_field, None)
        vf = m.find([t.key_field, t.item_field], vcol, key, 1, False) or (t.item_field, None)
        kv, vv = f"k{depth}", f"v{depth}"
        kexpr = _project(kcol, kf[0], kv, m, kf[1], depth + 1)
        vexpr = _project(vcol, vf[0], vv, m, vf[1], depth + 1)
        out = ref
        if vexpr != f"CAST({vv} AS {to_spark(vcol).simpleString()})":
            out = f"transform_values({out}, ({kv}, {vv}) -> {vexpr})"
        if kexpr != f"CAST({kv} AS {to_spark(kcol).simpleString()})":
            out = f"transform_keys({out}, ({kv}, {vv}) -> {kexpr})"
        return f"CAST({out} AS {target})"
    return f"CAST({ref} AS {target})"


def _projection(columns: Sequence[Column], task: FileScanTask) -> tuple[str, ...]:
    f = task.data_file
    m = _Mapper(_physical_schema(f.path, f.file_size_bytes), task.mapping)
    out = []
    for pos, col in enumerate(columns):
        found = m.find(list(m.schema), col, None, pos, True)
        if found is None:
            out.append(f"{_default_sql(col)} AS {ident(col.name)}")
        else:
            pf, key = found
            out.append(f"{_project(col, pf, ident(pf.name), m, key, 0)} AS {ident(col.name)}")
    return tuple(out)


def table_sql(state: LakeState, table: TableInfo, predicate: Predicate | None = None) -> str:
    """The SELECT that yields the table's rows at the state's snapshot, for Spark SQL.

    With a predicate, files whose statistics exclude it are left out: the SELECT then yields a superset of the rows
    matching the predicate (the caller still filters).

    Raises:
        UnsupportedTypeError: a column has a type Spark cannot hold (checked before anything is read).
    """
    spark_schema(table.columns)
    plan = plan_scan(state, table, predicate)
    columns = table.columns
    # files share a branch when they map alike AND have the same physical types (Spark reads a branch with one schema)
    groups: dict[tuple[tuple[str, ...], str, int | None], list[str]] = {}
    branches: list[str] = []
    for task in plan.files:
        proj = _projection(columns, task)
        uri = file_uri(task.data_file.path)
        if not task.deleted_positions:
            physical = str(_physical_schema(task.data_file.path, task.data_file.file_size_bytes).remove_metadata())
            groups.setdefault((proj, physical, task.max_snapshot), []).append(uri)
            continue
        branches.append(_branch(proj, [uri], task.max_snapshot, task))
    for (proj, _physical, max_snapshot), uris in groups.items():
        by_dir: dict[str, list[str]] = {}
        for uri in uris:  # Hadoop globs alternate within one directory: dir/{a,b}
            directory, _, name = uri.rpartition("/")
            by_dir.setdefault(directory, []).append(name)
        for directory, names in by_dir.items():
            branches.append(_branch(proj, [f"{directory}/{n}" for n in names], max_snapshot, None))
    inlined = _inlined_sql(state, table)
    if inlined:
        branches.append(inlined)
    if not branches:
        nulls = ", ".join(f"{literal(None, c)} AS {ident(c.name)}" for c in columns)
        return f"SELECT {nulls} WHERE false"
    return "\nUNION ALL\n".join(branches)


def _branch(proj: tuple[str, ...], uris: list[str], max_snapshot: int | None, task: FileScanTask | None) -> str:
    if len(uris) == 1:
        source = uris[0]
    else:
        directory = uris[0].rpartition("/")[0]
        source = directory + "/{" + ",".join(u.rpartition("/")[2] for u in uris) + "}"
    where = []
    if max_snapshot is not None:
        where.append(f"{ident(SNAPSHOT_COLUMN)} <= {max_snapshot}")
    inner = f"parquet.{ident(source)}"
    if task is not None and task.deleted_positions:
        inner = f"(SELECT *, _metadata.row_index AS {POS} FROM parquet.{ident(source)})"
        positions = task.deleted_positions
        if len(positions) <= MAX_LITERAL_DELETES:
            where.append(f"{POS} NOT IN ({', '.join(str(p) for p in positions)})")
        else:
            where.append(f"{POS} NOT IN (SELECT pos FROM VALUES {', '.join(f'({p})' for p in positions)} AS d(pos))")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {', '.join(proj)} FROM {inner}{clause}"


def _inlined_sql(state: LakeState, table: TableInfo) -> str | None:
    parts = read_inlined(state, table, with_rowid=False)
    rows = [r for t in parts for r in t.to_pylist()]
    if not rows:
        return None
    names = ", ".join(ident(c.name) for c in table.columns)
    values = ", ".join("(" + ", ".join(literal(r[c.name], c) for c in table.columns) + ")" for r in rows)
    return f"SELECT * FROM VALUES {values} AS inlined({names})"


def register_table(spark: SparkSession, state: LakeState, table: TableInfo, *, database: str | None = None,
                   view: str | None = None) -> str:
    """Create or replace the view database.view (default schema.table) over the table at the state's snapshot."""
    database = database or table.schema_name
    view = view or table.name
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {ident(database)}")
    name = f"{ident(database)}.{ident(view)}"
    spark.sql(f"CREATE OR REPLACE VIEW {name} AS {table_sql(state, table)}")
    return name


def read_table(spark: SparkSession, state: LakeState, table: TableInfo, where: str | None = None) -> DataFrame:
    """The table's rows at the state's snapshot WHERE a Spark SQL condition, as a DataFrame.

    Files whose column statistics exclude the condition are not read (Spark's Parquet reader then skips row groups
    by their own statistics). Columns are referenced unqualified or as t.<column>.
    """
    from .predicates import to_predicate

    sql = table_sql(state, table, to_predicate(where, table.columns, (None, "t")))
    return spark.sql(f"SELECT * FROM ({sql}) t" + (f" WHERE ({where})" if where else ""))


def register_lake(spark: SparkSession, state: LakeState) -> list[str]:
    """Views for every table of the lake at the state's snapshot; views of dropped tables are removed."""
    names = [register_table(spark, state, t) for t in state.tables.values()]
    return names


def time_travel_name(table: TableInfo, snapshot_id: int) -> str:
    """The view name a table gets for one snapshot: <table>__at_<snapshot>."""
    return f"{table.name}__at_{snapshot_id}"


def register_at(spark: SparkSession, state: LakeState, table: TableInfo) -> str:
    """A view of the table at the state's snapshot, under schema.<table>__at_<snapshot>."""
    return register_table(spark, state, table, view=time_travel_name(table, state.snapshot_id))
