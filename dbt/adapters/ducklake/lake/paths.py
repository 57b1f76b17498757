"""Paths in a lake: joining data_path, schema, table and file parts; local file access; file names."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .storage import FileIO, LocalFileIO, file_io, to_local  # to_local: lake paths' one local form

__all__ = ["FileIO", "LocalFileIO", "file_io"]  # the seam lives in storage.py; these names stay importable here

if TYPE_CHECKING:
    from .records import SchemaInfo, TableInfo

logger = logging.getLogger(__name__)
# what a file a cleanup could not remove becomes, and what finds it
LEFT_BEHIND = "left behind: ducklake_delete_orphaned_files removes it"


def join_path(base: str, rel: str) -> str:
    """base + rel, with exactly one '/' between them (DuckDB stores directory parts with a trailing '/')."""
    if not base:
        return rel
    if not rel:
        return base
    return base.rstrip("/") + "/" + rel.lstrip("/")


def as_dir(path: str) -> str:
    """A directory path with its trailing '/', as DuckDB stores data_path and schema/table paths."""
    return path if path.endswith("/") else path + "/"


def is_local(path: str) -> bool:
    """Whether a lake path is on the local file system (a plain path or a file:// URI), which the driver reads and
    links itself; anything else (s3://, gs://, hdfs://, ...) is read by Spark only."""
    return "://" not in path or path.startswith("file://")


def relative_to(path: str, base: str) -> str | None:
    """path relative to the directory base, or None if it is not inside it."""
    b = as_dir(base)
    return path[len(b) :] if path.startswith(b) else None


def uuid7() -> uuid.UUID:
    """A time-ordered UUIDv7, as DuckDB names its files and objects."""
    ms = time.time_ns() // 1_000_000
    rand = secrets.randbits(74)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return uuid.UUID(int=value)


def data_file_name() -> str:
    """A new data file name, 'ducklake-<uuidv7>.parquet'."""
    return f"ducklake-{uuid7()}.parquet"


def delete_file_name(deletion_vector: bool = False) -> str:
    """A new delete file name, 'ducklake-<uuidv7>-delete.parquet' ('.puffin' for a deletion vector)."""
    return f"ducklake-{uuid7()}-delete.{'puffin' if deletion_vector else 'parquet'}"


def table_directory(data_path: str, schema: SchemaInfo, table: TableInfo) -> str:
    """A table's directory: data_path + schema path + table path (each joined when relative)."""
    base = join_path(data_path, schema.path) if schema.path_is_relative else schema.path
    if not table.path:
        return base
    return join_path(base, table.path) if table.path_is_relative else table.path


def by_file_io(paths: Iterable[str]) -> list[tuple[FileIO, list[str]]]:
    """The paths grouped by the FileIO that reaches them (so that each store gets its files in one batch)."""
    groups: dict[int, tuple[FileIO, list[str]]] = {}
    for path in paths:
        fio = file_io(path)
        groups.setdefault(id(fio), (fio, []))[1].append(path)
    return list(groups.values())


def discard_files(paths: Iterable[str], root: str | None = None) -> None:
    """Remove written files that no commit references (missing ones are fine), and the directories below root that
    this leaves empty (a table's partition directories; an object store has none to remove).

    Best effort: this runs after a failure (often of the storage itself, which may refuse the deletes too), whose
    error is the one to report; a file that cannot be removed is logged and left as an orphan."""
    for fio, group in by_file_io(paths):
        try:
            fio.delete_many(group)  # one request per 1,000 files on S3
        except OSError as e:
            logger.warning(f"could not remove every file ({e}); {LEFT_BEHIND}")
        if root is not None:
            found = {p.rsplit("/", 1)[0] if "://" in p else os.path.dirname(os.path.abspath(to_local(p)))
                     for p in group}
            with contextlib.suppress(OSError):  # an empty directory left is harmless
                fio.prune_empty_dirs(found, root)


def discard_dir(directory: str) -> None:
    """Remove a directory of written files (a writer's staging directory), best effort as discard_files."""
    try:
        file_io(directory).delete_dir(directory)
    except OSError as e:
        logger.warning(f"could not remove {directory} ({e}); {LEFT_BEHIND}")
