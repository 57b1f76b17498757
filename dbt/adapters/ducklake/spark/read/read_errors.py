"""Spark's errors reading a lake file, told as errors about the lake file.

Spark reads a lake table's files through paths of the Spark layer's own: a manifest's symlinks
(`_ducklake_spark/t<table id>/.../f<data file id>_r<row id>.parquet`), readable copies (`.../readable/<key>.parquet`,
remotely `.../readable/s<job>/__ducklake_copy=<key>/part-*.parquet`), or the lake files themselves (the footer path,
the first reader's data source). The lake layer checks every file before a read (lake/read/file_checks.py); a file
removed or damaged after that check, or damaged with its size intact, still fails in Spark, whose error names its own
path deep in a JVM stack. Each read notes which lake files it reads (`note_files`, `note_copy`); `lake_file_error`
finds a noted path in an error's text and returns the MissingDataFileError of the lake file it stands for (its
catalog path, and what is wrong with it now), or None for any other error.

Noting costs a reference per read (the lookup tables are built only when an error is explained).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence

from ...lake.errors import MissingDataFileError
from ...lake.read.file_checks import ListedFile, damaged, problem_of, scan_files
from ...lake.records import DataFile

_NOTED_READS = 256  # the latest reads remembered (table and snapshot each): older ones are not explained
_lock = threading.Lock()
# (table id, snapshot id, context) -> the data files read
_reads: OrderedDict[tuple[int, int, str], Sequence[DataFile]] = OrderedDict()
_copies: dict[str, str] = {}  # a readable copy (its key) -> the lake file it copies

# a path in an error's text: a URI or an absolute path, up to a quote, blank or bracket
_PATH = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*:)?/[^\s'\"`()\[\],;]+")
_LINK = re.compile(r"/t(\d+)/(?:[^/]+/)*f(\d+)_r\d+[^/]*\.parquet$")
_REMOTE_COPY = re.compile(r"__ducklake_copy=([0-9a-f]+)")


def note_files(table_id: int, context: str, snapshot_id: int, files: Sequence[DataFile]) -> None:
    """A read of these data files of a table at a snapshot (context: how errors name it, file_checks.table_context)."""
    key = (table_id, snapshot_id, context)
    with _lock:
        _reads[key] = files
        _reads.move_to_end(key)
        while len(_reads) > _NOTED_READS:
            _reads.popitem(last=False)


def note_copy(copy: str, original: str) -> None:
    """A readable copy (its path, or a remote copy's key) of a lake file (its catalog path)."""
    with _lock:
        _copies[_key(copy)] = original


def lake_file_error(text: str) -> MissingDataFileError | None:
    """The error about the lake file behind a failed read whose error text names a path a noted read reads (a lake
    file, a manifest's link to one, a readable copy of one), when that lake file is missing or damaged now."""
    candidates = _PATH.findall(text)
    if not candidates:
        return None
    with _lock:
        reads = list(_reads.items())
        copies = dict(_copies)
    by_path: dict[str, tuple[str, ListedFile]] = {}
    by_id: dict[tuple[int, int], tuple[str, ListedFile]] = {}
    for (table_id, snapshot_id, context), files in reads:  # later reads win
        for f in files:
            by_id[(table_id, f.data_file_id)] = (context, ListedFile(f.path, f.file_size_bytes))
        for lf in scan_files(files, snapshot_id):
            by_path[_key(lf.path)] = (context, lf)
    for candidate in dict.fromkeys(c.rstrip(".:") for c in candidates):
        key = _key(candidate)
        found = by_path.get(key)
        if found is None and key in copies:
            found = by_path.get(_key(copies[key]))
        if found is None:
            remote = _REMOTE_COPY.search(candidate)
            if remote is not None and remote.group(1) in copies:
                found = by_path.get(_key(copies[remote.group(1)]))
        if found is None:
            link = _LINK.search(candidate)
            if link is not None:
                found = by_id.get((int(link.group(1)), int(link.group(2))))
        if found is None:
            continue
        context, lf = found
        problem = problem_of(lf, footer=True)
        if problem is not None:
            return damaged(context, lf, problem)
    return None


def _key(path: str) -> str:
    """A path as compared here: without its scheme and leading slashes (Spark writes file:/x, file:///x and s3a://
    for the catalog's /x, file:///x and s3://)."""
    return re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*:", "", path).lstrip("/")
