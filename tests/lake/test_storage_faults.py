"""The driver's S3 seam under faults (a fault-injecting proxy in front of moto's server): a missing bucket, refused
keys and an unreachable endpoint are said in one sentence naming them; throttled requests are retried; a cleanup the
store refuses is logged and leaves the files to orphan deletion instead of raising."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from dbt.adapters.ducklake.lake import s3_deletes, storage
from dbt.adapters.ducklake.lake.paths import LEFT_BEHIND, discard_dir, discard_files
from tests.support import s3
from tests.support.s3_faults import FaultProxy, fault_proxy

WRONG_KEY_ID = "AKIAWRONGDUCKLAKEKEY"


def _config(server: s3.S3Server, key_id: str | None = None) -> storage.ObjectStoreConfig:
    return storage.ObjectStoreConfig(key_id=key_id or server.key_id, secret=server.secret, region=server.region,
                                     endpoint=server.endpoint, url_style="path", use_ssl=False)


@pytest.fixture
def proxy(s3_server: s3.S3Server) -> Iterator[FaultProxy]:
    with fault_proxy(s3_server) as p:
        storage.configure_object_store(_config(p.server))
        try:
            yield p
        finally:
            storage.configure_object_store(storage.ObjectStoreConfig())


def test_check_names_the_bucket_the_keys_and_the_endpoint(proxy: FaultProxy) -> None:
    bucket = proxy.upstream.make_bucket()
    storage.check_object_store(f"s3://{bucket}/lake/")  # an empty lake directory of a bucket that exists
    with pytest.raises(storage.ObjectStoreAccessError, match="the bucket 'no-such-bucket' does not exist at http://"):
        storage.check_object_store("s3://no-such-bucket/lake/")
    proxy.add("forbidden", key_id=WRONG_KEY_ID, times=None)
    with pytest.raises(storage.ObjectStoreAccessError,
                       match=f"refused the credentials \\(the key id '{WRONG_KEY_ID}'\\): check s3_access_key_id"):
        storage.S3FileIO(_config(proxy.server, WRONG_KEY_ID)).check(f"s3://{bucket}/lake/")
    unreachable = storage.S3FileIO(storage.ObjectStoreConfig(endpoint="127.0.0.1:1", use_ssl=False, key_id="k",
                                                             secret="s", region="us-east-1", url_style="path"))
    with pytest.raises(storage.ObjectStoreAccessError, match="cannot reach S3 at http://127.0.0.1:1"):
        unreachable.check(f"s3://{bucket}/lake/")


def test_throttled_and_dropped_requests_are_retried(proxy: FaultProxy) -> None:
    root = f"s3://{proxy.upstream.make_bucket()}/lake/"
    fio = storage.file_io(root)
    rules = [proxy.add("slowdown", methods={"PUT"}, times=2), proxy.add("slowdown", methods={"GET"}, times=2),
             proxy.add("reset", methods={"PUT"}, times=1)]
    with fio.open_output(root + "a.bin") as out:
        out.write(b"hello")
    with fio.open_input(root + "a.bin") as f:
        assert f.read() == b"hello"
    assert [r.faulted for r in rules] == [2, 2, 1]


def test_a_refused_cleanup_is_logged_not_raised(proxy: FaultProxy, caplog: pytest.LogCaptureFixture) -> None:
    root = f"s3://{proxy.upstream.make_bucket()}/lake/"
    fio = storage.file_io(root)
    for name in ("t/a.parquet", "t/staging/b.parquet"):
        with fio.open_output(root + name) as out:
            out.write(b"x")
    proxy.add("forbidden", methods={"DELETE", "POST"}, times=None)  # not retried: the test stays quick
    with caplog.at_level(logging.WARNING):
        discard_files([root + "t/a.parquet"], root + "t/")
        discard_dir(root + "t/staging")
    assert sum(LEFT_BEHIND in r.getMessage() for r in caplog.records) == 2
    proxy.clear()
    assert sorted(i.path for i in fio.list(root)) == [root + "t/a.parquet", root + "t/staging/b.parquet"]


def test_deletes_are_batched_retried_and_leave_no_directory_markers(proxy: FaultProxy,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(s3_deletes, "BATCH", 10)  # 25 files: three requests
    bucket = proxy.upstream.make_bucket()
    root = f"s3://{bucket}/lake/"
    fio = storage.file_io(root)
    names = [f"t/k={i % 3}/f{i}.parquet" for i in range(25)]
    for name in [*names, "t/staging/a.parquet", "t/staging/b.parquet"]:
        with fio.open_output(root + name) as out:
            out.write(b"x")
    fio.move(root + "t/staging/a.parquet", root + "u/a.parquet")
    throttled = proxy.add("slowdown", methods={"POST"}, query="delete", times=1)
    discard_files([root + n for n in names], root + "t/")
    fio.delete_dir(root + "t/staging")
    assert throttled.faulted == 1  # the throttled batch was sent again
    # every folder emptied is gone: pyarrow's own deletes left `t/`, `t/k=0/`, ... as empty marker objects
    assert proxy.upstream.keys(bucket) == ["lake/u/a.parquet"]

