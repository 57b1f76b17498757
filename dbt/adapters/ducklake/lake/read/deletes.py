"""Delete files, laid out as the reference writes and reads them: positional Parquet files (read by position and
type) and deletion vectors.

A deletion vector (a lake with the `write_deletion_vectors` option; `ducklake_delete_file.format` 'puffin', named
`…-delete.puffin`) is, as DuckDB 1.5 writes it, one blob of Iceberg's deletion-vector-v1 layout and nothing else: a
4-byte big-endian length of what follows up to the checksum, the magic D1 D3 39 64, the deleted positions as a 64-bit
Roaring bitmap in its portable serialization (without run containers), and a big-endian CRC-32 of magic and bitmap.
It holds no per-position snapshot: every position counts from the delete file's begin_snapshot. DuckLake 1.1 also
keeps one data file's deletes of several snapshots in one Puffin file of such blobs, each naming its snapshot
(see puffin): there, a position counts from the first snapshot whose vector holds it.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap64

from ..errors import NotParquetError
from ..paths import is_local, to_local
from ..storage import file_io
from . import puffin

FILE_PATH_FIELD_ID = 2147483646
POS_FIELD_ID = 2147483645
SNAPSHOT_FIELD_ID = 2147483539
ROW_ID_FIELD_ID = 2147483540
SNAPSHOT_COLUMN = "_ducklake_internal_snapshot_id"
ROW_ID_COLUMN = "_ducklake_internal_row_id"


def _field(name: str, type_: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(name, type_, nullable=True, metadata={b"PARQUET:field_id": str(field_id).encode()})


@dataclass(frozen=True)
class DeletePositions:
    """The deleted positions of one data file, each with the snapshot that deleted it."""

    positions: tuple[int, ...]
    snapshots: tuple[int, ...]


DV_MAGIC = b"\xd1\xd3\x39\x64"


class DeleteFileFormatError(ValueError):
    """A delete file that is neither a positional Parquet file nor a deletion vector this reader knows."""


def read_deletion_vector(path: str) -> np.ndarray:
    """The positions (sorted int64) of a deletion vector file (see the module), every snapshot's of a Puffin file.

    Raises:
        DeleteFileFormatError: not a deletion vector blob or Puffin file, or a bad checksum.
    """
    with file_io(path).open_input(path) as fh:
        raw = fh.read()
    return _vector_arrays(path, raw)[0]


def _vector_arrays(path: str, raw: bytes) -> tuple[np.ndarray, np.ndarray | None]:
    """(positions, the snapshot of each or None) of a bare deletion vector or a Puffin file of several."""
    if raw[:4] != puffin.MAGIC:
        return _deletion_vector_positions(path, raw), None
    vectors = [(b.snapshot, _deletion_vector_positions(path, raw[b.offset:b.offset + b.length]))
               for b in _puffin_blobs(path, raw)]
    return puffin.attribute(vectors)


def _puffin_blobs(path: str, raw: bytes) -> list[puffin.Blob]:
    try:
        return puffin.blobs(path, raw)
    except puffin.PuffinFormatError as e:
        raise DeleteFileFormatError(str(e)) from None


def _deletion_vector_positions(path: str, raw: bytes) -> np.ndarray:
    if len(raw) < 12 or raw[4:8] != DV_MAGIC:
        raise DeleteFileFormatError(f"{path} is not a deletion vector (no D1 D3 39 64 magic after its length)")
    (n,) = struct.unpack(">I", raw[:4])
    body, tail = raw[4:4 + n], raw[4 + n:8 + n]
    if len(body) != n or len(tail) != 4 or struct.unpack(">I", tail)[0] != zlib.crc32(body):
        raise DeleteFileFormatError(f"{path}: the deletion vector's length or checksum does not match its content")
    return np.asarray(BitMap64.deserialize(body[4:]).to_array(), dtype=np.int64)


def deletion_vector_blob(positions: Iterable[int]) -> tuple[bytes, int]:
    """One deletion-vector-v1 blob of the positions, byte for byte as DuckDB writes it, and its cardinality."""
    values = np.unique(np.asarray(positions if isinstance(positions, np.ndarray) else list(positions), dtype=np.int64))
    # no run containers: DuckDB writes (and its reader expects) array and bitmap containers only
    body = DV_MAGIC + BitMap64(values.tolist(), optimize=False).serialize()
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body)), int(values.size)


def write_deletion_vector(path: str, positions: Iterable[int]) -> int:
    """Write the positions as a deletion vector file, byte for byte as DuckDB does; returns the file's size."""
    blob, _ = deletion_vector_blob(positions)
    with file_io(path).open_output(path) as out:
        out.write(blob)
    return len(blob)


