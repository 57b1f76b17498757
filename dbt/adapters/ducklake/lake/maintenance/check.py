"""A check of a lake's files, for users who suspect damage (a cleanup run by hand, a storage lifecycle rule, a copy
that skipped a folder): every data and delete file the catalog lists, for any snapshot it still holds (time travel
reads those too), is on storage with the size the catalog lists; with footers, each one is also a Parquet (Puffin)
file whose footer reads, and a data file's footer holds the catalog's record count.

Reads refuse such files anyway (lake/read/file_checks.py), but only those of the table and snapshot they read, and
only when they read it; this lists them all at once. It changes nothing and commits no snapshot. Files scheduled for
deletion are not checked (no snapshot reads them).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..paths import join_path
from ..read.file_checks import DATA_FILE, DELETE_FILE, ListedFile, content_problem, size_problem, sizes
from ..records import TableInfo

if TYPE_CHECKING:
    from ..catalog.state_source import StateSource

FOOTER_THREADS = 8  # footers read at once (each a small read at the end of a file)


@dataclass(frozen=True)
class FileProblem:
    """A file the catalog lists that is not on storage as listed."""

    table: str  # schema.table, the table's latest name (it may have been dropped since)
    file: ListedFile
    problem: str  # what is wrong, as read errors say it: "is missing (the catalog lists it with 9113 bytes)"
    begin_snapshot: int  # the snapshots that read the file: [begin_snapshot, end_snapshot)
    end_snapshot: int | None  # None: the latest too

    def __str__(self) -> str:
        seen = (f"snapshots {self.begin_snapshot} to {self.end_snapshot - 1}" if self.end_snapshot is not None
                else f"snapshot {self.begin_snapshot} to the latest")
        return f"{self.table}: {self.file.kind} {self.file.path} {self.problem} (read at {seen})"


@dataclass(frozen=True)
class CheckResult:
    data_files: int  # how many were checked
    delete_files: int
    problems: tuple[FileProblem, ...]

    @property
    def checked(self) -> int:
        return self.data_files + self.delete_files


@dataclass(frozen=True)
class _Listed:
    table_id: int
    file: ListedFile
    begin_snapshot: int
    end_snapshot: int | None


def check_files(lake: StateSource, schema: str | None = None, table: str | None = None, *,
                footers: bool = False) -> CheckResult:
    """Check the files of every table (of a schema, or one table: by its name at the latest snapshot) that any
    snapshot the catalog holds reads; with footers, read each file's footer too.

    Raises:
        NoSuchTableError / NoSuchSchemaError: the table or schema does not exist at the latest snapshot.
    """
    wanted = _wanted(lake, schema, table)
    names, listed = _listed(lake, wanted)
    found = sizes([x.file.path for x in listed])
    problems: list[tuple[_Listed, str]] = []
    sound: list[_Listed] = []
    for x in listed:
        if x.file.path not in found:
            continue  # a storage the driver cannot open: not checked
        problem = size_problem(x.file, found[x.file.path])
        if problem is None:
            sound.append(x)
        else:
            problems.append((x, problem))
    if footers and sound:
        with ThreadPoolExecutor(max_workers=min(FOOTER_THREADS, len(sound))) as pool:
            for x, problem in zip(sound, pool.map(lambda x: content_problem(x.file), sound), strict=True):
                if problem is not None:
                    problems.append((x, problem))
    out = tuple(FileProblem(names.get(x.table_id, f"table id {x.table_id}"), x.file, problem, x.begin_snapshot,
                            x.end_snapshot)
                for x, problem in sorted(problems, key=lambda p: (names.get(p[0].table_id, ""), p[0].file.path)))
    n_data = sum(1 for x in listed if x.file.kind == DATA_FILE)
    return CheckResult(n_data, len(listed) - n_data, out)


def _wanted(lake: StateSource, schema: str | None, table: str | None) -> set[int] | None:
    """The table ids to check (None: every table the catalog has rows of, dropped ones included)."""
    if table is None and schema is None:
        return None
    state = lake.snapshot()
    tables: Sequence[TableInfo]
    if table is not None:
        tables = [state.table(schema or "main", table)]
    else:
        s = state.schema(schema)  # type: ignore[arg-type]
        tables = [t for t in state.tables.values() if t.schema_id == s.schema_id]
    return {t.table_id for t in tables}


def _listed(lake: StateSource, wanted: set[int] | None) -> tuple[dict[int, str], list[_Listed]]:
    """({table id: schema.table}, every data and delete file row of the wanted tables, paths resolved)."""
    db = lake.db
    rd = db.dialect.read_bool
    with db.read() as conn:
        schemas: dict[int, tuple[int, str, str, bool]] = {}  # id -> (begin, name, path, relative), latest row
        for sid, name, path, rel, begin in db.query(
                conn, "SELECT schema_id, schema_name, path, path_is_relative, begin_snapshot FROM {p}ducklake_schema"):
            if sid not in schemas or begin >= schemas[sid][0]:
                schemas[sid] = (begin, name, path or "", rd(rel) is not False)
        tables: dict[int, tuple[int, int, str, str, bool]] = {}  # id -> (begin, schema, name, path, relative)
        for tid, sid, name, path, rel, begin in db.query(
                conn, "SELECT table_id, schema_id, table_name, path, path_is_relative, begin_snapshot "
                      "FROM {p}ducklake_table"):
            if tid not in tables or begin >= tables[tid][0]:
                tables[tid] = (begin, sid, name, path or "", rd(rel) is not False)
        data = db.query(conn, "SELECT table_id, path, path_is_relative, file_size_bytes, record_count, "
                              "begin_snapshot, end_snapshot FROM {p}ducklake_data_file ORDER BY data_file_id")
        deletes = db.query(conn, "SELECT table_id, path, path_is_relative, file_size_bytes, begin_snapshot, "
                                 "end_snapshot FROM {p}ducklake_delete_file ORDER BY delete_file_id")
    names: dict[int, str] = {}
    dirs: dict[int, str] = {}
    for tid, (_b, sid, name, tpath, trel) in tables.items():
        _sb, sname, spath, srel = schemas.get(sid, (0, "?", "", True))
        names[tid] = f"{sname}.{name}"
        base = join_path(lake.data_path, spath) if srel else spath
        dirs[tid] = join_path(base, tpath) if trel else tpath

    def resolve(tid: int, path: str, rel: object) -> str:
        return join_path(dirs.get(tid, lake.data_path), path) if rd(rel) is not False else path

    out = [_Listed(tid, ListedFile(resolve(tid, path, rel), size, DATA_FILE, rows), begin, end)
           for tid, path, rel, size, rows, begin, end in data if wanted is None or tid in wanted]
    out += [_Listed(tid, ListedFile(resolve(tid, path, rel), size, DELETE_FILE), begin, end)
            for tid, path, rel, size, begin, end in deletes if wanted is None or tid in wanted]
    return names, out
