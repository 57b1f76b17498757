"""DuckDB-file catalogs with duckdb 2.x installed instead of 1.5: the format layer opens files of either storage format
and never moves a file to a newer one by itself, so a DuckDB 1.5 user still opens every lake it wrote.

The reference (DuckDB 1.5.5 with its ducklake extension) runs in this process; the format layer with duckdb 2.x runs
in a child process with scripts/setup.sh's `.venv/duckdb2` first on PYTHONPATH (`python -m
tests.lake.test_duckdb2_catalog_files <step> <dir>`), printing JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.lake.errors import CatalogConnectionError

from ..support import reference

REPO_ROOT = Path(__file__).resolve().parents[2]
DUCKDB2 = REPO_ROOT / ".venv" / "duckdb2"
pytestmark = pytest.mark.skipif(not (DUCKDB2 / "duckdb").is_dir(),
                                reason="duckdb 2.x is not installed in .venv/duckdb2: run scripts/setup.sh --tests")


def _with_duckdb2(step: str, directory: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(DUCKDB2), str(REPO_ROOT)])}
    done = subprocess.run([sys.executable, "-m", "tests.lake.test_duckdb2_catalog_files", step, str(directory)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _rows(catalog: Path, sql: str) -> list[tuple]:
    with reference.attached(str(catalog)) as con:
        return [tuple(r) for r in con.execute(sql).fetchall()]


def test_duckdb2_reads_and_writes_lakes_duckdb15_opens(tmp_path: Path) -> None:
    # a lake DuckDB 1.5 wrote: rows, a delete, a second file
    ref = tmp_path / "ref.ducklake"
    reference.execute_all(str(ref), ["CALL lake.set_option('data_inlining_row_limit', 0)",
                                     "CREATE TABLE lake.t (id INTEGER, s VARCHAR)",
                                     "INSERT INTO lake.t SELECT i, 'r' || i FROM range(10) r(i)",
                                     "DELETE FROM lake.t WHERE id % 3 = 0",
                                     "INSERT INTO lake.t VALUES (100, 'x')"],
                          data_path=str(tmp_path / "ref_data") + "/")
    before = reference.storage_version(ref)

    got = _with_duckdb2("write", tmp_path)
    assert got["duckdb"].startswith("2.")
    # the format layer under duckdb 2.x read DuckDB 1.5's lake as DuckDB reads it
    assert sorted(map(tuple, got["ref_rows"])) == _rows(ref, "SELECT id, s FROM lake.t AT (VERSION => 4) ORDER BY ALL")
    # its commits kept each file's format: DuckDB 1.5 opens both lakes and reads what it wrote, at every snapshot
    assert reference.storage_version(ref) == before
    assert reference.storage_version(tmp_path / "ours.ducklake") == before  # a new file: v1.5, not duckdb 2's own format
    assert _rows(ref, "SELECT id, s FROM lake.t ORDER BY ALL") == sorted(
        [*map(tuple, got["ref_rows"]), (200, "from duckdb 2")])
    assert _rows(tmp_path / "ours.ducklake", "SELECT id, s FROM lake.t ORDER BY ALL") == [(1, "a"), (2, "b")]
    assert _rows(ref, "SELECT count(*) FROM lake.snapshots()") == [(got["ref_snapshots"],)]


def test_a_catalog_in_duckdb2s_own_format(tmp_path: Path) -> None:
    ref = tmp_path / "ref.ducklake"
    reference.execute_all(str(ref), ["CALL lake.set_option('data_inlining_row_limit', 0)",
                                     "CREATE TABLE lake.t (id INTEGER, s VARCHAR)",
                                     "INSERT INTO lake.t VALUES (1, 'a'), (2, 'b')"],
                          data_path=str(tmp_path / "ref_data") + "/")
    # the same catalog rows in a file of duckdb 2's format (as DuckDB 2.0 writes new files), read and written by the
    # format layer with duckdb 2.x, which leaves it in that format
    got = _with_duckdb2("v2", tmp_path)
    assert got["before"] == got["after"] and got["after"].startswith("v2")
    assert sorted(map(tuple, got["rows"])) == [(1, "a"), (2, "b"), (3, "c")]
    # with duckdb 1.5 the same file is refused in one message that names the way out
    with pytest.raises(CatalogConnectionError) as e:
        DuckLake.open(str(tmp_path / "v2.ducklake")).snapshot()
    assert "newer storage format" in str(e.value) and "duckdb>=2.0" in str(e.value)
    assert "STORAGE_VERSION 'v1.5.0'" in str(e.value)


# -- the child's side (duckdb 2.x) --------------------------------------------------------------------------------


def _append(lake: DuckLake, rows: dict) -> None:
    import pyarrow as pa

    from dbt.adapters.ducklake.lake.write.writer import write_data_files

    table = lake.snapshot().table("main", "t")
    with lake.transaction(author="duckdb2-test") as tx:
        tx.add_data_files("main", "t", write_data_files(table, lake.snapshot().table_path(table), pa.table(rows)))


def _read(lake: DuckLake) -> list[list]:
    from dbt.adapters.ducklake.lake.read.scan import read_arrow

    state = lake.snapshot()
    t = read_arrow(state, state.table("main", "t"), with_rowid=False)
    return [[r["id"], r["s"]] for r in t.to_pylist()]


def _child_write(directory: Path) -> dict:
    from dbt.adapters.ducklake.lake.records import Column

    ref = DuckLake.open(str(directory / "ref.ducklake"))
    rows = _read(ref)
    _append(ref, {"id": [200], "s": ["from duckdb 2"]})
    snapshots = ref.snapshot().snapshot_id + 1
    ref.close()
    ours = DuckLake.create(str(directory / "ours.ducklake"), str(directory / "ours_data") + "/")
    with ours.transaction() as tx:
        tx.create_table("main", "t", (Column(0, "id", "int32"), Column(0, "s", "varchar")))
    _append(ours, {"id": [1, 2], "s": ["a", "b"]})
    ours.close()
    return {"duckdb": duckdb.__version__, "ref_rows": rows, "ref_snapshots": snapshots}


def _child_v2(directory: Path) -> dict:
    v2 = directory / "v2.ducklake"
    con = duckdb.connect()
    con.execute(f"ATTACH '{directory / 'ref.ducklake'}' AS src (READ_ONLY)")
    con.execute(f"ATTACH '{v2}' AS dst (STORAGE_VERSION 'latest')")
    con.execute("COPY FROM DATABASE src TO dst")
    con.close()
    before = reference.storage_version(v2)
    lake = DuckLake.open(str(v2))
    _append(lake, {"id": [3], "s": ["c"]})
    rows = _read(lake)
    lake.close()
    return {"before": before, "after": reference.storage_version(v2), "rows": rows}


if __name__ == "__main__":
    step, where = sys.argv[1], Path(sys.argv[2])
    print(json.dumps({"write": _child_write, "v2": _child_v2}[step](where), default=str))