def write_puffin_deletes(path: str, data_file_path: str, deletes: DeletePositions) -> tuple[int, int]:
    """Write a data file's deletes of several snapshots as DuckLake 1.1 does: a Puffin file of one cumulative
    vector per snapshot (see puffin). Returns (size, footer size)."""
    pos = np.asarray(deletes.positions, dtype=np.int64)
    snaps = np.asarray(deletes.snapshots, dtype=np.int64)
    blobs = []
    for s in np.unique(snaps).tolist():
        blob, count = deletion_vector_blob(pos[snaps <= s])
        blobs.append((int(s), blob, count))
    raw = puffin.container(blobs, data_file_path)
    with file_io(path).open_output(path) as out:
        out.write(raw)
    return len(raw), puffin.footer_size(raw)


def read_delete_arrays(path: str, begin_snapshot: int) -> tuple[pa.Array, pa.Array]:
    """A delete file's (positions, snapshots) as int64 arrays, read by position as the reference does (file_path,
    pos[, snapshot]); a file without the snapshot column (or a deletion vector) deleted everything at
    begin_snapshot. One ParquetFile read (pq.read_table's dataset set-up costs several times a small file's read) of
    just those columns: the file_path column (a string per row) is not decoded, which more than halves the read of a
    small delete file; no pre-buffer and no threads of its own (callers read many files in parallel)."""
    if is_local(path):
        if is_deletion_vector(path):
            with open(to_local(path), "rb") as fh:
                return _vector_at(path, fh.read(), begin_snapshot)
        f = pq.ParquetFile(to_local(path), pre_buffer=False)
        names = f.schema_arrow.names
        table = f.read(columns=names[1:3], use_threads=False)
    else:
        # one request on an object store: the whole (small) file, told apart by its first bytes in memory
        with file_io(path).open_input(path) as source:
            raw = source.read()
        if raw[4:8] == DV_MAGIC or raw[:4] == puffin.MAGIC:
            return _vector_at(path, raw, begin_snapshot)
        f = pq.ParquetFile(pa.BufferReader(raw), pre_buffer=False)
        names = f.schema_arrow.names
        table = f.read(columns=names[1:3], use_threads=False)
    pos = table.column(0).combine_chunks().cast(pa.int64())
    if table.num_columns >= 2:
        return pos, table.column(1).combine_chunks().cast(pa.int64())
    return pos, pa.array([begin_snapshot] * len(pos), pa.int64())


def delete_file_has_snapshots(path: str) -> bool:
    """Whether a delete file names the snapshot of each position (a Parquet file with the snapshot column); a file
    without it (or a deletion vector) deleted everything at its begin_snapshot."""
    if is_deletion_vector(path):
        with file_io(path).open_input(path) as fh:
            raw = fh.read()
        # a Puffin file's footer says whether its vectors name their snapshots; no vector need be decoded
        return raw[:4] == puffin.MAGIC and any(b.snapshot is not None for b in _puffin_blobs(path, raw))
    with file_io(path).open_input(path) as source:
        return SNAPSHOT_COLUMN in pq.ParquetFile(source, pre_buffer=False).schema_arrow.names


def _vector_at(path: str, raw: bytes, begin_snapshot: int) -> tuple[pa.Array, pa.Array]:
    """A deletion vector's positions with their snapshots: a Puffin file's own, else the file's begin snapshot."""
    pos, snaps = _vector_arrays(path, raw)
    if snaps is None:
        snaps = np.full(pos.size, begin_snapshot, dtype=np.int64)
    return pa.array(pos, pa.int64()), pa.array(snaps, pa.int64())


