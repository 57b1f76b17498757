"""Reads over missing and damaged files (lake/read/file_checks.py) and the lake check (lake/maintenance/check.py), on a
lake DuckDB wrote (tests/support/damaged_lakes.py): every read of a damaged table fails naming the table, the snapshot
and the file's catalog path, never with fewer rows; nothing is committed; the check lists exactly the damaged files."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbt.adapters.ducklake.lake import DuckLake, read_arrow, storage
from dbt.adapters.ducklake.lake import paths as lake_paths
from dbt.adapters.ducklake.lake.errors import MissingDataFileError
from dbt.adapters.ducklake.lake.maintenance.check import check_files
from dbt.adapters.ducklake.lake.maintenance.compaction import merge_adjacent_files
from dbt.adapters.ducklake.lake.read import file_checks
from dbt.adapters.ducklake.lake.read.changes import read_changes
from dbt.adapters.ducklake.lake.read.file_checks import ListedFile, verify
from tests.support import damaged_lakes, s3
from tests.support.damaged_lakes import DamagedLake


@pytest.fixture
def damaged(file_catalog_url: str, data_path: str) -> tuple[str, DamagedLake]:
    return file_catalog_url, damaged_lakes.build(file_catalog_url, data_path)


def _missing(d: DamagedLake, table: str, snapshot: int | None = None) -> list[str]:
    """The parts every error about raw.<table>'s damaged file has."""
    key = table
    return [f"lake table raw.{table} at snapshot {snapshot or d.latest}: ", d.paths[key],
            f"the catalog lists it with {d.sizes[key]} bytes", "restore it from a backup"]


def test_reads_of_damaged_tables_fail_naming_the_file(damaged: tuple[str, DamagedLake]) -> None:
    catalog, d = damaged
    lake = DuckLake.open(catalog)
    try:
        st = lake.snapshot()
        expected = {
            "gone": [f"data file {d.paths['gone']} is missing"],
            "bad": [f"data file {d.paths['bad']} is {d.sizes['bad'] // 2} bytes, but", "(truncated or replaced)"],
            "del": [f"delete file {d.paths['del']} is missing"],
            "five": [f"data file {d.paths['five']} is missing"],
        }
        for table, parts in expected.items():
            with pytest.raises(MissingDataFileError) as info:
                read_arrow(st, st.table("raw", table))
            for part in parts + _missing(d, table):
                assert part in str(info.value), (table, str(info.value))
            assert info.value.path == d.paths[table]
        # rot's size is right: reading it shows the damage, as the file it is
        with pytest.raises(MissingDataFileError, match="is not a Parquet file") as info:
            read_arrow(st, st.table("raw", "rot"))
        assert info.value.path == d.paths["rot"] and "lake table raw.rot at snapshot" in str(info.value)
        # the others read whole; raw.old's removed file is read by time travel only
        assert read_arrow(st, st.table("raw", "ok")).num_rows == 1000
        assert read_arrow(st, st.table("raw", "old")).num_rows == 10
        then = lake.snapshot(d.old_snapshot)
        with pytest.raises(MissingDataFileError) as info:
            read_arrow(then, then.table("raw", "old"))
        assert all(p in str(info.value) for p in _missing(d, "old", d.old_snapshot))
        # the change feed reads the files that changed in its range
        with pytest.raises(MissingDataFileError, match=r"lake table raw\.del \(changes from snapshot 1 to"):
            read_changes(lake, "raw", "del", 1, d.latest)
        with pytest.raises(MissingDataFileError, match="raw.five"):
            read_changes(lake, "raw", "five", 1, d.latest)
    finally:
        lake.close()


def test_clone_and_compaction_refuse_and_commit_nothing(damaged: tuple[str, DamagedLake]) -> None:
    catalog, d = damaged
    lake = DuckLake.open(catalog)
    try:
        with pytest.raises(MissingDataFileError, match="raw.gone"), lake.transaction() as tx:
            tx.create_schema("copy")
            tx.clone_table("raw", "gone", "copy", "gone")
        with pytest.raises(MissingDataFileError, match=d.paths["five"]):
            merge_adjacent_files(lake, "raw", "five", min_file_size=1)
        assert lake.snapshot().snapshot_id == d.latest
    finally:
        lake.close()
    assert damaged_lakes.latest_snapshot(catalog) == d.latest


