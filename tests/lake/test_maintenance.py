"""Maintenance against the reference: each operation runs with our layer on one copy of a lake and with DuckDB's own
function on another; DuckDB then reads every surviving snapshot of both the same, and our reader agrees with it."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from dbt.adapters.ducklake.lake import DuckLake, read_arrow
from dbt.adapters.ducklake.lake import maintenance as mt
from tests.lake.compare import arrow_rows, plain_rows
from tests.support import reference
from tests.support.invariants import violations
from tests.support.reference_lakes import build, reference_state

FUTURE = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)


class Lake:
    """A lake in its own directory: catalog file plus data/ (copies get their data_path rewritten)."""

    def __init__(self, root: Path, backend: str) -> None:
        self.root = root
        self.backend = backend
        (root / "data").mkdir(parents=True, exist_ok=True)
        name = "m.ducklake" if backend == "duckdb" else "m.sqlite"
        self.url = f"{'duckdb' if backend == 'duckdb' else 'sqlite'}:///{root}/{name}"
        self.data = str(root / "data") + "/"

    def copy(self, root: Path) -> Lake:
        shutil.copytree(self.root, root)
        other = Lake(root, self.backend)
        lake = DuckLake.open(other.url)
        with lake.db.write() as conn:
            lake.db.execute(conn, "UPDATE {p}ducklake_metadata SET value = :v WHERE key = 'data_path' AND scope IS NULL",
                            {"v": other.data})
        lake.close()
        return other

    def duck(self, *sql: str) -> list[Any]:
        with reference.attached(self.url) as con:
            out: list[Any] = []
            for s in sql:
                out = con.execute(s).fetchall()
            return out

    def rows(self, sql: str) -> list[Any]:
        lake = DuckLake.open(self.url)
        try:
            with lake.db.read() as conn:
                return [tuple(r) for r in lake.db.query(conn, sql)]
        finally:
            lake.close()

    def files(self) -> set[str]:
        return {os.path.relpath(os.path.join(d, n), self.data) for d, _, ns in os.walk(self.data) for n in ns}


def _view(state: dict[str, Any]) -> dict[str, Any]:
    """What must agree between two lakes: snapshots (without times), rows and counts per snapshot, change feeds."""
    snaps = [(s[0], s[2], s[3]) for s in state["snapshots"]]
    tables = {k: (v["rows"], v["count"]) for k, v in state["tables"].items()}
    return {"snapshots": snaps, "tables": tables, "changes": state["changes"]}


def _ours_match_duckdb(lk: Lake) -> None:
    """Our reader returns DuckDB's rows at every surviving snapshot."""
    theirs = reference_state(lk.url)
    lake = DuckLake.open(lk.url)
    try:
        for (sid, schema, name), info in theirs["tables"].items():
            st = lake.snapshot(sid)
            assert arrow_rows(read_arrow(st, st.table(schema, name))) == plain_rows(info["rows"]), (sid, schema, name)
    finally:
        lake.close()


def _counts(lk: Lake) -> tuple[int, int, int]:
    return (lk.rows("SELECT count(*) FROM {p}ducklake_data_file")[0][0],
            lk.rows("SELECT count(*) FROM {p}ducklake_delete_file")[0][0],
            lk.rows("SELECT count(*) FROM {p}ducklake_files_scheduled_for_deletion")[0][0])


