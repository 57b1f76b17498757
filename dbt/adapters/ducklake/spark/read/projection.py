"""How one data file's fields become a table's columns, as the reference maps them: by field id, by the table's name
mapping, or by position; renamed, reordered, promoted, converted (type_readings) or filled with the column's initial
default. Shared by the table views (scan.py), the manifests (manifest.py) and the change feed (changes.py)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from ...lake.read.deletes import ROW_ID_COLUMN, SNAPSHOT_COLUMN
from ...lake.read.scan import FileScanTask
from ...lake.records import Column, NameMapping
from ...lake.storage import parquet_source
from ...lake.types import parse_value
from ..sql_literals import ident, literal, string_literal
from ..types import to_spark
from .type_readings import VARYING, encoding_kind, project

_FID = b"PARQUET:field_id"


@functools.lru_cache(maxsize=20000)
def physical_schema(path: str, size: int) -> pa.Schema:
    # data files never change once written: a footer read per (path, size) is enough
    with parquet_source(path) as source:
        return pq.read_schema(source)


@dataclass(frozen=True)
class FieldMapper:
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


def default_sql(col: Column) -> str:
    if col.initial_default is None or col.is_nested:
        return literal(None, col)
    return literal(parse_value(col.type, col.initial_default), col)


def project_field(col: Column, phys: pa.Field, ref: str, m: FieldMapper, key: int | None, depth: int) -> str:
    """A Spark expression giving the table column from the file field at ref."""
    target = to_spark(col).simpleString()
    t = phys.type
    if col.type == "struct" and pa.types.is_struct(t):
        fields = list(t)
        parts, same = [], len(fields) == len(col.children)
        for pos, child in enumerate(col.children):
            found = m.find(fields, child, key, pos, False)
            if found is None:
                parts.append(f"{string_literal(child.name)}, {default_sql(child)}")
                same = False
                continue
            pf, ckey = found
            cref = f'{ref}.{ident(pf.name)}'
            expr = project_field(child, pf, cref, m, ckey, depth)
            same = same and fields.index(pf) == pos and expr == f"CAST({cref} AS {to_spark(child).simpleString()})"
            parts.append(f"{string_literal(child.name)}, {expr}")
        if same:
            return f"CAST({ref} AS {target})"  # struct casts go by position: fine when only names differ
        return f"CASE WHEN {ref} IS NULL THEN NULL ELSE named_struct({', '.join(parts)}) END"
    if col.type == "list" and (pa.types.is_list(t) or pa.types.is_large_list(t)):
        (elem,) = col.children
        var = f"e{depth}"
        found = m.find([t.value_field], elem, key, 0, False) or (t.value_field, None)
        inner = project_field(elem, found[0], var, m, found[1], depth + 1)
        if inner == f"CAST({var} AS {to_spark(elem).simpleString()})":
            return f"CAST({ref} AS {target})"
        return f"transform({ref}, {var} -> {inner})"
    if col.type == "map" and pa.types.is_map(t):
        kcol, vcol = col.children
        kf = m.find([t.key_field, t.item_field], kcol, key, 0, False) or (t.key_field, None)
        vf = m.find([t.key_field, t.item_field], vcol, key, 1, False) or (t.item_field, None)
        kv, vv = f"k{depth}", f"v{depth}"
        kexpr = project_field(kcol, kf[0], kv, m, kf[1], depth + 1)
        vexpr = project_field(vcol, vf[0], vv, m, vf[1], depth + 1)
        out = ref
        if vexpr != f"CAST({vv} AS {to_spark(vcol).simpleString()})":
            out = f"transform_values({out}, ({kv}, {vv}) -> {vexpr})"
        if kexpr != f"CAST({kv} AS {to_spark(kcol).simpleString()})":
            out = f"transform_keys({out}, ({kv}, {vv}) -> {kexpr})"
        return f"CAST({out} AS {target})"
    if col.type in READ_BY_PROJECTION:
        enc = {col.column_id: encoding_kind(col.type, t)} if col.type in VARYING else {}
        if col.type in ("time", "timetz", "time_ns") and pa.types.is_timestamp(t):  # as this adapter writes them
            ref = f"timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {ref})"
        out = project(col, ref, enc)
        if out != ref:
            return out
    return f"CAST({ref} AS {target})"


READ_BY_PROJECTION = VARYING | {"uuid", "time", "timetz", "time_ns", "interval"}


def projection(columns: Sequence[Column], task: FileScanTask) -> tuple[str, ...]:
    f = task.data_file
    m = FieldMapper(physical_schema(f.path, f.file_size_bytes), task.mapping)
    out = []
    for pos, col in enumerate(columns):
        found = m.find(list(m.schema), col, None, pos, True)
        if found is None:
            out.append(f"{default_sql(col)} AS {ident(col.name)}")
        else:
            pf, key = found
            out.append(f"{project_field(col, pf, ident(pf.name), m, key, 0)} AS {ident(col.name)}")
    return tuple(out)