def test_check_lists_exactly_the_damaged_files(damaged: tuple[str, DamagedLake]) -> None:
    catalog, d = damaged
    lake = DuckLake.open(catalog)
    try:
        got = check_files(lake)
        assert {p.file.path for p in got.problems} == d.damaged
        by_path = {p.file.path: p for p in got.problems}
        assert by_path[d.paths["del"]].file.kind == "delete file"
        assert by_path[d.paths["gone"]].problem == f"is missing (the catalog lists it with {d.sizes['gone']} bytes)"
        old = by_path[d.paths["old"]]  # a file only earlier snapshots read is checked too
        assert old.end_snapshot is not None and old.begin_snapshot <= d.old_snapshot < old.end_snapshot
        assert "raw.old: data file" in str(old) and f"to {old.end_snapshot - 1})" in str(old)
        assert got.data_files == 1 + 1 + 1 + 5 + 2 + 1 + 1 and got.delete_files == 1
        # reading every footer finds rot too (the right size, not Parquet)
        deep = check_files(lake, footers=True)
        assert {p.file.path for p in deep.problems} == d.damaged | {d.paths["rot"]}
        # one table
        only = check_files(lake, "raw", "five")
        assert [p.file.path for p in only.problems] == [d.paths["five"]] and only.data_files == 5
        assert not check_files(lake, "raw", "ok", footers=True).problems
    finally:
        lake.close()


def test_a_file_is_looked_at_once_per_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "a.parquet"
    f.write_bytes(b"x" * 10)
    looked = []
    real = file_checks.sizes
    monkeypatch.setattr(file_checks, "sizes", lambda ps: looked.append(list(ps)) or real(ps))
    listed = ListedFile(str(f), 10)
    verify("t", [listed])
    verify("t", [listed])
    assert looked == [[str(f)]]
    with pytest.raises(MissingDataFileError, match=r"^t: data file .* is 10 bytes, but the catalog lists it with 11"):
        verify("t", [ListedFile(str(f), 11)])  # another catalog size is another file


def test_files_elsewhere_are_listed_by_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files not on the local file system (s3://, gs://, ...) are checked by a listing of their directory through
    pyarrow's file systems: here file:// URIs taken as remote."""
    monkeypatch.setattr(lake_paths, "is_local", lambda p: False)
    (tmp_path / "a.parquet").write_bytes(b"x" * 5)
    here = ListedFile(f"file://{tmp_path}/a.parquet", 5)
    gone = ListedFile(f"file://{tmp_path}/b.parquet", 7)
    verify("remote table", [here])
    with pytest.raises(MissingDataFileError, match="b.parquet is missing .*with 7 bytes"):
        verify("remote table", [here, gone])
    # a storage pyarrow has no file system for is left to the engine's read
    verify("remote table", [ListedFile("nosuchscheme://bucket/x.parquet", 3)])


def test_files_on_s3_are_listed_through_the_seam(s3_server: s3.S3Server) -> None:
    """Files on S3 are checked by a listing of their directory with the seam's configured endpoint and keys (pyarrow's
    own S3 file system for the URI would reach for AWS), whatever the spelling (s3:// or s3a://)."""
    storage.configure_object_store(storage.ObjectStoreConfig(
        key_id=s3_server.key_id, secret=s3_server.secret, region=s3_server.region, endpoint=s3_server.endpoint,
        url_style="path", use_ssl=False))
    try:
        bucket = s3_server.make_bucket()
        with storage.file_io(f"s3://{bucket}/t/a.parquet").open_output(f"s3://{bucket}/t/a.parquet") as out:
            out.write(b"x" * 5)
        here = ListedFile(f"s3://{bucket}/t/a.parquet", 5)
        verify("remote table", [here, ListedFile(f"s3a://{bucket}/t/a.parquet", 5)])
        with pytest.raises(MissingDataFileError, match="b.parquet is missing .*with 7 bytes"):
            verify("remote table", [here, ListedFile(f"s3://{bucket}/t/b.parquet", 7)])
        with pytest.raises(MissingDataFileError, match="a.parquet is 5 bytes, but the catalog lists it with 6"):
            verify("remote table", [ListedFile(f"s3://{bucket}/t/a.parquet", 6)])
    finally:
        storage.configure_object_store(storage.ObjectStoreConfig())
