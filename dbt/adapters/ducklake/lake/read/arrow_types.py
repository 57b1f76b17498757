"""Arrow types of table columns for results (no field-id metadata), and casts of file values to them."""

from __future__ import annotations

import re
import uuid

import pyarrow as pa

from ..errors import CatalogValueError
from ..records import Column
from ..types import to_arrow


def plain_type(col: Column) -> pa.DataType:
    """The Arrow type of a column without field-id metadata (for results)."""
    if col.type in ("int128", "uint128"):
        return pa.decimal256(39, 0)  # 128-bit integers need 39 digits
    if col.type == "list":
        return pa.list_(pa.field("element", plain_type(col.children[0])))
    if col.type == "map":
        return pa.map_(plain_type(col.children[0]), plain_type(col.children[1]))
    if col.type == "struct":
        return pa.struct([pa.field(c.name, plain_type(c)) for c in col.children])
    return _strip(to_arrow(col))


def _strip(t: pa.DataType) -> pa.DataType:
    if pa.types.is_list(t):
        return pa.list_(pa.field("element", _strip(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(_strip(t.key_type), _strip(t.item_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _strip(f.type)) for f in t])
    return t


def cast_to(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """Cast a leaf array to the table's Arrow type (promotions; UUIDs given as text or raw bytes)."""
    if arr.type == target:
        return arr
    if isinstance(target, pa.BaseExtensionType) and target.extension_name == "arrow.uuid":
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            raw = pa.array([None if v is None else uuid.UUID(v).bytes for v in arr.to_pylist()], pa.binary(16))
            return pa.ExtensionArray.from_storage(target, raw)
        if pa.types.is_fixed_size_binary(arr.type):
            return pa.ExtensionArray.from_storage(target, arr)
    if target == pa.month_day_nano_interval() and pa.types.is_fixed_size_binary(arr.type) and arr.type.byte_width == 12:
        return _parquet_interval(arr)
    if target == pa.month_day_nano_interval() and (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        return interval_from_text(arr)
    if _has_uuid(target) and not _has_uuid(arr.type):
        # nested UUIDs given as text (DuckDB's Arrow export): converted in Python (inlined rows are few), then cast
        # from the storage type, which Arrow does for nested extension types
        values = [_uuid_bytes(v, target) for v in arr.to_pylist()]
        return pa.array(values, _storage(target)).cast(target)
    return arr.cast(target)


def _is_uuid(t: pa.DataType) -> bool:
    return isinstance(t, pa.BaseExtensionType) and t.extension_name == "arrow.uuid"


def _children(t: pa.DataType) -> list[pa.Field]:
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [t.value_field]
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    return []


def _has_uuid(t: pa.DataType) -> bool:
    return _is_uuid(t) or any(_has_uuid(f.type) for f in _children(t))


def _storage(t: pa.DataType) -> pa.DataType:
    if _is_uuid(t):
        return pa.binary(16)
    if pa.types.is_map(t):
        return pa.map_(_storage(t.key_type), _storage(t.item_type))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_storage(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_storage(f.type)) for f in _children(t)])
    return t


def _uuid_bytes(v: object, t: pa.DataType) -> object:
    if v is None:
        return None
    if _is_uuid(t):
        return v.bytes if isinstance(v, uuid.UUID) else uuid.UUID(v).bytes if isinstance(v, str) else v
    if pa.types.is_map(t):
        pairs = v.items() if isinstance(v, dict) else v
        return [(_uuid_bytes(k, t.key_type), _uuid_bytes(x, t.item_type)) for k, x in pairs]  # type: ignore[union-attr,attr-defined]
    if pa.types.is_list(t):
        return [_uuid_bytes(x, t.value_type) for x in v]  # type: ignore[attr-defined]
    if pa.types.is_struct(t):
        return {f.name: _uuid_bytes(v.get(f.name), f.type) for f in _children(t)}  # type: ignore[attr-defined]
    return v


def _parquet_interval(arr: pa.Array) -> pa.Array:
    """Parquet INTERVAL (months, days, milliseconds as little-endian uint32) to Arrow month_day_nano."""
    out: list[pa.MonthDayNano | None] = []
    for v in arr.to_pylist():
        if v is None:
            out.append(None)
            continue
        months, days, millis = (int.from_bytes(v[i : i + 4], "little") for i in (0, 4, 8))
        out.append(pa.MonthDayNano([months, days, millis * 1_000_000]))
    return pa.array(out, pa.month_day_nano_interval())


# how Spark and the driver write an INTERVAL (spark/write/type_writings.py): text DuckDB casts VARCHAR -> INTERVAL, with
# microseconds (a Parquet INTERVAL holds milliseconds, and pyarrow cannot write one)
_INTERVAL_TEXT = re.compile(r"^(-?[0-9]+) months (-?[0-9]+) days (-?[0-9]+) microseconds$")


def interval_from_text(arr: pa.Array) -> pa.Array:
    """'<m> months <d> days <us> microseconds' to Arrow month_day_nano.

    Raises:
        ValueError: text of another form.
    """
    out: list[pa.MonthDayNano | None] = []
    for v in arr.to_pylist():
        if v is None:
            out.append(None)
            continue
        m = _INTERVAL_TEXT.match(v)
        if m is None:
            raise CatalogValueError(f"{v!r} is not an interval as this adapter writes one ('<m> months <d> days <us> "
                                    "microseconds')")
        out.append(pa.MonthDayNano([int(m.group(1)), int(m.group(2)), int(m.group(3)) * 1000]))
    return pa.array(out, pa.month_day_nano_interval())


def interval_to_text(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Arrow month_day_nano to the text form above (sub-microsecond nanoseconds dropped, as DuckDB holds none)."""
    out = [None if v is None else f"{v.months} months {v.days} days {v.nanoseconds // 1000} microseconds"
           for v in arr.to_pylist()]
    return pa.array(out, pa.string())
