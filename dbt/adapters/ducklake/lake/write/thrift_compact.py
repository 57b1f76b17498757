"""Thrift's compact protocol, as much as Parquet footers (parquet.thrift's FileMetaData) need.

Reading: structs decode to {field_id: value}, enough to walk a footer including the fields pyarrow does not expose
(is_min_value_exact / is_max_value_exact, field ids of every schema node). Rewriting: a struct splits into its fields'
encoded values (`fields`), which `encode_struct` joins again after fields were added or replaced, every other byte as
it was.
"""

from __future__ import annotations

import struct
from typing import Any

from ..errors import InvalidDataFileError

I32, LIST, STRUCT = 5, 9, 12  # the type codes a caller names


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def unzigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def value(buf: bytes, pos: int, kind: int) -> tuple[Any, int]:
    """The value of a type at pos, and the position after it (a boolean field's value is in its header)."""
    if kind in (1, 2):  # booleans live in the type nibble
        return kind == 1, pos
    if kind == 3:
        return buf[pos], pos + 1
    if kind in (4, 5, 6):
        n, pos = read_varint(buf, pos)
        return unzigzag(n), pos
    if kind == 7:
        return struct.unpack_from("<d", buf, pos)[0], pos + 8
    if kind == 8:
        n, pos = read_varint(buf, pos)
        return bytes(buf[pos:pos + n]), pos + n
    if kind in (9, 10):
        size, elem, pos = list_header(buf, pos)
        items = []
        for _ in range(size):
            if elem in (1, 2):  # a boolean element takes one byte
                items.append(buf[pos] == 1)
                pos += 1
            else:
                item, pos = value(buf, pos, elem)
                items.append(item)
        return items, pos
    if kind == 11:
        size, pos = read_varint(buf, pos)
        if not size:
            return {}, pos
        kinds = buf[pos]
        pos += 1
        out = {}
        for _ in range(size):
            k, pos = value(buf, pos, kinds >> 4)
            out[k], pos = value(buf, pos, kinds & 0x0F)
        return out, pos
    if kind == 12:
        return read_struct(buf, pos)
    raise InvalidDataFileError(f"bad Thrift type {kind} in Parquet footer")


def list_header(buf: bytes, pos: int) -> tuple[int, int, int]:
    """(size, element type, position of the first element) of the list header at pos."""
    header = buf[pos]
    size, elem, pos = header >> 4, header & 0x0F, pos + 1
    if size == 15:
        size, pos = read_varint(buf, pos)
    return size, elem, pos


def list_header_bytes(size: int, elem: int) -> bytes:
    return bytes([(size << 4) | elem]) if size < 15 else bytes([0xF0 | elem]) + varint(size)


def read_struct(buf: bytes, pos: int) -> tuple[dict[int, Any], int]:
    """A struct's fields as {field id: value}, and the position after the struct."""
    out: dict[int, Any] = {}
    last = 0
    while buf[pos]:
        last, kind, pos = _field_header(buf, pos, last)
        out[last], pos = value(buf, pos, kind)
    return out, pos + 1


def fields(buf: bytes, pos: int) -> tuple[list[tuple[int, int, bytes]], int]:
    """A struct's fields as (field id, type, encoded value), and the position after the struct."""
    out: list[tuple[int, int, bytes]] = []
    last = 0
    while buf[pos]:
        last, kind, start = _field_header(buf, pos, last)
        pos = value(buf, start, kind)[1]
        out.append((last, kind, buf[start:pos]))
    return out, pos + 1


def encode_struct(items: list[tuple[int, int, bytes]]) -> bytes:
    """A struct of (field id, type, encoded value) fields, in field id order."""
    out, last = bytearray(), 0
    for fid, kind, raw in sorted(items, key=lambda f: f[0]):
        delta = fid - last
        if 0 < delta <= 15:
            out.append((delta << 4) | kind)
        else:
            out.append(kind)
            out += varint(zigzag(fid))
        out += raw
        last = fid
    out.append(0)
    return bytes(out)


def _field_header(buf: bytes, pos: int, last: int) -> tuple[int, int, int]:
    """(field id, type, position of the value) of the field header at pos; last: the struct's previous field id."""
    header = buf[pos]
    delta, kind = header >> 4, header & 0x0F
    if delta:
        return last + delta, kind, pos + 1
    n, pos = read_varint(buf, pos + 1)
    return unzigzag(n), kind, pos
