"""Field ids on every node of a written Parquet file's schema, set by rewriting its footer (the data stays as it is).

Why: DuckDB maps a file's columns by field id when every top-level column has one, and then reads a list's element or
a map's key and value only if they carry ids too (DuckDB writes them on every node but the repeated groups). A
writer that cannot label those nodes (Spark labels top-level and struct fields only) registers its files with a name
mapping instead; but DuckDB 1.5 reads a name-mapped file's `_ducklake_internal_row_id` (an UPDATE's post-images)
by the name "2147483540", its field id printed, and fails on the file ("schema mismatch in glob"). Such a file gets
its field ids here, so it is read by field id as DuckDB's own are.

How: the footer is the file's FileMetaData in Thrift's compact protocol. Its schema list (field 2) is re-encoded with
field 9 (field_id) set on every SchemaElement that holds a table column; every other field is kept as it was.
The row groups' offsets point before the footer, so the new footer simply replaces the old one at the file's end.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InvalidDataFileError
from ..read.deletes import ROW_ID_COLUMN, ROW_ID_FIELD_ID, SNAPSHOT_COLUMN, SNAPSHOT_FIELD_ID
from ..records import Column
from ..storage import file_io, is_object_store, to_local
from .thrift_compact import (
    I32,
    LIST,
    STRUCT,
    encode_struct,
    fields,
    list_header,
    list_header_bytes,
    value,
    varint,
    zigzag,
)

_MAGIC = b"PAR1"
_FILE_SCHEMA = 2  # FileMetaData.schema: list<SchemaElement>
_NAME, _NUM_CHILDREN, _FIELD_ID = 4, 5, 9  # SchemaElement fields
_RESERVED = {ROW_ID_COLUMN: ROW_ID_FIELD_ID, SNAPSHOT_COLUMN: SNAPSHOT_FIELD_ID}


def label_field_ids(path: str, columns: Sequence[Column]) -> None:
    """Give every node of the file's schema that holds a table column (top level, struct fields, list elements, map
    keys and values) that column's id as its field id, and the lake's reserved columns theirs, by replacing the
    footer. A local file is rewritten in place from its footer on; an object is written again.

    Raises:
        InvalidDataFileError: the file is not plain Parquet, or its schema does not have the table's shape.
    """
    io = file_io(path)
    with io.open_input(path) as f:
        size = f.size()
        tail = f.read_at(8, size - 8) if size >= 12 else b""
        if tail[4:] != _MAGIC:
            raise InvalidDataFileError(f"{path}: not a plain Parquet file (no PAR1 footer magic)")
        length = int.from_bytes(tail[:4], "little")
        start = size - 8 - length
        footer = f.read_at(length, start)
        footer_out = relabelled_footer(footer, columns, path)
        if is_object_store(path):
            head = f.read_at(start, 0)  # an object cannot be cut and appended to: it is written again whole
    if is_object_store(path):
        with io.open_output(path) as out:
            out.write(head + _ended(footer_out))
        return
    with open(to_local(path), "r+b") as out:
        out.seek(start)
        out.write(_ended(footer_out))
        out.truncate()


def _ended(footer: bytes) -> bytes:
    return footer + len(footer).to_bytes(4, "little") + _MAGIC


def relabelled_footer(footer: bytes, columns: Sequence[Column], where: str) -> bytes:
    """The FileMetaData bytes with the schema's field ids set (see label_field_ids)."""
    try:
        top, _end = fields(footer, 0)
        schema = next(raw for fid, kind, raw in top if fid == _FILE_SCHEMA and kind == LIST)
        count, elem_type, pos = list_header(schema, 0)
        elements = []
        for _ in range(count):
            element, pos = fields(schema, pos)
            elements.append(element)
    except (IndexError, StopIteration) as e:
        raise InvalidDataFileError(f"{where}: cannot decode the Parquet footer's schema ({e!r})") from e
    if elem_type != STRUCT:
        raise InvalidDataFileError(f"{where}: the Parquet footer's schema is not a list of elements")
    ids = _field_ids(elements, columns, where)
    labelled = list_header_bytes(count, STRUCT) + b"".join(
        encode_struct(_with_id(e, i)) for e, i in zip(elements, ids, strict=True))
    return encode_struct([(fid, kind, labelled if fid == _FILE_SCHEMA else raw) for fid, kind, raw in top])


# ------------------------------------------------------------------------------------------ which node gets which id

def _field_ids(elements: list[list[tuple[int, int, bytes]]], columns: Sequence[Column], where: str) -> list[int | None]:
    """The field id of each schema element, in the footer's depth-first order (None: the root and repeated groups)."""
    ids: list[int | None] = [None] * len(elements)
    by_name = {c.name: c for c in columns}
    at = 1

    def visit(col: Column | None, reserved: int | None, path: str) -> None:
        nonlocal at
        if at >= len(elements):
            raise InvalidDataFileError(f"{where}: the file's schema ends before {path}")
        ids[at] = col.column_id if col is not None else reserved
        n = _int_field(elements[at], _NUM_CHILDREN)
        at += 1
        if col is None or not col.children:
            if n:
                raise InvalidDataFileError(f"{where}: file column {path} is a group, the table's is not")
            return
        if col.type == "struct":
            for _ in range(n):
                name = _name(elements[at]) if at < len(elements) else ""
                child = next((c for c in col.children if c.name == name), None)
                if child is None:
                    raise InvalidDataFileError(f"{where}: file field {path}.{name} matches no column of the table")
                visit(child, None, f"{path}.{name}")
            return
        # a list or a map: one repeated group (no id) holding the element, or the key and the value
        if n != 1 or at >= len(elements) or _int_field(elements[at], _NUM_CHILDREN) != len(col.children):
            raise InvalidDataFileError(f"{where}: file column {path} is not a {col.type} as the table's")
        at += 1
        for child in col.children:
            visit(child, None, f"{path}.{child.name}")

    for _ in range(_int_field(elements[0], _NUM_CHILDREN)):
        name = _name(elements[at]) if at < len(elements) else ""
        col = by_name.get(name)
        if col is None and name not in _RESERVED:
            raise InvalidDataFileError(f"{where}: file column {name!r} matches no column of the table")
        visit(col, _RESERVED.get(name), name)
    if at != len(elements):
        raise InvalidDataFileError(f"{where}: the file's schema has nodes the table does not")
    return ids


def _with_id(element: list[tuple[int, int, bytes]], field_id: int | None) -> list[tuple[int, int, bytes]]:
    kept = [f for f in element if f[0] != _FIELD_ID]
    if field_id is not None:
        kept.append((_FIELD_ID, I32, varint(zigzag(field_id))))
    return kept


def _int_field(element: list[tuple[int, int, bytes]], fid: int) -> int:
    return next((value(raw, 0, kind)[0] for f, kind, raw in element if f == fid), 0)


def _name(element: list[tuple[int, int, bytes]]) -> str:
    return next((value(raw, 0, kind)[0].decode() for f, kind, raw in element if f == _NAME), "")
