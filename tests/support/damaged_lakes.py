"""A lake DuckDB writes and the files then damaged the ways real lakes lose them (a cleanup by hand, a lifecycle
rule, a copy that skipped a folder), for the tests of reads over missing and damaged files.

Tables of schema `raw` (every insert writes a file: inlining off):
- gone: 1,000 rows in one data file, the file removed;
- bad: 1,000 rows in one data file, the file truncated to half its bytes;
- del: 1,000 rows, a DELETE (one delete file), the delete file removed;
- five: five inserts of 10 rows (five data files), the third file removed;
- old: 100 rows, all deleted (the file ends, still read by time travel), then 10 new rows; the ended file removed;
- rot: 1,000 rows in one data file, its last bytes overwritten (same size: only reading it shows the damage);
- ok: 1,000 rows, untouched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tests.support import reference

ROWS = "SELECT range AS id, range * 2 AS v FROM range({n})"


@dataclass(frozen=True)
class DamagedLake:
    paths: dict[str, str]  # table (or 'del' for its delete file) -> the damaged file's catalog path
    sizes: dict[str, int]  # the same -> its size as the catalog lists it
    old_snapshot: int  # a snapshot at which raw.old still reads its removed file
    latest: int  # the latest snapshot after the build

    @property
    def damaged(self) -> set[str]:
        """The damaged files' paths, except rot's (its size is right: found by reading it)."""
        return {p for t, p in self.paths.items() if t != "rot"}


def _files(con: object, table: str, column: str = "data_file") -> list[tuple[str, int]]:
    size = "data_file_size_bytes" if column == "data_file" else "delete_file_size_bytes"
    rows = con.execute(  # type: ignore[attr-defined]
        f"SELECT {column}, {size} FROM ducklake_list_files('lake', '{table}', schema => 'raw') "
        f"WHERE {column} IS NOT NULL ORDER BY {column}").fetchall()
    return [(r[0], r[1]) for r in rows]


def build(catalog: str, data_path: str | None = None) -> DamagedLake:
    """Write the tables with DuckDB into the lake (created if new, with data_path), then damage the files."""
    kw = {"data_path": data_path} if data_path else {}
    paths: dict[str, str] = {}
    sizes: dict[str, int] = {}
    with reference.attached(catalog, **kw) as con:  # type: ignore[arg-type]
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        con.execute("CREATE SCHEMA lake.raw")
        for t in ("gone", "bad", "del", "rot", "ok"):
            con.execute(f"CREATE TABLE lake.raw.{t} AS {ROWS.format(n=1000)}")
        con.execute("DELETE FROM lake.raw.del WHERE id % 7 = 0")
        con.execute("CREATE TABLE lake.raw.five (id BIGINT, v BIGINT)")
        for i in range(5):
            con.execute(f"INSERT INTO lake.raw.five SELECT range + {i * 10}, range FROM range(10)")
        con.execute(f"CREATE TABLE lake.raw.old AS {ROWS.format(n=100)}")
        old_snapshot = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        (paths["old"], sizes["old"]), = _files(con, "old")
        con.execute("DELETE FROM lake.raw.old")
        con.execute("INSERT INTO lake.raw.old SELECT range + 500, range FROM range(10)")
        for t in ("gone", "bad", "rot"):
            (paths[t], sizes[t]), = _files(con, t)
        (paths["del"], sizes["del"]), = _files(con, "del", "delete_file")
        paths["five"], sizes["five"] = _files(con, "five")[2]
        latest = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
    for t in ("gone", "del", "five", "old"):
        os.remove(paths[t])
    os.truncate(paths["bad"], sizes["bad"] // 2)
    with open(paths["rot"], "r+b") as f:
        f.seek(-4, os.SEEK_END)
        f.write(b"XXXX")
    return DamagedLake(paths, sizes, old_snapshot, latest)


def latest_snapshot(catalog: str) -> int:
    """The lake's latest snapshot id, as DuckDB reads it."""
    with reference.attached(catalog, read_only=True) as con:
        return con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
