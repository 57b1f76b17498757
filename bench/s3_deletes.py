"""Removing many files on S3 (a cleanup, an expired table, a failed model's files): the driver's batched deletes
against pyarrow's one request per file, in the same run.

For each N: N objects of a few bytes are put in one folder of a bucket (named as DuckDB names data files, uuid v7);
N / 2 of them are removed one request each (pyarrow's delete_file, the driver's way before) and the other half in
batches (`delete_many`, DeleteObjects); seconds per 1,000 files each. The bucket must hold no key at the end (the
folder's removal takes the directory markers pyarrow's deletes left).

Run: .venv/bin/python -m bench.s3_deletes [--files 2000,20000] [--s3-endpoint HOST:PORT] [--json F]
(moto's server on 127.0.0.1 by default; another endpoint's keys from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dbt.adapters.ducklake.lake import storage
from dbt.adapters.ducklake.lake.paths import uuid7
from tests.support import s3


def run(server: s3.S3Server, n: int) -> dict[str, Any]:
    storage.configure_object_store(storage.ObjectStoreConfig(
        key_id=server.key_id, secret=server.secret, region=server.region, endpoint=server.endpoint,
        url_style="path", use_ssl=False))
    root = f"s3://{server.make_bucket()}/lake/main/events/"
    fio = storage.file_io(root)
    assert isinstance(fio, storage.S3FileIO)
    paths = [f"{root}ducklake-{uuid7()}.parquet" for _ in range(n)]

    def put(path: str) -> None:
        with fio.open_output(path) as out:
            out.write(b"PAR1")

    t = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, paths))
    out: dict[str, Any] = {"files": n, "put_s": time.perf_counter() - t}
    half = n // 2
    fs = fio._fs  # the one-request way: pyarrow's delete_file per file (it also puts directory markers)
    t = time.perf_counter()
    for p in paths[:half]:
        fs.delete_file(storage.object_key(p))
    one_by_one = time.perf_counter() - t
    t = time.perf_counter()
    fio.delete_many(paths[half:])
    batched = time.perf_counter() - t
    out["delete_one_by_one_s_per_1000"] = one_by_one / half * 1000
    out["delete_batched_s_per_1000"] = batched / (n - half) * 1000
    out["delete_speedup"] = out["delete_one_by_one_s_per_1000"] / out["delete_batched_s_per_1000"]
    fio.delete_dir(root)  # the markers pyarrow's deletes left
    out["keys_left"] = len(server.keys(storage.object_key(root).split("/")[0]))
    out["load_avg_1m_at_end"] = os.getloadavg()[0]
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", default="2000,20000")
    ap.add_argument("--s3-endpoint", default="")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    results = []
    if args.s3_endpoint:
        server = s3.S3Server(args.s3_endpoint, os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"],
                             os.environ.get("AWS_REGION", "us-east-1"))
        results = [run(server, int(n)) for n in args.files.split(",")]
    else:
        with s3.moto_server(os.path.join(tempfile.gettempdir(), "s3-deletes-moto.log")) as server:
            for n in args.files.split(","):
                results.append(run(server, int(n)))
                print(json.dumps(results[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
