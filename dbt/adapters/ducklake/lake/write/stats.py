"""Per-file column statistics read from a Parquet footer, in the form DuckDB writes to ducklake_file_column_stats.

Policy: statistics are exact or absent. A bound that Parquet marks inexact (truncated strings), that needs a
lossy conversion into the column's type, or that the footer does not hold, becomes NULL; NULL is always safe
for DuckDB (pruning keeps the file, the optimizer does not trust the value).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InvalidDataFileError
from ..records import Column, ColumnStats, TableColumnStats
from ..types import (
    FLOAT_TYPES,
    INT64_MAX,
    INT_RANGES,
    TIMESTAMP_UNITS,
    decimal_params,
    float32,
    format_value,
    parse_type,
    sort_key,
)
from .thrift_compact import read_struct


def _footer_thrift(metadata: pq.FileMetaData | bytes) -> dict[int, Any]:
    if isinstance(metadata, (bytes, bytearray, memoryview)):
        raw = bytes(metadata)
    else:  # pyarrow re-serialises its Thrift object byte for byte
        sink = pa.BufferOutputStream()
        metadata.write_metadata_file(sink)
        data = sink.getvalue().to_pybytes()
        raw = data[-8 - int.from_bytes(data[-8:-4], "little"):-8]
    try:
        return read_struct(raw, 0)[0]
    except (IndexError, struct.error) as e:
        raise InvalidDataFileError(f"cannot decode Parquet footer: {e}") from e


# ------------------------------------------------------------------------------------------ schema tree

BOOLEAN, INT32, INT64, INT96, FLOAT, DOUBLE, BYTE_ARRAY, FLBA = range(8)
REQUIRED, OPTIONAL, REPEATED = range(3)
_UNIT_PER_SECOND = {1: 10**3, 2: 10**6, 3: 10**9}  # TimeUnit union: MILLIS, MICROS, NANOS


@dataclass
class _Node:
    element: dict[int, Any]
    max_def: int
    children: list[_Node] = field(default_factory=list)
    leaf_index: int | None = None

    @property
    def name(self) -> str:
        return self.element.get(4, b"").decode("utf-8", "replace")

    @property
    def field_id(self) -> int | None:
        return self.element.get(9)

    @property
    def repetition(self) -> int:
        return self.element.get(3, REQUIRED)

    def child(self, name: str) -> _Node | None:
        found = [c for c in self.children if c.name == name] or [
            c for c in self.children if c.name.lower() == name.lower()]
        return found[0] if found else None


def _schema_tree(elements: list[dict[int, Any]]) -> tuple[_Node, list[_Node]]:
    """The schema root and the leaves in column-chunk order."""
    leaves: list[_Node] = []
    pos = 0

    def build(max_def: int) -> _Node:
        nonlocal pos
        element = elements[pos]
        pos += 1
        node = _Node(element, max_def)
        for _ in range(element.get(5, 0)):
            child = elements[pos]
            node.children.append(build(max_def + (child.get(3, REQUIRED) != REQUIRED)))
        if not element.get(5):
            node.leaf_index = len(leaves)
            leaves.append(node)
        return node

    root = build(0)
    root.leaf_index = None
    return root, [leaf for leaf in leaves if leaf is not root]


def _list_element(node: _Node) -> _Node | None:
    """The element node of a Parquet list, following the format's backward-compatibility rules."""
    if node.repetition == REPEATED:  # a bare repeated field is a list of required elements
        return node
    if len(node.children) != 1 or node.children[0].repetition != REPEATED:
        return None
    rep = node.children[0]
    if not rep.children or len(rep.children) > 1 or rep.name in ("array", f"{node.name}_tuple"):
        return rep
    return rep.children[0]


def _match_by_name(col: Column, node: _Node, out: dict[int, _Node]) -> None:
    if not col.children:
        if node.leaf_index is not None:
            out[col.column_id] = node
        return
    if node.leaf_index is not None and node.repetition != REPEATED:
        return
    if col.type == "list":
        elem = _list_element(node)
        if elem is not None:
            _match_by_name(col.children[0], elem, out)
    elif col.type == "map":
        kv = node.children[0] if len(node.children) == 1 else None
        if kv is not None and len(kv.children) == 2:
            for child in col.children:
                pos = ("key", "value").index(child.name) if child.name in ("key", "value") else col.children.index(child)
                _match_by_name(child, kv.children[pos], out)
    else:
        for child in col.children:
            sub = node.child(child.name)
            if sub is not None:
                _match_by_name(child, sub, out)


# ------------------------------------------------------------------------------------------ bound values