BACKENDS = [pytest.param("duckdb", id="duckdb"), pytest.param("sqlite", id="sqlite")]
SCENARIOS = ["repeated_deletes", "updates", "schema_evolution", "partitioning", "inlined", "drops", "compaction"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _pair(tmp_path: Path, backend: str, scenario: str) -> tuple[Lake, Lake]:
    ours = Lake(tmp_path / "ours", backend)
    build(ours.url, ours.data, scenario)
    return ours, ours.copy(tmp_path / "theirs")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_expire_and_cleanup_like_duckdb(tmp_path: Path, backend: str, scenario: str) -> None:
    ours, theirs = _pair(tmp_path, backend, scenario)
    ids = [r[0] for r in ours.rows("SELECT snapshot_id FROM {p}ducklake_snapshot ORDER BY 1")]
    expire = ids[1:-1:2]  # every other snapshot but the first and the latest
    lake = DuckLake.open(ours.url)
    assert [s.snapshot_id for s in mt.expire_snapshots(lake, versions=expire, dry_run=True)] == expire
    assert [s.snapshot_id for s in mt.expire_snapshots(lake, versions=expire)] == expire
    lake.close()
    theirs.duck(f"CALL ducklake_expire_snapshots('lake', versions => {expire})")
    assert _counts(ours) == _counts(theirs)
    assert _view(reference_state(ours.url)) == _view(reference_state(theirs.url))
    assert ours.rows("SELECT path FROM {p}ducklake_files_scheduled_for_deletion ORDER BY 1") == theirs.rows(
        "SELECT path FROM {p}ducklake_files_scheduled_for_deletion ORDER BY 1")

    lake = DuckLake.open(ours.url)
    assert mt.cleanup_old_files(lake) == []  # scheduled just now: younger than the default 2 days
    planned = mt.cleanup_old_files(lake, all=True, dry_run=True)
    assert sorted(mt.cleanup_old_files(lake, all=True)) == sorted(planned)
    lake.close()
    theirs.duck("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
    assert ours.files() == {f for f in theirs.files()}
    assert _counts(ours) == _counts(theirs) and _counts(ours)[2] == 0
    _ours_match_duckdb(ours)
    assert violations(ours.url) == violations(theirs.url)  # DuckDB-written lakes can trip the float-stats check


def test_expire_older_than_and_noop(tmp_path: Path, backend: str) -> None:
    ours, theirs = _pair(tmp_path, backend, "repeated_deletes")
    lake = DuckLake.open(ours.url)
    assert mt.expire_snapshots(lake) == []  # no criteria and no expire_older_than option: nothing, like DuckDB
    got = mt.expire_snapshots(lake, older_than=FUTURE)
    lake.close()
    theirs.duck(f"CALL ducklake_expire_snapshots('lake', older_than => TIMESTAMPTZ '{FUTURE.isoformat()}')")
    assert len(ours.rows("SELECT * FROM {p}ducklake_snapshot")) == 1 and len(got) > 5  # only the latest is left
    assert _view(reference_state(ours.url)) == _view(reference_state(theirs.url))
    assert _counts(ours) == _counts(theirs)


def test_bad_input_changes_nothing(tmp_path: Path, backend: str) -> None:
    ours = Lake(tmp_path / "ours", backend)
    build(ours.url, ours.data, "repeated_deletes")
    before = (ours.rows("SELECT * FROM {p}ducklake_snapshot ORDER BY 1"), _counts(ours), ours.files())
    lake = DuckLake.open(ours.url)
    latest = lake.latest_snapshot_id()
    with pytest.raises(ValueError, match="do not exist"):
        mt.expire_snapshots(lake, versions=[1, 999])
    with pytest.raises(ValueError, match="latest"):
        mt.expire_snapshots(lake, versions=[latest])
    with pytest.raises(ValueError, match="not both"):
        mt.expire_snapshots(lake, versions=[1], older_than=FUTURE)
    with pytest.raises(ValueError, match="not both"):
        mt.cleanup_old_files(lake, all=True, older_than=FUTURE)
    with pytest.raises(ValueError, match="positive"):
        mt.merge_adjacent_files(lake, target_file_size=-5)
    lake.close()
    assert (ours.rows("SELECT * FROM {p}ducklake_snapshot ORDER BY 1"), _counts(ours), ours.files()) == before


def test_delete_orphaned_files(tmp_path: Path, backend: str) -> None:
    ours, theirs = _pair(tmp_path, backend, "updates")
    for lk in (ours, theirs):
        for rel in ("main/u/stray.parquet", "elsewhere/x.parquet", "main/u/notes.txt"):
            Path(lk.data, rel).parent.mkdir(parents=True, exist_ok=True)
            Path(lk.data, rel).write_bytes(b"PAR1")
    lake = DuckLake.open(ours.url)
    assert mt.delete_orphaned_files(lake) == []  # just written: younger than 2 days
    found = mt.delete_orphaned_files(lake, all=True, dry_run=True)
    assert sorted(os.path.relpath(p, ours.data) for p in found) == ["elsewhere/x.parquet", "main/u/stray.parquet"]
    mt.delete_orphaned_files(lake, older_than=FUTURE)
    lake.close()
    theirs_found = theirs.duck("CALL ducklake_delete_orphaned_files('lake', cleanup_all => true)")
    assert sorted(os.path.relpath(r[0], theirs.data) for r in theirs_found) == [
        "elsewhere/x.parquet", "main/u/stray.parquet"]
    assert ours.files() == theirs.files()
    _ours_match_duckdb(ours)
