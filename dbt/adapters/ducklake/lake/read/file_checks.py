"""Whether the files a read opens are on storage as the catalog lists them, and errors naming those that are not.

Why: Spark lists a manifest's symlinks (spark/read/manifest.py) and a footer-path glob (`dir/{a,b}`) and silently leaves
out a file that is not there, so a missing data file reads as no rows and a model built from it commits an empty or
partial table. DuckDB refuses such a read ("Cannot open file ..."); so does every reader here, naming the table, the
snapshot and the file's catalog path.

The check is cheap and done once per file and process (a data or delete file never changes once written): a stat of
a local file, one listing per directory elsewhere (pyarrow's file systems), each compared with the catalog's
file_size_bytes. A file of the right size whose bytes are damaged is found when it is read (`reading`, and the Spark
layer's mapping of its read errors), or by the lake check (lake/maintenance/check.py), which can read every footer.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from .. import paths, storage
from ..errors import MissingDataFileError
from ..records import DataFile

DATA_FILE = "data file"
DELETE_FILE = "delete file"
ADVICE = "restore it from a backup (to the same path), or rebuild the table from its source"
_PARQUET_MAGIC = (b"PAR1", b"PARE")  # PARE: an encrypted footer (DuckDB's ENCRYPTED lakes)

_lock = threading.Lock()
_verified: dict[str, int | None] = {}  # path -> the catalog size it was found with by this process
_UNKNOWN = -1  # no size a file has


@dataclass(frozen=True)
class ListedFile:
    """A file as the catalog lists it: its resolved path, its size in bytes (None if not recorded), its kind."""

    path: str
    size: int | None
    kind: str = DATA_FILE
    rows: int | None = None  # a data file's record count, compared with its footer's where footers are read


def table_context(schema: str, table: str, snapshot_id: int) -> str:
    """How an error names what was being read: `lake table raw.events at snapshot 3`."""
    return f"lake table {schema}.{table} at snapshot {snapshot_id}"


def data_file(f: DataFile) -> ListedFile:
    """A data file as the catalog lists it."""
    return ListedFile(f.path, f.file_size_bytes, DATA_FILE)


def scan_files(files: Iterable[DataFile], snapshot_id: int) -> list[ListedFile]:
    """The files a read of these data files at snapshot_id opens: each data file, and its delete file when the
    snapshot sees it."""
    out = []
    for f in files:
        out.append(data_file(f))
        d = f.delete_file
        if d is not None and d.begin_snapshot <= snapshot_id:
            out.append(ListedFile(d.path, d.file_size_bytes, DELETE_FILE))
    return out


def verify_scan(context: str, files: Sequence[DataFile], snapshot_id: int) -> None:
    """`verify` of the files a read of these data files at snapshot_id opens (`scan_files`), without a record made
    per file (a read of 10,000 files checked before costs a dict lookup per file).

    Raises:
        MissingDataFileError: a file is missing or of another size than listed.
    """
    todo: dict[str, tuple[int | None, str]] = {}
    with _lock:
        known = _verified.get
        for f in files:
            if known(f.path, _UNKNOWN) != f.file_size_bytes:
                todo[f.path] = (f.file_size_bytes, DATA_FILE)
            d = f.delete_file
            if d is not None and d.begin_snapshot <= snapshot_id and known(d.path, _UNKNOWN) != d.file_size_bytes:
                todo[d.path] = (d.file_size_bytes, DELETE_FILE)
    if todo:
        _check(context, todo)


def verify(context: str, files: Iterable[ListedFile]) -> None:
    """Check that each file is on storage with the size the catalog lists (files found so before by this process are
    not looked at again).

    Raises:
        MissingDataFileError: a file is missing or of another size; the message names the first one and counts the
            others.
    """
    with _lock:
        todo = {f.path: (f.size, f.kind) for f in files if _verified.get(f.path, _UNKNOWN) != f.size}
    if todo:
        _check(context, todo)


def _check(context: str, todo: dict[str, tuple[int | None, str]]) -> None:
    """Look at these files (path -> (catalog size, kind)) on storage; remember the sound ones, raise for the rest."""
    found = sizes(list(todo))
    bad: list[str] = []
    good = {}
    for path, (size, _kind) in todo.items():
        got = found.get(path, _UNKNOWN)
        if got == _UNKNOWN:  # a file system the driver cannot reach: Spark's read reports it
            continue
        if got is not None and (size is None or got == size):
            good[path] = size
        else:
            bad.append(path)
    with _lock:
        _verified.update(good)
    if bad:
        f = ListedFile(bad[0], *todo[bad[0]])
        raise damaged(context, f, size_problem(f, found[f.path]) or "is damaged", others=len(bad) - 1)


def forget(paths_: Iterable[str] | None = None) -> None:
    """Forget earlier checks (of these paths, or all): they are made again by the next read."""
    with _lock:
        if paths_ is None:
            _verified.clear()
            return
        for path in paths_:
            _verified.pop(path, None)


def damaged(context: str, f: ListedFile, problem: str, others: int = 0) -> MissingDataFileError:
    """The error for a file found damaged (problem: what is wrong, e.g. `is missing (...)`)."""
    more = f" (and {others} more of the files read)" if others else ""
    return MissingDataFileError(f"{context}: {f.kind} {f.path} {problem}{more}; {ADVICE}",
                                path=f.path, kind=f.kind, context=context)


def problem_of(f: ListedFile, *, footer: bool = False) -> str | None:
    """What is wrong with the file on storage now (no cache), or None: missing or of another size; with footer, also
    not Parquet (a deletion vector for a `.puffin` file) by its bytes, or a Parquet footer that does not parse."""
    found = sizes([f.path])
    if f.path not in found:
        return None  # cannot be looked at from here
    problem = size_problem(f, found[f.path])
    if problem is not None or not footer:
        return problem
    return content_problem(f)


def sizes(files: Sequence[str]) -> dict[str, int | None]:
    """The sizes of these files on storage (None: not there): a stat each locally, one listing per directory
    elsewhere; files on a storage the driver cannot open (no pyarrow file system for it) are left out."""
    out: dict[str, int | None] = {}
    remote = []
    is_local, to_local, stat = paths.is_local, paths.to_local, os.stat  # a stat per file: 10,000s in a loop
    for p in files:
        if not is_local(p):
            remote.append(p)
            continue
        try:
            out[p] = stat(to_local(p)).st_size
        except (FileNotFoundError, NotADirectoryError):
            out[p] = None
    out.update(_listed_sizes(remote))
    return out


@contextlib.contextmanager
def reading(context: str, f: ListedFile) -> Iterator[None]:
    """Around a read of a listed file: a storage or Parquet error caused by the file (missing, another size, not
    Parquet, a footer that does not parse) becomes MissingDataFileError naming it; other errors pass unchanged."""
    try:
        yield
    except (OSError, pa.ArrowException) as e:
        problem = problem_of(f, footer=True)
        if problem is None:
            raise
        raise damaged(context, f, problem) from e


@contextlib.contextmanager
def reading_any(context: str, files: Callable[[], Sequence[ListedFile]]) -> Iterator[None]:
    """Around reads of any of these files (footers, delete files; listed only on an error): an error a damaged one
    caused becomes MissingDataFileError naming it; other errors pass unchanged (see `explain`)."""
    try:
        yield
    except (OSError, pa.ArrowException) as e:
        found = explain(context, files(), e)
        if found is None:
            raise
        raise found from e


def explain(context: str, files: Sequence[ListedFile], error: BaseException) -> MissingDataFileError | None:
    """The damaged file behind a read error: the listed file its text names, if damaged now; for a Parquet error
    that names no file (pyarrow's "magic bytes not found"), the first listed file whose bytes are damaged (their
    footers read, on this error path only); None otherwise (the error is not about these files)."""
    text = str(error)
    named = [f for f in files if paths.to_local(f.path) in text]
    if not named and (isinstance(error, OSError) or not isinstance(error, pa.ArrowException)):
        return None
    for f in named or files:
        problem = problem_of(f, footer=True)
        if problem is not None:
            return damaged(context, f, problem)
    return None


def _listed_sizes(uris: Sequence[str]) -> dict[str, int | None]:
    """Sizes of files on other storage (None: not there), one listing per directory (pyarrow's file system of the
    URI); files on a storage pyarrow cannot open are left out."""
    if not uris:
        return {}
    from pyarrow import fs as pafs

    out: dict[str, int | None] = {}
    by_dir: dict[str, list[str]] = defaultdict(list)
    for uri in uris:
        by_dir[uri.rpartition("/")[0]].append(uri)
    for directory, files in by_dir.items():
        if storage.is_object_store(directory) and storage.object_store_configured():
            # the seam's S3 file system: the profile's endpoint and keys (pyarrow's from_uri knows neither and
            # reaches for AWS itself: seconds of timeouts on another endpoint, and no check). Without a profile's
            # settings (a process outside dbt), or when the seam cannot list, pyarrow's own for the URI below.
            try:
                listed = {storage.object_key(i.path): i.size for i in storage.file_io(directory).list(directory + "/")}
            except (pa.ArrowException, OSError, ValueError):
                listed = None
            if listed is not None:
                for uri in files:
                    out[uri] = listed.get(storage.object_key(uri))
                continue
        try:
            filesystem, root = pafs.FileSystem.from_uri(directory)
            infos = filesystem.get_file_info(pafs.FileSelector(root, allow_not_found=True))
        except (pa.ArrowException, OSError, ValueError):  # no such file system here: Spark's read reports
            continue
        sizes = {i.base_name: i.size for i in infos if i.type == pafs.FileType.File}
        for uri in files:
            out[uri] = sizes.get(uri.rpartition("/")[2])
    return out


def size_problem(f: ListedFile, size: int | None) -> str | None:
    """What is wrong with a file found with this size on storage (None: not there), or None."""
    if size is not None and (f.size is None or size == f.size):
        return None
    listed = f"the catalog lists it with {f.size} bytes" if f.size is not None else "the catalog lists it"
    if size is None:
        return f"is missing ({listed})"
    return f"is {size} bytes, but {listed} (truncated or replaced)"


def content_problem(f: ListedFile) -> str | None:
    """What is wrong with a file's bytes, or None: not a file of its format by its magic bytes, a Parquet footer
    that does not parse, or (rows given) one that holds another number of rows."""
    if f.path.endswith(".puffin"):  # a deletion vector: its length, magic and checksum (lake/read/deletes.py)
        from .deletes import DeleteFileFormatError, read_deletion_vector

        try:
            read_deletion_vector(f.path)
        except DeleteFileFormatError as e:
            return f"is not a deletion vector DuckDB writes ({_reason(e)})"
        except (OSError, pa.ArrowException, ValueError) as e:
            return f"cannot be read ({_reason(e)})"
        return None
    try:
        if paths.is_local(f.path):
            with open(paths.to_local(f.path), "rb") as fh:
                head = fh.read(4)
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - 4))
                tail = fh.read(4)
        else:
            # through the storage seam: the profile's endpoint and keys, not pyarrow's defaults for the URI
            with storage.file_io(f.path).open_input(f.path) as fh:
                head = fh.read(4)
                fh.seek(max(0, fh.size() - 4))
                tail = fh.read(4)
    except (OSError, pa.ArrowException, ValueError) as e:
        return f"cannot be read ({_reason(e)})"
    if head not in _PARQUET_MAGIC or tail not in _PARQUET_MAGIC:
        return "is not a Parquet file (no PAR1 magic bytes at its ends)"
    if tail == b"PARE":
        return None  # an encrypted footer: pyarrow cannot parse it without the key
    try:
        if paths.is_local(f.path):
            meta = pq.read_metadata(paths.to_local(f.path))
        else:  # through the seam, as above (pyarrow's own S3 for the URI resolves AWS regions)
            with storage.file_io(f.path).open_input(f.path) as fh:
                meta = pq.read_metadata(fh)
    except (OSError, pa.ArrowException, ValueError) as e:
        return f"has a Parquet footer that cannot be read ({_reason(e)})"
    if f.rows is not None and meta.num_rows != f.rows:
        return f"holds {meta.num_rows} rows by its footer, but the catalog lists {f.rows} (replaced)"
    return None


def _reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]