def _annotation(node: _Node) -> tuple[str, Any]:
    """What the leaf's bytes mean: ('decimal', scale), ('time'|'timestamp', (per_second, utc)), ..."""
    el, logical, conv = node.element, node.element.get(10) or {}, node.element.get(6)
    if 5 in logical or conv == 5:
        return "decimal", logical.get(5, {}).get(1, el.get(7, 0))
    if 10 in logical:
        return ("int" if logical[10].get(2, True) else "uint"), None
    if conv in (11, 12, 13, 14):
        return "uint", None
    if 6 in logical or conv == 6:
        return "date", None
    if 7 in logical or 8 in logical:
        spec = logical.get(7) or logical.get(8) or {}
        unit = next(iter(spec.get(2, {2: {}})))
        return ("time" if 7 in logical else "timestamp"), (_UNIT_PER_SECOND.get(unit, 0), bool(spec.get(1)))
    if conv in (7, 8):
        return "time", (10**3 if conv == 7 else 10**6, True)
    if conv in (9, 10):  # legacy TIMESTAMP_* means adjusted to UTC
        return "timestamp", (10**3 if conv == 9 else 10**6, True)
    if 14 in logical:
        return "uuid", None
    if logical.keys() & {1, 4, 12} or conv in (0, 4, 19):
        return "string", None
    if logical.keys() & {11, 15, 16, 17, 18} or conv == 21:  # null, float16, variant, geo, interval
        return "opaque", None
    return "plain", None


def _decode(node: _Node, raw: bytes) -> tuple[str, Any] | None:
    """A bound's raw PLAIN bytes as (kind, value); None if they cannot be read."""
    phys = node.element.get(1)
    kind, extra = _annotation(node)
    if kind == "opaque":
        return None
    if phys == BOOLEAN:
        return ("bool", bool(raw[0] & 1)) if raw else None
    if phys in (INT32, INT64):
        width = 4 if phys == INT32 else 8
        if len(raw) != width:
            return None
        n = int.from_bytes(raw, "little", signed=kind != "uint")
        if kind in ("decimal", "time", "timestamp"):
            return kind, (n, extra)
        return ("date", n) if kind == "date" else ("int", n)
    if phys in (FLOAT, DOUBLE):
        width = 4 if phys == FLOAT else 8
        return ("float", struct.unpack("<f" if width == 4 else "<d", raw)[0]) if len(raw) == width else None
    if phys in (BYTE_ARRAY, FLBA):
        if kind == "decimal":
            return ("decimal", (int.from_bytes(raw, "big", signed=True), extra)) if raw else None
        return ("uuid" if kind == "uuid" and len(raw) == 16 else "str" if kind == "string" else "bytes"), raw
    return None  # INT96 and unknown physical types carry no usable order