def is_deletion_vector(path: str) -> bool:
    """Whether a delete file is a deletion vector (by its first bytes, whatever its name: Parquet starts with
    PAR1; a deletion vector with its length, then the magic)."""
    if is_local(path):
        with open(to_local(path), "rb") as fh:
            head = fh.read(8)
    else:
        with file_io(path).open_input(path) as fh:
            head = fh.read_at(8, 0) if fh.size() >= 8 else b""
    return head[4:8] == DV_MAGIC or head[:4] == puffin.MAGIC


def read_delete_file(path: str, begin_snapshot: int) -> DeletePositions:
    """Positions (and per-position snapshots, or begin_snapshot for files without that column) of a delete file."""
    pos, snaps = read_delete_arrays(path, begin_snapshot)
    return DeletePositions(tuple(pos.to_pylist()), tuple(snaps.to_pylist()))


def merge_positions(existing: DeletePositions | None, new: Iterable[int], snapshot_id: int) -> DeletePositions:
    """All deletes of a data file after this commit: the old ones (kept with their snapshots) plus the new ones."""
    added = np.asarray(new if isinstance(new, np.ndarray) else [int(p) for p in new], dtype=np.int64)
    old_pos = np.asarray(existing.positions if existing is not None else (), dtype=np.int64)
    old_snaps = np.asarray(existing.snapshots if existing is not None else (), dtype=np.int64)
    positions = np.concatenate([old_pos, added])
    snapshots = np.concatenate([old_snaps, np.full(added.size, snapshot_id, dtype=np.int64)])
    # a position deleted before keeps its snapshot: a stable sort keeps the old occurrence of a value first
    order = np.argsort(positions, kind="stable")
    positions, snapshots = positions[order], snapshots[order]
    first = np.r_[True, positions[1:] != positions[:-1]] if positions.size else np.zeros(0, bool)
    return DeletePositions(tuple(positions[first].tolist()), tuple(snapshots[first].tolist()))


def _repeated(text: str, n: int) -> pa.Array:
    """A string array of `text` n times, built from its buffers (a Python list of n references costs ~0.5 s per
    million rows, a take of one value ~0.1 s)."""
    raw = text.encode()
    if len(raw) * n >= 2**31:  # beyond 32-bit offsets
        return pa.array([text], pa.string()).take(pa.array(np.zeros(n, dtype=np.int32)))
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pa.py_buffer(raw * n))


def write_delete_file(path: str, data_file_path: str, deletes: DeletePositions, with_snapshots: bool) -> tuple[int, int]:
    """Write a delete file (file_path, pos[, _ducklake_internal_snapshot_id]); returns (size, footer_size)."""
    n = len(deletes.positions)
    fields = [_field("file_path", pa.string(), FILE_PATH_FIELD_ID), _field("pos", pa.int64(), POS_FIELD_ID)]
    arrays = [_repeated(data_file_path, n), pa.array(deletes.positions, pa.int64())]
    if with_snapshots:
        fields.append(_field(SNAPSHOT_COLUMN, pa.int64(), SNAPSHOT_FIELD_ID))
        arrays.append(pa.array(deletes.snapshots, pa.int64()))
    table = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    fio = file_io(path)
    with fio.open_output(path) as out:
        pq.write_table(table, out, compression="snappy", row_group_size=DELETE_ROW_GROUP_ROWS)
    return fio.size(path), footer_size(path)


DELETE_ROW_GROUP_ROWS = 1 << 20


def delete_row_groups(count: int) -> int:
    """The row groups of a Parquet delete file of count positions that write_delete_file writes."""
    return max(1, -(-count // DELETE_ROW_GROUP_ROWS))


def footer_size(path: str) -> int:
    """The Parquet footer length: the little-endian int32 before the trailing 'PAR1'."""
    with file_io(path).open_input(path) as fh:
        size = fh.size()
        tail = fh.read_at(8, size - 8) if size >= 8 else b""
    if tail[4:] != b"PAR1":
        raise NotParquetError(f"{path} is not a Parquet file (no PAR1 magic at the end)")
    return int.from_bytes(tail[:4], "little")
