"""Puffin files of deletion vectors as DuckLake 1.1 writes them: one data file's deletes of several snapshots.

Layout (Iceberg's Puffin): `PFA1`, the blobs, `PFA1`, a JSON footer payload (uncompressed), its length (u32
little-endian), flags (u32, 0), `PFA1`. Each blob is a complete deletion-vector-v1 blob (length, magic, 64-bit
Roaring bitmap, CRC) of every position deleted as of its snapshot, named by the blob property
`ducklake-snapshot-id`: blobs are cumulative, so a position was deleted at the first blob snapshot that holds it.
A file of one snapshot is the bare blob, without the container (see deletes).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAGIC = b"PFA1"
BLOB_TYPE = "deletion-vector-v1"
SNAPSHOT_PROPERTY = "ducklake-snapshot-id"


class PuffinFormatError(ValueError):
    """A Puffin file this reader cannot take (bad magic, compressed footer, mixed blob properties)."""


@dataclass(frozen=True)
class Blob:
    offset: int
    length: int
    snapshot: int | None


def blobs(path: str, raw: bytes) -> list[Blob]:
    """The deletion-vector blobs a Puffin file's footer lists, in file order (other blob types are skipped).

    Raises:
        PuffinFormatError: not a Puffin file, a compressed footer or flags set, or only some blobs naming a snapshot.
    """
    if len(raw) < 16 or raw[:4] != MAGIC or raw[-4:] != MAGIC:
        raise PuffinFormatError(f"{path} is not a Puffin file (no PFA1 magic at its start and end)")
    size, flags = struct.unpack("<II", raw[-12:-4])
    start = len(raw) - 12 - size
    if start < 8 or raw[start - 4:start] != MAGIC:
        raise PuffinFormatError(f"{path}: the Puffin footer's length does not match the file")
    if flags != 0:
        raise PuffinFormatError(f"{path}: the Puffin footer is compressed (flags {flags}); DuckLake writes it plain")
    try:
        footer = json.loads(raw[start:start + size])
    except ValueError as e:
        raise PuffinFormatError(f"{path}: the Puffin footer is not JSON ({e})") from None
    out = []
    for b in footer.get("blobs", []):
        if b.get("type") != BLOB_TYPE:
            continue
        snap = (b.get("properties") or {}).get(SNAPSHOT_PROPERTY)
        out.append(Blob(int(b["offset"]), int(b["length"]), int(snap) if snap is not None else None))
    named = {b.snapshot is not None for b in out}
    if len(named) > 1:
        raise PuffinFormatError(f"{path}: some deletion vectors name their snapshot ({SNAPSHOT_PROPERTY}) and some "
                                "do not; the file is not one DuckLake writes")
    return out


def attribute(vectors: Sequence[tuple[int | None, np.ndarray]]) -> tuple[np.ndarray, np.ndarray | None]:
    """(positions, snapshot of each) from cumulative vectors: a position counts from the first snapshot whose
    vector holds it. Vectors without snapshots are a plain union (snapshots None)."""
    if not vectors:
        return np.zeros(0, np.int64), None
    if vectors[0][0] is None:
        return np.unique(np.concatenate([v for _, v in vectors])), None
    ordered = sorted(vectors, key=lambda sv: sv[0])  # type: ignore[arg-type, return-value]
    positions = np.concatenate([v for _, v in ordered])
    snapshots = np.concatenate([np.full(v.size, s, np.int64) for s, v in ordered])
    order = np.argsort(positions, kind="stable")  # stable: the earliest snapshot of a position comes first
    positions, snapshots = positions[order], snapshots[order]
    first = np.r_[True, positions[1:] != positions[:-1]] if positions.size else np.zeros(0, bool)
    return positions[first], snapshots[first]


def container(blob_bytes: Sequence[tuple[int, bytes, int]], referenced_file: str) -> bytes:
    """A Puffin file of deletion-vector blobs: (snapshot, blob, cardinality) each, as DuckLake 1.1 writes it."""
    body = bytearray(MAGIC)
    listed = []
    for snapshot, blob, cardinality in blob_bytes:
        listed.append({"type": BLOB_TYPE, "fields": [], "snapshot-id": -1, "sequence-number": -1,
                       "offset": len(body), "length": len(blob),
                       "properties": {"referenced-data-file": referenced_file, "cardinality": str(cardinality),
                                      SNAPSHOT_PROPERTY: str(snapshot)}})
        body += blob
    payload = json.dumps({"blobs": listed, "properties": {"created-by": "ducklake"}},
                         separators=(",", ":")).encode()
    return bytes(body + MAGIC + payload + struct.pack("<II", len(payload), 0) + MAGIC)


def footer_size(raw: bytes) -> int:
    """A Puffin file's footer_size as DuckLake records it: the footer payload and the 12 bytes after it."""
    (payload,) = struct.unpack("<I", raw[-12:-8])
    return payload + 12