def _rescale(n: int, from_per: int, to_per: int) -> int | None:
    """n ticks of 1/from_per s as ticks of 1/to_per s; None unless exact. Infinity sentinels pass through."""
    if abs(n) == INT64_MAX:
        return n
    if to_per >= from_per:
        return n * (to_per // from_per)
    q, r = divmod(n, from_per // to_per)
    return None if r else q


def _bound_text(t: str, decoded: tuple[str, Any] | None, physical: int | None) -> str | None:
    """The DuckDB text of a decoded bound as a value of DuckLake type t; None unless exact."""
    if decoded is None:
        return None
    kind, v = decoded
    if t in INT_RANGES:
        if kind == "decimal" and v[1] == 0:
            kind, v = "int", v[0]
        lo, hi = INT_RANGES[t]
        return str(v) if kind == "int" and lo <= v <= hi else None
    if t in FLOAT_TYPES:
        if kind == "int":
            v = float(v)
        elif kind != "float" or v != v:  # a NaN bound says nothing
            return None
        if t == "float32" and physical != FLOAT and float32(v) != v:
            return None
        return format_value(t, v)
    if t.startswith("decimal("):
        p, s = decimal_params(t)
        unscaled, scale = (v, 0) if kind == "int" else v if kind == "decimal" else (None, 0)
        if unscaled is None:
            return None
        if s >= scale:
            unscaled *= 10 ** (s - scale)
        elif unscaled % 10 ** (scale - s):
            return None  # the column's scale cannot hold this bound exactly
        else:
            unscaled //= 10 ** (scale - s)
        if len(str(abs(unscaled))) > p:
            return None
        text = str(abs(unscaled)).rjust(s + 1, "0")
        return ("-" if unscaled < 0 else "") + (f"{text[:-s]}.{text[-s:]}" if s else text)
    if t == "boolean":
        return ("1" if v else "0") if kind == "bool" else None
    if t in ("varchar", "json"):
        try:
            return v.decode("utf-8") if kind in ("str", "bytes") else None
        except UnicodeDecodeError:
            return None
    if t == "blob":
        return v.hex().upper() if kind in ("str", "bytes", "uuid") else None
    if t == "uuid":
        return format_value(t, v) if kind == "uuid" or (kind == "bytes" and len(v) == 16) else None
    if t == "date":
        return format_value(t, v) if kind == "date" else None
    if t in ("time", "time_ns") and kind == "time" and not v[1][1]:
        n = _rescale(v[0], v[1][0], 10**9 if t == "time_ns" else 10**6)
        return None if n is None else format_value(t, n)
    if t in TIMESTAMP_UNITS and kind == "timestamp" and v[1][1] == (t == "timestamptz") and v[1][0]:
        n = _rescale(v[0], v[1][0], TIMESTAMP_UNITS[t])
        return None if n is None or abs(n) > INT64_MAX else format_value(t, n)
    return None  # interval, timetz, int128 stored as DOUBLE, geometry, mismatched types


def _signed_order(node: _Node) -> bool:
    """Whether the deprecated min/max fields (signed order) are valid bounds for this leaf."""
    return node.element.get(1) in (BOOLEAN, INT32, INT64, FLOAT, DOUBLE) and _annotation(node)[0] != "uint"


@dataclass
class _Bounds:
    texts: list[tuple[str, bool]] = field(default_factory=list)  # (text, exact) per chunk with values
    complete: bool = True  # every chunk that may hold values gave both bounds

    def pick(self, t: str, smallest: bool) -> str | None:
        """The extreme bound over chunks; None unless complete and the extreme one is exact."""
        if not self.complete or not self.texts:
            return None
        keys = [(sort_key(t, text), exact, text) for text, exact in self.texts]
        best = min(k[0] for k in keys) if smallest else max(k[0] for k in keys)
        exact = [text for key, ok, text in keys if key == best and ok]
        return exact[0] if exact else None


def _leaf_stats(col: Column, node: _Node, metas: list[dict[int, Any] | None], duckdb_writer: bool,
                nan_hint: bool | None) -> ColumnStats:
    t = parse_type(col.type)
    size: int | None = 0
    values: int | None = 0
    nulls: int | None = 0
    lows, highs = _Bounds(), _Bounds()
    missing_bounds = saw_nan = False
    physical = node.element.get(1)
    for meta in metas:
        if meta is None:  # column chunk kept in another file: nothing is known
            size = values = nulls = None
            lows.complete = highs.complete = False
            continue
        stats = meta.get(12) or {}
        chunk_nulls = stats.get(3, 0 if node.max_def == 0 else None)
        size = None if size is None else size + meta.get(7, 0)
        values = None if values is None else values + meta.get(5, 0)
        nulls = None if nulls is None or chunk_nulls is None else nulls + chunk_nulls
        if chunk_nulls is not None and meta.get(5, 0) - chunk_nulls <= 0:
            continue  # only NULLs: no bounds needed
        if 6 in stats and 5 in stats:
            raw = (stats[6], stats[5], stats.get(8, True), stats.get(7, True))
        elif 2 in stats and 1 in stats and _signed_order(node):
            raw = (stats[2], stats[1], True, True)
        else:
            missing_bounds = True
            lows.complete = highs.complete = False
            continue
        decoded = [_decode(node, r) for r in raw[:2]]
        saw_nan = saw_nan or any(d is not None and d[0] == "float" and d[1] != d[1] for d in decoded)
        low, high = (_bound_text(t, d, physical) for d in decoded)
        for bounds, text, exact in ((lows, low, raw[2]), (highs, high, raw[3])):
            if text is None:
                bounds.complete = False
            else:
                bounds.texts.append((text, bool(exact)))
    if values is None or nulls is None or nulls > values:
        value_count = null_count = None  # as DuckDB: both or neither
    else:
        value_count, null_count = values - nulls, nulls
    contains_nan = None
    if t in FLOAT_TYPES:
        if value_count == 0 or physical not in (FLOAT, DOUBLE):
            contains_nan = False
        elif nan_hint is not None:
            contains_nan = nan_hint
        elif saw_nan:
            contains_nan = True
        elif duckdb_writer:
            # DuckDB's Parquet writer (1.3 on) leaves min/max out of exactly the chunks that hold a NaN
            contains_nan = missing_bounds
        else:
            contains_nan = True  # unknown: other writers skip NaN silently; True means "maybe" to DuckDB
    low, high = lows.pick(t, True), highs.pick(t, False)
    if t in FLOAT_TYPES:
        # Parquet writers store a zero minimum as -0.0 and a zero maximum as +0.0 (the spec asks for it); DuckDB
        # prints the zero it holds, so MIN answered from metadata would say -0.0 for data holding 0.0
        low = "0.0" if low == "-0.0" else low
        high = "0.0" if high == "-0.0" else high
    return ColumnStats(col.column_id, size, value_count, null_count, low, high, contains_nan)


def _nan_aware_duckdb(created_by: str) -> bool:
    """Whether the file comes from a DuckDB whose writer omits min/max exactly where a chunk has NaNs (>= 1.3)."""
    m = re.match(r"DuckDB version v?(\d+)\.(\d+)", created_by)
    return m is not None and (int(m.group(1)), int(m.group(2))) >= (1, 3)


def file_column_stats(metadata: pq.FileMetaData | bytes, columns: Sequence[Column], *, by: str = "field_id",
                      contains_nan: Mapping[int, bool] | None = None) -> list[ColumnStats]:
    """One ColumnStats per leaf of the column trees that the file holds, in column_id order.

    metadata is a pyarrow FileMetaData (or the raw Thrift footer). Leaves are matched to Parquet columns by
    PARQUET field id (by="field_id") or by name path (by="name", lists and maps by structure).
    contains_nan optionally gives, per float column_id, what the writer knows about NaNs; otherwise it is
    inferred: exact for DuckDB-written files, True ("maybe") for other writers unless there are no values.
    """
    if by not in ("field_id", "name"):
        raise ValueError(f"by must be 'field_id' or 'name', not {by!r}")
    footer = _footer_thrift(metadata)
    root, leaves = _schema_tree(footer.get(2, []))
    ours = {leaf.column_id: leaf for top in columns for leaf in top.leaves() if not leaf.is_nested}
    matched: dict[int, _Node] = {}
    if by == "field_id":
        by_id = {leaf.field_id: leaf for leaf in reversed(leaves) if leaf.field_id is not None}
        matched = {cid: by_id[cid] for cid in ours if cid in by_id}
    else:
        for top in columns:
            node = root.child(top.name)
            if node is not None:
                _match_by_name(top, node, matched)
        matched = {cid: node for cid, node in matched.items() if cid in ours}
    writer = footer.get(6, b"").decode("utf-8", "replace")
    row_groups = footer.get(4, [])
    result = []
    for column_id in sorted(matched):
        node = matched[column_id]
        col = ours[column_id]
        metas = [rg[1][node.leaf_index].get(3) for rg in row_groups]
        hint = (contains_nan or {}).get(column_id)
        result.append(_leaf_stats(col, node, metas, _nan_aware_duckdb(writer), hint))
    return result


def merge_table_column_stats(existing: TableColumnStats | None, new: ColumnStats, type: str, *,
                             table_id: int | None = None) -> TableColumnStats:
    """Widen table-level stats by one file's stats, as DuckDB's MergeStats does (unknown stays unknown).

    table_id is needed only when there is no existing row.
    """
    has_null = None if new.null_count is None else new.null_count > 0
    if existing is None:
        if table_id is None:
            raise ValueError("table_id is required when there are no existing table column stats")
        return TableColumnStats(table_id, new.column_id, has_null, new.contains_nan, new.min_value, new.max_value)

    def either(a: bool | None, b: bool | None) -> bool | None:
        return None if a is None or b is None else a or b

    low, high = existing.min_value, existing.max_value
    any_valid = new.value_count is None or new.null_count is None or new.value_count > 0
    if any_valid:
        if low is None and high is None:  # DuckDB reads "no bounds yet" as "no values yet"
            low, high = new.min_value, new.max_value
        else:
            t = parse_type(type)
            if low is not None:
                low = None if new.min_value is None else min(low, new.min_value, key=lambda s: sort_key(t, s))
            if high is not None:
                high = None if new.max_value is None else max(high, new.max_value, key=lambda s: sort_key(t, s))
    return TableColumnStats(existing.table_id, existing.column_id, either(existing.contains_null, has_null),
                            either(existing.contains_nan, new.contains_nan), low, high)


def footer_size(path_or_file: str | os.PathLike[str] | IO[bytes]) -> int:
    """The little-endian int32 before the trailing 'PAR1' (the Thrift footer's length)."""
    if isinstance(path_or_file, str) and "://" in path_or_file:
        from ..read.deletes import footer_size as lake_footer_size  # through the storage seam

        return lake_footer_size(path_or_file)
    if isinstance(path_or_file, (str, os.PathLike)):
        with open(path_or_file, "rb") as opened:
            return footer_size(opened)
    f = path_or_file
    here = f.tell()
    try:
        f.seek(-8, os.SEEK_END)
        tail = f.read(8)
    finally:
        f.seek(here)
    if len(tail) != 8 or tail[4:] not in (b"PAR1", b"PARE"):
        raise InvalidDataFileError("not a Parquet file (no trailing PAR1)")
    return int.from_bytes(tail[:4], "little")
