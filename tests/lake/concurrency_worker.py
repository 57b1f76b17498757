"""Subprocess entry point of tests/lake/test_concurrency.py: one writer appending to a shared lake.

    python -m tests.lake.concurrency_worker '<json config>'

Roles:
- "lake": this layer. N transactions, each staged on the latest snapshot, then a Parquet file of `rows` ids written
  by writer.write_data_files, registered and committed (one snapshot each). Every commit attempt is counted (by
  wrapping the transaction module's latest_snapshot, which each attempt calls once), as is every commit that found a
  newer snapshot than its base and had to pass the conflict rules (check_conflicts).
- "duckdb": the reference (DuckDB 1.5.5 with the ducklake extension loaded by path). N autocommit INSERT statements,
  one snapshot each; small ones are inlined into the catalog, bigger ones become Parquet files (DuckDB's defaults).
  DuckDB retries lost snapshot races itself, but on SQLite it can fail a commit outright ("database is locked");
  then the statement is retried here, and every such retry is counted with its message.

Start is synchronised by a barrier directory: each worker creates ready-<name> once it has opened the lake, then
waits for the file "go". The result (JSON) goes to config["out"].
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

BARRIER_TIMEOUT_SECONDS = 60.0
DUCKDB_MAX_STATEMENT_RETRIES = 500


def duckdb_ids(start: int, i: int) -> range:
    """The ids DuckDB's i-th INSERT writes: 3 rows (inlined) on even i, 15 rows (a Parquet file) on odd i."""
    return range(start + 100 * i, start + 100 * i + (3 if i % 2 == 0 else 15))


def lake_ids(start: int, i: int, rows: int) -> range:
    """The ids of our writer's i-th file."""
    return range(start + rows * i, start + rows * (i + 1))


def _barrier(cfg: dict[str, Any]) -> None:
    with open(os.path.join(cfg["barrier"], f"ready-{cfg['name']}"), "w"):
        pass
    go = os.path.join(cfg["barrier"], "go")
    deadline = time.monotonic() + BARRIER_TIMEOUT_SECONDS
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            raise SystemExit(f"{cfg['name']}: no 'go' after {BARRIER_TIMEOUT_SECONDS}s")
        time.sleep(0.002)


def run_lake(cfg: dict[str, Any]) -> dict[str, Any]:
    import pyarrow as pa

    from dbt.adapters.ducklake.lake.lake import DuckLake
    from dbt.adapters.ducklake.lake.write import transaction as tx_mod
    from dbt.adapters.ducklake.lake.write.writer import write_data_files

    attempts = [0]
    rebased = [0]
    real_latest, real_check = tx_mod.latest_snapshot, tx_mod.check_conflicts

    def counting_latest(*a: Any, **kw: Any) -> Any:
        attempts[0] += 1
        return real_latest(*a, **kw)

    def counting_check(*a: Any, **kw: Any) -> Any:
        rebased[0] += 1
        return real_check(*a, **kw)

    tx_mod.latest_snapshot = counting_latest  # type: ignore[assignment]
    tx_mod.check_conflicts = counting_check  # type: ignore[assignment]

    lake = DuckLake.open(cfg["catalog"])
    _barrier(cfg)
    t0 = time.monotonic()
    snapshots, per_commit_attempts, commit_seconds = [], [], []
    for i in range(cfg["n"]):
        ids = list(lake_ids(cfg["start"], i, cfg["rows"]))
        tx = lake.transaction(author=cfg["name"], commit_message=f"{cfg['name']} #{i}")
        info = tx.base.table(cfg["schema"], cfg["table"])
        specs = write_data_files(info, tx.base.table_path(info),
                                 pa.table({"id": pa.array(ids, pa.int64()), "src": [cfg["name"]] * len(ids)}))
        tx.add_data_files(cfg["schema"], cfg["table"], specs)
        before = attempts[0]
        c0 = time.monotonic()
        snap = tx.commit()
        commit_seconds.append(time.monotonic() - c0)
        assert snap is not None
        snapshots.append(snap.snapshot_id)
        per_commit_attempts.append(attempts[0] - before)
        time.sleep(random.uniform(0, cfg.get("pause", 0.0)))  # spread the commits over DuckDB's (slower) ones
    lake.close()
    return {
        "name": cfg["name"], "snapshots": snapshots, "attempts": per_commit_attempts,
        "retries": sum(a - 1 for a in per_commit_attempts), "rebased": rebased[0],
        "max_commit_seconds": max(commit_seconds), "elapsed": time.monotonic() - t0,
    }


def run_duckdb(cfg: dict[str, Any]) -> dict[str, Any]:
    import duckdb

    from tests.support import reference

    con = reference.connect()
    con.execute(reference.attach_sql(cfg["catalog"]))
    _barrier(cfg)
    t0 = time.monotonic()
    retries, errors = 0, {}
    for i in range(cfg["n"]):
        ids = duckdb_ids(cfg["start"], i)
        sql = (f"INSERT INTO lake.{cfg['schema']}.{cfg['table']} SELECT range AS id, '{cfg['name']}' AS src "
               f"FROM range({ids.start}, {ids.stop})")
        while True:
            try:
                con.execute(sql)
                break
            except duckdb.Error as e:
                retries += 1
                key = f"{type(e).__name__}: {str(e).splitlines()[-1][:160]}"
                errors[key] = errors.get(key, 0) + 1
                if retries > DUCKDB_MAX_STATEMENT_RETRIES:
                    raise
                time.sleep(random.uniform(0.005, 0.03))
    con.close()
    return {"name": cfg["name"], "retries": retries, "errors": errors, "elapsed": time.monotonic() - t0}


def main() -> None:
    cfg = json.loads(sys.argv[1])
    result = run_lake(cfg) if cfg["role"] == "lake" else run_duckdb(cfg)
    with open(cfg["out"], "w") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    main()
