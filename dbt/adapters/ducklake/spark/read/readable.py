"""Spark-readable copies of data files Spark 4.0 cannot open: DuckDB writes GEOMETRY and VARIANT columns with the
Parquet GEOMETRY / VARIANT logical types, and parquet-java 1.15 (Spark 4.0) fails on such a footer whatever schema a
query asks for. pyarrow reads them; a copy holds the same rows in the same order (so positional deletes and
`_metadata.row_index` still apply) and the same field ids, with

- each GEOMETRY value as the WKT text DuckDB prints for it (`lake.wkb`), a plain string column;
- each VARIANT as the same group of (metadata, value, typed_value) without the annotation, which Spark reads as its
  VARIANT type (shredded values included: `spark.sql.variant.allowReadingShredded`, see session.REQUIRED_CONF).

A copy is made once per data file (named by the file's path and size; data files never change) under the table's
`_ducklake_spark/` directory (skipped by both engines' orphan cleanup), by the first query of the table, in parallel;
later queries and processes reuse it. Copies unused for manifest.KEEP_UNUSED_SECONDS are removed by the manifest
cleanup. Costs a read and a write of the file once, whatever columns a query selects.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...lake.records import Column
from ...lake.wkb import to_wkt

READABLE = "readable"  # the copies' directory under a table's manifest root
_FID = b"PARQUET:field_id"


def copy_path(root: str, path: str, size: int) -> str:
    """Where the readable copy of a data file lives (root: the table's manifest root)."""
    return os.path.join(root, READABLE, hashlib.sha1(f"{path}\0{size}".encode()).hexdigest()[:32] + ".parquet")


def ensure_copies(root: str, files: Sequence[tuple[str, int]], columns: Sequence[Column]) -> dict[str, str]:
    """Readable copies of these (local path, size) data files, made where missing: {path: copy path}."""
    geometry = {c.column_id for top in columns for c in top.walk() if c.type == "geometry"}
    out = {p: copy_path(root, p, s) for p, s in files}
    missing = [(p, out[p]) for p, _ in files if not os.path.exists(out[p])]
    for target in out.values():
        if os.path.exists(target):
            with contextlib.suppress(OSError):
                os.utime(target)  # in use: keeps the cleanup off it
    if missing:
        os.makedirs(os.path.join(root, READABLE), exist_ok=True)
        with ThreadPoolExecutor(max_workers=min(4, len(missing))) as pool:
            list(pool.map(lambda pt: _copy(pt[0], pt[1], geometry), missing))
    return out


def _copy(path: str, target: str, geometry: set[int]) -> None:
    src = pq.ParquetFile(path)
    schema = readable_schema(src.schema_arrow, geometry)
    tmp = f"{target}.tmp-{uuid.uuid4().hex}"
    try:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as out:
            for i in range(src.num_row_groups):
                t = src.read_row_group(i)
                arrays = [readable_column(t.column(j).combine_chunks(), src.schema_arrow.field(j), geometry)
                          for j in range(t.num_columns)]
                out.write_table(pa.Table.from_arrays(arrays, schema=schema), row_group_size=max(1, t.num_rows))
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


def _is_geometry(field: pa.Field, geometry: set[int]) -> bool:
    raw = (field.metadata or {}).get(_FID)
    return raw is not None and int(raw) in geometry and (pa.types.is_binary(field.type)
                                                       or pa.types.is_large_binary(field.type))


def _schema_field(field: pa.Field, geometry: set[int]) -> pa.Field:
    t = field.type
    if _is_geometry(field, geometry):
        return field.with_type(pa.string())
    if pa.types.is_struct(t):
        return field.with_type(pa.struct([_schema_field(t.field(i), geometry) for i in range(t.num_fields)]))
    if pa.types.is_list(t):
        return field.with_type(pa.list_(_schema_field(t.value_field, geometry)))
    if pa.types.is_large_list(t):
        return field.with_type(pa.large_list(_schema_field(t.value_field, geometry)))
    if pa.types.is_map(t):
        return field.with_type(pa.map_(_schema_field(t.key_field, geometry), _schema_field(t.item_field, geometry)))
    return field


def readable_schema(schema: pa.Schema, geometry: set[int]) -> pa.Schema:
    return pa.schema([_schema_field(f, geometry) for f in schema], metadata=schema.metadata)


def readable_column(arr: pa.Array, field: pa.Field, geometry: set[int]) -> pa.Array:
    """The array with every geometry leaf (by field id, at any depth) as WKT text."""
    t = field.type
    if _is_geometry(field, geometry):
        return pa.array([None if v is None else to_wkt(v) for v in arr.to_pylist()], pa.string())
    new = _schema_field(field, geometry).type
    if new == t:
        return arr
    if pa.types.is_struct(t):
        children = [readable_column(arr.field(i), t.field(i), geometry) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(new), mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        values = readable_column(arr.values, t.value_field, geometry)
        cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        offsets = arr.offsets
        if arr.offset or len(values) != offsets[-1].as_py() - offsets[0].as_py():
            values = values.slice(offsets[0].as_py(), offsets[-1].as_py() - offsets[0].as_py())
            offsets = pc.subtract(offsets, offsets[0])
        return cls.from_arrays(offsets, values, type=new, mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_map(t):
        keys = readable_column(arr.keys, t.key_field, geometry)
        items = readable_column(arr.items, t.item_field, geometry)
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=new,
                                       mask=arr.is_null() if arr.null_count else None)
    return arr
