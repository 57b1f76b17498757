"""The driver's file seam (lake/storage.py): the local and the S3 implementation behave alike (moto's server on
loopback), paths keep the catalog's s3:// spelling, and footers and delete files round-trip through it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt.adapters.ducklake.lake import storage
from dbt.adapters.ducklake.lake.paths import discard_files
from dbt.adapters.ducklake.lake.read.deletes import DeletePositions, read_delete_file, write_delete_file
from dbt.adapters.ducklake.lake.write.datafiles import read_footer
from tests.support import s3


def _config(server: s3.S3Server) -> storage.ObjectStoreConfig:
    return storage.ObjectStoreConfig(key_id=server.key_id, secret=server.secret, region=server.region,
                                     endpoint=server.endpoint, url_style="path", use_ssl=False)


@pytest.fixture(params=["local", "s3"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A directory for lake files: local, or a fresh bucket's prefix (the seam configured for the server)."""
    if request.param == "local":
        yield str(tmp_path) + "/"
        return
    server: s3.S3Server = request.getfixturevalue("s3_server")
    storage.configure_object_store(_config(server))
    try:
        yield f"s3://{server.make_bucket()}/lake/"
    finally:
        storage.configure_object_store(storage.ObjectStoreConfig())


def test_file_operations_agree(root: str) -> None:
    fio = storage.file_io(root)
    a, b = root + "t/x=1/a.bin", root + "t/b.bin"
    with fio.open_output(a) as out:
        out.write(b"hello")
    assert fio.exists(a) and fio.size(a) == 5
    with fio.open_input(a) as f:
        assert f.read_at(3, 2) == b"llo"
    fio.move(a, b)
    assert not fio.exists(a) and fio.exists(b)
    fio.copy(b, a)
    assert fio.size(a) == 5
    fio.delete(a)
    with pytest.raises(FileNotFoundError):
        fio.copy(a, root + "t/c.bin")
    assert [(f.path.rsplit("/", 1)[1], f.size) for f in fio.list(root + "t/")] == [("b.bin", 5)]
    listed = [f.path for f in fio.list(root)]
    assert listed == [b]
    fio.delete(b)
    fio.delete(b)  # missing is fine
    assert list(fio.list(root + "t/")) == [] and list(fio.list(root + "none/")) == []


def test_footers_and_delete_files(root: str) -> None:
    path = root + "t/data.parquet"
    fio = storage.file_io(path)
    with fio.open_output(path) as out:
        pq.write_table(pa.table({"i": pa.array(range(100), pa.int64())}), out)
    footer = read_footer(path)
    assert footer.metadata.num_rows == 100 and footer.file_size == fio.size(path)
    dpath = root + "t/delete.parquet"
    size, footer_size = write_delete_file(dpath, path, DeletePositions((1, 5), (3, 3)), with_snapshots=True)
    assert size == fio.size(dpath) and 0 < footer_size < size
    assert read_delete_file(dpath, 3) == DeletePositions((1, 5), (3, 3))
    discard_files([path, dpath], root)
    assert list(fio.list(root)) == []


def test_s3a_spelling_is_the_same_object(s3_server: s3.S3Server) -> None:
    storage.configure_object_store(_config(s3_server))
    try:
        bucket = s3_server.make_bucket()
        fio = storage.file_io(f"s3a://{bucket}/k")
        with fio.open_output(f"s3a://{bucket}/k") as out:
            out.write(b"1")
        assert fio.exists(f"s3://{bucket}/k")
        assert [f.path for f in fio.list(f"s3a://{bucket}/")] == [f"s3://{bucket}/k"]
    finally:
        storage.configure_object_store(storage.ObjectStoreConfig())


def test_unreachable_schemes_are_refused() -> None:
    with pytest.raises(ValueError, match="gs://"):
        storage.file_io("gs://bucket/x")


def test_config_repr_hides_secrets() -> None:
    shown = repr(storage.ObjectStoreConfig(key_id="id", secret="topsecret", session_token="tok"))
    assert "topsecret" not in shown and "tok'" not in shown


def test_a_lake_on_s3_written_by_the_driver(tmp_path: Path, s3_server: s3.S3Server) -> None:
    """The format layer alone on S3: files the driver writes are registered with s3 paths DuckDB reads; orphan
    deletion lists the bucket through the seam (orphans and a killed writer's staging prefix go, nothing else)."""
    from dbt.adapters.ducklake.lake import Column, DuckLake, write_data_files
    from dbt.adapters.ducklake.lake.maintenance import cleanup as mt

    storage.configure_object_store(_config(s3_server))
    try:
        data = f"s3://{s3_server.make_bucket()}/lake/"
        catalog = f"sqlite:///{tmp_path}/m.sqlite"
        lake = DuckLake.create(catalog, data)
        with lake.transaction() as tx:
            t = tx.create_table("main", "t", [Column(0, "x", "int64")])
            files = write_data_files(t, tx.table_path(t), pa.table({"x": [1, 2, 3]}))
            tx.add_data_files("main", "t", files)
        assert all(f.path.startswith(data + "main/t/") for f in files)
        with s3.attached(s3_server, catalog, read_only=True) as con:
            assert con.execute("SELECT x FROM lake.main.t ORDER BY x").fetchall() == [(1,), (2,), (3,)]
        fio = storage.file_io(data)
        orphan, staging = data + "main/t/ducklake-orphan.parquet", data + "main/t/ducklake-write-0192f0c0/"
        for path in (orphan, staging + "part-00000-x.snappy.parquet", staging + "_SUCCESS"):
            with fio.open_output(path) as out:
                out.write(b"x")
        assert mt.delete_orphaned_files(lake) == []  # younger than the default age: kept
        assert mt.delete_orphaned_files(lake, all=True) == [orphan, staging.rstrip("/")]
        assert sorted(f.path for f in fio.list(data)) == sorted(f.path for f in files)
    finally:
        storage.configure_object_store(storage.ObjectStoreConfig())
