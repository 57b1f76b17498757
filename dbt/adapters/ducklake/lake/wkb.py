"""WKB (what DuckDB stores a GEOMETRY as in Parquet) to WKT text exactly as DuckDB prints it (`g::VARCHAR`,
`ST_AsText(g)`): `POINT (1 2)`, `POINT Z (1 2 3)`, `MULTIPOINT (1 2, 3 4)`, `POLYGON EMPTY`, numbers as the shortest
text that reads back the same double (`0.1`, `1e+20`, `-0`). ISO WKB (Z/M by +1000/2000/3000) and EWKB flags."""

from __future__ import annotations

import math
import struct

_NAMES = {1: "POINT", 2: "LINESTRING", 3: "POLYGON", 4: "MULTIPOINT", 5: "MULTILINESTRING", 6: "MULTIPOLYGON",
          7: "GEOMETRYCOLLECTION"}


class WKBError(ValueError):
    """Bytes that are not WKB."""


_POINT_LE = b"\x01\x01\x00\x00\x00"  # a little-endian 2D point, the common case: read without the general parser
_XY = "<dd"  # a format, not a struct.Struct: the module is shipped to Spark executors by value (pickled)


def to_wkt(data: bytes) -> str:
    """The WKT text DuckDB 1.5 prints for a WKB geometry.

    Raises:
        WKBError: the bytes are not WKB of a geometry DuckDB has.
    """
    if len(data) == 21 and data[:5] == _POINT_LE:
        x, y = struct.unpack_from(_XY, data, 5)
        if x != x and y != y:  # both NaN
            return "POINT EMPTY"
        return f"POINT ({_number(x)} {_number(y)})"
    try:
        text, _end, _empty = _parse(memoryview(data), 0)
    except (struct.error, IndexError) as e:
        raise WKBError(f"not WKB: {bytes(data[:16]).hex()}...") from e
    return text


def _number(x: float) -> str:
    text = repr(x)
    return text[:-2] if text.endswith(".0") else text


def _parse(buf: memoryview, at: int) -> tuple[str, int, bool]:
    """(WKT, offset after, whether the geometry is empty) of the geometry at offset at."""
    order = "<" if buf[at] == 1 else ">"
    (code,) = struct.unpack_from(order + "I", buf, at + 1)
    at += 5
    has_z = bool(code & 0x80000000)
    has_m = bool(code & 0x40000000)
    if code & 0x20000000:  # EWKB SRID: skipped
        at += 4
    code &= 0x0FFFFFFF
    kind, dims = code % 1000, code // 1000
    has_z = has_z or dims in (1, 3)
    has_m = has_m or dims in (2, 3)
    name = _NAMES.get(kind)
    if name is None:
        raise WKBError(f"WKB geometry type {code} is not one DuckDB has")
    tag = name + (" ZM" if has_z and has_m else " Z" if has_z else " M" if has_m else "")
    n_dims = 2 + has_z + has_m
    fmt = order + "d" * n_dims

    def coords(count: int, at: int) -> tuple[list[str], int]:
        out = []
        for _ in range(count):
            out.append(" ".join(_number(v) for v in struct.unpack_from(fmt, buf, at)))
            at += 8 * n_dims
        return out, at

    def count(at: int) -> tuple[int, int]:
        return struct.unpack_from(order + "I", buf, at)[0], at + 4

    if kind == 1:
        values = struct.unpack_from(fmt, buf, at)
        at += 8 * n_dims
        if all(math.isnan(v) for v in values):
            return f"{tag} EMPTY", at, True
        return f"{tag} ({' '.join(_number(v) for v in values)})", at, False
    if kind == 2:
        n, at = count(at)
        points, at = coords(n, at)
        return (f"{tag} ({', '.join(points)})" if n else f"{tag} EMPTY"), at, not n
    if kind == 3:
        rings_n, at = count(at)
        rings = []
        for _ in range(rings_n):
            n, at = count(at)
            points, at = coords(n, at)
            rings.append(f"({', '.join(points)})" if n else "EMPTY")
        return (f"{tag} ({', '.join(rings)})" if rings_n else f"{tag} EMPTY"), at, not rings_n
    n, at = count(at)
    parts = []
    for _ in range(n):
        text, at, empty = _parse(buf, at)
        if kind == 7:
            parts.append(text)
        elif empty:
            parts.append("EMPTY")
        else:  # a member of a MULTI*: its text without the type name ("POINT (1 2)" -> "1 2")
            inner = text[text.index("("):]
            parts.append(inner[1:-1] if kind == 4 else inner)
    return (f"{tag} ({', '.join(parts)})" if n else f"{tag} EMPTY"), at, not n
